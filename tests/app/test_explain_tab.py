"""The Attention vs evidence tab: attribution beside cross-attention, agreement, and pruning."""

import gradio as gr
import numpy as np
import pytest
import torch

from transformer.errors import InputError
from transformer.inside import interventions
from ui import services
from ui.tabs import explain as explain_tab
from ui.views import explain
from ui.views.translate import WEIGHT_DECIMALS

SENTENCE = "A dog runs across the grass."
DRAWN_TO = 0.5 * 10 ** -WEIGHT_DECIMALS  # weights are drawn rounded


@pytest.fixture(scope="module")
def attributed(app_services, translation):
    return explain_tab.on_attribute(app_services, "multi30k-en-de", translation, "integrated gradients", 32, 3,
                                    "mean of heads")


def test_the_evidence_and_the_attention_share_rows_and_columns(attributed, translation):
    evidence, attention = attributed["explain_attribution"].data[0], attributed["explain_attention"].weights
    shape = (translation.num_steps, len(translation.source_ids))
    assert np.asarray(evidence.z).shape == attention.shape == shape
    np.testing.assert_allclose(attention.numpy(), translation.cross_attention[2].mean(0).numpy(), atol=DRAWN_TO)
    assert evidence.zmin == -evidence.zmax, "signed evidence on a scale centred on 0"
    assert "Completeness" in attributed["explain_summary"]


def test_the_agreement_table_ranks_every_head_each_layer_and_rollout(attributed, translation):
    table = attributed["explain_agreement"]
    layers, heads = translation.cross_attention.shape[:2]
    assert len(table) == layers * heads + layers + 1
    assert {"L1H1", "L3 mean of heads", "rollout"} <= set(table["attention"])
    correlations = list(table["rank correlation"])
    assert correlations == sorted(correlations, reverse=True), "best first"


def test_clicking_a_heads_row_opens_that_head_beside_the_evidence(translation):
    event = gr.SelectData(None, {"index": [0, 0], "value": "L2H3", "row_value": ["L2H3", "50%", 0.5]})
    views = explain_tab.on_agreement_row(translation, event)
    assert views["explain_layer"] == 2 and views["explain_head"] == "3"
    np.testing.assert_allclose(views["explain_attention"].weights.numpy(),
                               translation.cross_attention[1, 2].numpy(), atol=DRAWN_TO)
    rollout = gr.SelectData(None, {"index": [0, 0], "value": "rollout", "row_value": ["rollout", "50%", 0.5]})
    assert explain_tab.on_agreement_row(translation, rollout) == {}


def test_rollout_is_shown_as_shares_that_sum_to_one(app_services, translation):
    views = explain_tab.on_attribute(app_services, "multi30k-en-de", translation, "attention rollout", 32, 1, "1")
    np.testing.assert_allclose(np.asarray(views["explain_attribution"].data[0].z).sum(1), 1.0, atol=1e-5)


def test_attributing_before_any_translation_says_what_to_do(app_services):
    with pytest.raises(InputError, match="Translate a sentence first"):
        explain_tab.on_attribute(app_services, "multi30k-en-de", None, "integrated gradients", 32, 1, "1")


def test_a_pruning_curve_starts_at_full_agreement_and_falls_as_heads_go(app_services):
    checkpoint = app_services.registry.get("multi30k-en-de")
    sentences = ["A dog runs across the grass.", "Two men are sitting on a bench.", "A girl rides a red bike."]
    order = interventions.pruning_order(checkpoint, "cross", seed=1)
    seen = []
    curve = interventions.pruning_curve(checkpoint, sentences, "cross", order, on_step=lambda *p: seen.append(p))
    assert len(curve.chrf) == len(order) + 1 == 13 and curve.chrf[0] == 100.0
    assert curve.chrf[-1] < 50, "with every cross-attention head off the translations fall apart"
    assert seen[-1] == (13, 13)
    assert sorted(order) == sorted(interventions.pruning_order(checkpoint, "cross", seed=2))


def test_the_pruning_order_by_importance_removes_the_least_important_head_first(app_services):
    checkpoint = app_services.registry.get("multi30k-en-de")
    importance = {"cross": torch.arange(12.0).flip(0).view(3, 4)}  # L1H1 matters most, L3H4 least
    order = interventions.pruning_order(checkpoint, "cross", importance)
    assert order[0] == "L3H4" and order[-1] == "L1H1"


def quiet_progress(*args, **kwargs):
    """Stands in for Gradio's progress tracker outside a request."""


@pytest.mark.slow
def test_pruning_on_the_sample_sentences_compares_importance_order_with_random(app_services):
    views = explain_tab.on_prune(app_services, "multi30k-en-de", "cross-attention", explain_tab.SAMPLE,
                                 progress=quiet_progress)
    lines = {trace.name: trace for trace in views["prune_plot"].data}
    assert set(lines) == {"least important first: chrF vs unpruned", "random order: chrF vs unpruned"}
    assert all(line.y[0] == 100.0 and len(line.y) == 13 for line in lines.values())
    assert "of 12** cross heads can go" in views["prune_summary"] and "Michel et al." in views["prune_summary"]


def test_pruning_against_references_scores_bleu_beside_chrf(app_services):
    checkpoint = app_services.registry.get("multi30k-en-de")
    sentences = ["A dog runs across the grass.", "Two men are sitting on a bench."]
    references = ["Ein Hund rennt über das Gras.", "Zwei Männer sitzen auf einer Bank."]
    order = interventions.pruning_order(checkpoint, "encoder", seed=0)
    curve = interventions.pruning_curve(checkpoint, sentences, "encoder", order, references)
    assert len(curve.bleu) == len(curve.chrf) == 13 and curve.bleu[0] > 50
    figure = explain.pruning_figure([curve, curve], ["least important first", "random order"])
    assert "least important first: BLEU vs references" in {trace.name for trace in figure.data}
    assert "BLEU against the references" in explain.pruning_summary([curve, curve])


def test_multi30k_references_are_refused_for_a_model_not_trained_on_it(app_services):
    with pytest.raises(InputError, match="trained on Multi30K"):
        explain_tab.pruning_sentences(app_services.registry.get("reverse-tiny"), explain_tab.VALIDATION)


@pytest.mark.skipif(not services.multi30k_available(), reason="Multi30K is not on this machine")
def test_multi30k_validation_sentences_come_with_their_references(app_services):
    sentences, references = explain_tab.pruning_sentences(app_services.registry.get("multi30k-en-de"),
                                                          explain_tab.VALIDATION)
    assert len(sentences) == len(references) == explain_tab.VALIDATION_SENTENCES


def test_rollout_inside_the_encoder_is_drawn_beside_with_rows_that_sum_to_one(attributed, translation):
    shares = np.asarray(attributed["explain_encoder_rollout"].data[0].z)
    assert shares.shape == (len(translation.source_ids),) * 2
    np.testing.assert_allclose(shares.sum(1), 1.0, atol=1e-5)
