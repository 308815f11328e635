"""The Experiments tab: what changes when heads are switched off, a token is forced or word order is taken away."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import plotly.graph_objects as go
import torch

from transformer.files.checkpoint import Checkpoint
from transformer.inside import interventions
from transformer.inside import one_head

from .. import figures
from .choices import clamp, kind_key
from .text import markdown_escape
from .translate import attention_axes, map_figure


def head_choices(checkpoint: Checkpoint) -> dict[str, list[str]]:
    """Head labels (L1H1, ...) per attention type, for the ablation checkboxes."""
    return {kind: [interventions.head_label(layer, head) for layer in range(layers) for head in range(heads)]
            for kind, (layers, heads) in interventions.head_count(checkpoint).items()}


def word_diff(before: str, after: str) -> list[tuple[str, str | None]]:
    """Word-level difference for a highlighted-text view: kept words plain, removed and added ones labelled."""
    old, new = before.split(), after.split()
    pieces: list[tuple[str, str | None]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if op == "equal":
            pieces.append((" ".join(old[i1:i2]) + " ", None))
        if op in ("delete", "replace"):
            pieces.append((" ".join(old[i1:i2]) + " ", "removed"))
        if op in ("insert", "replace"):
            pieces.append((" ".join(new[j1:j2]) + " ", "added"))
    return pieces


@dataclass
class ComparisonView:
    """An intervention beside the unmodified run: texts, their difference, probabilities and attention."""

    description: str               # what was done, e.g. the shuffled sentence, shown in full
    before: str
    after: str
    difference: list[tuple[str, str | None]]
    probability: go.Figure | None
    attention_before: go.Figure
    attention_after: go.Figure


MEASURES = ("what each key adds (‖α v W_O‖)", "attention weights")


def comparison_attention(comparison: interventions.Comparison, kind: str, layer: int, head: int | None,
                         measure: str = MEASURES[0],
                         checkpoint: Checkpoint | None = None) -> tuple[go.Figure, go.Figure]:
    """The same map (kind, 1-based layer, head or None for all heads) of both runs: what each key adds, on one
    scale for both, or the weights. A switched-off head keeps crisp weights while adding nothing, so the
    weights alone would say it still works."""
    if measure != MEASURES[0] or checkpoint is None:
        return (map_figure(comparison.before, kind, layer, head, "Unmodified"),
                map_figure(comparison.after, kind, layer, head, "With the intervention"))
    kind = kind_key(kind)
    model = checkpoint.model
    runs = ((comparison.before, None, True), (comparison.after, comparison.head_mask, comparison.positions))
    matrices = []
    for translation, mask, positions in runs:
        maps = one_head.contribution_maps(model, translation, kind, mask, positions)
        layer = clamp(layer, 1, maps.layers.shape[0])
        matrices.append(maps.layers[layer - 1] if head is None else maps.heads[layer - 1, head - 1])
    largest = max(float(matrices[0].max()), float(matrices[1].max()), 1e-6)
    which = f"layer {layer}, {'all heads together' if head is None else f'head {head}'}: ‖α v W_O‖"
    figures_ = []
    for (translation, _, _), matrix, title in zip(runs, matrices, ("Unmodified", "With the intervention")):
        rows, columns, row_title, column_title = attention_axes(translation, kind)
        figures_.append(figures.attention_heatmap(matrix, rows, columns, title, row_title, column_title,
                                                  kind != "encoder", which, value_name="adds", largest=largest))
    return figures_[0], figures_[1]


def comparison_view(comparison: interventions.Comparison, kind: str = "cross", layer: int | None = None,
                    head: int | None = None, measure: str = MEASURES[1],
                    checkpoint: Checkpoint | None = None) -> ComparisonView:
    """Every view of a comparison; the map of ``layer`` (default: the last) and ``head`` (None: mean of heads, or
    all heads together) in ``measure``."""
    before, after = comparison.before, comparison.after
    changes = comparison.probability_changes()
    probability = (figures.probability_comparison(changes, "Probability of the original translation's tokens")
                   if changes else None)
    layer = before.cross_attention.shape[0] if layer is None else layer
    same = " The translation does not change." if after.predicted_ids == before.predicted_ids else ""
    return ComparisonView(f"**With {markdown_escape(comparison.description)}**.{same}", before.text, after.text,
                          word_diff(before.text, after.text), probability,
                          *comparison_attention(comparison, kind, layer, head, measure, checkpoint))


def importance_views(importance: dict[str, torch.Tensor], title: str) -> tuple[go.Figure, str]:
    """The importance heatmaps and a summary naming the heads that matter most, least, and harm."""
    ranked = interventions.ranked_heads(importance)
    listed = lambda heads: ", ".join(f"{kind} {label} ({drop:+.2f})" for kind, label, drop in heads)  # noqa: E731
    lines = [f"**Most important:** {listed(ranked[:3])}.",
             f"**Barely matter:** {listed(sorted(ranked, key=lambda item: abs(item[2]))[:3])}."]
    better_without = [item for item in reversed(ranked) if item[2] < 0][:3]
    if better_without:
        lines.append(f"**The translation became more likely without:** {listed(better_without)}.")
    summary = ("  \n".join(lines) + "  \nNumbers are the drop in log-probability (nats) of the translation when "
               "that head alone is off.")
    return figures.head_importance_heatmaps(importance, title), summary
