"""Attention summaries on hand-computed cases, the beam tree, shared links and raw exports."""

import json
import math

import pytest
import torch

from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, load_checkpoint
from transformer.inside import analysis
from transformer.paper.decoding import BeamStep, beam_search
from transformer.paper.translation import translate


@pytest.fixture(scope="module")
def reverse():
    return load_checkpoint(REPOSITORY_CHECKPOINTS / "reverse-tiny", device="cpu")


def test_one_hot_diagonal_has_zero_entropy_zero_distance_and_diagonality_one():
    stats = analysis.map_statistics(torch.eye(4), ["a", "b", "c", "</s>"])
    assert stats["entropy"] == pytest.approx(0.0, abs=1e-6)
    assert stats["distance"] == pytest.approx(0.0)
    assert stats["diagonality"] == pytest.approx(1.0)
    assert stats["special_share"] == pytest.approx(0.25)  # only the last row looks at </s>


def test_uniform_attention_has_maximal_entropy():
    stats = analysis.map_statistics(torch.full((3, 4), 0.25), ["a", "b", "c", "d"])
    assert stats["entropy"] == pytest.approx(math.log(4))
    assert stats["diagonality"] == pytest.approx(0.25)
    # mean |i - j| over rows 0..2 and columns 0..3: (6 + 4 + 4) / 4 / 3
    assert stats["distance"] == pytest.approx((6 + 4 + 4) / 12)


def test_attention_sunk_into_end_of_sentence_is_counted():
    weights = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.5, 0.5]])
    assert analysis.map_statistics(weights, ["x", "y", "</s>"])["special_share"] == pytest.approx(0.75)


def test_anti_diagonal_is_not_diagonal():
    assert analysis.map_statistics(torch.eye(4).flip(1), list("abcd"))["diagonality"] == pytest.approx(0.0)


def test_rectangular_diagonal_is_stretched():
    assert analysis.diagonal_keys(3, 5).tolist() == [0, 2, 4]


def test_a_map_of_one_row_is_read_on_its_first_key_and_no_special_key_gets_no_share():
    """The first decoding step has one query: its diagonal key is the first."""
    assert analysis.diagonal_keys(1, 3).tolist() == [0] and analysis.diagonal_keys(1, 3).dtype == torch.long
    stats = analysis.map_statistics(torch.tensor([[0.7, 0.2, 0.1]]), ["a", "b", "c"])
    assert stats["diagonality"] == pytest.approx(0.7)
    assert stats["special_share"] == 0
    assert stats["distance"] == pytest.approx(0.2 + 0.2)


def test_pieces_merge_into_words_keeping_specials_and_punctuation_apart():
    words, index = analysis.words_from_pieces(["▁Ein", "▁klein", "er", "▁Hund", "▁bell", "t", ".", "</s>"])
    assert words == ["Ein", "kleiner", "Hund", "bellt", ".", "</s>"]
    assert index == [0, 1, 1, 2, 3, 3, 4, 5]


def test_a_piece_after_a_special_token_or_punctuation_starts_a_word_of_its_own():
    assert analysis.words_from_pieces(["<s>", "x", ".", "y"]) == (["<s>", "x", ".", "y"], [0, 1, 2, 3])


def test_a_lone_word_mark_piece_starts_the_word_the_next_pieces_write():
    words, index = analysis.words_from_pieces(["__en__", "▁", "A", "▁a", "▁", "re", "d", "▁", "."])
    assert words == ["__en__", "A", "a", "red", "▁", "."]
    assert index == [0, 1, 1, 2, 3, 3, 3, 4, 5]


def test_word_attention_sums_keys_and_averages_queries():
    weights = torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.2, 0.8]])  # two query pieces of one word
    merged, query_words, key_words = analysis.word_attention(weights, ["▁Hund", "e"], ["▁do", "gs", "</s>"])
    assert query_words == ["Hunde"] and key_words == ["dogs", "</s>"]
    assert merged.tolist() == [[pytest.approx(0.6), pytest.approx(0.4)]]
    one_piece_words, _, _ = analysis.word_attention(weights, ["▁Ein", "▁Hund"], ["▁do", "gs", "</s>"])
    assert one_piece_words.tolist() == [[pytest.approx(1.0), 0.0], [pytest.approx(0.2), pytest.approx(0.8)]]


def test_head_statistics_cover_every_head(reverse):
    tr = translate(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, "1 2 3 4")
    stats = analysis.head_statistics(tr)
    assert len(stats) == 3 * 2 * 4
    assert [(s.kind, s.layer, s.head) for s in stats] == [
        (kind, layer, head) for kind in ("encoder", "decoder", "cross") for layer in (1, 2) for head in (1, 2, 3, 4)]
    assert all(0 <= s.diagonality <= 1 and s.entropy >= 0 for s in stats)
    other = analysis.head_statistics(translate(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer,
                                               "9 8 7 6 5"))
    averaged = analysis.mean_statistics([stats, other])
    assert [(s.kind, s.layer, s.head) for s in averaged] == [(s.kind, s.layer, s.head) for s in stats]
    for name in ("entropy", "distance", "special_share", "diagonality"):
        assert [getattr(s, name) for s in averaged] == pytest.approx(
            [(getattr(a, name) + getattr(b, name)) / 2 for a, b in zip(stats, other)])
    assert analysis.mean_statistics([stats]) == stats, "the mean of one sentence is that sentence's"


def test_the_beam_tree_links_each_candidate_to_the_beam_it_extended_and_drops_what_extends_a_dead_one():
    """Beam 2, made by hand: step 1 keeps candidates 0 and 1. At step 2 candidate 0 extends beam 1 and finishes,
    candidate 1 extends beam 0 and is kept, candidate 2 is pruned; beam 0 of step 2 is the finished one, so it is
    dead. At step 3 what extends it is dropped, an infinite score too; the tree ends when no beam lives."""
    steps = [BeamStep(parents=[0, 0, 0], tokens=[5, 6, 7], log_probs=[-0.1, -0.5, -2.0], finished=[False] * 3,
                      kept=[0, 1]),
             BeamStep(parents=[1, 0, 0], tokens=[3, 8, 9], log_probs=[-0.6, -0.7, -3.0],
                      finished=[True, False, False], kept=[0, 1]),
             BeamStep(parents=[0, 1, 1, 1], tokens=[6, 3, 4, 9], log_probs=[-0.8, -0.9, -1.0, float("-inf")],
                      finished=[False, True, False, False], kept=[]),
             BeamStep(parents=[0], tokens=[5], log_probs=[-5.0], finished=[False], kept=[0])]
    nodes = analysis.beam_tree(steps)
    assert [(n.step, n.token, n.parent, n.status) for n in nodes] == [
        (1, 5, None, "kept"), (1, 6, None, "kept"), (1, 7, None, "pruned"),
        (2, 3, 1, "finished"), (2, 8, 0, "kept"), (2, 9, 0, "pruned"),
        (3, 3, 4, "finished"), (3, 4, 4, "pruned")]
    assert [n.log_prob for n in nodes] == [-0.1, -0.5, -2.0, -0.6, -0.7, -3.0, -0.9, -1.0]


def test_a_candidate_of_a_beam_that_did_not_live_is_left_out_of_the_tree():
    """At the first step only beam 0 holds <s>: a candidate naming beam 1 extends nothing."""
    first = BeamStep(parents=[0, 1], tokens=[5, 6], log_probs=[-0.1, -0.2], finished=[False, False], kept=[0])
    assert [(n.token, n.parent) for n in analysis.beam_tree([first])] == [(5, None)]


def test_beam_tree_is_consistent_with_the_returned_hypotheses(reverse):
    src = torch.tensor([reverse.source_tokenizer.encode("3 1 4 1 5")])
    results, steps = beam_search(reverse.model, src, beam_size=3, return_steps=True)
    nodes = analysis.beam_tree(steps[0])
    finished = [n for n in nodes if n.status == "finished"]
    assert len(finished) == len(results[0]) == 3

    def path(node):
        tokens = []
        while node is not None:
            tokens.append(node.token)
            node = nodes[node.parent] if node.parent is not None else None
        return tokens[::-1]

    finished_paths = {tuple(path(n)[:-1]): n.log_prob for n in finished}  # without the eos
    for hypothesis in results[0]:
        assert tuple(hypothesis.tokens) in finished_paths
        assert finished_paths[tuple(hypothesis.tokens)] == pytest.approx(hypothesis.log_prob, abs=1e-5)
    for node in nodes:  # cumulative log-probabilities only fall along a path
        if node.parent is not None:
            assert node.log_prob <= nodes[node.parent].log_prob + 1e-6
    last_step = max(node.step for node in nodes)
    assert not [node for node in nodes if node.step == last_step and node.status == "kept"], \
        "the search ends at its last step: no beam lives on from it"


def test_training_writes_probe_attention_at_every_evaluation(tmp_path):
    from transformer.train.trainer import Trainer
    from transformer.train.settings import TrainConfig

    config = TrainConfig(data="copy", steps=20, eval_every=10, synthetic_size=300, max_tokens=500,
                         out_dir=str(tmp_path / "run"), probe_sentences=["1 2 3"])
    Trainer(config, show_progress=False).run()
    probes = [json.loads(line) for line in (tmp_path / "run" / "probes.jsonl").read_text().splitlines()]
    assert [p["step"] for p in probes] == [10, 20]
    first = probes[0]
    assert first["source_tokens"][-1] == "</s>"
    cross = torch.tensor(first["cross"])
    assert cross.shape[-2:] == (len(first["target_tokens"]), len(first["source_tokens"]))
    assert torch.allclose(cross.sum(-1), torch.ones(cross.shape[:-1]), atol=1e-3)
