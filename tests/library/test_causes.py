"""What causes each word: ALTI+ contributions that add up, contrastive evidence that is complete, and activation
patching whose checks hold to float32 rounding, on the bundled model, a converted Marian and small models of both
layer orders; and their command lines."""

import json

import pytest
import torch

from helpers import run_command
from marian_models import build_marian
from transformer.errors import InputError
from transformer.files import hub
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, Checkpoint, load_checkpoint
from transformer.inside import contrastive, contributions, patching
from transformer.paper.config import ModelConfig
from transformer.paper.translation import forced_decode
from transformer.paper.model import AddAndNorm, MultiHeadAttention, Transformer

CLEAN, CORRUPTED = "The doctor said that she was tired.", "The doctor said that he was tired."
SHE_STEP = 8  # "Der Arzt hat soeben , was sie ...": the step that writes "sie"
# A share that is 0 or 1 in exact arithmetic, read to float32 rounding: the corrupted run is one row, the patched
# runs up to 32 at once, and a batch's size changes how the kernels split their float32 sums (an Intel Xeon reads
# -5.3e-8 where an AMD EPYC reads 0). The shares are differences of logits of about 10 over a gap of about 5.
ROUNDING = 1e-5


@pytest.fixture(scope="module")
def bundled():
    return load_checkpoint(REPOSITORY_CHECKPOINTS / "multi30k-en-de", device="cpu")


@pytest.fixture(scope="module")
def doctor(bundled):
    translation = bundled.translate(CLEAN, 5)
    assert translation.predicted_pieces[SHE_STEP - 1] == "▁sie"
    return translation


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    marian = build_marian(tmp_path_factory.mktemp("marian"), trained_steps=100)
    return load_checkpoint(hub.convert(marian, tmp_path_factory.mktemp("ours") / "tiny-marian"), device="cpu")


def small_model(norm_first: bool) -> Transformer:
    torch.manual_seed(0)
    config = ModelConfig(src_vocab_size=30, tgt_vocab_size=30, d_model=8, n_heads=2, n_encoder_layers=2,
                         n_decoder_layers=2, d_ff=16, dropout=0.0, max_len=32, norm_first=norm_first)
    return Transformer(config).eval()


def small_translation(model: Transformer):
    ids = type("Ids", (), {"pieces": lambda self, ids: [str(i) for i in ids], "decode": lambda self, ids: "",
                           "encode": lambda self, text, add_eos=True: [], "prefix_ids": ()})()
    return forced_decode(model, ids, ids, [5, 9, 7, 11, 3], [4, 8, 6, 10])


# --- ALTI+ contributions ---------------------------------------------------------------------------------------

def test_one_block_worked_by_hand():
    """Two 2-d tokens, one head whose projections are the identity, no norm after the add (pre-norm's order):
    query 0 looks only at itself and gets all of it; query 1 looks half at each, and its own token, doubled by the
    residual, lies three times closer to its output than the other."""
    attention = MultiHeadAttention(d_model=2, n_heads=1)
    with torch.no_grad():
        attention.in_proj.weight.copy_(torch.eye(2).repeat(3, 1))
        attention.in_proj.bias.zero_()
        attention.out_proj.weight.copy_(torch.eye(2))
        attention.out_proj.bias.zero_()
    x = torch.eye(2).unsqueeze(0)  # a batch of one sentence
    weights = torch.tensor([[[[1.0, 0.0], [0.5, 0.5]]]])
    parts = contributions.block_parts(attention, AddAndNorm(2, 0.0, norm_first=True, eps=1e-5), x, x, weights)
    torch.testing.assert_close(parts.parts, torch.tensor([[[[2.0, 0.0], [0.0, 0.0]], [[0.5, 0.0], [0.0, 1.5]]]]))
    torch.testing.assert_close(parts.whole, torch.tensor([[[2.0, 0.0], [0.5, 1.5]]]))
    # ‖y‖₁ − ‖y − T_j‖₁: query 0: 2 − 0 and 2 − 2; query 1: 2 − 1.5 and 2 − 0.5.
    torch.testing.assert_close(parts.contributions(), torch.tensor([[[1.0, 0.0], [0.25, 0.75]]]))


def test_the_layers_compose_as_alti_plus_worked_by_hand():
    encoder = [torch.tensor([[[1.0, 0.0], [0.5, 0.5]]])]  # each a batch of one sentence
    decoder = [torch.tensor([[[1.0, 0.0], [0.4, 0.6]]])]
    cross = [torch.tensor([[[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]])]  # two encoder outputs, then the residual
    source, prefix, from_source = contributions.compose(encoder, decoder, cross)
    torch.testing.assert_close(from_source[0], encoder[0][0])
    torch.testing.assert_close(source[0, -1], torch.tensor([[0.35, 0.15], [0.15, 0.05]]))
    torch.testing.assert_close(prefix[0, -1], torch.tensor([[0.5, 0.0], [0.32, 0.48]]))


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_every_blocks_parts_add_up_to_what_the_model_computed(norm_first):
    model = small_model(norm_first)
    translation = small_translation(model)
    records = contributions.record_blocks(model, [translation.source_ids], [translation.target_ids])
    for kind, modules in contributions.attention_blocks(model).items():
        for (attention, add_and_norm), record in zip(modules, records[kind]):
            parts = contributions.block_parts(attention, add_and_norm, record.block_input, record.residual,
                                              record.weights, record.memory)
            torch.testing.assert_close(parts.whole, record.output, atol=1e-5, rtol=1e-5)


def test_the_bundled_models_blocks_add_up_too(bundled, doctor):
    records = contributions.record_blocks(bundled.model, [doctor.source_ids], [doctor.target_ids])
    attention, add_and_norm = contributions.attention_blocks(bundled.model)["cross"][-1]
    record = records["cross"][-1]
    parts = contributions.block_parts(attention, add_and_norm, record.block_input, record.residual, record.weights,
                                      record.memory)
    torch.testing.assert_close(parts.whole, record.output, atol=1e-4, rtol=1e-4)


def check_shares(result: contributions.Contributions, steps: int, sources: int) -> None:
    assert result.source.shape[1:] == (steps, sources) and result.prefix.shape[1:] == (steps, steps)
    assert (result.source >= 0).all() and (result.prefix >= 0).all()
    torch.testing.assert_close(result.source.sum(-1) + result.prefix.sum(-1), torch.ones(result.source.shape[:2]))
    assert (result.prefix.triu(diagonal=1) == 0).all(), "a step draws on no later target token"
    torch.testing.assert_close(result.encoder.sum(-1), torch.ones(sources))


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_shares_are_non_negative_and_each_steps_source_and_prefix_sum_to_one(norm_first):
    model = small_model(norm_first)
    translation = small_translation(model)
    check_shares(contributions.contributions(model, translation), translation.num_steps, len(translation.source_ids))


def test_a_block_decomposed_a_few_queries_at_a_time_gives_the_same_shares(monkeypatch):
    model = small_model(norm_first=False)
    translation = small_translation(model)
    whole = contributions.contributions(model, translation)
    monkeypatch.setattr(contributions, "FLOATS_AT_ONCE", 2 * len(translation.source_ids) * model.config.d_model)
    chunked = contributions.contributions(model, translation)
    torch.testing.assert_close(chunked.source, whole.source)
    torch.testing.assert_close(chunked.prefix, whole.prefix)


def test_translations_measured_together_get_what_each_gets_alone(bundled, doctor):
    """Sentences of other lengths padded into one pass: each one's shares are its own, whatever sits beside it."""
    others = [bundled.translate(text, 1) for text in ("A dog.", "Two men in orange hats are fixing the road.")]
    together = contributions.contributions_together(bundled.model, [others[0], doctor, others[1]])
    for translation, measured in zip([others[0], doctor, others[1]], together):
        alone = contributions.contributions(bundled.model, translation)
        check_shares(measured, translation.num_steps, len(translation.source_ids))
        for name in ("source", "prefix", "encoder"):
            torch.testing.assert_close(getattr(measured, name), getattr(alone, name), atol=1e-5, rtol=1e-4)
        for kind, blocks in alone.blocks.items():
            for own, padded in zip(blocks, measured.blocks[kind]):
                torch.testing.assert_close(padded, own, atol=1e-5, rtol=1e-4)


def test_the_source_shares_alone_are_those_of_the_whole_rollout(bundled, doctor):
    others = [bundled.translate("Two men in orange hats are fixing the road.", 1), doctor]
    for translation, shares in zip(others, contributions.source_shares_together(bundled.model, others)):
        torch.testing.assert_close(shares, contributions.contributions(bundled.model, translation).source_share)


def test_a_model_in_bfloat16_is_measured_in_float32_from_its_own_values():
    model = small_model(norm_first=True).to(torch.bfloat16)
    translation = small_translation(model)
    check_shares(contributions.contributions(model, translation), translation.num_steps, len(translation.source_ids))


def test_the_bundled_model_takes_its_nouns_from_the_source_and_names_where(bundled, doctor):
    result = contributions.contributions(bundled.model, doctor)
    check_shares(result, doctor.num_steps, len(doctor.source_ids))
    arzt = doctor.predicted_pieces.index("▁Arzt")
    assert result.source_share[arzt] > 0.6
    assert doctor.source_pieces[int(result.source[-1, arzt].argmax())] == "▁doctor"
    assert result.source_share_by_layer.shape == (bundled.model.config.n_decoder_layers, doctor.num_steps)


def test_a_converted_marian_has_contributions_too(converted):
    translation = converted.translate("A dog runs across the grass.", 1)
    check_shares(contributions.contributions(converted.model, translation), translation.num_steps,
                 len(translation.source_ids))


def test_the_contributions_command_prints_one_json_object_of_steps(doctor):
    done = run_command("transformer.contributions", CLEAN, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["target_tokens"] == doctor.target_pieces and result["source_tokens"] == doctor.source_pieces
    assert [step["token"] for step in result["steps"]] == doctor.predicted_pieces
    for number, step in enumerate(result["steps"]):
        assert len(step["source"]) == len(doctor.source_pieces) and len(step["prefix"]) == number + 1
        assert step["source_share"] + step["prefix_share"] == pytest.approx(1)
        assert sum(step["source"]) + sum(step["prefix"]) == pytest.approx(1, abs=1e-4)


# --- contrastive evidence --------------------------------------------------------------------------------------

def test_integrated_gradients_of_a_contrast_are_complete_and_point_at_she(bundled, doctor):
    evidence = contrastive.contrastive_evidence(bundled.model, doctor, bundled.target_tokenizer, SHE_STEP, "▁er")
    assert evidence.completeness_gap < 0.01
    total = float(evidence.source.sum() + evidence.prefix.sum())
    assert total == pytest.approx(evidence.contrast - evidence.baseline_contrast, rel=0.01)
    assert doctor.source_pieces[int(evidence.source.argmax())] == "▁she"
    assert evidence.prefix.shape == (SHE_STEP,)


def test_the_contrast_is_the_difference_of_the_two_log_probabilities(bundled, doctor):
    evidence = contrastive.contrastive_evidence(bundled.model, doctor, bundled.target_tokenizer, SHE_STEP, "▁er",
                                                method="gradient_x_input")
    step = SHE_STEP - 1
    er = bundled.target_tokenizer.id_of("▁er")
    with torch.no_grad():
        logits = bundled.model(torch.tensor([doctor.source_ids]), torch.tensor([doctor.target_ids])).logits[0, step]
    log_probs = logits.float().log_softmax(-1)
    assert evidence.contrast == pytest.approx(float(log_probs[doctor.predicted_ids[step]] - log_probs[er]), abs=1e-4)
    assert evidence.alternative == "▁er" and evidence.chosen == "▁sie"


def test_without_an_alternative_the_runner_up_is_compared(bundled, doctor):
    evidence = contrastive.contrastive_evidence(bundled.model, doctor, bundled.target_tokenizer, 2,
                                                method="gradient_x_input")
    runner_up = next(piece for piece in doctor.top_pieces[1] if piece != doctor.predicted_pieces[1])
    assert evidence.alternative == runner_up


@pytest.mark.parametrize("step, alternative, code", [
    (SHE_STEP, "▁sie", "inside.alternative_is_chosen"), (SHE_STEP, "qqqxqqq", "inside.unknown_piece"),
    (99, "▁er", "inside.step_out_of_range")])
def test_a_contrast_that_cannot_be_made_says_why(bundled, doctor, step, alternative, code):
    with pytest.raises(InputError) as raised:
        contrastive.contrastive_evidence(bundled.model, doctor, bundled.target_tokenizer, step, alternative)
    assert raised.value.code == code


# --- activation patching ---------------------------------------------------------------------------------------

def patch_pair(checkpoint: Checkpoint, translation, corrupted: str, step: int, alternative=None, **options):
    corrupted_ids = checkpoint.source_tokenizer.encode(corrupted)
    return patching.activation_patching(checkpoint.model, translation, checkpoint.target_tokenizer, corrupted_ids,
                                        step, alternative, **options)


@pytest.fixture(scope="module")
def she_he(bundled, doctor):
    return patch_pair(bundled, doctor, CORRUPTED, SHE_STEP, "▁er")


def test_patching_nothing_restores_nothing_and_the_last_encoder_layer_restores_the_clean_logits(she_he):
    assert abs(she_he.nothing) <= ROUNDING
    assert she_he.last_encoder_layer_all_positions["max_logit_difference"] <= ROUNDING
    assert she_he.last_encoder_layer_all_positions["restored"] == pytest.approx(1, abs=ROUNDING)
    assert isinstance(she_he.last_encoder_layer_all_positions["restored"], float), "a share, not a whole number"
    assert she_he.last_encoder_layer_all_positions["every_position_paired"]


def test_she_carries_the_difference_in_every_encoder_layer(she_he, doctor):
    for layer in she_he.encoder_positions:
        assert doctor.source_pieces[int(layer.argmax())] == "▁she"
    assert she_he.clean_difference > 0 > she_he.corrupted_difference


def test_what_cannot_see_the_source_restores_nothing_and_the_last_decoder_layer_everything(she_he):
    first_decoder_layer = she_he.heads["decoder"][0]
    assert first_decoder_layer.abs().max() <= ROUNDING, "the first decoder layer's self-attention sees the prefix alone"
    assert she_he.decoder_layers[-1] == pytest.approx(1, abs=ROUNDING)


def test_the_grids_have_a_share_for_every_component(bundled, she_he, doctor):
    config = bundled.model.config
    assert she_he.encoder_positions.shape == (config.n_encoder_layers, len(doctor.source_ids))
    assert {kind: tuple(values.shape) for kind, values in she_he.heads.items()} == {
        kind: (config.layers(kind), config.n_heads) for kind in ("encoder", "decoder", "cross")}
    assert she_he.decoder_layers.shape == (config.n_decoder_layers,)


def test_sources_of_different_lengths_pair_the_pieces_they_share(bundled, doctor):
    longer = "The doctor said that he was very tired."
    result = patch_pair(bundled, doctor, longer, SHE_STEP, "▁er")
    assert not result.last_encoder_layer_all_positions["every_position_paired"]
    she = doctor.source_pieces.index("▁she")
    tired = doctor.source_pieces.index("▁tire")
    assert result.encoder_positions[:, she].isnan().all() and not result.encoder_positions[:, tired].isnan().any()
    assert (she, she) not in result.alignment and (0, 0) in result.alignment


def test_an_alignment_outside_the_sources_or_pairing_twice_is_refused(bundled, doctor):
    for alignment, code in (([(0, 40)], "inside.alignment_outside"), ([(0, 0), (0, 1)], "inside.alignment_repeats")):
        with pytest.raises(InputError) as raised:
            patch_pair(bundled, doctor, CORRUPTED, SHE_STEP, "▁er", alignment=alignment)
        assert raised.value.code == code


def test_noise_on_she_stands_in_for_a_corrupted_sentence_and_repeats_with_its_seed(bundled, doctor):
    she = doctor.source_pieces.index("▁she")
    runs = [patching.activation_patching(bundled.model, doctor, bundled.target_tokenizer, None, SHE_STEP, "▁er",
                                         noise_positions=[she], seed=seed) for seed in (0, 0, 1)]
    torch.testing.assert_close(runs[0].encoder_positions, runs[1].encoder_positions)
    assert runs[0].corrupted_difference != runs[2].corrupted_difference
    assert runs[0].last_encoder_layer_all_positions["max_logit_difference"] <= ROUNDING
    with pytest.raises(InputError):
        patching.activation_patching(bundled.model, doctor, bundled.target_tokenizer, None, SHE_STEP, "▁er",
                                     noise_positions=[40])


def test_a_pair_that_makes_no_difference_is_refused(bundled, doctor):
    with pytest.raises(InputError) as raised:
        patch_pair(bundled, doctor, CLEAN, SHE_STEP, "▁er")
    assert raised.value.code == "inside.nothing_to_restore"


def test_progress_is_reported_and_raising_from_it_stops_the_grid(bundled, doctor):
    seen = []
    patch_pair(bundled, doctor, CORRUPTED, SHE_STEP, "▁er", on_progress=lambda done, total: seen.append((done, total)))
    assert seen[-1][0] == seen[-1][1] and [done for done, _ in seen] == sorted(done for done, _ in seen)

    def stop(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        patch_pair(bundled, doctor, CORRUPTED, SHE_STEP, "▁er", on_progress=stop)
    assert bundled.translate(CLEAN, 5).predicted_ids == doctor.predicted_ids, "no hook is left behind"


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_the_exact_checks_hold_on_both_layer_orders(norm_first):
    model = small_model(norm_first)
    translation = small_translation(model)
    tokens = type("Pieces", (), {"piece": lambda self, i: str(i), "pieces": lambda self, ids: [str(i) for i in ids],
                                 "id_of": lambda self, piece: int(piece), "unk_id": -1})()
    result = patching.activation_patching(model, translation, tokens, [5, 9, 12, 11, 3], translation.num_steps)
    assert abs(result.nothing) <= ROUNDING
    assert result.last_encoder_layer_all_positions["max_logit_difference"] <= ROUNDING
    assert result.decoder_layers[-1] == pytest.approx(1, abs=1e-4)


def test_a_converted_marian_can_be_patched(converted):
    translation = converted.translate("A dog runs across the grass.", 1)
    result = patch_pair(converted, translation, "A dog walks across the grass.", 3)  # as many pieces
    assert result.last_encoder_layer_all_positions["max_logit_difference"] <= ROUNDING


def test_the_patch_command_prints_the_grids_and_both_checks(bundled, doctor):
    done = run_command("transformer.patch", CLEAN, CORRUPTED, "--step", str(SHE_STEP), "--alternative", "▁er",
                       "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    config = bundled.model.config
    assert len(result["encoder_positions"]) == config.n_encoder_layers
    assert len(result["encoder_positions"][0]) == len(doctor.source_ids)
    assert len(result["heads"]["cross"]) == config.n_decoder_layers and len(result["decoder_layers"]) == 3
    assert abs(result["nothing"]) <= ROUNDING
    assert result["last_encoder_layer_all_positions"]["restored"] == pytest.approx(1, abs=ROUNDING)
    assert result["target"] == "▁sie" and result["alternative"] == "▁er"


@pytest.mark.parametrize("args, says", [
    (["--step", "8"], "give either a corrupted sentence or --noise"),
    (["--noise", "1"], "with --noise, give --step"),
    (["he", "--step", "99"], "out of range"),
    (["--noise", "40", "--step", "1"], "outside the source"),
    (["--noise", "1", "--step", "1", "--alternative", "qqqxqqq"], "not a piece"),
    (["he", "--step", "1", "--align", "1-"], "pairs of positions")])
def test_the_patch_command_says_what_is_wrong_in_one_line(args, says):
    done = run_command("transformer.patch", CLEAN, *args)
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr


def test_contributions_and_patching_in_one_thread_leave_anothers_translations_alone(bundled, doctor):
    """A server translates for one visitor while it measures for another: the hooks act in their own thread."""
    import threading

    expected_shares = contributions.contributions(bundled.model, doctor).source_share
    translations, failures = [], []

    def translate_meanwhile():
        try:
            for _ in range(6):
                translations.append(bundled.translate("A dog runs across the grass.", 1).predicted_ids)
        except Exception as error:  # noqa: BLE001 - reported below, in the test's own thread
            failures.append(error)

    other = threading.Thread(target=translate_meanwhile)
    other.start()
    for _ in range(6):
        torch.testing.assert_close(contributions.contributions(bundled.model, doctor).source_share, expected_shares)
        assert abs(patch_pair(bundled, doctor, CORRUPTED, SHE_STEP, "▁er").nothing) <= ROUNDING
    other.join()
    assert not failures and len(translations) == 6 and all(ids == translations[0] for ids in translations)


def test_the_step_a_pair_changes_most_is_found_with_the_token_the_changed_sentence_prefers(bundled, doctor):
    step, preferred = patching.most_affected_step(bundled.model, doctor, bundled.source_tokenizer.encode(CORRUPTED))
    assert step == SHE_STEP and bundled.target_tokenizer.piece(preferred) == "▁er"


def test_the_patch_command_finds_the_step_itself_when_none_is_given():
    done = run_command("transformer.patch", CLEAN, CORRUPTED, "--json")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert (result["step"], result["target"], result["alternative"]) == (SHE_STEP, "▁sie", "▁er")
