"""The Experiments tab: what changes when heads are switched off, a token is forced or word order is taken away."""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass

import plotly.graph_objects as go
import torch

from transformer.files.checkpoint import Checkpoint
from transformer.inside import interventions
from transformer.inside import one_head, patching
from transformer.paper.sentences import encode_source

from ..drawing import charts, figures
from ..runtime.language import ENGLISH, Message, Number, message, percent, said, text
from .choices import kind_key
from ..runtime.numbers import clamp
from .text import markdown_escape
from .translate import AXES, AttentionMap, MapWords, attention_axes, map_of, which_message


def head_labels(checkpoint: Checkpoint) -> dict[str, list[str]]:
    """Head labels (L1H1, ...) per attention type, for the ablation checkboxes."""
    return {kind: [interventions.head_label(layer, head) for layer in range(layers) for head in range(heads)]
            for kind, (layers, heads) in interventions.head_count(checkpoint).items()}


def word_diff(before: str, after: str, language: str = ENGLISH) -> list[tuple[str, str | None]]:
    """Word-level difference for a highlighted-text view: kept words plain, removed and added ones labelled (the
    labels are the legend's words, in ``language``)."""
    removed, added = text(language, "experiments.removed"), text(language, "experiments.added")
    old, new = before.split(), after.split()
    pieces: list[tuple[str, str | None]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if op == "equal":
            pieces.append((" ".join(old[i1:i2]) + " ", None))
        if op in ("delete", "replace"):
            pieces.append((" ".join(old[i1:i2]) + " ", removed))
        if op in ("insert", "replace"):
            pieces.append((" ".join(new[j1:j2]) + " ", added))
    return pieces


def titled_map(translation, kind: str, layer: int, head: int | None, title: Message) -> AttentionMap:
    """``map_of``'s map under ``title``, its layer, head and axes named in every language."""
    kind = kind_key(kind)
    drawn = map_of(translation, kind, layer, head, str(title))
    return dataclasses.replace(drawn, words=MapWords(title, which_message(translation, kind, layer, head),
                                                     *(message(f"map.axis.{name}") for name in AXES[kind])))


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


# The measures' words; their English words are the values the page and scripts send.
MEASURE_KEYS = ("experiments.measure.adds", "experiments.measure.weights")
MEASURES = tuple(text(ENGLISH, key) for key in MEASURE_KEYS)

def described(comparison: interventions.Comparison) -> Message:
    """What an intervention did, as a message (experiments.did.<its name>)."""
    key, count = f"experiments.did.{comparison.intervention}", comparison.details.get("count")
    return message(key if count is None else f"{key}.{'one' if count == 1 else 'other'}", **comparison.details)


def comparison_attention(comparison: interventions.Comparison, kind: str, layer: int, head: int | None,
                         measure: str = MEASURES[0], checkpoint: Checkpoint | None = None,
                         language: str = ENGLISH) -> tuple[go.Figure, go.Figure]:
    """The same map (kind, 1-based layer, head or None for all heads) of both runs: what each key adds, on one
    scale for both, or the weights. A switched-off head keeps crisp weights while adding nothing, so the
    weights alone would say it still works."""
    titles = (message("experiments.unmodified"), message("experiments.with_intervention"))
    if measure != MEASURES[0] or checkpoint is None:
        return tuple(titled_map(translation, kind, layer, head, title).figure(language)
                     for translation, title in zip((comparison.before, comparison.after), titles))
    kind = kind_key(kind)
    model = checkpoint.model
    runs = ((comparison.before, None, True), (comparison.after, comparison.head_mask, comparison.positions))
    matrices = []
    for translation, mask, positions in runs:
        maps = one_head.contribution_maps(model, translation, kind, mask, positions)
        layer = clamp(layer, 1, maps.layers.shape[0])
        matrices.append(maps.layers[layer - 1] if head is None else maps.heads[layer - 1, head - 1])
    largest = max(float(matrices[0].max()), float(matrices[1].max()), 1e-6)
    which = (text(language, "experiments.adds.all_heads", layer=layer) if head is None else
             text(language, "experiments.adds.one_head", layer=layer, head=head))
    row_title, column_title = (text(language, f"map.axis.{name}") for name in AXES[kind])
    figures_ = []
    for (translation, _, _), matrix, title in zip(runs, matrices, titles):
        rows, columns, _, _ = attention_axes(translation, kind)
        figures_.append(figures.attention_heatmap(matrix, rows, columns, said(title, language), row_title,
                                                  column_title, kind != "encoder", which,
                                                  value_name=text(language, "experiments.adds"), largest=largest,
                                                  language=language))
    return figures_[0], figures_[1]


def comparison_view(comparison: interventions.Comparison, kind: str = "cross", layer: int | None = None,
                    head: int | None = None, measure: str = MEASURES[1], checkpoint: Checkpoint | None = None,
                    language: str = ENGLISH) -> ComparisonView:
    """Every view of a comparison, in ``language``; the map of ``layer`` (default: the last) and ``head`` (None:
    mean of heads, or all heads together) in ``measure``."""
    before, after = comparison.before, comparison.after
    changes = comparison.probability_changes()
    probability = (charts.probability_comparison(changes, text(language, "experiments.probability_title"),
                                                  language=language) if changes else None)
    layer = before.cross_attention.shape[0] if layer is None else layer
    same = after.predicted_ids == before.predicted_ids
    description = text(language, "experiments.with_unchanged" if same else "experiments.with",
                       what=markdown_escape(said(described(comparison), language)))
    return ComparisonView(description, before.text, after.text, word_diff(before.text, after.text, language),
                          probability, *comparison_attention(comparison, kind, layer, head, measure, checkpoint,
                                                             language))


def importance_views(importance: dict[str, torch.Tensor], title: str,
                     language: str = ENGLISH) -> tuple[go.Figure, str]:
    """The importance heatmaps and a summary naming the heads that matter most, least, and harm, in ``language``
    (``title`` in it already)."""
    ranked = interventions.ranked_heads(importance)

    def listed(heads) -> list[Message]:
        return [message("experiments.ranked_head", kind=message(f"experiments.kind.{kind}"), label=label,
                        drop=Number(drop, "+.2f")) for kind, label, drop in heads]
    lines = [message("experiments.most_important", heads=listed(ranked[:3])),
             message("experiments.barely_matter", heads=listed(sorted(ranked, key=lambda item: abs(item[2]))[:3]))]
    better_without = [item for item in reversed(ranked) if item[2] < 0][:3]
    if better_without:
        lines.append(message("experiments.better_without", heads=listed(better_without)))
    lines.append(message("experiments.importance_note"))
    summary = "  \n".join(said(line, language) for line in lines)
    return charts.head_importance_heatmaps(importance, title, language=language), summary


@dataclass
class PatchingView:
    """Activation patching between the sentence last translated and a changed one: both grids and a summary."""

    heads: go.Figure
    positions: go.Figure
    summary: str


def patching_view(checkpoint: Checkpoint, translation, corrupted: str, step: int, alternative: str | None,
                  on_progress=None, language: str = ENGLISH) -> PatchingView:
    """``patching.activation_patching`` of ``translation`` against ``corrupted`` at ``step`` (1-based), drawn and
    summed up in ``language``; ``on_progress(done, total)`` after each batch of patched runs."""
    corrupted_ids, _ = encode_source(checkpoint.model, checkpoint.source_tokenizer, corrupted)
    result = patching.activation_patching(checkpoint.model, translation, checkpoint.target_tokenizer, corrupted_ids,
                                          clamp(step, 1, translation.num_steps), alternative or None,
                                          on_progress=on_progress)
    title = text(language, "experiments.patching.title", step=result.step, target=result.target,
                 alternative=result.alternative)
    return PatchingView(charts.patching_heads(result.heads, title, language=language),
                        charts.patching_positions(result.encoder_positions, translation.source_pieces,
                                                   text(language, "experiments.patching.positions_title"),
                                                   language=language),
                        patching_summary(result, translation, language))


def strongest_components(result: patching.Patching, translation, count: int = 4) -> list[Message]:
    """The components that restore the largest shares, each as a message."""
    found = [(share, message("experiments.patching.at_position", layer=layer + 1,
                             piece=markdown_escape(translation.source_pieces[position]), share=percent(share)))
             for layer, row in enumerate(result.encoder_positions.tolist())
             for position, share in enumerate(row) if share == share]
    found += [(share, message("experiments.patching.head", kind=message(f"experiments.kind.{kind}"),
                              label=interventions.head_label(layer, head), share=percent(share)))
              for kind, grid in result.heads.items() for layer, row in enumerate(grid.tolist())
              for head, share in enumerate(row)]
    found += [(share, message("experiments.patching.decoder_layer", layer=layer + 1, share=percent(share)))
              for layer, share in enumerate(result.decoder_layers.tolist())]
    return [named for _, named in sorted(found, key=lambda item: -item[0])[:count]]


def patching_summary(result: patching.Patching, translation, language: str = ENGLISH) -> str:
    checks = result.last_encoder_layer_all_positions
    lines = [message("experiments.patching.differences", step=result.step, target=markdown_escape(result.target),
                     alternative=markdown_escape(result.alternative), clean=Number(result.clean_difference, "+.2f"),
                     corrupted=Number(result.corrupted_difference, "+.2f")),
             message("experiments.patching.strongest", components=strongest_components(result, translation)),
             # Rounded as shown, and + 0.0 turns -0.0 into 0.0: rounding noise is not "-0%".
             message("experiments.patching.checks", nothing=percent(round(result.nothing, 2) + 0.0),
                     last=percent(checks["restored"]), gap=Number(checks["max_logit_difference"], ".1g"))]
    if not checks["every_position_paired"]:
        lines.append(message("experiments.patching.unpaired"))
    lines.append(message("experiments.patching.caveat"))
    return "  \n".join(said(line, language) for line in lines)
