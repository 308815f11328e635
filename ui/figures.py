"""Pure figure builders: numbers and labels in, a Plotly figure out. No model, no I/O, no gradio.

Axes use integer positions with the token pieces as tick labels, so a
sentence with a repeated word ("the ... the") keeps one column per token;
Plotly would merge repeated category labels. Attention colour scales run
from 0 to 1 so maps are comparable across heads and layers.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import plotly.colors
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .runtime.language import DECIMAL_MARK, ENGLISH, PERCENT_SIGN, Number, percent, text
from .runtime.language import table as locale

ATTENTION_COLORSCALE = "Blues"
MARK = "#ff7f0e"  # what a lesson or a step points at, as the step view marks the current token
ROWS_ARE_STEPS = "rows are steps"  # a heatmap trace's meta: row i is decoding step i + 1 (a click can go there)
GRID = "#e5ecf6"
FONT = dict(family="Inter, Segoe UI, Helvetica, Arial, sans-serif", size=13)
MOST_TICK_LABELS = 60  # token labels an axis shows before it labels every n-th position
WORD_CHARS, LANGUAGE_TITLE_CHARS = 16, 90  # a word as a tick label; a language's translation as its panel's title
HEATMAP_MARGIN = {"l": 130, "r": 20}
LABEL_CHAR_PX = 7.5  # the width of a character of a 13-px tick label
MIN_COLUMN_PX = 22  # at least 18 px per column on any screen (issue: phones), with room for rotated labels
LAPTOP_CHART_PX = 760  # a fixed width is no narrower than a laptop's chart, where it fits without scrolling
PHONE_COLUMNS = 6  # columns that fit a 390-px phone at MIN_COLUMN_PX beside the row labels and colour bar
# Small multiples: a panel is PANEL_HEIGHT px tall, so about a dozen 11-px labels fit down its side; across, the
# page's width is shared by the columns (about 80 upright labels on a laptop's screen).
PANEL_HEIGHT = 230
PANEL_TICK_FONT = 11  # px: readable on a projector
PANEL_LABEL_CHAR_PX = LABEL_CHAR_PX * PANEL_TICK_FONT / 13
MOST_PANEL_LABELS = 12
MOST_GRID_COLUMN_LABELS = 80
# How Plotly writes the numbers of hovers and axes in each language: the decimal mark, then the thousands
# separator (English keeps Plotly's own default, unset).
SEPARATORS = {"de": ",.", "fr": ",\u202f"}


def _words(language: str, key: str, /, **values) -> str:
    """A figure's fixed words in ``language``: ``figures.<key>`` of ui/locales/<language>/figures.json. Words
    around Plotly's own placeholders (hovers) take those as values, ``y="%{y}"``, so each language puts them
    where its sentence needs them."""
    return text(language, f"figures.{key}", **values)


# Plotly's toolbar buttons are keyboard stops: zooming in or out a step and autoscaling repeat the zoom box and the
# reset button, and a chart that cannot be zoomed needs none of them.
ZOOM_BUTTONS = ["zoom", "pan", "select", "lasso", "resetscale"]
REPEATED_BUTTONS = ["zoomin", "zoomout", "autoscale"]

# The charts' shared look as a Plotly template: what Plotly's default one gave them (its 7 kB, sent with every
# figure, held mostly styles of charts the app never draws). The page's own figures (ui/static/figures.js) carry it
# too, from the page's config.
_AXIS = {"gridcolor": "white", "linecolor": "white", "ticks": "", "title": {"standoff": 15}, "zerolinecolor": "white",
         "automargin": True, "zerolinewidth": 2, "ticklabeloverflow": "allow"}
TEMPLATE = {
    "layout": {"autotypenumbers": "strict", "font": {"color": "#2a3f5f"}, "hovermode": "closest",
               "hoverlabel": {"align": "left"}, "paper_bgcolor": "white", "plot_bgcolor": "#E5ECF6",
               "colorway": ["#636efa", "#EF553B", "#00cc96", "#ab63fa", "#FFA15A", "#19d3f3", "#FF6692", "#B6E880",
                            "#FF97FF", "#FECB52"],
               "xaxis": _AXIS, "yaxis": _AXIS, "shapedefaults": {"line": {"color": "#2a3f5f"}},
               "annotationdefaults": {"arrowcolor": "#2a3f5f", "arrowhead": 0, "arrowwidth": 1}},
    "data": {"bar": [{"type": "bar", "marker": {"line": {"color": "#E5ECF6", "width": 0.5}}}],
             "heatmap": [{"type": "heatmap", "colorbar": {"outlinewidth": 0, "ticks": ""}}]}}


def _layout(fig: go.Figure, title: str, height: int | None = None, zoomable: bool = True,
            language: str = ENGLISH) -> go.Figure:
    """Shared looks. ``zoomable=False`` for charts with nothing to zoom into (bar charts of a few values): a stray
    drag then zooms nothing. Numbers as ``language`` writes them (a decimal comma in German and French)."""
    # Plain colours instead of a named template: a template costs ~10 ms per figure to build and is sent
    # to the browser with every figure.
    fig.layout.template = TEMPLATE  # in place of Plotly's default (an update would merge the two)
    fig.update_layout(title=dict(text=title, x=0.01, font=dict(size=15)), font=FONT, paper_bgcolor="white",
                      plot_bgcolor="white", margin=dict(l=10, r=10, t=60, b=10), height=height,
                      modebar=dict(remove=REPEATED_BUTTONS + ([] if zoomable else ZOOM_BUTTONS)))
    if not zoomable:
        fig.update_layout(dragmode=False)
    if language in SEPARATORS:
        fig.update_layout(separators=SEPARATORS[language])
    fig.update_xaxes(gridcolor=GRID, zerolinecolor=GRID)
    fig.update_yaxes(gridcolor=GRID, zerolinecolor=GRID)
    return fig


def escape(label: str) -> str:
    """Plotly renders a subset of HTML in text: "</s>" would vanish and "<s>" strike through the rest."""
    return str(label).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _escaped(labels: Sequence[str]) -> list[str]:
    return [escape(label) for label in labels]


def quiet_image_export_logs() -> None:
    """Kaleido and its browser driver log a dozen INFO lines about their own browser per exported image."""
    for chatty in ("kaleido", "choreographer"):
        logging.getLogger(chatty).setLevel(logging.WARNING)


def _ticks(labels: Sequence[str], most: int = MOST_TICK_LABELS) -> dict:
    """Every position labelled, or every n-th one when more would overlap into a smear (hover names them all)."""
    every = -(-len(labels) // most)
    positions = list(range(0, len(labels), max(1, every)))
    return dict(tickmode="array", tickvals=positions, ticktext=[escape(labels[i]) for i in positions])


def _slanted(labels: Sequence[str], angle: int = -45) -> int:
    """Tick angle for token labels along x: upright text takes the least width once a sentence gets long."""
    return -90 if len(labels) > 30 else angle


def _matrix(values) -> list[list[float]]:
    """A nested list from a tensor, array or list (figures stay independent of torch)."""
    return values.tolist() if hasattr(values, "tolist") else [list(row) for row in values]


def _hover_text(query_labels: Sequence[str], key_labels: Sequence[str], rows_are_steps: bool,
                language: str = ENGLISH) -> list[list[str]]:
    """Each cell's row and column, named for the hover (its value comes from Plotly's own ``%{z}``, so maps of one
    sentence share their text and a change of head sends only the numbers). Positions count from 0, as in the
    positional encoding; decoding steps count from 1, as on the step slider."""
    rows = [_words(language, "step", step=i + 1, label=escape(label)) if rows_are_steps
            else _words(language, "position", position=i, label=escape(label)) for i, label in enumerate(query_labels)]
    columns = [_words(language, "position", position=j, label=escape(label)) for j, label in enumerate(key_labels)]
    return [[f"{row} → {column}" for column in columns] for row in rows]


def attention_heatmap(weights, query_labels: Sequence[str], key_labels: Sequence[str], title: str | None = None,
                      query_title: str | None = None, key_title: str | None = None, rows_are_steps: bool = False,
                      subtitle: str = "", value_name: str | None = None, largest: float = 1.0,
                      signed: bool = False, marked_row: int | None = None, *, language: str = ENGLISH) -> go.Figure:
    """One attention map (queries x keys) as a heatmap; rows are queries, columns keys.

    ``value_name`` and ``largest`` (the top of the colour scale) for maps of other quantities than weights;
    ``signed`` for values either side of 0 (blue below, red above, white at 0). ``marked_row`` (0-based) is
    outlined: the step a lesson or the step view is on.

    ``rows_are_steps``: row i is what decoding step i + 1 produced (decoder self- and cross-attention); the trace
    says so in its ``meta``, so that a click on a row can go to that step.
    ``subtitle`` (which layer and head) leads the smaller second title line, which also names the columns: an
    axis title above the key labels would collide with the title on a narrow screen.
    Unnamed (None), the title, the axes and the values are the words of ``language`` for attention, query, key and
    weight.
    """
    title = _words(language, "attention") if title is None else title
    query_title, key_title = _axes_titles(query_title, key_title, language)
    value_name = _words(language, "weight") if value_name is None else value_name
    matrix = _matrix(weights)
    if len(matrix) != len(query_labels) or (matrix and len(matrix[0]) != len(key_labels)):
        raise ValueError(f"attention of shape {len(matrix)}x{len(matrix[0]) if matrix else 0} does not match "
                         f"{len(query_labels)} query and {len(key_labels)} key labels")
    fig = go.Figure(go.Heatmap(
        z=matrix, x=list(range(len(key_labels))), y=list(range(len(query_labels))),
        zmin=-largest if signed else 0, zmax=largest, colorscale="RdBu_r" if signed else ATTENTION_COLORSCALE,
        text=_hover_text(query_labels, key_labels, rows_are_steps, language),
        hovertemplate=f"%{{text}}<br>{value_name} %{{z:.4f}}<extra></extra>",
        colorbar=dict(title=value_name, thickness=12),
        meta=ROWS_ARE_STEPS if rows_are_steps else None))
    fig.update_xaxes(side="top", tickangle=_slanted(key_labels), automargin=False, **_ticks(key_labels))
    fig.update_yaxes(title=_words(language, "queries", name=query_title), autorange="reversed", automargin=False,
                     **_ticks(query_labels))
    if marked_row is not None:
        fig.add_shape(type="rect", x0=-0.5, x1=len(key_labels) - 0.5, y0=marked_row - 0.5, y1=marked_row + 0.5,
                      line=dict(color=MARK, width=3), fillcolor="rgba(0,0,0,0)")
    fig = _layout(fig, heatmap_title(title, subtitle, key_title, language=language),
                  height=min(1400, 230 + 26 * len(query_labels)), language=language)  # rows stay about 18 px or more
    # Fixed margins: automatic ones make Plotly redraw in a loop with rotated labels on top.
    fig.update_layout(margin=dict(l=HEATMAP_MARGIN["l"], r=HEATMAP_MARGIN["r"], t=_top_margin(key_labels), b=20),
                      width=_readable_width(len(key_labels)))
    return fig


def _axes_titles(query_title: str | None, key_title: str | None, language: str) -> tuple[str, str]:
    """What a map's rows and columns are called: as given, else query and key in ``language``."""
    return (_words(language, "query") if query_title is None else query_title,
            _words(language, "key") if key_title is None else key_title)


def attention_table(weights, query_labels: Sequence[str], key_labels: Sequence[str], title: str,
                    query_title: str | None = None, key_title: str | None = None, subtitle: str = "",
                    marked_row: int | None = None, axes_note: str = "", *, language: str = ENGLISH) -> str:
    """One attention map as an HTML table whose cells are coloured as the heatmap's: for a phone, which never loads
    Plotly.js (4.8 MB for each phone of a class). Each cell's weight is its text, hidden from sight and read by
    screen readers; the marked row is outlined (page.css, ``.attention-table``). ``axes_note`` names the axes
    (default: from ``query_title`` and ``key_title``, in ``language``)."""
    query_title, key_title = _axes_titles(query_title, key_title, language)
    matrix = _matrix(weights)
    colours = plotly.colors.sample_colorscale(ATTENTION_COLORSCALE, [min(max(w, 0.0), 1.0) for row in matrix
                                                                     for w in row])
    head = "".join(f'<th scope="col"><span>{escape(label)}</span></th>' for label in key_labels)
    rows = []
    for i, (label, row) in enumerate(zip(query_labels, matrix)):
        cells = "".join(f'<td style="background:{colours[i * len(row) + j]}"><span class="cell-value">'
                        f"{Number(weight, '.0%').in_(language)}</span></td>" for j, weight in enumerate(row))
        marked = ' class="marked-row"' if i == marked_row else ""
        rows.append(f'<tr{marked}><th scope="row">{escape(label)}</th>{cells}</tr>')
    axes_note = axes_note or _words(language, "rows_and_columns", rows=query_title, columns=key_title)
    note = " · ".join(part for part in (subtitle, axes_note) if part)
    return (f'<figure class="attention-table"><figcaption>{escape(title)}<br><small>{escape(note)}</small>'
            f'</figcaption><table><thead><tr><td></td>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
            "</figure>")


def _top_margin(labels: Sequence[str]) -> int:
    """Room above a heatmap for its two title lines and its slanted column labels, as long as the longest label
    needs (a fixed margin for the longest possible one left a blank band over short words)."""
    longest = max((len(label) for label in labels), default=1)
    slant = abs(math.sin(math.radians(_slanted(labels))))
    return int(min(200, 90 + LABEL_CHAR_PX * longest * slant))


def _grid_margin(query_labels: Sequence[str], key_labels: Sequence[str], key_angle: int) -> dict:
    """Room left of the panels for the rows' labels and under them for the slanted columns', as long as the longest
    label needs: Plotly's automargin measures every label of every panel as it draws (half the time of drawing
    a model view in Chromium)."""
    def needed(labels: Sequence[str], slant: float) -> int:
        longest = max([1, *(len(label) for label in labels)])
        return int(min(200, 20 + PANEL_LABEL_CHAR_PX * longest * slant))
    return {"l": needed(query_labels, 1.0), "b": needed(key_labels, abs(math.sin(math.radians(key_angle))))}


def _readable_width(columns: int) -> int | None:
    """The width a heatmap needs for ``MIN_COLUMN_PX`` per column; None (the page's width) for a few columns,
    which fit even a phone. A wider chart scrolls sideways inside its own frame on a narrow screen."""
    needed = HEATMAP_MARGIN["l"] + HEATMAP_MARGIN["r"] + 80 + MIN_COLUMN_PX * columns  # 80: the colour bar
    return max(needed, LAPTOP_CHART_PX) if columns > PHONE_COLUMNS else None


def heatmap_title(title: str, subtitle: str, key_title: str, *, language: str = ENGLISH) -> str:
    """A heatmap's title: its name, then which map (layer and head) and what its columns are on a smaller line."""
    return _titled(title, subtitle, _words(language, "keys_columns", name=key_title))


def _titled(title: str, *notes: str) -> str:
    """A title with a smaller second line of notes (the empty ones left out)."""
    line = " · ".join(note for note in notes if note)
    return f"{title}<br><sup>{line}</sup>" if line else title


def attention_grid(weights, query_labels: Sequence[str], key_labels: Sequence[str], title: str,
                   row_names: Sequence[str], column_names: Sequence[str], query_title: str | None = None,
                   key_title: str | None = None, rows_are_steps: bool = False, subtitle: str = "",
                   *, language: str = ENGLISH) -> go.Figure:
    """Small multiples: ``weights`` nested [row][column][query][key], e.g. heads of one layer or layers x heads.

    Rows are named on the right and columns on top, once each: a title over every panel ("layer 1 · head 1")
    runs into its neighbours on a phone. Labels go on the outer panels only, and a long sentence labels every
    n-th token, as many as a panel has room for (hover names every position).
    """
    query_title, key_title = _axes_titles(query_title, key_title, language)
    weight = _words(language, "weight")
    hover_text = _hover_text(query_labels, key_labels, rows_are_steps, language)
    rows, columns = len(row_names), len(column_names)
    fig = make_subplots(rows=rows, cols=columns, column_titles=list(column_names),
                        row_titles=list(row_names) if any(row_names) else None, shared_xaxes=True,
                        shared_yaxes=True, horizontal_spacing=0.015, vertical_spacing=min(0.06, 0.3 / rows))
    for r in range(rows):
        for c in range(columns):
            matrix = _matrix(weights[r][c])
            panel = " · ".join(name for name in (row_names[r], column_names[c]) if name)
            fig.add_trace(go.Heatmap(
                z=matrix, x=list(range(len(key_labels))), y=list(range(len(query_labels))), zmin=0, zmax=1,
                colorscale=ATTENTION_COLORSCALE, showscale=(r == 0 and c == 0),
                colorbar=dict(title=weight, thickness=10), text=hover_text,
                hovertemplate=f"{panel}<br>%{{text}}<br>{weight} %{{z:.4f}}<extra></extra>",
                meta=ROWS_ARE_STEPS if rows_are_steps else None), row=r + 1, col=c + 1)
    tick_font = dict(size=PANEL_TICK_FONT)
    key_angle = _slanted(key_labels, -60)
    fig.update_xaxes(tickangle=key_angle, tickfont=tick_font, automargin=False,
                     **_ticks(key_labels, most=max(MOST_PANEL_LABELS, MOST_GRID_COLUMN_LABELS // columns)))
    fig.update_yaxes(autorange="reversed", tickfont=tick_font, automargin=False,
                     **_ticks(query_labels, most=MOST_PANEL_LABELS))
    for r in range(1, rows):
        fig.update_xaxes(showticklabels=False, row=r)
    for c in range(2, columns + 1):
        fig.update_yaxes(showticklabels=False, col=c)
    fig.update_annotations(font_size=PANEL_TICK_FONT)
    fig = _layout(fig, _titled(title, subtitle, _words(language, "queries_rows", name=query_title),
                               _words(language, "keys_columns", name=key_title)),
                  height=90 + PANEL_HEIGHT * rows, language=language)
    fig.update_layout(margin=_grid_margin(query_labels, key_labels, key_angle))
    return fig


def _numbers(values) -> list[float]:
    return values.tolist() if hasattr(values, "tolist") else [float(value) for value in values]


def top_k_bar(pieces: Sequence[str], probabilities: Sequence[float], chosen: str | None = None,
              title: str | None = None, *, language: str = ENGLISH) -> go.Figure:
    """Horizontal bars of the top-k next tokens, each labelled "piece  12.3%" beside the axis (a label on or by a
    bar runs into a short bar's neighbour); the chosen one is highlighted."""
    title = _words(language, "candidates.title") if title is None else title
    probabilities = _numbers(probabilities)
    labels = [f"{piece}  {Number(p, '.1%').in_(language)}" for piece, p in zip(pieces, probabilities)]
    fig = go.Figure(go.Bar(orientation="h", hovertemplate="%{customdata}: %{x:.4f}<extra></extra>",
                           x=probabilities, y=list(range(len(pieces))), customdata=_escaped(pieces),
                           marker={"color": ["#d62728" if piece == chosen else "#1f77b4" for piece in pieces]}))
    fig.update_yaxes(autorange="reversed", ticklabelstandoff=6, **_ticks(labels))
    fig.update_xaxes(range=[0, 1], title=_words(language, "probability"))
    return _layout(fig, title, height=120 + 34 * len(pieces), zoomable=False, language=language)


def source_attention_bar(weights: Sequence[float], source_labels: Sequence[str], title: str,
                         *, language: str = ENGLISH) -> go.Figure:
    """Where one decoding step looked in the source: one bar per source token."""
    values = _numbers(weights)
    fig = go.Figure(go.Bar(x=list(range(len(source_labels))), y=values,
                           marker=dict(colorscale=ATTENTION_COLORSCALE, cmin=0, cmax=1, color=values,
                                       line=dict(color="#444", width=0.5)),
                           customdata=_escaped(source_labels),
                           hovertemplate="%{customdata}: %{y:.4f}<extra></extra>"))
    fig.update_xaxes(tickangle=_slanted(source_labels), **_ticks(source_labels))
    fig.update_yaxes(range=[0, 1], title=_words(language, "attention_axis"))
    return _layout(fig, title, height=320, zoomable=False, language=language)


def token_probability_bar(pieces: Sequence[str], probabilities: Sequence[float], title: str,
                          *, language: str = ENGLISH) -> go.Figure:
    """The probability the model gave each token of a (forced) target."""
    positions = list(range(len(pieces)))
    fig = go.Figure(go.Bar(x=positions, y=list(probabilities), marker_color="#2ca02c", customdata=_escaped(pieces),
                           hovertemplate="%{customdata}: %{y:.4f}<extra></extra>"))
    fig.update_xaxes(tickangle=_slanted(pieces), **_ticks(pieces))
    fig.update_yaxes(range=[0, 1], title=_words(language, "probability"))
    return _layout(fig, title, height=320, zoomable=False, language=language)


# --- positional encoding ----------------------------------------------------------------------------

def positional_encoding_heatmap(table, title: str | None = None, *, language: str = ENGLISH) -> go.Figure:
    """positions x dimensions, values in [-1, 1]."""
    title = _words(language, "positions.title") if title is None else title
    matrix = _matrix(table)
    hover = _words(language, "positions.hover", position="%{y}", dimension="%{x}", value="%{z:.4f}")
    fig = go.Figure(go.Heatmap(z=matrix, zmin=-1, zmax=1, colorscale="RdBu", reversescale=True,
                               hovertemplate=f"{hover}<extra></extra>", colorbar=dict(thickness=12)))
    fig.update_xaxes(title=_words(language, "dimension_i"))
    fig.update_yaxes(title=_words(language, "position_axis"), autorange="reversed")
    return _layout(fig, title, height=420, language=language)


def positional_encoding_lines(table, dimensions: Sequence[int], title: str | None = None,
                              *, language: str = ENGLISH) -> go.Figure:
    title = _words(language, "lines.title") if title is None else title
    matrix = _matrix(table)
    fig = go.Figure()
    for d in dimensions:
        if 0 <= d < (len(matrix[0]) if matrix else 0):
            fig.add_trace(go.Scatter(x=list(range(len(matrix))), y=[row[d] for row in matrix], mode="lines",
                                     name=_words(language, "lines.name", dimension=d,
                                                wave="sin" if d % 2 == 0 else "cos")))
    fig.update_xaxes(title=_words(language, "position_axis"))
    fig.update_yaxes(title=_words(language, "value"), range=[-1.1, 1.1])
    fig.update_layout(showlegend=True)  # Plotly hides the legend of a single line, and with it the line's name
    return _layout(fig, title, height=360, language=language)


def position_similarity(table, title: str | None = None, *, language: str = ENGLISH) -> go.Figure:
    title = _words(language, "similarity.title") if title is None else title
    matrix = _matrix(table)
    dots = [[sum(a * b for a, b in zip(row_i, row_j)) for row_j in matrix] for row_i in matrix]
    fig = go.Figure(go.Heatmap(z=dots, colorscale="Viridis",
                               hovertemplate="PE(%{y}) · PE(%{x}) = %{z:.2f}<extra></extra>",
                               colorbar=dict(thickness=12)))
    fig.update_xaxes(title=_words(language, "position_axis"))
    fig.update_yaxes(title=_words(language, "position_axis"), autorange="reversed")
    return _layout(fig, title, height=420, language=language)


# --- training -----------------------------------------------------------------------------------------

def training_curves(steps: Sequence[dict], evals: Sequence[dict], title: str | None = None,
                    *, language: str = ENGLISH) -> go.Figure:
    """Loss (training and validation), learning rate, and validation BLEU / exact match over updates."""
    title = _words(language, "training.title") if title is None else title
    said = {name: _words(language, f"training.{name}") for name in
            ("loss", "learning_rate", "score", "train_loss", "val_loss", "bleu", "exact_match", "update")}
    fig = make_subplots(rows=1, cols=3, subplot_titles=(said["loss"], said["learning_rate"], said["score"]),
                        horizontal_spacing=0.08)
    if steps:
        fig.add_trace(go.Scatter(x=[s["step"] for s in steps], y=[s["loss"] for s in steps], mode="lines",
                                 name=said["train_loss"], line=dict(color="#1f77b4")), row=1, col=1)
        fig.add_trace(go.Scatter(x=[s["step"] for s in steps], y=[s["lr"] for s in steps], mode="lines",
                                 name=said["learning_rate"], line=dict(color="#9467bd")), row=1, col=2)
    if evals:
        x = [e["step"] for e in evals]
        fig.add_trace(go.Scatter(x=x, y=[e["val_loss"] for e in evals], mode="lines+markers",
                                 name=said["val_loss"], line=dict(color="#ff7f0e")), row=1, col=1)
        fig.add_trace(go.Scatter(x=x, y=[e["bleu"] for e in evals], mode="lines+markers",
                                 name=said["bleu"], line=dict(color="#2ca02c")), row=1, col=3)
        if any("exact_match" in e for e in evals):
            fig.add_trace(go.Scatter(x=x, y=[100 * e.get("exact_match", 0) for e in evals], mode="lines+markers",
                                     name=said["exact_match"], line=dict(color="#d62728", dash="dot")), row=1, col=3)
    fig.update_xaxes(title=said["update"])
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return _layout(fig, title, height=380, language=language)




# --- experiments --------------------------------------------------------------------------------------

def head_importance_heatmaps(importance: dict, title: str | None = None, *, language: str = ENGLISH) -> go.Figure:
    """One layer x head panel per attention type: drop in log-probability when that head alone is off."""
    title = _words(language, "importance.title") if title is None else title
    return head_heatmaps(importance, _titled(title, _words(language, "importance.note")), _words(language, "nats"),
                         lambda kind, layer, head, value: _words(language, "importance.cell", kind=kind, layer=layer,
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
        matrix = _matrix(values[kind])
        layers, heads = len(matrix), len(matrix[0])
        fig.add_trace(go.Heatmap(
            z=matrix, x=list(range(heads)), y=list(range(layers)), **_centred_colours(largest, colour_title),
            showscale=(i == 0), text=[[cell(named[kind], l + 1, h + 1, matrix[l][h]) for h in range(heads)] for l in range(layers)],
            hovertemplate="%{text}<extra></extra>"), row=1, col=i + 1)
        fig.update_xaxes(tickvals=list(range(heads)),
                         ticktext=[_words(language, "importance.head_tick", head=h + 1) for h in range(heads)],
                         row=1, col=i + 1)
        fig.update_yaxes(tickvals=list(range(layers)),
                         ticktext=[_words(language, "importance.layer_tick", layer=l + 1) for l in range(layers)],
                         autorange="reversed", row=1, col=i + 1)
    return _layout(fig, title, height=360, language=language)


def languages_side_by_side(panels: Sequence[tuple[str, object, Sequence[str], Sequence[str]]], title: str, *,
                           language: str = ENGLISH) -> go.Figure:
    """One word-level cross-attention map per target language, one above the other so each has the page's width
    (a projector's audience reads the languages against the same source words): ``panels`` holds (its title, the
    map (target words, source words), source words, target words); every map on the one 0-1 scale."""
    heights = [max(3, len(target_words)) for *_, target_words in panels]
    fig = make_subplots(rows=len(panels), cols=1, vertical_spacing=0.3 / len(panels), row_heights=heights,
                        subplot_titles=[escape(_shortened(name, LANGUAGE_TITLE_CHARS)) for name, *_ in panels])
    for i, (_, weights, source_words, target_words) in enumerate(panels):
        matrix = _matrix(weights)
        fig.add_trace(go.Heatmap(
            z=matrix, x=list(range(len(source_words))), y=list(range(len(target_words))), zmin=0, zmax=1,
            colorscale=ATTENTION_COLORSCALE, showscale=(i == 0), colorbar=dict(thickness=10),
            text=[[f"{escape(t)} ← {escape(s)}: {Number(w, '.2f').in_(language)}" for s, w in zip(source_words, row)]
                  for t, row in zip(target_words, matrix)],
            hovertemplate="%{text}<extra></extra>"), row=i + 1, col=1)
        fig.update_xaxes(**_ticks([_shortened(word, WORD_CHARS) for word in source_words]), tickangle=0,
                         row=i + 1, col=1)
        fig.update_yaxes(**_ticks([_shortened(word, WORD_CHARS) for word in target_words]), autorange="reversed",
                         row=i + 1, col=1)
    return _layout(fig, title, height=min(2400, 140 + 90 * len(panels) + 22 * sum(heights)), language=language)


def _shortened(label: str, most: int) -> str:
    """A label cut to ``most`` characters (hover shows it whole)."""
    return label if len(label) <= most else label[: most - 1] + "…"


def patching_heads(heads: dict, title: str, *, language: str = ENGLISH) -> go.Figure:
    """Activation patching's layer x head panels: the share of the difference each head's clean output restores."""
    return head_heatmaps(heads, _titled(title, _words(language, "patching.note")),
                         _words(language, "patching.restored"),
                         lambda kind, layer, head, value: _words(language, "patching.head_cell", kind=kind, layer=layer,
                                                                 head=head, share=percent(value)), language)


PATCHING_GRID_HEIGHT, PATCHING_ROW_HEIGHT = 200, 40  # px: the title, axes and colour bar, then each layer's row


def patching_positions(shares, source_labels: Sequence[str], title: str, *, language: str = ENGLISH) -> go.Figure:
    """Activation patching's encoder layer x source position grid; a position without a partner stays blank."""
    matrix = [[None if x != x else x for x in row] for row in _matrix(shares)]
    largest = max([1e-6] + [abs(x) for row in matrix for x in row if x is not None])
    labels = _escaped(source_labels)
    fig = go.Figure(go.Heatmap(
        z=matrix, x=list(range(len(labels))), y=list(range(len(matrix))),
        **_centred_colours(largest, _words(language, "patching.restored")), text=[[_words(language, "patching.position_cell", layer=l + 1, piece=labels[p],
                      share=percent(value) if value is not None else "–") for p, value in enumerate(row)]
              for l, row in enumerate(matrix)], hovertemplate="%{text}<extra></extra>"))
    fig.update_xaxes(**_ticks(source_labels), tickangle=_slanted(source_labels))
    fig.update_yaxes(tickvals=list(range(len(matrix))),
                     ticktext=[_words(language, "importance.layer_tick", layer=l + 1) for l in range(len(matrix))],
                     autorange="reversed")
    return _layout(fig, title, height=PATCHING_GRID_HEIGHT + PATCHING_ROW_HEIGHT * len(matrix), language=language)


def _kind_name(kind: str, language: str) -> str:
    """An attention type ("encoder", "decoder", "cross") as a panel names it in ``language``; another name as it
    is."""
    key = f"figures.kind.{kind}"
    return locale(language).get(key, kind)


def _tensor_max(values) -> float:
    flat = [abs(x) for row in _matrix(values) for x in row]
    return max(flat) if flat else 0.0


def probability_comparison(changes: Sequence[tuple[str, float, float]], title: str,
                           *, language: str = ENGLISH) -> go.Figure:
    """Grouped bars: each token of the original translation, its probability before and after an intervention."""
    positions = list(range(len(changes)))
    labels = [piece for piece, _, _ in changes]
    pieces = _escaped(labels)
    unmodified = _words(language, "comparison.unmodified")
    fig = go.Figure([
        go.Bar(x=positions, y=[before for _, before, _ in changes], name=unmodified, marker_color="#1f77b4",
               customdata=pieces, hovertemplate=f"%{{customdata}}: %{{y:.4f}}<extra>{unmodified}</extra>"),
        go.Bar(x=positions, y=[after for _, _, after in changes], name=_words(language, "comparison.intervened"),
               marker_color="#d62728", customdata=pieces,
               hovertemplate=f"%{{customdata}}: %{{y:.4f}}<extra>{_words(language, 'comparison.intervention')}"
                             "</extra>"),
    ])
    fig.update_xaxes(tickangle=_slanted(labels), **_ticks(labels))
    fig.update_yaxes(range=[0, 1], title=_words(language, "probability"))
    fig.update_layout(barmode="group", legend=dict(orientation="h", y=1.12))
    return _layout(fig, title, height=340, zoomable=False, language=language)


# --- analysis -----------------------------------------------------------------------------------------

def beam_tree_figure(nodes: Sequence, pieces: Sequence[str], title: str | None = None,
                     *, language: str = ENGLISH) -> go.Figure:
    """Candidates per step (x) ordered by cumulative log-probability (y); edges to the beam each extends.

    ``nodes`` are analysis.BeamNode; ``pieces[i]`` labels node i. Kept beams are blue circles, finished
    hypotheses green stars, pruned candidates open grey circles on dotted edges: shape and line say what colour
    says, for readers who do not tell the colours apart (WCAG 1.4.1), and grey labels keep 4.5:1 contrast.
    """
    title = _words(language, "beam.title") if title is None else title
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
    styles = {"kept": ("#1f77b4", "circle", _words(language, "beam.kept")),
              "finished": ("#2ca02c", "star", _words(language, "beam.finished")),
              "pruned": ("#bbbbbb", "circle-open", _words(language, "beam.pruned"))}
    hover = _words(language, "beam.hover", step="%{customdata[1]}", log_p="%{customdata[0]:.3f}")
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
    fig.update_xaxes(title=_words(language, "beam.steps_axis"), dtick=1,
                     range=[-0.5, max(by_step, default=0) + 0.5])  # no empty steps
    fig.update_yaxes(showticklabels=False, title=_words(language, "beam.candidates_axis"))
    fig.update_layout(legend=dict(orientation="h", y=1.08))
    depth = max((len(m) for m in by_step.values()), default=1)
    return _layout(fig, title, height=max(380, 120 + 42 * depth), language=language)


STAGGERED_WORDS = 24  # words a row of alignment labels holds side by side at the app's width


def alignment_figure(weights, source_words: Sequence[str], target_words: Sequence[str], title: str,
                     threshold: float = 0.05, *, language: str = ENGLISH) -> go.Figure:
    """Cross-attention as lines from each target word (bottom) to source words (top), width = weight.

    The strongest link of every target word (its argmax alignment) is drawn in red.
    """
    matrix = _matrix(weights)
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
                                 showlegend=False, hovertext=_escaped(words), hoverinfo="text"))
        # Past STAGGERED_WORDS words, labels alternate between two heights so neighbours do not overlap.
        rows = 2 if len(words) > STAGGERED_WORDS else 1
        for row in range(rows):
            offset = (0.03 + 0.1 * row) * (1 if side == "top" else -1)
            fig.add_trace(go.Scatter(x=xs[row::rows], y=[y + offset] * len(xs[row::rows]), mode="text",
                                     text=_escaped(words[row::rows]), textposition=f"{side} center",
                                     showlegend=False, hoverinfo="skip"))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False, range=[-0.45, 1.45])
    return _layout(fig, _titled(title, _words(language, "alignment.note", threshold=Number(threshold, ".0%"))),
                   height=380, language=language)


# --- inside a head ------------------------------------------------------------------------------------

def vector_panels(panels: dict, title: str, *, language: str = ENGLISH) -> go.Figure:
    """Vectors as rows of coloured cells, one panel each: {name: (matrix (rows, d), row labels)}; blue negative,
    red positive, white 0, on one scale across the panels so their sizes compare."""
    names = list(panels)
    hover = _words(language, "vectors.hover", row="%{customdata}", dimension="%{x}", value="%{z:.4f}")
    hover += "<extra></extra>"
    largest = max(float(abs(_tensor_max(matrix))) for matrix, _ in panels.values()) or 1.0
    fig = make_subplots(rows=2, cols=2, subplot_titles=names, vertical_spacing=0.12, horizontal_spacing=0.12,
                        row_heights=[0.15, 0.85])
    for index, (name, (matrix, labels)) in enumerate(panels.items()):
        values = _matrix(matrix)
        fig.add_trace(go.Heatmap(z=values, y=list(range(len(labels))), zmin=-largest, zmax=largest, zmid=0,
                                 colorscale="RdBu_r", showscale=index == 0, colorbar=dict(thickness=10),
                                 customdata=[[label] * len(values[0]) for label in _escaped(labels)],
                                 hovertemplate=hover),
                      row=index // 2 + 1, col=index % 2 + 1)
        fig.update_yaxes(autorange="reversed", row=index // 2 + 1, col=index % 2 + 1,
                         **_ticks(labels, most=MOST_PANEL_LABELS * 2))
    fig.update_xaxes(title=_words(language, "dimension"), row=2)
    return _layout(fig, title, height=260 + 22 * max(len(labels) for _, labels in panels.values()),
                   language=language)


def paired_bars(labels: Sequence[str], series: dict[str, Sequence[float]], title: str,
                *, language: str = ENGLISH) -> go.Figure:
    """Two or more numbers per label, side by side (e.g. attention weight and contribution share)."""
    positions = list(range(len(labels)))
    fig = go.Figure([go.Bar(x=positions, y=list(values), name=name, customdata=_escaped(labels),
                            hovertemplate=f"%{{customdata}}<br>{name}: %{{y:.4f}}<extra></extra>")
                     for name, values in series.items()])
    fig.update_xaxes(tickangle=_slanted(labels), **_ticks(labels))
    fig.update_yaxes(range=[0, 1], title=_words(language, "share_axis"))
    fig.update_layout(barmode="group", legend=dict(orientation="h", y=1.12, x=0))
    return _layout(fig, title, height=360, zoomable=False, language=language)


NARROWEST_PANEL = 6  # tokens' worth of width a panel of contrastive_bars gets at least, so that its title fits
BAR_HEADROOM = 1.05  # the value axis reaches a little past the longest bar, which would otherwise touch the frame


def contrastive_bars(groups: dict[str, tuple[Sequence[str], Sequence[float]]], title: str, value_name: str,
                     *, language: str = ENGLISH) -> go.Figure:
    """Signed evidence per token, one panel per group of tokens ({panel title: (labels, scores)}): red bars favour
    the chosen token, blue ones the alternative, on one scale."""
    names = list(groups)
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=names, horizontal_spacing=0.08,
                        column_widths=[max(NARROWEST_PANEL, len(groups[name][0])) for name in names])
    largest = max([1e-6] + [abs(x) for _, scores in groups.values() for x in _numbers(scores)])
    for i, name in enumerate(names):
        labels, scores = groups[name]
        scores = _numbers(scores)
        fig.add_trace(go.Bar(x=list(range(len(labels))), y=scores, customdata=_escaped(labels),
                             marker={"color": ["#b2182b" if x >= 0 else "#2166ac" for x in scores]},
                             hovertemplate=f"%{{customdata}}: %{{y:+.3f}} {escape(value_name)}<extra></extra>",
                             showlegend=False), row=1, col=i + 1)
        fig.update_xaxes(tickangle=_slanted(labels), **_ticks(labels), row=1, col=i + 1)
        fig.update_yaxes(range=[-largest * BAR_HEADROOM, largest * BAR_HEADROOM], row=1, col=i + 1)
    fig.update_yaxes(title=value_name, row=1, col=1)
    return _layout(fig, title, height=380, zoomable=False, language=language)


def logit_lens_heatmap(chosen_probabilities, favourites: Sequence[Sequence[str]], produced: Sequence[str],
                       *, language: str = ENGLISH) -> go.Figure:
    """Layers (rows) x decoding steps (columns): colour the probability of the token finally chosen, text the
    layer's own favourite."""
    matrix = _matrix(chosen_probabilities)
    layers = [_words(language, "lens.layer", layer=i + 1) for i in range(len(matrix))]
    favourite = [[escape(piece) for piece in row] for row in favourites]
    steps = [_words(language, "lens.finally", step=j + 1, piece=escape(piece)) for j, piece in enumerate(produced)]
    hover = _words(language, "lens.hover", p="%{z:.3f}", favourite="%{text}")
    fig = go.Figure(go.Heatmap(
        z=matrix, x=list(range(len(produced))), y=list(range(len(layers))), zmin=0, zmax=1,
        colorscale="Greens", text=favourite, texttemplate="%{text}", textfont=dict(size=11),
        customdata=[steps for _ in layers], hovertemplate=f"%{{customdata}}<br>{hover}<extra></extra>",
        colorbar=dict(title=_words(language, "lens.colorbar"), thickness=12)))
    fig.update_xaxes(title=_words(language, "lens.steps_axis"), tickangle=_slanted(produced), **_ticks(produced))
    fig.update_yaxes(**_ticks(layers))
    return _layout(fig, _words(language, "lens.title"), height=220 + 40 * len(layers), language=language)


def pruning_curves(series: dict[str, tuple[Sequence[float], Sequence[str]]], title: str,
                   *, language: str = ENGLISH) -> go.Figure:
    """Scores against heads switched off, one line per series: {label naming the score: (scores from 0 heads
    off, heads in the order switched off)}."""
    fig = go.Figure()
    hover = _words(language, "pruning.hover", heads="%{x}", last="%{customdata}", score="%{y:.1f}")
    for label, (scores, order) in series.items():
        fig.add_trace(go.Scatter(x=list(range(len(scores))), y=list(scores), mode="lines+markers", name=label,
                                 customdata=[_words(language, "pruning.none")] + _escaped(order),
                                 hovertemplate=f"{escape(label)}<br>{hover}<extra></extra>"))
    fig.update_xaxes(title=_words(language, "pruning.heads_axis"), dtick=1)
    fig.update_yaxes(title=_words(language, "pruning.score_axis"), range=[0, 102])
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return _layout(fig, title, height=420, language=language)


# The words the page's own figures (ui/static/figures.js) write, by their key in figures.json less "figures.".
PAGE_WORDS = ("attention", "query", "key", "weight", "position", "step", "queries", "queries_rows", "keys_columns",
              "probability", "attention_axis")


def page_settings(language: str = ENGLISH) -> dict:
    """What the page's own figure builders (ui/static/figures.js) share with these, stated here once, with their
    words in ``language``; a test in Chromium holds their figures equal to these of the same numbers."""
    return {
        # as plotly's Python package expands the name: Plotly.js's own "Blues" is another scale (dark to light)
        "template": TEMPLATE, "colorscale": plotly.colors.get_colorscale(ATTENTION_COLORSCALE), "mark": MARK,
        "rowsAreSteps": ROWS_ARE_STEPS, "grid": GRID, "font": FONT, "mostTickLabels": MOST_TICK_LABELS,
        "heatmapMargin": HEATMAP_MARGIN, "labelCharPx": LABEL_CHAR_PX, "minColumnPx": MIN_COLUMN_PX,
        "laptopChartPx": LAPTOP_CHART_PX, "phoneColumns": PHONE_COLUMNS, "panelHeight": PANEL_HEIGHT,
        "panelTickFont": PANEL_TICK_FONT, "panelLabelCharPx": PANEL_LABEL_CHAR_PX,
        "mostPanelLabels": MOST_PANEL_LABELS, "mostGridColumnLabels": MOST_GRID_COLUMN_LABELS,
        "zoomButtons": ZOOM_BUTTONS, "repeatedButtons": REPEATED_BUTTONS,
        "words": {key: locale(language)[f"figures.{key}"] for key in PAGE_WORDS},
        # Plotly's own tool-bar tooltips, by its English words (Plotly.register's locale dictionary; charts.js).
        "toolBar": {words: locale(language)[key] for key, words in locale(ENGLISH).items()
                    if key.startswith("figures.toolbar.")},
        "separators": SEPARATORS.get(language), "decimalMark": DECIMAL_MARK[language],
        "percentSign": PERCENT_SIGN[language]}


