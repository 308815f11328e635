"""The Corpus tab's figures: every head's role over a corpus at a glance, and one head's queries and keys in one
picture. Numbers and labels in, a Plotly figure out; no model, no I/O, no gradio.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import plotly.graph_objects as go

from .charts import make_subplots
from .figures import apply_layout, escape, laid_out
from ..runtime.language import ENGLISH, Number, percent, said
from ..runtime.language import text as words

# Each role's colour (Okabe and Ito's palette, told apart with every common colour-vision deficiency); each cell
# also names its role in words, so no one has to tell colours apart.
ROLE_COLOURS = {"previous": "#56B4E9", "same": "#0072B2", "next": "#009E73", "aligned": "#E69F00",
                "special": "#CC79A7", "broad": "#F0E442", "mixed": "#D9D9D9"}
ROLES = tuple(ROLE_COLOURS)
# The statistic a cell shows beside its role: the share that earned it the role (a mixed head has none: its
# figures are in its hover and the table).
ROLE_FIGURE = {"previous": "previous", "same": "same", "next": "next", "aligned": "aligned", "special": "special",
               "broad": "spread"}
MAP_ROW_PX, MAP_BASE_PX = 46, 150  # the heads map's height: per layer, and for its titles and margins
TOKEN_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
OTHER_TOKENS = "#BBBBBB"
POSITION_SCALE = "Viridis"
SPACE_HEIGHT = 560
QUERY_SYMBOL, KEY_SYMBOL = "circle", "diamond-open"
COORDINATE_DIGITS = 3  # the projection's coordinates run to a few units: a thousandth is below a pixel


def role_name(role: str, language: str = ENGLISH) -> str:
    return words(language, f"corpus.role.{role}")


def heads_map(roles: Sequence[dict], kinds: Sequence[str], title: str, language: str = ENGLISH) -> go.Figure:
    """One layers x heads panel per kind of attention; each cell coloured and named by the head's role over the
    corpus, with the share behind it, and every figure in its hover. ``roles``: ``HeadRole.to_json()`` of every
    head (layers and heads from 1). A cell's customdata is ``[kind, layer, head]``: what a click opens."""
    figure = make_subplots(rows=1, cols=len(kinds), horizontal_spacing=0.06,
                           subplot_titles=[words(language, f"map.kind.{kind}") for kind in kinds])
    deepest = 1
    for column, kind in enumerate(kinds, start=1):
        heads_of = [role for role in roles if role["kind"] == kind]
        layers, heads = max(role["layer"] for role in heads_of), max(role["head"] for role in heads_of)
        deepest = max(deepest, layers)  # the encoder and the decoder may have different depths
        grid = {(role["layer"], role["head"]): role for role in heads_of}
        cells = [[grid[layer, head] for head in range(1, heads + 1)] for layer in range(1, layers + 1)]
        figure.add_trace(go.Heatmap(
            z=[[ROLES.index(cell["role"]) for cell in row] for row in cells],
            x=list(range(1, heads + 1)), y=list(range(1, layers + 1)),
            colorscale=discrete_scale([ROLE_COLOURS[role] for role in ROLES]), zmin=-0.5, zmax=len(ROLES) - 0.5,
            showscale=False, xgap=2, ygap=2,
            text=[[cell_label(cell, language) for cell in row] for row in cells], texttemplate="%{text}",
            textfont={"size": 11, "color": "#000000"},
            hovertext=[[cell_hover(cell, language) for cell in row] for row in cells],
            hovertemplate="%{hovertext}<extra></extra>",
            customdata=[[[kind, cell["layer"], cell["head"]] for cell in row] for row in cells]),
            row=1, col=column)
        figure.update_xaxes(tickvals=list(range(1, heads + 1)), title_text=words(language, "corpus.map.head"),
                            row=1, col=column)
        figure.update_yaxes(tickvals=list(range(1, layers + 1)), autorange="reversed",
                            title_text=words(language, "corpus.map.layer") if column == 1 else None,
                            row=1, col=column)
    return apply_layout(figure, title, height=MAP_BASE_PX + MAP_ROW_PX * deepest, zoomable=False, language=language)


def discrete_scale(colours: Sequence[str]) -> list:
    """A colour scale that gives each whole number from 0 its own colour, with no blend between."""
    scale = []
    for index, colour in enumerate(colours):
        scale += [[index / len(colours), colour], [(index + 1) / len(colours), colour]]
    return scale


def cell_label(cell: dict, language: str) -> str:
    name = escape(role_name(cell["role"], language))
    figure = ROLE_FIGURE.get(cell["role"])
    return name if figure is None else f"{name}<br>{said(percent(cell[figure]), language)}"


def cell_hover(cell: dict, language: str) -> str:
    """Every figure of a head, in ``language``; those its kind has not (None) left out."""
    figures = [words(language, "corpus.map.hover_head", kind=words(language, f"map.kind.{cell['kind']}"),
                     layer=cell["layer"], head=cell["head"], role=role_name(cell["role"], language))]
    for name in ("previous", "same", "next", "special", "aligned", "spread", "confidence"):
        if cell.get(name) is not None:
            figures.append(words(language, f"corpus.figure.{name}", share=said(percent(cell[name]), language)))
    figures.append(words(language, "corpus.figure.entropy", nats=said(Number(cell["entropy"], ".2f"), language)))
    alike = cell.get("most_alike")
    if alike:
        figures.append(words(language, "corpus.figure.most_alike", layer=alike["layer"], head=alike["head"]))
    return "<br>".join(escape(line) for line in figures)


def queries_and_keys(points: Sequence[Sequence[float]], query_count: int, hovers: Sequence[str],
                     positions: Sequence[float], tokens: Sequence[str], places: Sequence[list], colour_by: str,
                     title: str, language: str = ENGLISH) -> dict:
    """One head's queries (circles) and keys (open diamonds) in one projection (``head_space.joint_projection``),
    coloured by where each token stands in its sentence (``positions``, 0 the first, 1 the last) or by its token
    (the most frequent each a colour, the rest grey). ``points``: the queries' rows, then the keys'; ``hovers``,
    ``positions``, ``tokens`` and ``places`` (each point's customdata: what a click opens) in the same order.
    Built as JSON: thousands of points through Plotly's validation took 0.3 s of the 0.3 s a click may take."""
    colours = token_colours(tokens) if colour_by == "token" else None
    traces = []
    for name, part, symbol in (("queries", slice(0, query_count), QUERY_SYMBOL),
                               ("keys", slice(query_count, len(points)), KEY_SYMBOL)):
        marker = {"symbol": symbol, "size": 6, "opacity": 0.8}
        if colours is None:
            marker.update(color=[round(position, 3) for position in positions[part]], colorscale=POSITION_SCALE,
                          cmin=0, cmax=1, showscale=name == "queries",
                          colorbar={"title": {"text": words(language, "corpus.space.position")}, "thickness": 10,
                                    "tickvals": [0, 1], "ticktext": [words(language, "corpus.space.first"),
                                                                     words(language, "corpus.space.last")]})
        else:
            marker["color"] = [colours.get(token, OTHER_TOKENS) for token in tokens[part]]
        traces.append({"type": "scattergl", "mode": "markers", "name": words(language, f"corpus.space.{name}"),
                       "x": [round(point[0], COORDINATE_DIGITS) for point in points[part]],
                       "y": [round(point[1], COORDINATE_DIGITS) for point in points[part]], "marker": marker,
                       "hovertext": list(hovers[part]), "hovertemplate": "%{hovertext}<extra></extra>",
                       "customdata": list(places[part])})
    for token, colour in (colours or {}).items():  # the tokens' colours, named in the legend
        traces.append({"type": "scatter", "mode": "markers", "x": [None], "y": [None], "name": escape(token),
                       "marker": {"color": colour, "size": 8}, "hoverinfo": "skip"})
    axis = {"showticklabels": False, "zeroline": False}
    layout = {"xaxis": {**axis, "title": {"text": words(language, "corpus.space.axis", number=1)}},
              "yaxis": {**axis, "title": {"text": words(language, "corpus.space.axis", number=2)}},
              "legend": {"itemclick": False, "itemdoubleclick": False, "orientation": "h", "x": 0, "y": 1.0,
                         "yanchor": "bottom"}}
    return laid_out({"data": traces, "layout": layout}, title, height=SPACE_HEIGHT, language=language)


def token_colours(tokens: Sequence[str]) -> dict[str, str]:
    """The most frequent tokens, each with its colour (ties: the first seen)."""
    counts = Counter(tokens)
    return {token: colour for (token, _), colour in zip(counts.most_common(len(TOKEN_COLOURS)), TOKEN_COLOURS)}
