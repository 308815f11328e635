"""Pure figure builders: numbers and labels in, a figure out (as JSON, or a Plotly figure). No model, I/O, gradio.

Axes use integer positions with the token pieces as tick labels, so a repeated word ("the ... the") keeps one column
per token (Plotly merges repeated category labels); colour scales run from 0 to 1, alike across heads and layers.
The Translate tab's figures (``*_json``) take holes for the page's numbers (frames.py): their looks are here alone.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence

import plotly.colors
import plotly.graph_objects as go
from _plotly_utils.basevalidators import ColorscaleValidator  # a trace's, without loading every figure class (0.2 s)

from .frames import Hole, Outer, Panels, Template, expanded, grid_panel
from ..runtime.language import ENGLISH, Number, text
from ..runtime.language import table as locale

ATTENTION_COLORSCALE = "Blues"
MARK = "#ff7f0e"  # what a lesson or a step points at, as the step view marks the current token
ROWS_ARE_STEPS = "rows are steps"  # a heatmap trace's meta: row i is decoding step i + 1 (a click can go there)
GRID_META = "panel"  # a grid's trace's meta: its panels (frames.grid_panel), and whether its "rows" are steps
HOVER_JOINER = " → "  # between a cell's row and column in its hover text, where the page's chart text splits them
GRID = "#e5ecf6"
FONT = dict(family="Inter, Segoe UI, Helvetica, Arial, sans-serif", size=13)
MOST_TICK_LABELS = 60  # token labels an axis shows before it labels every n-th position
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
PANEL_GAP = 0.05  # empty rows and columns between panels, a share of a panel's (at least one)
# How Plotly writes the numbers of hovers and axes in each language: the decimal mark, then the thousands
# separator (English keeps Plotly's own default, unset).
SEPARATORS = {"de": ",.", "fr": ",\u202f"}


def say(language: str, key: str, /, **values) -> str:
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


def looks(title: str, height: int | None = None, zoomable: bool = True, language: str = ENGLISH) -> dict:
    """Every chart's shared looks, as its layout's fields. ``zoomable=False`` for charts with nothing to zoom into
    (bar charts of a few values): a stray drag then zooms nothing. Numbers as ``language`` writes them (a decimal
    comma in German and French). Plain colours instead of a named template: a template costs ~10 ms per figure to
    build and is sent to the browser with every figure."""
    layout = {"template": TEMPLATE, "title": {"text": title, "x": 0.01, "font": {"size": 15}}, "font": FONT,
              "paper_bgcolor": "white", "plot_bgcolor": "white", "margin": {"l": 10, "r": 10, "t": 60, "b": 10},
              "modebar": {"remove": REPEATED_BUTTONS + ([] if zoomable else ZOOM_BUTTONS)}}
    if height is not None:
        layout["height"] = height
    if not zoomable:
        layout["dragmode"] = False
    if language in SEPARATORS:
        layout["separators"] = SEPARATORS[language]
    return layout


AXIS_LOOKS = {"gridcolor": GRID, "zerolinecolor": GRID}
AXIS_KEY = re.compile(r"^[xy]axis[0-9]*$")


def apply_layout(fig: go.Figure, title: str, height: int | None = None, zoomable: bool = True,
                 language: str = ENGLISH) -> go.Figure:
    """``looks`` on a Plotly figure."""
    layout = looks(title, height, zoomable, language)
    fig.layout.template = layout.pop("template")  # in place of Plotly's default (an update would merge the two)
    fig.update_layout(**layout)
    fig.update_xaxes(**AXIS_LOOKS)
    fig.update_yaxes(**AXIS_LOOKS)
    return fig


def laid_out(figure: dict, title: str, height: int | None = None, zoomable: bool = True,
             language: str = ENGLISH) -> dict:
    """``looks`` on a figure built as JSON (``{"data": [...], "layout": {...}}``)."""
    layout = {**figure["layout"], **looks(title, height, zoomable, language)}
    for key in [key for key in layout if AXIS_KEY.match(key)]:
        layout[key] = {**layout[key], **AXIS_LOOKS}
    return {"data": figure["data"], "layout": layout}


def plotly_figure(figure: dict) -> go.Figure:
    """A figure built as JSON as a Plotly figure (for exports, images and the charts sent whole)."""
    return go.Figure(expanded(figure))


@functools.cache
def colorscale(name: str) -> list:
    """A named colour scale as a trace expands it (Plotly.js's own "Blues" is another scale), without a trace."""
    return [list(step) for step in ColorscaleValidator("colorscale", "heatmap").validate_coerce(name)]


def escape(label: str) -> str:
    """Plotly renders a subset of HTML in text: "</s>" would vanish and "<s>" strike through the rest."""
    return str(label).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escaped_all(labels: Sequence[str]) -> list[str]:
    return [escape(label) for label in labels]


def tick_labels(labels: Sequence[str], most: int = MOST_TICK_LABELS) -> dict:
    """Every position labelled, or every n-th one when more would overlap into a smear (hover names them all)."""
    positions = tick_positions(len(labels), most)
    return dict(tickmode="array", tickvals=positions, ticktext=[escape(labels[i]) for i in positions])


def tick_positions(count: int, most: int = MOST_TICK_LABELS) -> list[int]:
    return list(range(0, count, max(1, -(-count // most))))


def slant_room(labels: Sequence[str], angle: int = -45) -> int:
    """Tick angle for token labels along x: upright text takes the least width once a sentence gets long."""
    return -90 if len(labels) > 30 else angle


def as_matrix(values) -> list[list[float]] | Hole:
    """A nested list from a tensor, array or list (figures stay independent of torch); a hole as it is."""
    if isinstance(values, Hole):
        return values
    return values.tolist() if hasattr(values, "tolist") else [list(row) for row in values]


def _hover_text(query_labels: Sequence[str], key_labels: Sequence[str], rows_are_steps: bool,
                language: str = ENGLISH) -> Outer:
    """Each cell's row and column, named for the hover (its value comes from Plotly's own ``%{z}``, so maps of one
    sentence share their text and a change of head sends only the numbers). Positions count from 0, as in the
    positional encoding; decoding steps count from 1, as on the step slider."""
    rows = [say(language, "step", step=i + 1, label=escape(label)) if rows_are_steps
            else say(language, "position", position=i, label=escape(label)) for i, label in enumerate(query_labels)]
    columns = [say(language, "position", position=j, label=escape(label)) for j, label in enumerate(key_labels)]
    return Outer(tuple(rows), tuple(columns), HOVER_JOINER)


def attention_heatmap(weights, query_labels: Sequence[str], key_labels: Sequence[str], title: str | None = None,
                      query_title: str | None = None, key_title: str | None = None, rows_are_steps: bool = False,
                      subtitle: str = "", value_name: str | None = None, largest: float = 1.0,
                      signed: bool = False, marked_row: int | None = None, *, language: str = ENGLISH) -> go.Figure:
    """One attention map (queries x keys) as a heatmap: ``heatmap_json``'s figure as a Plotly figure."""
    return plotly_figure(heatmap_json(weights, query_labels, key_labels, title, query_title, key_title,
                                      rows_are_steps, subtitle, value_name, largest, signed, marked_row,
                                      language=language))


def heatmap_json(weights, query_labels: Sequence[str], key_labels: Sequence[str], title: str | None = None,
                 query_title: str | None = None, key_title: str | None = None, rows_are_steps: bool = False,
                 subtitle: str = "", value_name: str | None = None, largest: float = 1.0, signed: bool = False,
                 marked_row: int | Hole | None = None, *, language: str = ENGLISH) -> dict:
    """One attention map (queries x keys) as a heatmap; rows are queries, columns keys.

    ``value_name`` and ``largest`` (the top of the colour scale) for maps of other quantities than weights;
    ``signed`` for values either side of 0 (blue below, red above, white at 0). ``marked_row`` (0-based) is
    outlined: the step a lesson or the step view is on.

    ``rows_are_steps``: row i is what decoding step i + 1 produced (decoder self- and cross-attention); the trace
    says so in its ``meta``, so that a click on a row can go to that step.
    ``subtitle`` (which layer and head) leads the smaller second title line, which also names the columns: an
    axis title above the key labels would collide with the title on a narrow screen.
    Unnamed (None), the title, the axes and the values are the words of ``language`` for attention, query, key and
    weight. ``weights`` and ``marked_row`` may be holes the page fills (ui/drawing/frames.py).
    """
    title = say(language, "attention") if title is None else title
    query_title, key_title = _axes_titles(query_title, key_title, language)
    value_name = say(language, "weight") if value_name is None else value_name
    matrix = as_matrix(weights)
    if not isinstance(matrix, Hole) and (len(matrix) != len(query_labels)
                                         or (matrix and len(matrix[0]) != len(key_labels))):
        raise ValueError(f"attention of shape {len(matrix)}x{len(matrix[0]) if matrix else 0} does not match "
                         f"{len(query_labels)} query and {len(key_labels)} key labels")
    trace = {"type": "heatmap", "z": matrix, "x": list(range(len(key_labels))), "y": list(range(len(query_labels))),
             "zmin": -largest if signed else 0, "zmax": largest,
             "colorscale": colorscale("RdBu_r" if signed else ATTENTION_COLORSCALE),
             "text": _hover_text(query_labels, key_labels, rows_are_steps, language),
             "hovertemplate": f"%{{text}}<br>{value_name} %{{z:.4f}}<extra></extra>",
             "colorbar": {"title": {"text": value_name}, "thickness": 12}}
    if rows_are_steps:
        trace["meta"] = ROWS_ARE_STEPS
    layout = {"xaxis": {"side": "top", "tickangle": slant_room(key_labels), "automargin": False,
                        **tick_labels(key_labels)},
              "yaxis": {"title": {"text": say(language, "queries", name=query_title)}, "autorange": "reversed",
                        "automargin": False, **tick_labels(query_labels)}}
    if marked_row is not None:
        layout["shapes"] = [{"type": "rect", "x0": -0.5, "x1": len(key_labels) - 0.5, "y0": marked_row - 0.5,
                             "y1": marked_row + 0.5, "line": {"color": MARK, "width": 3},
                             "fillcolor": "rgba(0,0,0,0)"}]
    figure = laid_out({"data": [trace], "layout": layout}, heatmap_title(title, subtitle, key_title,
                                                                         language=language),
                      height=min(1400, 230 + 26 * len(query_labels)), language=language)  # rows stay >= 18 px
    # Fixed margins: automatic ones make Plotly redraw in a loop with rotated labels on top.
    figure["layout"]["margin"] = {"l": HEATMAP_MARGIN["l"], "r": HEATMAP_MARGIN["r"], "t": _top_margin(key_labels),
                                  "b": 20}
    if (width := _readable_width(len(key_labels))) is not None:
        figure["layout"]["width"] = width
    return figure


def _axes_titles(query_title: str | None, key_title: str | None, language: str) -> tuple[str, str]:
    """What a map's rows and columns are called: as given, else query and key in ``language``."""
    return (say(language, "query") if query_title is None else query_title,
            say(language, "key") if key_title is None else key_title)


def attention_table(weights, query_labels: Sequence[str], key_labels: Sequence[str], title: str,
                    query_title: str | None = None, key_title: str | None = None, subtitle: str = "",
                    marked_row: int | None = None, axes_note: str = "", *, language: str = ENGLISH) -> str:
    """One attention map as an HTML table whose cells are coloured as the heatmap's: for a phone, which never loads
    Plotly.js (4.8 MB for each phone of a class). Each cell's weight is its text, hidden from sight and read by
    screen readers; the marked row is outlined (page.css, ``.attention-table``). ``axes_note`` names the axes
    (default: from ``query_title`` and ``key_title``, in ``language``)."""
    query_title, key_title = _axes_titles(query_title, key_title, language)
    matrix = as_matrix(weights)
    colours = plotly.colors.sample_colorscale(ATTENTION_COLORSCALE, [min(max(w, 0.0), 1.0) for row in matrix
                                                                     for w in row])
    head = "".join(f'<th scope="col"><span>{escape(label)}</span></th>' for label in key_labels)
    rows = []
    for i, (label, row) in enumerate(zip(query_labels, matrix)):
        cells = "".join(f'<td style="background:{colours[i * len(row) + j]}"><span class="cell-value">'
                        f"{Number(weight, '.0%').in_(language)}</span></td>" for j, weight in enumerate(row))
        marked = ' class="marked-row"' if i == marked_row else ""
        rows.append(f'<tr{marked}><th scope="row">{escape(label)}</th>{cells}</tr>')
    axes_note = axes_note or say(language, "rows_and_columns", rows=query_title, columns=key_title)
    note = " · ".join(part for part in (subtitle, axes_note) if part)
    return (f'<figure class="attention-table"><figcaption>{escape(title)}<br><small>{escape(note)}</small>'
            f'</figcaption><table><thead><tr><td></td>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
            "</figure>")


def _top_margin(labels: Sequence[str]) -> int:
    """Room above a heatmap for its two title lines and its slanted column labels, as long as the longest label
    needs (a fixed margin for the longest possible one left a blank band over short words)."""
    longest = max((len(label) for label in labels), default=1)
    slant = abs(math.sin(math.radians(slant_room(labels))))
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
    return titled_with(title, subtitle, say(language, "keys_columns", name=key_title))


def titled_with(title: str, *notes: str) -> str:
    """A title with a smaller second line of notes (the empty ones left out)."""
    line = " · ".join(note for note in notes if note)
    return f"{title}<br><sup>{line}</sup>" if line else title


def attention_grid(weights, query_labels: Sequence[str], key_labels: Sequence[str], title: str,
                   row_names: Sequence[str], column_names: Sequence[str], query_title: str | None = None,
                   key_title: str | None = None, rows_are_steps: bool = False, subtitle: str = "",
                   *, language: str = ENGLISH) -> go.Figure:
    """Small multiples: ``grid_json``'s figure as a Plotly figure."""
    return plotly_figure(grid_json(weights, query_labels, key_labels, title, row_names, column_names, query_title,
                                   key_title, rows_are_steps, subtitle, language=language))


def grid_json(weights, query_labels: Sequence[str], key_labels: Sequence[str], title: str,
              row_names: Sequence[str], column_names: Sequence[str], query_title: str | None = None,
              key_title: str | None = None, rows_are_steps: bool = False, subtitle: str = "",
              *, language: str = ENGLISH) -> dict:
    """Small multiples: ``weights`` nested [row][column][query][key], e.g. heads of one layer or layers x heads,
    drawn as one heatmap whose panels lie a few empty rows and columns apart (``frames.Panels``): Plotly draws a
    heatmap per subplot two to three times slower (Chromium here: 58 against 24 ms for 3 x 4 panels of 22 x 20).

    Rows are named on the right and columns on top, once each: a title over every panel ("layer 1 · head 1")
    runs into its neighbours on a phone; the hover names the panel. Labels go along the left and bottom edges, and
    a long sentence labels every n-th token, as many as a panel has room for (hover names every position). The
    trace's ``meta`` says how big a panel is and how far apart (``GRID_META``), so that the page can tell which
    panel, row and column a cell is (a click on a row goes to its step; the chart as text reads each panel).
    """
    query_title, key_title = _axes_titles(query_title, key_title, language)
    weight = say(language, "weight")
    hover = _hover_text(query_labels, key_labels, rows_are_steps, language)
    rows, columns, named = len(row_names), len(column_names), any(row_names)
    queries, keys = len(query_labels), len(key_labels)
    apart = (max(1, round(queries * PANEL_GAP)), max(1, round(keys * PANEL_GAP)))
    down, across = queries + apart[0], keys + apart[1]  # from one panel's first row (column) to the next one's
    right = 0.98 if named else 1.0

    def panel_hover(r: int, c: int) -> Outer:
        name = " · ".join(part for part in (row_names[r], column_names[c]) if part)
        return Outer(tuple(f"{name}<br>{row}" for row in hover.rows) if name else hover.rows, hover.columns,
                     hover.joiner)

    def repeated(ticks: dict, count: int, period: int) -> dict:
        return dict(tickmode="array", tickvals=[n * period + v for n in range(count) for v in ticks["tickvals"]],
                    ticktext=ticks["ticktext"] * count)
    trace = {"type": "heatmap", "z": Panels(tuple(tuple(as_matrix(weights[r][c]) for c in range(columns))
                                                  for r in range(rows)), None, apart),
             "zmin": 0, "zmax": 1, "colorscale": colorscale(ATTENTION_COLORSCALE), "hoverongaps": False,
             "colorbar": {"title": {"text": weight}, "thickness": 10},
             "text": Panels(tuple(tuple(panel_hover(r, c) for c in range(columns)) for r in range(rows)), "", apart),
             "hovertemplate": f"%{{text}}<br>{weight} %{{z:.4f}}<extra></extra>",
             "meta": {GRID_META: grid_panel(queries, keys, *apart),
                      **({"rows": ROWS_ARE_STEPS} if rows_are_steps else {})}}
    key_angle = slant_room(key_labels, -60)
    tick_font = {"size": PANEL_TICK_FONT}
    bare = {"tickfont": tick_font, "automargin": False, "showgrid": False, "zeroline": False}
    layout = {"xaxis": {**bare, "domain": [0, right], "tickangle": key_angle, **repeated(
                  tick_labels(key_labels, most=max(MOST_PANEL_LABELS, MOST_GRID_COLUMN_LABELS // columns)), columns,
                  across)},
              "yaxis": {**bare, "autorange": "reversed",
                        **repeated(tick_labels(query_labels, most=MOST_PANEL_LABELS), rows, down)}}
    note = {"font": tick_font, "showarrow": False}
    layout["annotations"] = [{**note, "text": name, "xref": "x", "x": c * across + (keys - 1) / 2,
                              "xanchor": "center", "yref": "paper", "y": 1.0, "yanchor": "bottom"}
                             for c, name in enumerate(column_names)]
    if named:
        layout["annotations"] += [{**note, "text": name, "textangle": 90, "xref": "paper", "x": right,
                                   "xanchor": "left", "yref": "y", "y": r * down + (queries - 1) / 2,
                                   "yanchor": "middle"} for r, name in enumerate(row_names)]
    figure = laid_out({"data": [trace], "layout": layout},
                      titled_with(title, subtitle, say(language, "queries_rows", name=query_title),
                                  say(language, "keys_columns", name=key_title)),
                      height=90 + PANEL_HEIGHT * rows, language=language)
    figure["layout"]["margin"].update(_grid_margin(query_labels, key_labels, key_angle))
    return figure


def as_numbers(values) -> list[float]:
    return values.tolist() if hasattr(values, "tolist") else [float(value) for value in values]


def top_k_bar(pieces: Sequence[str], probabilities: Sequence[float], chosen: str | None = None,
              title: str | None = None, *, language: str = ENGLISH) -> go.Figure:
    """Horizontal bars of the top-k next tokens (``top_k_json``) as a Plotly figure."""
    title = say(language, "candidates.title") if title is None else title
    return plotly_figure(top_k_json(candidates(pieces, probabilities, chosen, language), len(pieces), title,
                                    language=language))


CANDIDATES = ("probabilities", "ticktext", "pieces", "colors")  # what ``candidates`` gives a step


def candidates(pieces: Sequence[str], probabilities: Sequence[float], chosen: str | None,
               language: str = ENGLISH) -> dict:
    """What the top-k chart of one step shows: each piece labelled "piece  12.3%" beside the axis (a label on or by
    a bar runs into a short bar's neighbour), the chosen one highlighted."""
    probabilities = as_numbers(probabilities)
    labels = [f"{piece}  {Number(p, '.1%').in_(language)}" for piece, p in zip(pieces, probabilities)]
    return {"probabilities": probabilities, "ticktext": tick_labels(labels)["ticktext"],
            "pieces": escaped_all(pieces), "colors": ["#d62728" if piece == chosen else "#1f77b4" for piece in pieces]}


def top_k_json(shown: dict, count: int, title: str | Template, *, language: str = ENGLISH) -> dict:
    """Horizontal bars of ``count`` next tokens, as ``candidates`` gives them (or holes the page fills)."""
    trace = {"type": "bar", "orientation": "h", "hovertemplate": "%{customdata}: %{x:.4f}<extra></extra>",
             "x": shown["probabilities"], "y": list(range(count)), "customdata": shown["pieces"],
             "marker": {"color": shown["colors"]}}
    layout = {"yaxis": {"autorange": "reversed", "ticklabelstandoff": 6, "tickmode": "array",
                        "tickvals": tick_positions(count), "ticktext": shown["ticktext"]},
              "xaxis": {"range": [0, 1], "title": {"text": say(language, "probability")}}}
    return laid_out({"data": [trace], "layout": layout}, title, height=120 + 34 * count, zoomable=False,
                    language=language)


def source_attention_bar(weights: Sequence[float], source_labels: Sequence[str], title: str,
                         *, language: str = ENGLISH) -> go.Figure:
    """Where one decoding step looked in the source (``source_attention_json``) as a Plotly figure."""
    return plotly_figure(source_attention_json(as_numbers(weights), source_labels, title, language=language))


def source_attention_json(weights: list[float] | Hole, source_labels: Sequence[str], title: str | Template,
                          *, language: str = ENGLISH) -> dict:
    """Where one decoding step looked in the source: one bar per source token."""
    trace = {"type": "bar", "x": list(range(len(source_labels))), "y": weights,
             "marker": {"colorscale": colorscale(ATTENTION_COLORSCALE), "cmin": 0, "cmax": 1, "color": weights,
                        "line": {"color": "#444", "width": 0.5}},
             "customdata": escaped_all(source_labels), "hovertemplate": "%{customdata}: %{y:.4f}<extra></extra>"}
    layout = {"xaxis": {"tickangle": slant_room(source_labels), **tick_labels(source_labels)},
              "yaxis": {"range": [0, 1], "title": {"text": say(language, "attention_axis")}}}
    return laid_out({"data": [trace], "layout": layout}, title, height=320, zoomable=False, language=language)


def token_probability_bar(pieces: Sequence[str], probabilities: Sequence[float], title: str,
                          *, language: str = ENGLISH) -> go.Figure:
    """The probability the model gave each token of a (forced) target."""
    positions = list(range(len(pieces)))
    fig = go.Figure(go.Bar(x=positions, y=list(probabilities), marker_color="#2ca02c", customdata=escaped_all(pieces),
                           hovertemplate="%{customdata}: %{y:.4f}<extra></extra>"))
    fig.update_xaxes(tickangle=slant_room(pieces), **tick_labels(pieces))
    fig.update_yaxes(range=[0, 1], title=say(language, "probability"))
    return apply_layout(fig, title, height=320, zoomable=False, language=language)


@functools.cache
def known() -> dict:
    """Parts of many figures the page holds in its config, which frames leave to it (ui/drawing/frames.py, ``framed``)."""
    return {"template": TEMPLATE, "colorscale": colorscale(ATTENTION_COLORSCALE)}


def page_settings(language: str = ENGLISH) -> dict:
    """What the page's figures need besides their frames, in its config: the parts frames leave to the page, the
    mark's colour (its styles outline with it too), a hover text's joiner and Plotly's own tool-bar tooltips in
    ``language``, by their English words (Plotly.register's locale dictionary; charts.js)."""
    return {"known": known(), "mark": MARK, "hoverJoiner": HOVER_JOINER,
            "toolBar": {words: locale(language)[key] for key, words in locale(ENGLISH).items()
                        if key.startswith("figures.toolbar.")}}
