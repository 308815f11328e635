"""Pure chart builders beyond the attention maps of ``figures.py``, in its look: positional encodings, training
curves, head experiments, patching, the beam tree and word alignment, the vectors inside a head. Numbers and
labels in, a Plotly figure out; no model, no I/O, no gradio.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from transformer.files import curves

from .figures import (ATTENTION_COLORSCALE, MOST_PANEL_LABELS, apply_layout, as_matrix, as_numbers, escape, escaped_all,
                      say, slant_room, tick_labels, titled_with)
from ..runtime.language import ENGLISH, Number, percent
from ..runtime.language import table as locale

WORD_CHARS, LANGUAGE_TITLE_CHARS = 16, 90  # a word as a tick label; a language's translation as its panel's title


def make_subplots(*args, **options) -> go.Figure:
    """Plotly's ``make_subplots``, imported when first called: importing it loads every figure class of Plotly
    (0.2 s), which the app's start-up does not need (the page draws its first views in the browser)."""
    from plotly.subplots import make_subplots as made

    return made(*args, **options)


# --- positional encoding ----------------------------------------------------------------------------

def positional_encoding_heatmap(table, title: str | None = None, *, language: str = ENGLISH) -> go.Figure:
    """positions x dimensions, values in [-1, 1]."""
    title = say(language, "positions.title") if title is None else title
    matrix = as_matrix(table)
    hover = say(language, "positions.hover", position="%{y}", dimension="%{x}", value="%{z:.4f}")
    fig = go.Figure(go.Heatmap(z=matrix, zmin=-1, zmax=1, colorscale="RdBu", reversescale=True,
                               hovertemplate=f"{hover}<extra></extra>", colorbar=dict(thickness=12)))
    fig.update_xaxes(title=say(language, "dimension_i"))
    fig.update_yaxes(title=say(language, "position_axis"), autorange="reversed")
    return apply_layout(fig, title, height=420, language=language)


def positional_encoding_lines(table, dimensions: Sequence[int], title: str | None = None,
                              *, language: str = ENGLISH) -> go.Figure:
    title = say(language, "lines.title") if title is None else title
    matrix = as_matrix(table)
    fig = go.Figure()
    for d in dimensions:
        if 0 <= d < (len(matrix[0]) if matrix else 0):
            fig.add_trace(go.Scatter(x=list(range(len(matrix))), y=[row[d] for row in matrix], mode="lines",
                                     name=say(language, "lines.name", dimension=d,
                                                wave="sin" if d % 2 == 0 else "cos")))
    fig.update_xaxes(title=say(language, "position_axis"))
    fig.update_yaxes(title=say(language, "value"), range=[-1.1, 1.1])
    fig.update_layout(showlegend=True)  # Plotly hides the legend of a single line, and with it the line's name
    return apply_layout(fig, title, height=360, language=language)


def position_similarity(table, title: str | None = None, *, language: str = ENGLISH) -> go.Figure:
    title = say(language, "similarity.title") if title is None else title
    matrix = as_matrix(table)
    dots = [[sum(a * b for a, b in zip(row_i, row_j)) for row_j in matrix] for row_i in matrix]
    fig = go.Figure(go.Heatmap(z=dots, colorscale="Viridis",
                               hovertemplate="PE(%{y}) · PE(%{x}) = %{z:.2f}<extra></extra>",
                               colorbar=dict(thickness=12)))
    fig.update_xaxes(title=say(language, "position_axis"))
    fig.update_yaxes(title=say(language, "position_axis"), autorange="reversed")
    return apply_layout(fig, title, height=420, language=language)


# --- training -----------------------------------------------------------------------------------------

def training_curves(steps: Sequence[dict], evals: Sequence[dict], title: str | None = None,
                    *, language: str = ENGLISH) -> go.Figure:
    """Loss (training and validation), learning rate, and validation BLEU / exact match over updates: the
    panels and lines of ``transformer.files.curves.panels`` (which a model card's picture draws too), in
    ``language``."""
    title = say(language, "training.title") if title is None else title
    said = {name: say(language, f"training.{name}") for name in curves.ENGLISH}
    shown = curves.panels(steps, evals, said)
    fig = make_subplots(rows=1, cols=len(shown), subplot_titles=tuple(shown), horizontal_spacing=0.08)
    for column, series in enumerate(shown.values(), start=1):
        for line in series:
            fig.add_trace(go.Scatter(x=[x for x, _ in line.points], y=[y for _, y in line.points],
                                     mode="lines+markers" if line.evaluated else "lines", name=line.name,
                                     line=dict(color=line.colour, dash="dot" if line.dashed else None)),
                          row=1, col=column)
    fig.update_xaxes(title=said["update"])
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return apply_layout(fig, title, height=380, language=language)




# --- experiments --------------------------------------------------------------------------------------

def head_importance_heatmaps(importance: dict, title: str | None = None, *, language: str = ENGLISH) -> go.Figure:
    """One layer x head panel per attention type: drop in log-probability when that head alone is off."""
    title = say(language, "importance.title") if title is None else title
    return head_heatmaps(importance, titled_with(title, say(language, "importance.note")), say(language, "nats"),
                         lambda kind, layer, head, value: say(language, "importance.cell", kind=kind, layer=layer,
                                                                 head=head, drop=Number(value, "+.3f")), language)


def _centred_colours(largest: float, colour_title: str) -> dict:
    """A signed heatmap's colours: red above 0, blue below, white at 0, one scale from -largest to largest."""
    return dict(zmid=0, zmin=-largest, zmax=largest, colorscale="RdBu", reversescale=True,
                colorbar=dict(title=colour_title, thickness=10))


def head_heatmaps(values: dict, title: str, colour_title: str, cell, language: str = ENGLISH) -> go.Figure:
    """One layer x head panel per attention type of ``values`` ({kind: (layers, heads)}), on one colour scale
    centred on 0; ``cell(kind name, layer, head, value)`` is a cell's hover (layers and heads from 1)."""
    kinds = list(values)
    named = {kind: _kind_name(kind, language) for kind in kinds}
    fig = make_subplots(rows=1, cols=len(kinds), subplot_titles=[named[kind] for kind in kinds],
                        horizontal_spacing=0.08)
    largest = max(1e-6, max(float(abs(_tensor_max(v))) for v in values.values()))
    for i, kind in enumerate(kinds):
        matrix = as_matrix(values[kind])
        layers, heads = len(matrix), len(matrix[0])
        fig.add_trace(go.Heatmap(
            z=matrix, x=list(range(heads)), y=list(range(layers)), **_centred_colours(largest, colour_title),
            showscale=(i == 0),
            text=[[cell(named[kind], l + 1, h + 1, matrix[l][h]) for h in range(heads)] for l in range(layers)],
            hovertemplate="%{text}<extra></extra>"), row=1, col=i + 1)
        fig.update_xaxes(tickvals=list(range(heads)),
                         ticktext=[say(language, "importance.head_tick", head=h + 1) for h in range(heads)],
                         row=1, col=i + 1)
        fig.update_yaxes(tickvals=list(range(layers)),
                         ticktext=[say(language, "importance.layer_tick", layer=l + 1) for l in range(layers)],
                         autorange="reversed", row=1, col=i + 1)
    return apply_layout(fig, title, height=360, language=language)


def languages_side_by_side(panels: Sequence[tuple[str, object, Sequence[str], Sequence[str]]], title: str, *,
                           language: str = ENGLISH) -> go.Figure:
    """One word-level cross-attention map per target language, one above the other so each has the page's width
    (a projector's audience reads the languages against the same source words): ``panels`` holds (its title, the
    map (target words, source words), source words, target words); every map on the one 0-1 scale."""
    heights = [max(3, len(target_words)) for *_, target_words in panels]
    fig = make_subplots(rows=len(panels), cols=1, vertical_spacing=0.3 / len(panels), row_heights=heights,
                        subplot_titles=[escape(_shortened(name, LANGUAGE_TITLE_CHARS)) for name, *_ in panels])
    for i, (_, weights, source_words, target_words) in enumerate(panels):
        matrix = as_matrix(weights)
        fig.add_trace(go.Heatmap(
            z=matrix, x=list(range(len(source_words))), y=list(range(len(target_words))), zmin=0, zmax=1,
            colorscale=ATTENTION_COLORSCALE, showscale=(i == 0), colorbar=dict(thickness=10),
            text=[[f"{escape(t)} ← {escape(s)}: {Number(w, '.2f').in_(language)}" for s, w in zip(source_words, row)]
                  for t, row in zip(target_words, matrix)],
            hovertemplate="%{text}<extra></extra>"), row=i + 1, col=1)
        fig.update_xaxes(**tick_labels([_shortened(word, WORD_CHARS) for word in source_words]), tickangle=0,
                         row=i + 1, col=1)
        fig.update_yaxes(**tick_labels([_shortened(word, WORD_CHARS) for word in target_words]), autorange="reversed",
                         row=i + 1, col=1)
    return apply_layout(fig, title, height=min(2400, 140 + 90 * len(panels) + 22 * sum(heights)), language=language)


def _shortened(label: str, most: int) -> str:
    """A label cut to ``most`` characters (hover shows it whole)."""
    return label if len(label) <= most else label[: most - 1] + "…"


def patching_heads(heads: dict, title: str, *, language: str = ENGLISH) -> go.Figure:
    """Activation patching's layer x head panels: the share of the difference each head's clean output restores."""
    return head_heatmaps(heads, titled_with(title, say(language, "patching.note")),
                         say(language, "patching.restored"),
                         lambda kind, layer, head, value: say(language, "patching.head_cell", kind=kind, layer=layer,
                                                                 head=head, share=percent(value)), language)


PATCHING_GRID_HEIGHT, PATCHING_ROW_HEIGHT = 200, 40  # px: the title, axes and colour bar, then each layer's row


def patching_positions(shares, source_labels: Sequence[str], title: str, *, language: str = ENGLISH) -> go.Figure:
    """Activation patching's encoder layer x source position grid; a position without a partner stays blank."""
    matrix = [[None if x != x else x for x in row] for row in as_matrix(shares)]
    largest = max([1e-6] + [abs(x) for row in matrix for x in row if x is not None])
    labels = escaped_all(source_labels)
    fig = go.Figure(go.Heatmap(
        z=matrix, x=list(range(len(labels))), y=list(range(len(matrix))),
        **_centred_colours(largest, say(language, "patching.restored")),
        text=[[say(language, "patching.position_cell", layer=l + 1, piece=labels[p],
                   share=percent(value) if value is not None else "–") for p, value in enumerate(row)]
              for l, row in enumerate(matrix)], hovertemplate="%{text}<extra></extra>"))
    fig.update_xaxes(**tick_labels(source_labels), tickangle=slant_room(source_labels))
    fig.update_yaxes(tickvals=list(range(len(matrix))),
                     ticktext=[say(language, "importance.layer_tick", layer=l + 1) for l in range(len(matrix))],
                     autorange="reversed")
    return apply_layout(fig, title, height=PATCHING_GRID_HEIGHT + PATCHING_ROW_HEIGHT * len(matrix), language=language)


def _kind_name(kind: str, language: str) -> str:
    """An attention type ("encoder", "decoder", "cross") as a panel names it in ``language``; another name as it
    is."""
    key = f"figures.kind.{kind}"
    return locale(language).get(key, kind)


def _tensor_max(values) -> float:
    flat = [abs(x) for row in as_matrix(values) for x in row]
    return max(flat) if flat else 0.0


def probability_comparison(changes: Sequence[tuple[str, float, float]], title: str,
                           *, language: str = ENGLISH) -> go.Figure:
    """Grouped bars: each token of the original translation, its probability before and after an intervention."""
    positions = list(range(len(changes)))
    labels = [piece for piece, _, _ in changes]
    pieces = escaped_all(labels)
    unmodified = say(language, "comparison.unmodified")
    fig = go.Figure([
        go.Bar(x=positions, y=[before for _, before, _ in changes], name=unmodified, marker_color="#1f77b4",
               customdata=pieces, hovertemplate=f"%{{customdata}}: %{{y:.4f}}<extra>{unmodified}</extra>"),
        go.Bar(x=positions, y=[after for _, _, after in changes], name=say(language, "comparison.intervened"),
               marker_color="#d62728", customdata=pieces,
               hovertemplate=f"%{{customdata}}: %{{y:.4f}}<extra>{say(language, 'comparison.intervention')}"
                             "</extra>"),
    ])
    fig.update_xaxes(tickangle=slant_room(labels), **tick_labels(labels))
    fig.update_yaxes(range=[0, 1], title=say(language, "probability"))
    fig.update_layout(barmode="group", legend=dict(orientation="h", y=1.12))
    return apply_layout(fig, title, height=340, zoomable=False, language=language)


# --- analysis -----------------------------------------------------------------------------------------

def beam_tree_figure(nodes: Sequence, pieces: Sequence[str], title: str | None = None,
                     *, language: str = ENGLISH) -> go.Figure:
    """Candidates per step (x) ordered by cumulative log-probability (y); edges to the beam each extends.

    ``nodes`` are analysis.BeamNode; ``pieces[i]`` labels node i. Kept beams are blue circles, finished
    hypotheses green stars, pruned candidates open grey circles on dotted edges: shape and line say what colour
    says, for readers who do not tell the colours apart (WCAG 1.4.1), and grey labels keep 4.5:1 contrast.
    """
    title = say(language, "beam.title") if title is None else title
    positions: dict[int, tuple[float, float]] = {}
    by_step: dict[int, list[int]] = {}
    for i, node in enumerate(nodes):
        by_step.setdefault(node.step, []).append(i)
    for step, members in by_step.items():
        members.sort(key=lambda i: nodes[i].log_prob, reverse=True)
        for rank, i in enumerate(members):
            positions[i] = (step, -rank)
    fig = go.Figure()
    edge_x, edge_y, pruned_x, pruned_y = [], [], [], []
    for i, node in enumerate(nodes):
        x, y = positions[i]
        px, py = positions[node.parent] if node.parent is not None else (0, 0)
        target_x, target_y = (pruned_x, pruned_y) if node.status == "pruned" else (edge_x, edge_y)
        target_x += [px, x, None]
        target_y += [py, y, None]
    fig.add_trace(go.Scatter(x=pruned_x, y=pruned_y, mode="lines", line=dict(color="#bbbbbb", width=1, dash="dot"),
                             hoverinfo="skip", showlegend=False))
    fig.add_trace(go.Scatter(x=edge_x, y=edge_y, mode="lines", line=dict(color="#7f9fbf", width=1.5),
                             hoverinfo="skip", showlegend=False))
    styles = {"kept": ("#1f77b4", "circle", say(language, "beam.kept")),
              "finished": ("#2ca02c", "star", say(language, "beam.finished")),
              "pruned": ("#bbbbbb", "circle-open", say(language, "beam.pruned"))}
    hover = say(language, "beam.hover", step="%{customdata[1]}", log_p="%{customdata[0]:.3f}")
    for status, (color, symbol, name) in styles.items():
        members = [i for i, node in enumerate(nodes) if node.status == status]
        fig.add_trace(go.Scatter(
            x=[positions[i][0] for i in members], y=[positions[i][1] for i in members], mode="markers+text",
            marker=dict(color=color, symbol=symbol, size=14 if status == "finished" else 9), name=name,
            text=[escape(pieces[i]) for i in members], textposition="top center",
            textfont=dict(color="#767676" if status == "pruned" else "#222222", size=11),
            customdata=[[nodes[i].log_prob, nodes[i].step] for i in members],
            hovertemplate=f"%{{text}}<br>{hover}<extra></extra>"))
    fig.add_trace(go.Scatter(x=[0], y=[0], mode="markers+text", text=[escape("<s>")], textposition="top center",
                             marker=dict(color="#444444", size=9), showlegend=False, hoverinfo="skip"))
    fig.update_xaxes(title=say(language, "beam.steps_axis"), dtick=1,
                     range=[-0.5, max(by_step, default=0) + 0.5])  # no empty steps
    fig.update_yaxes(showticklabels=False, title=say(language, "beam.candidates_axis"))
    fig.update_layout(legend=dict(orientation="h", y=1.08))
    depth = max((len(m) for m in by_step.values()), default=1)
    return apply_layout(fig, title, height=max(380, 120 + 42 * depth), language=language)


STAGGERED_WORDS = 24  # words a row of alignment labels holds side by side at the app's width


def alignment_figure(weights, source_words: Sequence[str], target_words: Sequence[str], title: str,
                     threshold: float = 0.05, *, language: str = ENGLISH) -> go.Figure:
    """Cross-attention as lines from each target word (bottom) to source words (top), width = weight.

    The strongest link of every target word (its argmax alignment) is drawn in red.
    """
    matrix = as_matrix(weights)
    span = max(len(source_words), len(target_words)) - 1 or 1
    sx = [i * span / max(1, len(source_words) - 1) for i in range(len(source_words))]
    tx = [i * span / max(1, len(target_words) - 1) for i in range(len(target_words))]
    fig = go.Figure()
    for t, row in enumerate(matrix):
        best = max(range(len(row)), key=row.__getitem__)
        for s, weight in enumerate(row):
            if weight < threshold and s != best:
                continue
            fig.add_trace(go.Scatter(
                x=[tx[t], sx[s]], y=[0, 1], mode="lines", showlegend=False,
                line=dict(width=1 + 9 * weight, color="#d62728" if s == best else "#1f77b4"),
                opacity=0.35 + 0.65 * weight,
                hovertemplate=f"{escape(target_words[t])} → {escape(source_words[s])}: "
                              f"{Number(weight, '.3f').in_(language)}<extra></extra>"))
    for xs, words, y, side in ((sx, source_words, 1, "top"), (tx, target_words, 0, "bottom")):
        fig.add_trace(go.Scatter(x=xs, y=[y] * len(xs), mode="markers", marker=dict(color="#444", size=6),
                                 showlegend=False, hovertext=escaped_all(words), hoverinfo="text"))
        # Past STAGGERED_WORDS words, labels alternate between two heights so neighbours do not overlap.
        rows = 2 if len(words) > STAGGERED_WORDS else 1
        for row in range(rows):
            offset = (0.03 + 0.1 * row) * (1 if side == "top" else -1)
            fig.add_trace(go.Scatter(x=xs[row::rows], y=[y + offset] * len(xs[row::rows]), mode="text",
                                     text=escaped_all(words[row::rows]), textposition=f"{side} center",
                                     showlegend=False, hoverinfo="skip"))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False, range=[-0.45, 1.45])
    return apply_layout(fig, titled_with(title, say(language, "alignment.note", threshold=Number(threshold, ".0%"))),
                   height=380, language=language)


# --- inside a head ------------------------------------------------------------------------------------

def vector_panels(panels: dict, title: str, *, language: str = ENGLISH) -> go.Figure:
    """Vectors as rows of coloured cells, one panel each: {name: (matrix (rows, d), row labels)}; blue negative,
    red positive, white 0, on one scale across the panels so their sizes compare."""
    names = list(panels)
    hover = say(language, "vectors.hover", row="%{customdata}", dimension="%{x}", value="%{z:.4f}")
    hover += "<extra></extra>"
    largest = max(float(abs(_tensor_max(matrix))) for matrix, _ in panels.values()) or 1.0
    fig = make_subplots(rows=2, cols=2, subplot_titles=names, vertical_spacing=0.12, horizontal_spacing=0.12,
                        row_heights=[0.15, 0.85])
    for index, (name, (matrix, labels)) in enumerate(panels.items()):
        values = as_matrix(matrix)
        fig.add_trace(go.Heatmap(z=values, y=list(range(len(labels))), zmin=-largest, zmax=largest, zmid=0,
                                 colorscale="RdBu_r", showscale=index == 0, colorbar=dict(thickness=10),
                                 customdata=[[label] * len(values[0]) for label in escaped_all(labels)],
                                 hovertemplate=hover),
                      row=index // 2 + 1, col=index % 2 + 1)
        fig.update_yaxes(autorange="reversed", row=index // 2 + 1, col=index % 2 + 1,
                         **tick_labels(labels, most=MOST_PANEL_LABELS * 2))
    fig.update_xaxes(title=say(language, "dimension"), row=2)
    return apply_layout(fig, title, height=260 + 22 * max(len(labels) for _, labels in panels.values()),
                   language=language)


def paired_bars(labels: Sequence[str], series: dict[str, Sequence[float]], title: str,
                *, language: str = ENGLISH) -> go.Figure:
    """Two or more numbers per label, side by side (e.g. attention weight and contribution share)."""
    positions = list(range(len(labels)))
    fig = go.Figure([go.Bar(x=positions, y=list(values), name=name, customdata=escaped_all(labels),
                            hovertemplate=f"%{{customdata}}<br>{name}: %{{y:.4f}}<extra></extra>")
                     for name, values in series.items()])
    fig.update_xaxes(tickangle=slant_room(labels), **tick_labels(labels))
    fig.update_yaxes(range=[0, 1], title=say(language, "share_axis"))
    fig.update_layout(barmode="group", legend=dict(orientation="h", y=1.12, x=0))
    return apply_layout(fig, title, height=360, zoomable=False, language=language)


NARROWEST_PANEL = 6  # tokens' worth of width a panel of contrastive_bars gets at least, so that its title fits
BAR_HEADROOM = 1.05  # the value axis reaches a little past the longest bar, which would otherwise touch the frame


def contrastive_bars(groups: dict[str, tuple[Sequence[str], Sequence[float]]], title: str, value_name: str,
                     *, language: str = ENGLISH) -> go.Figure:
    """Signed evidence per token, one panel per group of tokens ({panel title: (labels, scores)}): red bars favour
    the chosen token, blue ones the alternative, on one scale."""
    names = list(groups)
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=names, horizontal_spacing=0.08,
                        column_widths=[max(NARROWEST_PANEL, len(groups[name][0])) for name in names])
    largest = max([1e-6] + [abs(x) for _, scores in groups.values() for x in as_numbers(scores)])
    for i, name in enumerate(names):
        labels, scores = groups[name]
        scores = as_numbers(scores)
        fig.add_trace(go.Bar(x=list(range(len(labels))), y=scores, customdata=escaped_all(labels),
                             marker={"color": ["#b2182b" if x >= 0 else "#2166ac" for x in scores]},
                             hovertemplate=f"%{{customdata}}: %{{y:+.3f}} {escape(value_name)}<extra></extra>",
                             showlegend=False), row=1, col=i + 1)
        fig.update_xaxes(tickangle=slant_room(labels), **tick_labels(labels), row=1, col=i + 1)
        fig.update_yaxes(range=[-largest * BAR_HEADROOM, largest * BAR_HEADROOM], row=1, col=i + 1)
    fig.update_yaxes(title=value_name, row=1, col=1)
    return apply_layout(fig, title, height=380, zoomable=False, language=language)


def logit_lens_heatmap(chosen_probabilities, favourites: Sequence[Sequence[str]], produced: Sequence[str],
                       *, title_key: str = "lens.title", language: str = ENGLISH) -> go.Figure:
    """Layers (rows) x decoding steps (columns): colour the probability of the token finally chosen, text the
    layer's own favourite; titled by ``figures.<title_key>`` (the logit lens's, or the tuned lens's)."""
    matrix = as_matrix(chosen_probabilities)
    layers = [say(language, "lens.layer", layer=i + 1) for i in range(len(matrix))]
    favourite = [[escape(piece) for piece in row] for row in favourites]
    steps = [say(language, "lens.finally", step=j + 1, piece=escape(piece)) for j, piece in enumerate(produced)]
    hover = say(language, "lens.hover", p="%{z:.3f}", favourite="%{text}")
    fig = go.Figure(go.Heatmap(
        z=matrix, x=list(range(len(produced))), y=list(range(len(layers))), zmin=0, zmax=1,
        colorscale="Greens", text=favourite, texttemplate="%{text}", textfont=dict(size=11),
        customdata=[steps for _ in layers], hovertemplate=f"%{{customdata}}<br>{hover}<extra></extra>",
        colorbar=dict(title=say(language, "lens.colorbar"), thickness=12)))
    fig.update_xaxes(title=say(language, "lens.steps_axis"), tickangle=slant_room(produced), **tick_labels(produced))
    fig.update_yaxes(**tick_labels(layers))
    return apply_layout(fig, say(language, title_key), height=220 + 40 * len(layers), language=language)


def pruning_curves(series: dict[str, tuple[Sequence[float], Sequence[str]]], title: str,
                   *, language: str = ENGLISH) -> go.Figure:
    """Scores against heads switched off, one line per series: {label naming the score: (scores from 0 heads
    off, heads in the order switched off)}."""
    fig = go.Figure()
    hover = say(language, "pruning.hover", heads="%{x}", last="%{customdata}", score="%{y:.1f}")
    for label, (scores, order) in series.items():
        fig.add_trace(go.Scatter(x=list(range(len(scores))), y=list(scores), mode="lines+markers", name=label,
                                 customdata=[say(language, "pruning.none")] + escaped_all(order),
                                 hovertemplate=f"{escape(label)}<br>{hover}<extra></extra>"))
    fig.update_xaxes(title=say(language, "pruning.heads_axis"), dtick=1)
    fig.update_yaxes(title=say(language, "pruning.score_axis"), range=[0, 102])
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return apply_layout(fig, title, height=420, language=language)


# The words the page's own figures (ui/static/figures.js) write, by their key in figures.json less "figures.".
