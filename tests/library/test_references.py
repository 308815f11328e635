"""Every measure the explorer shows equals an independent reference written from its paper's formulas, in float64
and sharing no code with the library (paper_reference.py), on a tiny model of each layer order whose every bias
and LayerNorm parameter is non-trivial, with two or more layers of each kind: ALTI+ block by block and rolled
out, contrastive gradient × input and integrated gradients, the attributions of each output token, activation
patching of every head, encoder position and decoder layer, attention rollout, ‖α v W_O‖ per head and per layer,
the logit lens and the head statistics.

The library computes in float32: its numbers match the reference's to float32 rounding (FLOAT32, stated where
gradients or differences of logits need more)."""

import pytest
import torch

from paper_reference import (Reference, alti_block, alti_plus, contrast, gradient_x_input, head_statistics,
                             integrated_gradients, logit_lens, norm_based, rollout)
from transformer.inside import analysis, attribution, contrastive, contributions, one_head, patching
from transformer.paper.config import ModelConfig
from transformer.paper.model import Transformer
from transformer.paper.translation import forced_decode

FLOAT32 = 1e-5  # float32 rounding of numbers of about 1, through a few layers
SOURCE = [5, 9, 7, 11, 6, 3]  # a sentence of ids, ending in </s> (3)
CORRUPTED = [5, 9, 8, 11, 6, 3]  # the same with one id changed: a minimal pair for patching
TARGET = [4, 8, 6, 10, 12]  # the translation forced on it, without <s> and </s>
STEP = 3  # the step that patching and contrastive evidence look at (1-based)
IG_STEPS = 16


class Ids:
    """A tokenizer of ids alone: each id is its own piece, 2 and 3 read as <s> and </s>."""

    unk_id, prefix_ids = 1, ()
    names = {0: "<pad>", 1: "<unk>", 2: "<s>", 3: "</s>"}

    def piece(self, token: int) -> str:
        return self.names.get(token, str(token))

    def pieces(self, ids) -> list[str]:
        return [self.piece(token) for token in ids]

    def decode(self, ids) -> str:
        return " ".join(self.pieces(ids))


def tiny_model(norm_first: bool) -> Transformer:
    """Two encoder and three decoder layers of two heads, every bias and LayerNorm γ and β drawn at random."""
    torch.manual_seed(11)
    config = ModelConfig(src_vocab_size=16, tgt_vocab_size=16, d_model=8, n_heads=2, n_encoder_layers=2,
                         n_decoder_layers=3, d_ff=12, dropout=0.0, max_len=24, norm_first=norm_first)
    model = Transformer(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("bias"):
                parameter.copy_(0.5 * torch.randn_like(parameter))
            elif "norm" in name:
                parameter.copy_(1 + 0.4 * torch.randn_like(parameter))
    return model


@pytest.fixture(scope="module", params=[False, True], ids=["post-norm", "pre-norm"])
def case(request):
    model = tiny_model(request.param)
    translation = forced_decode(model, Ids(), Ids(), SOURCE, TARGET)
    reference = Reference(model)
    return model, translation, reference, reference.run(translation.source_ids, translation.target_ids)


def close(library: torch.Tensor, expected: torch.Tensor, atol: float = FLOAT32, rtol: float = 1e-4) -> None:
    torch.testing.assert_close(library.double(), expected, atol=atol, rtol=rtol)


def test_the_reference_runs_the_model_the_library_runs(case):
    """The ground the rest stands on: the same logits and every attention map."""
    model, translation, _, run = case
    close(model(torch.tensor([SOURCE]), torch.tensor([translation.target_ids])).logits[0], run.logits)
    for kind, maps in (("encoder", translation.encoder_attention), ("decoder", translation.decoder_attention),
                       ("cross", translation.cross_attention)):
        for layer, block in enumerate(run.blocks[kind]):
            close(maps[layer], block.weights)


# --- ALTI+ -----------------------------------------------------------------------------------------------------

def test_alti_contributions_of_every_block_are_the_papers(case):
    model, translation, reference, run = case
    measured = contributions.contributions(model, translation)
    for kind in ("encoder", "decoder", "cross"):
        for layer, block in enumerate(run.blocks[kind]):
            close(measured.blocks[kind][layer], alti_block(reference, kind, layer, block))


def test_alti_plus_rolls_the_blocks_out_in_the_layers_order(case):
    model, translation, reference, run = case
    measured = contributions.contributions(model, translation)
    to_source, to_prefix, encoded = alti_plus(reference, run)
    close(measured.encoder, encoded)
    close(measured.source[-1], to_source)
    close(measured.prefix[-1], to_prefix)
    close(measured.source_share, to_source.sum(-1))


def test_stopes_unbiased_sigma_is_a_difference_of_a_few_percent_here_and_of_1e_4_on_the_bundled_model(case):
    """stopes' reference code takes a post-norm block's σ with torch.std (n − 1); LayerNorm, and so the library,
    divides by n, as the model computed. With d_model 8, σ moves by √(8/7) and a contribution by up to 0.15 here
    (the output bias and β, which σ does not scale, weigh more against the parts); with the bundled model's 256
    dimensions by at most 7.3e-5 (the doctor sentence, docs/causes.md). A pre-norm block has no σ to take."""
    model, translation, reference, run = case
    largest = max(float((alti_block(reference, kind, layer, block)
                         - alti_block(reference, kind, layer, block, unbiased_sigma=True)).abs().max())
                  for kind in ("encoder", "decoder", "cross") for layer, block in enumerate(run.blocks[kind]))
    if model.config.norm_first:
        assert largest == 0
    else:
        assert 0.01 < largest < 0.2


# --- gradients -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", contrastive.METHODS)
def test_contrastive_evidence_scores_every_token_as_the_papers_formula(case, method):
    model, translation, reference, _ = case
    alternative = 7
    measured = contrastive.contrastive_evidence(model, translation, Ids(), STEP, alternative, method,
                                                steps=IG_STEPS)
    f = contrast(reference, translation.source_ids, translation.target_ids, STEP,
                 translation.predicted_ids[STEP - 1], alternative)
    embeddings = (reference.embed(translation.source_ids), reference.embed(translation.target_ids[:STEP]))
    if method == "gradient_x_input":
        source, prefix = gradient_x_input(f, *embeddings)
    else:
        source, prefix = integrated_gradients(f, *embeddings, steps=IG_STEPS)
    close(measured.source, source, atol=1e-4)
    close(measured.prefix, prefix, atol=1e-4)
    assert measured.contrast == pytest.approx(float(f(*embeddings)), abs=1e-4)
    assert (measured.method, measured.step, measured.chosen, measured.alternative) == \
        (method, STEP, str(translation.predicted_ids[STEP - 1]), "7")
    if method == "integrated_gradients":  # completeness: the scores add up to f(input) − f(zero baseline)
        zeros = [torch.zeros_like(value) for value in embeddings]
        assert measured.baseline_contrast == pytest.approx(float(f(*zeros)), abs=1e-4)
        assert measured.completeness_gap == pytest.approx(
            abs(float(source.sum() + prefix.sum()) - (measured.contrast - measured.baseline_contrast))
            / abs(measured.contrast - measured.baseline_contrast), abs=1e-3)


@pytest.mark.parametrize("method", ["gradient_x_input", "integrated_gradients"])
def test_attributions_of_every_output_token_are_the_papers_formula(case, method):
    model, translation, reference, _ = case
    attributed = attribution.attribute(model, translation, method, steps=IG_STEPS)
    assert attributed.method == method
    measured = attributed.scores
    embeddings = reference.embed(translation.source_ids)
    for t, chosen in enumerate(translation.predicted_ids):
        def log_p(source_embeddings, t=t, chosen=chosen):
            logits = reference.run(translation.source_ids, translation.target_ids, source_embeddings).logits[t]
            return logits.log_softmax(-1)[chosen]
        expected = gradient_x_input(log_p, embeddings) if method == "gradient_x_input" else \
            integrated_gradients(log_p, embeddings, steps=IG_STEPS)
        close(measured[t], expected[0], atol=1e-4)
        if method == "integrated_gradients":  # completeness: how far the scores are from log p(e) − log p(0)
            change = float(log_p(embeddings) - log_p(torch.zeros_like(embeddings)))
            assert float(attributed.completeness_gap[t]) == pytest.approx(
                abs(float(expected[0].sum()) - change) / abs(change), abs=1e-3)


# --- activation patching -------------------------------------------------------------------------------------

def restored(reference: Reference, run, d_clean: float, d_corrupted: float, target: int, other: int) -> float:
    logits = run.logits[STEP - 1]
    return (float(logits[target] - logits[other]) - d_corrupted) / (d_clean - d_corrupted)


def test_patching_restores_what_patching_each_head_layer_and_position_by_hand_restores(case):
    """A head patched by hand: its slice of W_O's input, the weighted values, copied from the clean run."""
    model, translation, reference, _ = case
    measured = patching.activation_patching(model, translation, Ids(), CORRUPTED, STEP, 7)
    assert measured.corrupted_source == Ids().pieces(CORRUPTED) and measured.alignment == [(i, i) for i in
                                                                                         range(len(SOURCE))]
    patched_by_hand(measured, model, translation, reference, CORRUPTED)


def test_noise_patching_restores_what_the_same_noise_and_patches_restore_by_hand(case):
    """Meng et al.'s corruption: the clean source with noise on its embeddings, every patched run noised alike."""
    model, translation, reference, _ = case
    noised = patching.noised_embeddings(model, torch.tensor([SOURCE]), [1, 2], seed=3)[0].double()
    measured = patching.activation_patching(model, translation, Ids(), None, STEP, 7, noise_positions=[1, 2],
                                            seed=3)
    assert measured.corrupted_source == Ids().pieces(SOURCE)
    assert abs(measured.nothing) <= FLOAT32
    assert measured.last_encoder_layer_all_positions["restored"] == pytest.approx(1, abs=FLOAT32)
    patched_by_hand(measured, model, translation, reference, SOURCE, noised)


def patched_by_hand(measured, model, translation, reference: Reference, corrupted_ids: list[int],
                    corrupted_embeddings: torch.Tensor | None = None) -> None:
    """Every share of ``measured`` against the reference run on the corrupted source, patched one part at a time."""
    target, other = translation.predicted_ids[STEP - 1], 7
    prefix = translation.target_ids[:STEP]
    corrupted = lambda **patch: reference.run(corrupted_ids, prefix, corrupted_embeddings, **patch)  # noqa: E731
    clean = reference.run(SOURCE, prefix)
    d_clean, d_corrupted = (float(run.logits[STEP - 1, target] - run.logits[STEP - 1, other])
                            for run in (clean, corrupted()))
    assert {kind: tuple(grid.shape) for kind, grid in measured.heads.items()} == \
        {kind: (len(clean.blocks[kind]), model.config.n_heads) for kind in ("encoder", "decoder", "cross")}
    assert measured.clean_difference == pytest.approx(d_clean, abs=1e-4)
    assert measured.corrupted_difference == pytest.approx(d_corrupted, abs=1e-4)
    shares = lambda **patch: restored(reference, corrupted(**patch), d_clean, d_corrupted, target,  # noqa: E731
                                      other)
    for kind in ("encoder", "decoder", "cross"):
        for layer, block in enumerate(clean.blocks[kind]):
            for head in range(model.config.n_heads):
                expected = shares(heads={(kind, layer, head): block.heads[head]})
                assert float(measured.heads[kind][layer, head]) == pytest.approx(expected, abs=1e-4), \
                    (kind, layer, head)
    for layer, output in enumerate(clean.encoder_layers):
        for position in range(len(SOURCE)):
            expected = shares(encoder_layers={layer: ([position], output[position])})
            assert float(measured.encoder_positions[layer, position]) == pytest.approx(expected, abs=1e-4)
    for layer, output in enumerate(clean.decoder_layers):
        assert float(measured.decoder_layers[layer]) == pytest.approx(shares(decoder_layers={layer: output}),
                                                                     abs=1e-4)


def test_integrated_gradients_take_64_steps_unless_told_otherwise(case):
    model, translation, _, _ = case
    assert torch.equal(attribution.attribute(model, translation, "integrated_gradients").scores,
                       attribution.attribute(model, translation, "integrated_gradients", steps=64).scores)
    assert torch.equal(attribution.integrated_gradients(model, translation).scores,
                       attribution.integrated_gradients(model, translation, steps=64).scores)
    assert torch.equal(contrastive.contrastive_evidence(model, translation, Ids(), STEP, 7).source,
                       contrastive.contrastive_evidence(model, translation, Ids(), STEP, 7, steps=64).source)


def test_a_contrast_by_an_unknown_method_is_refused_naming_the_methods(case):
    model, translation, _, _ = case
    with pytest.raises(ValueError, match="^method must be one of gradient_x_input, integrated_gradients, not 'x'$"):
        contrastive.contrastive_evidence(model, translation, Ids(), STEP, 7, method="x")


# --- attention read as evidence ------------------------------------------------------------------------------

def test_rollout_is_abnar_and_zuidemas(case):
    _, translation, _, run = case
    close(attribution.rollout(translation).scores, rollout(run))


def test_what_each_key_adds_through_each_head_and_each_layer_is_its_norm(case):
    model, translation, reference, run = case
    for kind in ("encoder", "decoder", "cross"):
        maps = one_head.contribution_maps(model, translation, kind)
        for layer, block in enumerate(run.blocks[kind]):
            per_head, per_layer = norm_based(reference, kind, layer, block)
            close(maps.heads[layer], per_head)
            close(maps.layers[layer], per_layer)


def test_the_logit_lens_reads_each_decoder_layer_through_the_final_norm_and_projection(case):
    model, translation, reference, run = case
    close(one_head.logit_lens(model, translation).probabilities, logit_lens(reference, run, translation.predicted_ids))


def test_every_head_statistic_is_its_definition(case):
    _, translation, _, run = case
    labels = {"encoder": translation.source_pieces, "decoder": translation.target_pieces,
              "cross": translation.source_pieces}
    measured = analysis.head_statistics(translation)
    assert {row.kind for row in measured} == set(labels)
    for row in measured:
        expected = head_statistics(run.blocks[row.kind][row.layer - 1].weights[row.head - 1], labels[row.kind],
                                   analysis.SPECIAL_TOKENS)
        for name, value in expected.items():
            assert getattr(row, name) == pytest.approx(value, abs=FLOAT32), (row.kind, row.layer, row.head, name)
    assert any(row.special_share > 0.05 for row in measured), "the maps put weight on <s> and </s>"
