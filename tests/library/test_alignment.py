"""Attention as word alignment, scored: the alignment error rate on Och & Ney's definition, worked by hand; which
step's attention aligns which target word (Shift-Att, Chen et al., 2020); each method's map equal to the library's
own view of it, batched or alone; and the command line."""

import json

import pytest
import torch

from helpers import run_command
from transformer.errors import InputError
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, load_checkpoint
from transformer.inside import alignment, contributions, one_head
from transformer.inside.alignment import GoldLinks, PairPieces, PieceScores
from transformer.paper.translation import forced_decode

PAIRS = [("a dog runs .", "un chien court ."), ("two children play football in the park .",
                                                  "deux enfants jouent au football dans le parc ."),
         ("a man .", "un homme .")]


@pytest.fixture(scope="module")
def english_french():
    return load_checkpoint(REPOSITORY_CHECKPOINTS / "multi30k-en-fr", device="cpu")


# --- the score ---------------------------------------------------------------------------------------------------

def test_the_alignment_error_rate_counts_sure_and_possible_links_as_och_and_ney_define_it():
    gold = [GoldLinks(sure=frozenset({(0, 0), (1, 1)}), possible=frozenset({(0, 0), (1, 1), (1, 2)}))]
    found = [{(0, 0), (1, 2), (2, 2)}]
    # |A∩S| = 1, |A∩P| = 2, |A| = 3, |S| = 2: AER = 1 - (1 + 2) / (3 + 2)
    score = alignment.alignment_error(found, gold)
    assert score.aer == pytest.approx(0.4)
    assert score.precision == pytest.approx(2 / 3)
    assert score.recall == pytest.approx(1 / 2)


def test_a_corpus_is_scored_on_its_links_pooled_not_on_the_mean_of_its_sentences():
    gold = [GoldLinks(frozenset({(0, 0)}), frozenset({(0, 0)})),
            GoldLinks(frozenset({(0, 0), (1, 1), (2, 2)}), frozenset({(0, 0), (1, 1), (2, 2)}))]
    found = [{(0, 0)}, {(0, 1)}]
    # pooled: |A∩S| = |A∩P| = 1, |A| = 2, |S| = 4, so 1 - 2/6; the mean of the sentences' AERs would be 0.5
    assert alignment.alignment_error(found, gold).aer == pytest.approx(2 / 3)


def test_a_perfect_alignment_scores_zero_and_possible_links_cost_no_precision():
    gold = [GoldLinks(frozenset({(0, 0)}), frozenset({(0, 0), (0, 1)}))]
    assert alignment.alignment_error([{(0, 0), (0, 1)}], gold) == alignment.AlignmentScore(0.0, 1.0, 1.0)


def test_gold_links_are_read_from_one_with_every_sure_link_possible_too(tmp_path):
    path = tmp_path / "gold"
    path.write_text("1-1 2p3\n\n3-2\n", encoding="utf-8")
    first, empty, third = alignment.read_gold(path)
    assert first == GoldLinks(sure=frozenset({(0, 0)}), possible=frozenset({(0, 0), (1, 2)}))
    assert empty == GoldLinks(frozenset(), frozenset())
    assert third.sure == third.possible == {(2, 1)}


@pytest.mark.parametrize("line", ["1-x", "0-1", "1_2", "1-2-3"])
def test_a_link_that_is_not_one_is_refused_with_its_line(tmp_path, line):
    path = tmp_path / "gold"
    path.write_text(f"1-1\n{line}\n", encoding="utf-8")
    with pytest.raises(InputError) as refused:
        alignment.read_gold(path)
    assert refused.value.code == "align.bad_link"
    assert str(refused.value) == (f"{path}, line 2: {line} is not a link like 3-5 (sure) or 3p5 (possible), "
                                  "counted from 1.")


@pytest.mark.parametrize(("line", "code"), [("a dog", "align.bad_pair"), ("a ||| b ||| c", "align.bad_pair"),
                                            ("a dog |||  ", "align.empty_side")])
def test_a_pair_must_have_words_on_both_sides_of_one_separator(tmp_path, line, code):
    path = tmp_path / "pairs"
    path.write_text(f"{line}\n", encoding="utf-8")
    with pytest.raises(InputError) as refused:
        alignment.read_pairs(path)
    assert refused.value.code == code


def test_pairs_are_read_with_their_words_split_by_spaces(tmp_path):
    path = tmp_path / "pairs"
    path.write_text("  oh ,  oh !   |||  oh , oh !  \n", encoding="utf-8")
    assert alignment.read_pairs(path) == [("oh , oh !", "oh , oh !")]


# --- from pieces to words ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("pieces", "words"), [
    (["▁do", "▁not", "▁", "force", "▁a", "▁mor", "ator", "ium"], [0, 1, 2, 2, 3, 4, 4, 4]),
    (["▁", ".", "▁", "▁"], [0, 0, 1, 2]),
    (["tail", "▁head"], [0, 1]),
])
def test_each_piece_belongs_to_the_word_its_space_began(pieces, words):
    assert alignment.piece_words(pieces) == words


def test_a_target_word_links_to_the_source_word_of_its_best_piece_and_words_join_their_pieces():
    scores = torch.tensor([[0.1, 0.7, 0.2],   # target piece 0 (word 0) -> source piece 1 (word 0)
                           [0.6, 0.3, 0.1],   # target piece 1 (word 1) -> source piece 0 (word 0)
                           [0.0, 0.1, 0.9]])  # target piece 2 (word 1) -> source piece 2 (word 1)
    assert alignment.hard_links(scores, [0, 1, 1], [0, 0, 1]) == {(0, 0), (0, 1), (1, 1)}


def test_shift_att_reads_the_step_where_the_target_word_is_the_input_attention_the_step_that_predicts_it():
    # decoder positions: <s>, y1, y2, y3 (y3 then predicts </s>); row t looks only at source word t
    looks = torch.eye(4, 4)[:, :3].unsqueeze(0)
    scores = PieceScores(attention=looks, norm=looks, alti=looks)
    pair = PairPieces(source_ids=[5, 6, 7, 1], target_body=[8, 9, 10], source_words=[0, 1, 2],
                      target_words=[0, 1, 2], source_start=0, target_start=0)
    # attention: y_j is predicted at row j - 1, which looks at source word j - 1
    assert alignment.word_links(scores, pair, "attention", None) == {(0, 0), (1, 1), (2, 2)}
    # shift-att: y_j is read at row j, which looks at source word j (the last looks at none of the three words
    # more than another, so the first wins)
    assert alignment.word_links(scores, pair, "shift-att", None) == {(1, 0), (2, 1), (0, 2)}


def test_without_a_layer_attention_averages_the_layers_and_alti_takes_the_whole_models_rollout():
    first, last = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 3.0]])
    scores = PieceScores(*(torch.stack([first, last]),) * 3)
    assert torch.equal(alignment.method_map(scores, "attention", None), torch.tensor([[0.5, 1.5]]))
    assert torch.equal(alignment.method_map(scores, "norm", 1), first)
    assert torch.equal(alignment.method_map(scores, "alti", None), last)


# --- each method's map is the library's own view of it -----------------------------------------------------------

def encoded(checkpoint, pairs):
    return [alignment.pair_pieces(checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer,
                                  source, target, line) for line, (source, target) in enumerate(pairs, start=1)]


def test_each_methods_map_is_the_one_the_explorer_shows_for_the_same_pair_batched_or_alone(english_french):
    model = english_french.model
    pairs = encoded(english_french, PAIRS)
    together = alignment.piece_scores_together(model, [pair.source_ids for pair in pairs],
                                               [[model.config.start_id] + pair.target_body for pair in pairs])
    for pair, scores in zip(PAIRS, together):
        seen = forced_decode(model, english_french.source_tokenizer, english_french.target_tokenizer, *pair)
        assert torch.allclose(scores.attention, seen.cross_attention.mean(1), atol=1e-5)
        assert torch.allclose(scores.norm, one_head.contribution_maps(model, seen, "cross").layers, atol=1e-4)
        assert torch.allclose(scores.alti, contributions.contributions(model, seen).source, atol=1e-5)


def test_the_words_of_each_pair_are_its_spaces_words(english_french):
    pair = encoded(english_french, [PAIRS[1]])[0]
    assert max(pair.source_words) + 1 == len(PAIRS[1][0].split())
    assert max(pair.target_words) + 1 == len(PAIRS[1][1].split())
    assert len(pair.source_words) == len(pair.source_ids) - 1  # every piece but </s>


def test_a_layer_the_decoder_lacks_and_an_unknown_method_are_refused_by_name(english_french):
    with pytest.raises(InputError, match="Layer 4 does not exist: the decoder has 3 layers"):
        alignment.align(english_french.model, english_french.source_tokenizer, english_french.target_tokenizer,
                        PAIRS, [("attention", 4)])
    with pytest.raises(InputError, match="no alignment method mean; choose one of attention, shift-att, norm, alti"):
        alignment.check_method(english_french.model, "mean", None)


# --- the command line --------------------------------------------------------------------------------------------

@pytest.fixture
def hansards_like(tmp_path):
    text, gold = tmp_path / "pairs", tmp_path / "gold"
    text.write_text("".join(f"{source} ||| {target}\n" for source, target in PAIRS), encoding="utf-8")
    gold.write_text("1-1 2-2 3-3 4-4\n1-1 2-2 3-3 4p4 5-5 7-7 8-8 9-9\n1-1 2-2 3-3\n", encoding="utf-8")
    return str(text), str(gold)


def test_align_prints_the_score_and_each_lines_links_as_the_library_reads_them(english_french, hansards_like):
    text, gold = hansards_like
    result = run_command("transformer.align", "--checkpoint", str(english_french.path), "--text", text,
                         "--gold", gold, "--method", "norm", "--layer", "2", "--json")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    found = alignment.align(english_french.model, english_french.source_tokenizer, english_french.target_tokenizer,
                            PAIRS, [("norm", 2)])[("norm", 2)]
    assert printed["alignments"] == [sorted(map(list, links)) for links in found]
    score = alignment.alignment_error(found, alignment.read_gold(gold))
    assert (printed["aer"], printed["precision"], printed["recall"]) == pytest.approx(
        (score.aer, score.precision, score.recall), abs=1e-6)


def test_align_all_scores_every_method_at_every_layer_and_over_all(english_french, hansards_like):
    text, gold = hansards_like
    result = run_command("transformer.align", "--checkpoint", str(english_french.path), "--text", text,
                         "--gold", gold, "--method", "all", "--json")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert (printed["gold"], printed["sentences"]) == ("gold", 3)
    rows = printed["methods"]
    assert [(row["method"], row["layer"]) for row in rows] == [
        (method, layer) for method in alignment.METHODS for layer in (1, 2, 3, None)]
    assert all(0 <= row["aer"] <= 1 for row in rows)


@pytest.mark.parametrize(("arguments", "said"), [
    (["--gold", "GOLD_TWO"], "error [align.count_mismatch]: There are 3 sentence pairs but gold links for 2 "
                             "sentences: the files must have a line for each pair.\n"),
    (["--layer", "9"], "error [align.no_layer]: Layer 9 does not exist: the decoder has 3 layers (counting from 1).\n"),
])
def test_a_mistake_is_one_line_naming_its_code(english_french, hansards_like, tmp_path, arguments, said):
    text, gold = hansards_like
    two = tmp_path / "two"
    two.write_text("1-1\n1-1\n", encoding="utf-8")
    arguments = [str(two) if argument == "GOLD_TWO" else argument for argument in arguments]
    result = run_command("transformer.align", "--checkpoint", str(english_french.path), "--text", text,
                         *arguments)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", said)


def test_every_method_compared_needs_gold_to_compare_by(hansards_like):
    result = run_command("transformer.align", "--text", hansards_like[0], "--method", "all")
    assert result.returncode == 2
    assert result.stderr == ("error [usage]: --method all compares the methods' scores; give --gold (see python -m "
                             "transformer.align --help)\n")
