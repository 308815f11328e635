"""Attention summaries on hand-computed cases, the beam tree, shared links and raw exports."""

import json
import math

import pytest
import torch

from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, load_checkpoint
from transformer.inside import analysis
from transformer.paper.decoding import beam_search
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


def test_pieces_merge_into_words_keeping_specials_and_punctuation_apart():
    words, index = analysis.words_from_pieces(["▁Ein", "▁klein", "er", "▁Hund", "▁bell", "t", ".", "</s>"])
    assert words == ["Ein", "kleiner", "Hund", "bellt", ".", "</s>"]
    assert index == [0, 1, 1, 2, 3, 3, 4, 5]


def test_a_lone_word_mark_piece_starts_the_word_the_next_pieces_write():
    words, index = analysis.words_from_pieces(["__en__", "▁", "A", "▁a", "▁", "re", "d", "▁", "."])
    assert words == ["__en__", "A", "a", "red", "▁", "."]
    assert index == [0, 1, 1, 2, 3, 3, 3, 4, 5]


def test_word_attention_sums_keys_and_averages_queries():
    weights = torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.2, 0.8]])  # two query pieces of one word
    merged, query_words, key_words = analysis.word_attention(weights, ["▁Hund", "e"], ["▁do", "gs", "</s>"])
    assert query_words == ["Hunde"] and key_words == ["dogs", "</s>"]
    assert merged.tolist() == [[pytest.approx(0.6), pytest.approx(0.4)]]


def test_head_statistics_cover_every_head(reverse):
    tr = translate(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, "1 2 3 4")
    stats = analysis.head_statistics(tr)
    assert len(stats) == 3 * 2 * 4
    assert all(0 <= s.diagonality <= 1 and s.entropy >= 0 for s in stats)
    averaged = analysis.mean_statistics([stats, stats])
    assert averaged[5].entropy == pytest.approx(stats[5].entropy)


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
