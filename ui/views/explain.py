"""The Attention vs evidence tab: gradient attributions and rollout beside cross-attention, how far they agree,
and how the translation holds up as heads are pruned."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import pandas
import plotly.graph_objects as go
import torch

from transformer.files.checkpoint import Checkpoint
from transformer.inside import attribution, contrastive, interventions
from transformer.paper.translation import Translation

from ..drawing import charts, figures
from ..runtime.language import ENGLISH, Message, Number, message, percent, said, text
from .choices import require_translation
from ..runtime.numbers import clamp
from .experiments import titled_map
from .samples import SAMPLE_SIZE
from .text import markdown_escape
from .translate import AXES, AttentionMap, attention_axes

# The methods' English names are the values the page and scripts send (their words: explain.method.<key>), and
# the library's names of them.
# The methods by the value the page and scripts send, their English words (explain.method.<key>).
METHODS = {text(ENGLISH, f"explain.method.{key}"): key
           for key in ("integrated_gradients", "gradient_x_input", "rollout")}
KINDS = ("cross", "encoder", "decoder")  # what can be pruned: explain.kind.<kind> names it in a sentence


@dataclass
class AttributionView:
    attribution: attribution.Attribution
    figure: go.Figure
    summary: str


def method_key(method: str) -> str:
    """A method's name in the library (``integrated_gradients``), from its English name on the page or its own."""
    return METHODS.get(method, method)


def attribution_view(checkpoint: Checkpoint, translation: Translation | None, method: str, steps,
                     language: str = ENGLISH) -> AttributionView:
    translation = require_translation(translation)
    key = method_key(method)
    result = attribution.attribute(checkpoint.model, translation, key, clamp(steps, 1, 256))
    rows, columns, _, _ = attention_axes(translation, "cross")
    row_title, column_title = (text(language, f"map.axis.{name}") for name in AXES["cross"])
    if key == "rollout":
        figure = figures.attention_heatmap(result.scores, rows, columns, text(language, "explain.rollout_title"),
                                           row_title, column_title, True, text(language, "explain.rollout_subtitle"),
                                           value_name=text(language, "explain.share"), language=language)
        summary = text(language, "explain.rollout_summary")
    else:
        largest = float(result.scores.abs().max()) or 1.0
        figure = figures.attention_heatmap(result.scores, rows, columns, text(language, f"explain.method_title.{key}"),
                                           row_title, column_title, True, text(language, "explain.signed_subtitle"),
                                           value_name=text(language, "explain.attribution"), largest=largest,
                                           signed=True, language=language)
        summary = text(language, "explain.gradient_summary")
    if result.completeness_gap is not None:
        gap = result.completeness_gap
        summary += text(language, "explain.completeness", median=Number(float(gap.median()), ".1%"),
                        worst=Number(float(gap.max()), ".1%"), steps=clamp(steps, 1, 256))
    return AttributionView(result, figure, summary)


def attention_beside(translation: Translation | None, layer, head: int | None) -> AttentionMap:
    """The cross-attention map beside the evidence: its words in the language of the page it is drawn on."""
    translation = require_translation(translation)
    layers = translation.cross_attention.shape[0]
    return titled_map(translation, "cross", clamp(layer, 1, layers), head, message("explain.cross_attention"))


def encoder_rollout_figure(translation: Translation | None, language: str = ENGLISH) -> go.Figure:
    translation = require_translation(translation)
    pieces = translation.source_pieces
    return figures.attention_heatmap(attribution.encoder_rollout(translation), pieces, pieces,
                                     text(language, "explain.encoder_rollout"),
                                     text(language, "explain.encoder_output"), text(language, "explain.source_word"),
                                     subtitle=text(language, "explain.encoder_rollout_subtitle"),
                                     value_name=text(language, "explain.share"), language=language)


def agreement_rows(translation: Translation, scores: torch.Tensor, with_rollout: bool = True) -> list[dict]:
    """Agreement of every cross-attention head, each layer's mean of heads, and (unless ``scores`` are rollout
    itself) rollout with ``scores``."""
    cross = translation.cross_attention.float()
    candidates = {f"L{layer + 1}H{head + 1}": cross[layer, head]
                  for layer in range(cross.shape[0]) for head in range(cross.shape[1])}
    candidates.update({f"L{layer + 1}": cross[layer].mean(0) for layer in range(cross.shape[0])})
    if with_rollout:
        candidates["rollout"] = attribution.rollout(translation).scores
    rows = []
    for name, attention in candidates.items():
        top, correlation = attribution.agreement(attention, scores)
        rows.append({"attention": name, "top_1": top, "correlation": correlation})
    return rows


AGREEMENT_COLUMNS = {"attention": "explain.column.attention", "top_1": "explain.column.top_1",
                     "correlation": "explain.column.correlation"}  # agreement_rows' names: their words
LAYER_MEAN = re.compile(r"L(\d+)")  # agreement_rows' name of a layer's mean of heads (a head's: "L2H3")


def candidate_name(name: str, language: str = ENGLISH) -> str:
    """An ``agreement_rows`` name ("L2H3", "L2" for its mean of heads, "rollout") as a table shows it in
    ``language``."""
    if found := LAYER_MEAN.fullmatch(name):
        return text(language, "explain.layer_mean", layer=int(found[1]))
    return text(language, "explain.rollout_row") if name == "rollout" else name


def agreement_table(rows: list[dict], language: str = ENGLISH) -> pandas.DataFrame:
    """The agreement of each candidate, best first, its names and numbers as ``language`` writes them."""
    frame = pandas.DataFrame(rows).groupby("attention", sort=False).mean().reset_index()
    frame = frame.sort_values("correlation", ascending=False)
    frame = frame.assign(attention=frame["attention"].map(lambda name: candidate_name(name, language)),
                         top_1=frame["top_1"].map(lambda share: said(percent(share), language)),
                         correlation=frame["correlation"].round(3))
    return frame.rename(columns={name: text(language, key) for name, key in AGREEMENT_COLUMNS.items()})


def sample_agreement(checkpoint: Checkpoint, sentences: list[str], method: str, steps,
                     on_sentence: Callable[[int, int], None] | None = None,
                     language: str = ENGLISH) -> pandas.DataFrame:
    """Agreement over many sentences, each attributed on the model's own greedy translation."""
    key = method_key(method)
    rows = []
    for done, sentence in enumerate(sentences, start=1):
        translation = checkpoint.translate(sentence)
        scores = attribution.attribute(checkpoint.model, translation, key, clamp(steps, 1, 256)).scores
        rows += agreement_rows(translation, scores, with_rollout=key != "rollout")
        if on_sentence is not None:
            on_sentence(done, len(sentences))
    return agreement_table(rows, language)


PRUNING_ORDERS = ("explain.order.importance", "explain.order.random")  # the orders' words, by key
RANDOM_ORDER_SEED = 0  # one fixed random order, so the comparison curve is the same at every click


def pruning_curves(checkpoint: Checkpoint, kind: str, sentences: list[str], references: list[str] | None,
                   report: Callable[[float, str], None], language: str = ENGLISH) -> list[interventions.PruningCurve]:
    """``kind`` attention pruned head by head in each of ``PRUNING_ORDERS``: the heads ranked over the first
    ``SAMPLE_SIZE`` sentences, least important first, and a fixed random order; ``report(fraction, what)``, what
    in ``language``."""
    report(0, text(language, "explain.progress.ranking"))
    importance = interventions.mean_head_importance(checkpoint, sentences[:SAMPLE_SIZE])
    orders = (interventions.pruning_order(checkpoint, kind, importance),
              interventions.pruning_order(checkpoint, kind, seed=RANDOM_ORDER_SEED))
    curves = []
    for number, (label, order) in enumerate(zip(pruning_labels(language), orders)):
        def on_step(done, total, number=number, label=label):
            report((number * total + done) / (len(orders) * total),
                   text(language, "explain.progress.heads_off", order=label, off=done - 1, total=total - 1))
        curves.append(interventions.pruning_curve(checkpoint, sentences, kind, order, references, on_step=on_step))
    return curves


def pruning_labels(language: str = ENGLISH) -> list[str]:
    """The names of ``PRUNING_ORDERS`` in ``language``."""
    return [text(language, key) for key in PRUNING_ORDERS]


def pruning_figure(curves: list[interventions.PruningCurve], labels: list[str],
                   language: str = ENGLISH) -> go.Figure:
    """The curves, one line per order (named ``labels``, in ``language``) and score."""
    series = {text(language, "explain.series.chrf", order=label): (curve.chrf, curve.order)
              for curve, label in zip(curves, labels)}
    series.update({text(language, "explain.series.bleu", order=label): (curve.bleu, curve.order)
                   for curve, label in zip(curves, labels) if curve.bleu is not None})
    return charts.pruning_curves(series, text(language, "explain.pruning_title", kind=kind_words(curves[0].kind)),
                                  language=language)


def kind_words(kind: str) -> Message:
    """An attention kind that was pruned, as a sentence names it ("cross" heads)."""
    return message(f"explain.kind.{kind}") if kind in KINDS else kind


def pruning_summary(curves: list[interventions.PruningCurve], language: str = ENGLISH) -> str:
    """How many heads go before the translations change much, and whether that is what the papers found."""
    ranked, shuffled = curves
    total = len(ranked.order)

    def survivable(curve):  # heads off before chrF against the unpruned translations falls below 90
        return next((k for k, score in enumerate(curve.chrf) if score < 90), total + 1) - 1

    kept = survivable(ranked)
    verdict = message("explain.verdict.most" if kept >= total / 2 else "explain.verdict.fewer")
    line = text(language, "explain.pruning_summary", kept=kept, total=total, kind=kind_words(ranked.kind),
                random=survivable(shuffled), verdict=verdict, chrf=Number(ranked.chrf[-1], ".1f"))
    if ranked.bleu is not None:
        line += text(language, "explain.pruning_bleu", unpruned=Number(ranked.bleu[0], ".1f"),
                     pruned=Number(ranked.bleu[-1], ".1f"))
    return line


@dataclass
class ContrastView:
    """Why one step's token and not another: signed evidence over the source and the translation so far."""

    evidence: contrastive.ContrastiveEvidence
    figure: go.Figure
    summary: str


# The methods a contrast can be explained by: the gradient ones of METHODS.
CONTRAST_METHODS = {name: key for name, key in METHODS.items() if key in contrastive.METHODS}


def contrast_view(checkpoint: Checkpoint, translation: Translation | None, step, alternative: str | None,
                  method: str, language: str = ENGLISH) -> ContrastView:
    """``contrastive.contrastive_evidence`` at ``step`` against ``alternative`` (default: the runner-up), drawn and
    summed up in ``language``."""
    translation = require_translation(translation)
    step = clamp(step, 1, translation.num_steps)
    evidence = contrastive.contrastive_evidence(checkpoint.model, translation, checkpoint.target_tokenizer, step,
                                                alternative or None, CONTRAST_METHODS.get(method, method))
    points = text(language, "explain.contrast.points")
    groups = {text(language, "explain.contrast.source"): (translation.source_pieces, evidence.source),
              text(language, "explain.contrast.prefix"): (translation.target_pieces[:step], evidence.prefix)}
    title = text(language, "explain.contrast.title", step=step, chosen=evidence.chosen,
                 alternative=evidence.alternative)
    return ContrastView(evidence, charts.contrastive_bars(groups, title, points, language=language),
                        contrast_summary(evidence, translation, language))


def contrast_summary(evidence: contrastive.ContrastiveEvidence, translation: Translation,
                     language: str = ENGLISH) -> str:
    pieces = translation.source_pieces + translation.target_pieces[:evidence.step]
    scores = torch.cat([evidence.source, evidence.prefix]).tolist()
    ranked = sorted(range(len(scores)), key=lambda i: -scores[i])

    def listed(indices) -> list[Message]:
        return [message("explain.contrast.token", piece=markdown_escape(pieces[i]), score=Number(scores[i], "+.2f"))
                for i in indices]
    chosen, alternative = markdown_escape(evidence.chosen), markdown_escape(evidence.alternative)
    lines = [message("explain.contrast.difference", step=evidence.step, chosen=chosen, alternative=alternative,
                     contrast=Number(evidence.contrast, "+.2f")),
             message("explain.contrast.for_chosen", chosen=chosen,
                     tokens=listed([i for i in ranked[:3] if scores[i] > 0]) or "–"),
             message("explain.contrast.for_alternative", alternative=alternative,
                     tokens=listed([i for i in reversed(ranked[-3:]) if scores[i] < 0]) or "–")]
    if evidence.completeness_gap is not None:
        lines.append(message("explain.contrast.complete", total=Number(sum(scores), "+.2f"),
                             difference=Number(evidence.contrast - evidence.baseline_contrast, "+.2f"),
                             gap=Number(evidence.completeness_gap, ".1%")))
    return "  \n".join(said(line, language) for line in lines)
