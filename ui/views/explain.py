"""The Attention vs evidence tab: gradient attributions and rollout beside cross-attention, how far they agree,
and how the translation holds up as heads are pruned."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas
import plotly.graph_objects as go
import torch

from transformer.files.checkpoint import Checkpoint
from transformer.inside import attribution
from transformer.inside import interventions
from transformer.paper.decoding import Translation

from .. import figures
from .choices import clamp, require_translation
from .samples import SAMPLE_SIZE
from .translate import AttentionMap, attention_axes, map_of

METHODS = {"integrated gradients": "integrated_gradients", "gradient × input": "gradient_x_input",
           "attention rollout": "rollout"}
NOTES = {
    "intro": "Is the bright cell of a heatmap *why* the model wrote that word? Not necessarily (Jain & Wallace, "
             "2019). Here the cross-attention of any head sits beside two other kinds of evidence: **gradients** "
             "(how the log-probability of each output token changes with each source word's embedding; integrated "
             "gradients add up to the whole change from all-zero embeddings at the same positions) and **rollout** (attention multiplied "
             "through the layers with the residual connection counted, Abnar & Zuidema, 2020). Neither is an "
             "explanation either: a gradient is local, rollout assumes that attention weights are all that "
             "moves information. Where all three agree, trust grows.",
    "agreement": "For each head, and for rollout: how often its most-attended source word is the most-attributed "
                 "one (top-1), and how well it orders the source words as the attribution does (Spearman's rank "
                 "correlation, mean over output tokens). Click a row to see that head beside the attribution.",
    "encoder_rollout": "Each encoder output position (row) as a mix of the source words it was built from (columns): "
                       "the encoder's self-attention of every layer, each counted half with the residual connection, "
                       "multiplied through the layers. Rows sum to 1. A wide row: that position's vector carries "
                       "much of the sentence, not just its own word.",
    "pruning": "Heads switched off one at a time, least important first (the head ranking of the Experiments tab, "
               "over the first 20 of the chosen sentences), and in a random order for comparison. The score is chrF of the pruned "
               "model's translations against the unpruned model's own, so it needs no references. Michel et al. "
               "(2019) and Voita et al. (2019) found that most heads can go at little cost, and that "
               "encoder-decoder attention is the most fragile: compare the three attention types here.",
}


@dataclass
class AttributionView:
    attribution: attribution.Attribution
    figure: go.Figure
    summary: str


def attribution_view(checkpoint: Checkpoint, translation: Translation | None, method: str, steps) -> AttributionView:
    translation = require_translation(translation)
    key = METHODS.get(method, method)
    result = attribution.attribute(checkpoint.model, translation, key, clamp(steps, 1, 256))
    rows, columns, row_title, column_title = attention_axes(translation, "cross")
    if key == "rollout":
        figure = figures.attention_heatmap(result.scores, rows, columns, "Attention rollout", row_title,
                                           column_title, True, "share of source information, rows sum to 1",
                                           value_name="share")
        summary = "Rollout rows are shares of the source information reaching each output token (they sum to 1)."
    else:
        largest = float(result.scores.abs().max()) or 1.0
        figure = figures.attention_heatmap(result.scores, rows, columns, method.capitalize(), row_title,
                                           column_title, True, "red: raises the token's log-probability, blue: "
                                           "lowers it", value_name="attribution", largest=largest, signed=True)
        summary = "Each row: how each source word's embedding moves the log-probability of that output token."
    if result.completeness_gap is not None:
        gap = result.completeness_gap
        summary += (f" Completeness: the attributions of a token add up to its change in log-probability from an "
                    f"all-zero source to within {float(gap.median()):.1%} (median; worst {float(gap.max()):.1%}) "
                    f"with {clamp(steps, 1, 256)} steps.")
    return AttributionView(result, figure, summary)


def attention_beside(translation: Translation | None, layer, head: int | None) -> AttentionMap:
    translation = require_translation(translation)
    layers = translation.cross_attention.shape[0]
    return map_of(translation, "cross", clamp(layer, 1, layers), head, "Cross-attention")


def encoder_rollout_figure(translation: Translation | None) -> go.Figure:
    translation = require_translation(translation)
    pieces = translation.source_pieces
    return figures.attention_heatmap(attribution.encoder_rollout(translation), pieces, pieces, "Encoder rollout",
                                     "encoder output", "source word", subtitle="every layer, residual counted",
                                     value_name="share")


def agreement_rows(translation: Translation, scores: torch.Tensor, with_rollout: bool = True) -> list[dict]:
    """Agreement of every cross-attention head, each layer's mean of heads, and (unless ``scores`` are rollout
    itself) rollout with ``scores``."""
    cross = translation.cross_attention.float()
    candidates = {f"L{layer + 1}H{head + 1}": cross[layer, head]
                  for layer in range(cross.shape[0]) for head in range(cross.shape[1])}
    candidates.update({f"L{layer + 1} mean of heads": cross[layer].mean(0) for layer in range(cross.shape[0])})
    if with_rollout:
        candidates["rollout"] = attribution.rollout(translation).scores
    rows = []
    for name, attention in candidates.items():
        top, correlation = attribution.agreement(attention, scores)
        rows.append({"attention": name, "top-1 agreement": top, "rank correlation": correlation})
    return rows


def agreement_table(rows: list[dict]) -> pandas.DataFrame:
    frame = pandas.DataFrame(rows).groupby("attention", sort=False).mean().reset_index()
    frame = frame.sort_values("rank correlation", ascending=False)
    return frame.assign(**{"top-1 agreement": frame["top-1 agreement"].map("{:.0%}".format),
                           "rank correlation": frame["rank correlation"].round(3)})


def sample_agreement(checkpoint: Checkpoint, sentences: list[str], method: str, steps,
                     on_sentence: Callable[[int, int], None] | None = None) -> pandas.DataFrame:
    """Agreement over many sentences, each attributed on the model's own greedy translation."""
    key = METHODS.get(method, method)
    rows = []
    for done, sentence in enumerate(sentences, start=1):
        translation = checkpoint.translate(sentence)
        scores = attribution.attribute(checkpoint.model, translation, key, clamp(steps, 1, 256)).scores
        rows += agreement_rows(translation, scores, with_rollout=key != "rollout")
        if on_sentence is not None:
            on_sentence(done, len(sentences))
    return agreement_table(rows)


PRUNING_ORDERS = ("least important first", "random order")
RANDOM_ORDER_SEED = 0  # one fixed random order, so the comparison curve is the same at every click


def pruning_curves(checkpoint: Checkpoint, kind: str, sentences: list[str], references: list[str] | None,
                   report: Callable[[float, str], None]) -> list[interventions.PruningCurve]:
    """``kind`` attention pruned head by head in each of ``PRUNING_ORDERS``: the heads ranked over the first
    ``SAMPLE_SIZE`` sentences, least important first, and a fixed random order; ``report(fraction, what)``."""
    report(0, "ranking the heads")
    importance = interventions.mean_head_importance(checkpoint, sentences[:SAMPLE_SIZE])
    orders = (interventions.pruning_order(checkpoint, kind, importance),
              interventions.pruning_order(checkpoint, kind, seed=RANDOM_ORDER_SEED))
    curves = []
    for number, (label, order) in enumerate(zip(PRUNING_ORDERS, orders)):
        def on_step(done, total, number=number, label=label):
            report((number * total + done) / (len(orders) * total), f"{label}: {done - 1} of {total - 1} heads off")
        curves.append(interventions.pruning_curve(checkpoint, sentences, kind, order, references, on_step=on_step))
    return curves


def pruning_figure(curves: list[interventions.PruningCurve], labels: list[str]) -> go.Figure:
    series = {f"{label}: chrF vs unpruned": (curve.chrf, curve.order) for curve, label in zip(curves, labels)}
    series.update({f"{label}: BLEU vs references": (curve.bleu, curve.order)
                   for curve, label in zip(curves, labels) if curve.bleu is not None})
    return figures.pruning_curves(series, f"Pruning {curves[0].kind} attention, head by head")


def pruning_summary(curves: list[interventions.PruningCurve]) -> str:
    """How many heads go before the translations change much, and whether that is what the papers found."""
    ranked, shuffled = curves
    total = len(ranked.order)

    def survivable(curve):  # heads off before chrF against the unpruned translations falls below 90
        return next((k for k, score in enumerate(curve.chrf) if score < 90), total + 1) - 1

    kept = survivable(ranked)
    verdict = ("most can go, as Michel et al. (2019) and Voita et al. (2019) found for their models"
               if kept >= total / 2 else "fewer than half can go, so this small model leans on its heads more than the large models of "
                    "Michel et al. (2019) and Voita et al. (2019), where most could go")
    line = (f"Least important first, **{kept} of {total}** {ranked.kind} heads can go before chrF against the "
            f"unpruned translations falls below 90 (in a random order: {survivable(shuffled)}): {verdict}. With all "
            f"{total} off, chrF is {ranked.chrf[-1]:.1f}.")
    if ranked.bleu is not None:
        line += f" BLEU against the references: {ranked.bleu[0]:.1f} unpruned, {ranked.bleu[-1]:.1f} with all off."
    return line
