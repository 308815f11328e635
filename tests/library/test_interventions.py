"""Experiments change the model's behaviour exactly as described, and leave the unmodified model untouched."""

import copy

import pytest
import torch

from multilingual_models import build_multilingual
from transformer import errors
from transformer.files import hub
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, load_checkpoint
from transformer.inside import interventions
from transformer.metrics import corpus_scores
from transformer.paper.translation import forced_decode, translate
from transformer.paper.model import HeadMask


@pytest.fixture(scope="module")
def reverse():
    return load_checkpoint(REPOSITORY_CHECKPOINTS / "reverse-tiny", device="cpu")


@pytest.fixture(scope="module")
def bundled():
    return load_checkpoint(REPOSITORY_CHECKPOINTS / "multi30k-en-de", device="cpu")


def logits(checkpoint, head_mask=None, positions=True, model=None):
    model = model or checkpoint.model
    src = torch.tensor([checkpoint.source_tokenizer.encode("3 1 4 1 5")])
    tgt = torch.tensor([[2] + checkpoint.target_tokenizer.encode("5 1 4 1 3", add_eos=False)])
    with torch.no_grad():
        return model(src, tgt, head_mask=head_mask, positions=positions).logits


@pytest.mark.parametrize("kind, stack, block", [("encoder", "encoder", "self_attn"),
                                                 ("decoder", "decoder", "self_attn"), ("cross", "decoder", "cross_attn")])
def test_a_switched_off_head_contributes_exactly_nothing(reverse, kind, stack, block):
    mask = interventions.make_head_mask(reverse, {kind: ["L2H3"]})
    # The same effect by surgery on a copy: zero the output-projection columns fed by that head.
    surgical = copy.deepcopy(reverse.model)
    head_dim = surgical.config.head_dim
    with torch.no_grad():
        getattr(getattr(surgical, stack).layers[1], block).out_proj.weight[:, 2 * head_dim:3 * head_dim] = 0
    assert torch.allclose(logits(reverse, mask), logits(reverse, model=surgical), atol=1e-5)
    assert not torch.allclose(logits(reverse, mask), logits(reverse), atol=1e-4)


def test_unknown_heads_are_refused(reverse):
    with pytest.raises(errors.InputError, match="does not exist"):
        interventions.make_head_mask(reverse, {"encoder": ["L9H1"]})
    assert interventions.make_head_mask(reverse, {}) is None


def test_head_importance_in_one_batch_equals_one_head_at_a_time(reverse):
    tr = translate(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, "2 7 1 8 2")
    importance = interventions.head_importance(reverse, tr)
    assert set(importance) == {"encoder", "decoder", "cross"}
    assert importance["cross"].shape == (2, 4)
    kind, layer, head = "cross", 1, 2
    alone = translate(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, "2 7 1 8 2")
    mask = interventions.make_head_mask(reverse, {kind: [interventions.head_label(layer, head)]})
    rescored = forced_decode(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, alone.source_ids,
                             alone.predicted_ids[:-1], head_mask=mask)
    assert importance[kind][layer, head].item() == pytest.approx(alone.log_prob - rescored.log_prob, abs=1e-3)
    ranked = interventions.ranked_heads(importance)
    assert len(ranked) == 24 and ranked[0][2] >= ranked[-1][2]


def test_token_override_continues_from_the_forced_prefix(reverse):
    tr = translate(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, "1 2 3 4 5")
    comparison = interventions.override_token(reverse, tr, step=2, token="▁9")
    after = comparison.after
    assert after.predicted_ids[0] == tr.predicted_ids[0]
    assert after.predicted_pieces[1] == "▁9"
    assert after.text.split()[:2] == ["5", "9"]
    assert comparison.before.text == tr.text == "5 4 3 2 1"


def test_removing_positions_changes_the_encoder_output(reverse):
    src = torch.tensor([reverse.source_tokenizer.encode("1 2 3 4")])
    with torch.no_grad():
        with_positions = reverse.model.encode(src).memory
        without = reverse.model.encode(src, positions=False).memory
    assert not torch.allclose(with_positions, without, atol=1e-3)
    comparison = interventions.without_positions(reverse, "1 2 3 4")
    assert comparison.before.text == "4 3 2 1"
    assert len(comparison.probability_changes()) == len(comparison.before.predicted_pieces)


def test_shuffled_source_changes_the_reversal(reverse):
    comparison = interventions.shuffled_source(reverse, "1 2 3 4 5 6", seed=1)
    shuffled = interventions.shuffle_words("1 2 3 4 5 6", seed=1)
    assert shuffled != "1 2 3 4 5 6"
    assert comparison.after.text == " ".join(reversed(shuffled.split()))


def test_the_unmodified_model_is_unaffected_afterwards(reverse):
    before = logits(reverse)
    interventions.ablate_heads(reverse, "3 1 4 1 5", {"encoder": ["L1H1"], "cross": ["L2H2"]})
    interventions.without_positions(reverse, "3 1 4 1 5")
    assert torch.equal(logits(reverse), before)


def test_head_mask_may_differ_per_batch_row(reverse):
    ones = torch.ones(2, 4)
    off = ones.clone()
    off[0, 0] = 0
    batch = HeadMask(encoder=torch.stack([ones, off]))
    src = torch.tensor([reverse.source_tokenizer.encode("1 2 3")] * 2)
    tgt = torch.tensor([[2, 5, 6]] * 2)
    with torch.no_grad():
        both = reverse.model(src, tgt, head_mask=batch).logits
        plain = reverse.model(src[:1], tgt[:1]).logits
        single = reverse.model(src[:1], tgt[:1], head_mask=HeadMask(encoder=off)).logits
    assert torch.allclose(both[0], plain[0], atol=1e-5) and torch.allclose(both[1], single[0], atol=1e-5)


def test_a_head_is_named_by_its_layer_and_head_from_1_in_either_case():
    assert interventions.head_label(1, 2) == "L2H3"
    assert interventions.parse_head_label("L2H3") == (1, 2) and interventions.parse_head_label("l1h4") == (0, 3)
    for label in ("L2", "H3", "LxH1", "X1H2", ""):
        with pytest.raises(errors.InputError) as raised:
            interventions.parse_head_label(label)
        assert (raised.value.code, raised.value.values) == ("inside.not_a_head_name", {"label": repr(label)})


def test_a_head_mask_is_zero_at_each_head_named_and_one_everywhere_else(reverse):
    mask = interventions.make_head_mask(reverse, {"cross": ["L2H3", "L1H1"], "encoder": []})
    expected = torch.ones(2, 4)
    expected[1, 2] = expected[0, 0] = 0
    assert torch.equal(mask.cross, expected)
    assert torch.equal(mask.encoder, torch.ones(2, 4)) and torch.equal(mask.decoder, torch.ones(2, 4))
    assert interventions.make_head_mask(reverse, {"cross": [], "decoder": []}) is None
    for label in ("L3H1", "L1H5", "L0H1"):
        with pytest.raises(errors.InputError) as raised:
            interventions.make_head_mask(reverse, {"decoder": [label]})
        assert (raised.value.code, raised.value.values) == ("inside.no_such_head",
                                                            {"label": label, "layers": 2, "heads": 4})


def test_unless_told_otherwise_the_experiments_start_from_the_greedy_translation(bundled):
    """On a sentence whose beam-2 translation is not its greedy one, each experiment's first run is the greedy."""
    text = "The doctor said that she was tired."
    greedy = bundled.translate(text).text
    assert bundled.translate(text, 2).text != greedy
    for comparison in (interventions.ablate_heads(bundled, text, {"cross": ["L1H1"]}),
                       interventions.without_positions(bundled, text), interventions.shuffled_source(bundled, text)):
        assert comparison.before.text == greedy, comparison.intervention
    assert interventions.shuffled_source(bundled, text).details["sentence"] == interventions.shuffle_words(text, 0)
    assert interventions.shuffle_words(text) == interventions.shuffle_words(text, 0) != \
        interventions.shuffle_words(text, 1)


def test_every_experiment_keeps_both_translations_to_the_length_it_is_given(reverse):
    text = "3 1 4 1 5"
    assert len(reverse.translate(text).predicted_ids) == 6, "five digits and </s> when nothing limits it"
    comparisons = [interventions.ablate_heads(reverse, text, {"cross": ["L2H1"]}, max_length=2),
                   interventions.without_positions(reverse, text, max_length=2),
                   interventions.shuffled_source(reverse, text, seed=2, max_length=2)]
    for comparison in comparisons:
        assert len(comparison.before.predicted_ids) == len(comparison.after.predicted_ids) == 2, \
            comparison.intervention
        assert comparison.before.text == reverse.translate(text, beam_size=1, max_length=2).text


def test_probability_changes_pair_each_token_of_the_first_translation_with_both_its_probabilities(reverse):
    comparison = interventions.ablate_heads(reverse, "3 1 4 1 5", {"cross": ["L2H1", "L2H2"]})
    assert comparison.probability_changes() == list(zip(comparison.before.predicted_pieces,
                                                        comparison.before.token_probs,
                                                        comparison.rescored.token_probs))
    assert [piece for piece, _, _ in comparison.probability_changes()] == ["▁5", "▁1", "▁4", "▁1", "▁3", "</s>"]
    forced = interventions.override_token(reverse, comparison.before, step=1, token="▁9")
    assert forced.probability_changes() == [], "a forced token is compared by its two continuations"


def test_switching_heads_off_compares_the_translations_and_rescores_the_first_under_the_mask(reverse):
    off = {"cross": ["L2H1", "L2H2", "L2H3", "L2H4"], "decoder": ["L1H1"]}
    comparison = interventions.ablate_heads(reverse, "3 1 4 1 5", off, beam_size=2, max_length=20)
    mask = interventions.make_head_mask(reverse, off)
    assert comparison.before.text == reverse.translate("3 1 4 1 5", 2, 20).text
    assert comparison.after.text == reverse.translate("3 1 4 1 5", 2, 20, head_mask=mask).text
    assert comparison.before.text != comparison.after.text
    rescored = forced_decode(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer,
                             comparison.before.source_ids, comparison.before.predicted_ids[:-1], head_mask=mask)
    assert comparison.rescored.token_probs == pytest.approx(rescored.token_probs)
    assert (comparison.intervention, comparison.details) == ("switched_off", {"count": 5})
    assert torch.equal(comparison.head_mask.cross, mask.cross)


def test_an_override_is_clamped_to_the_steps_read_as_a_word_start_and_refuses_what_cannot_be_written(reverse):
    tr = translate(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, "1 2 3 4 5")
    last = interventions.override_token(reverse, tr, step=99, token="9")  # a typed word: tried as "▁9"
    assert last.details == {"step": tr.num_steps, "piece": "▁9"} and last.intervention == "forced"
    assert last.after.predicted_pieces[tr.num_steps - 1] == "▁9"
    assert last.after.ended and last.after.predicted_pieces[-1] == "</s>", "a continuation that ends says so"
    first = interventions.override_token(reverse, tr, step=0, token=reverse.target_tokenizer.id_of("▁7"))
    assert first.details["step"] == 1 and first.after.predicted_pieces[0] == "▁7"
    same = interventions.override_token(reverse, tr, step=3, token=tr.predicted_pieces[2])
    assert same.after is same.before and same.before.source_text == tr.source_text
    for token, code, values in (("<s>", "inside.special_piece", {"start": "<s>", "pad": "<pad>"}),
                                ("<pad>", "inside.special_piece", {"start": "<s>", "pad": "<pad>"}),
                                ("qqq", "inside.unknown_piece", {"piece": "qqq"})):
        with pytest.raises(errors.InputError) as raised:
            interventions.override_token(reverse, tr, step=1, token=token)
        assert (raised.value.code, raised.value.values) == (code, values)
    unknown = interventions.override_token(reverse, tr, step=1, token="<unk>")  # <unk> is a piece it can force
    assert unknown.after.predicted_pieces[0] == "<unk>"
    by_id = interventions.override_token(reverse, tr, step=1, token=reverse.target_tokenizer.unk_id)
    assert by_id.after.predicted_pieces[0] == "<unk>", "an id is the token it names"
    assert interventions.override_token(reverse, tr, step=1, token="▁▁6").after.predicted_pieces[0] == "▁6"
    short = interventions.override_token(reverse, tr, step=1, token="▁9", max_length=2)
    assert len(short.after.predicted_ids) == 2 and not short.after.ended, "cut at its length, not ended"


def test_without_positions_the_model_reads_a_bag_and_the_first_translation_is_rescored_so(reverse):
    comparison = interventions.without_positions(reverse, "3 1 4 1 5", beam_size=2, max_length=20)
    assert comparison.after.text == reverse.translate("3 1 4 1 5", 2, 20, positions=False).text
    rescored = forced_decode(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer,
                             comparison.before.source_ids, comparison.before.predicted_ids[:-1], positions=False)
    assert comparison.rescored.token_probs == pytest.approx(rescored.token_probs)
    assert (comparison.positions, comparison.intervention, comparison.details) == (False, "no_positions", {})


def test_a_shuffle_changes_the_order_when_it_can_repeats_with_its_seed_and_keeps_every_word(reverse):
    assert interventions.shuffle_words("1 2 3 4 5", seed=3) == interventions.shuffle_words("1 2 3 4 5", seed=3)
    assert sorted(interventions.shuffle_words("1 2 3 4 5", seed=3).split()) == ["1", "2", "3", "4", "5"]
    assert all(interventions.shuffle_words("1 2", seed) == "2 1" for seed in range(5)), "it tries until it changes"
    assert interventions.shuffle_words("7 7 7") == "7 7 7" and interventions.shuffle_words("7") == "7"
    assert interventions.shuffle_words("1 2", seed=439) == "1 2", "seed 439 keeps the order ten times: it gives up"
    comparison = interventions.shuffled_source(reverse, "1 2 3 4 5", seed=2, beam_size=2, max_length=20)
    shuffled = interventions.shuffle_words("1 2 3 4 5", seed=2)
    assert comparison.details == {"sentence": shuffled} and comparison.intervention == "shuffled"
    assert comparison.after.text == reverse.translate(shuffled, 2, 20).text
    rescored = forced_decode(reverse.model, reverse.source_tokenizer, reverse.target_tokenizer, shuffled,
                             comparison.before.predicted_ids[:-1])
    assert comparison.rescored.token_probs == pytest.approx(rescored.token_probs)


def test_mean_importance_averages_each_sentences_importance_against_its_own_greedy_translation(reverse):
    sentences = ["1 2 3", "4 5 6 7"]
    mean = interventions.mean_head_importance(reverse, sentences)
    each = [interventions.head_importance(reverse, reverse.translate(sentence)) for sentence in sentences]
    for kind in ("encoder", "decoder", "cross"):
        torch.testing.assert_close(mean[kind], (each[0][kind] + each[1][kind]) / 2)
    one = interventions.mean_head_importance(reverse, sentences[:1])
    assert all(torch.equal(one[kind], each[0][kind]) for kind in ("encoder", "decoder", "cross"))


def test_pruning_takes_heads_least_important_first_or_in_a_seeded_order(reverse):
    importance = {"cross": torch.tensor([[0.5, -0.1, 2.0, 0.0], [1.0, 0.3, 0.2, 0.1]])}
    assert interventions.pruning_order(reverse, "cross", importance) == [
        "L1H2", "L1H4", "L2H4", "L2H3", "L2H2", "L1H1", "L2H1", "L1H3"]
    seeded = interventions.pruning_order(reverse, "encoder", seed=4)
    assert seeded == interventions.pruning_order(reverse, "encoder", seed=4)
    assert sorted(seeded) == sorted(f"L{layer}H{head}" for layer in (1, 2) for head in (1, 2, 3, 4))
    assert seeded != interventions.pruning_order(reverse, "encoder", seed=5)


def test_a_pruning_curve_scores_each_set_of_heads_off_against_the_unpruned_and_the_references(reverse):
    sentences, references = ["1 2 3 4", "5 6 7"], ["4 3 2 1", "7 6 5"]
    assert interventions.translate_with_mask(reverse, sentences, None) == [reverse.translate(s).text
                                                                         for s in sentences]
    order = ["L2H1", "L2H2", "L2H3", "L2H4"]
    seen = []
    curve = interventions.pruning_curve(reverse, sentences, "cross", order, references,
                                        on_step=lambda done, total: seen.append((done, total)))
    assert (curve.kind, curve.order) == ("cross", order) and seen == [(k, 5) for k in range(1, 6)]
    assert curve.chrf[0] == pytest.approx(100) and curve.bleu[0] == pytest.approx(100)
    mask = interventions.make_head_mask(reverse, {"cross": order})
    pruned = interventions.translate_with_mask(reverse, sentences, mask)
    assert pruned != references
    assert curve.chrf[-1] == pytest.approx(corpus_scores(pruned, references)["chrf"])
    assert curve.bleu[-1] == pytest.approx(corpus_scores(pruned, references)["bleu"])
    assert interventions.pruning_curve(reverse, sentences, "cross", order[:1]).bleu is None


def test_translating_with_a_head_mask_keeps_a_multilingual_models_language(tmp_path_factory):
    original = build_multilingual(tmp_path_factory.mktemp("m2m100"), "m2m100")
    converted = load_checkpoint(hub.convert(original, tmp_path_factory.mktemp("ours") / "m2m100"), device="cpu")
    russian = converted.in_languages("en", "ru")
    assert russian.target_tokenizer.prefix_ids, "the target language's token starts every translation"
    sentences = ["A man walks.", "Two dogs play in the park."]
    assert interventions.translate_with_mask(russian, sentences, None) == [russian.translate(s).text
                                                                         for s in sentences]
