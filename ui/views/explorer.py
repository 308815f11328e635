"""What the page's explorer (ui/static/explorer.js) draws the Translate tab from: each view's figure as the server
draws it (for exports, the API and the tests), the same figure as a frame the page fills (ui/drawing/frames.py), and a
translation's numbers that fill them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import plotly.graph_objects as go
import torch

from transformer.paper.translation import Translation

from ..drawing import figures
from ..drawing.frames import Template, expanded, framed, hole
from ..runtime.language import ENGLISH, text
from .choices import ATTENTION_KINDS, VIEWS, kind_key
from ..runtime.numbers import clamp
from .translate import (MOST_PAGE_NUMBERS, WEIGHT_DECIMALS, attention_axes, attention_tensor, map_block, one_map,
                        step_caption, titles)


# Which figure draws each view, by whether the heads are shown one by one or averaged: one map, a layer's heads
# side by side, or every layer's. The page picks the frame it fills by it (ui/static/explorer.js).
VIEW_FIGURES = {VIEWS[0]: {"heads": "map", "mean": "map"}, VIEWS[1]: {"heads": "layerHeads", "mean": "map"},
                VIEWS[2]: {"heads": "everyHead", "mean": "everyMean"}}
FIGURES = ("map", "layerHeads", "everyHead", "everyMean")


def attention_figure(translation: Translation, kind: str, view: str = VIEWS[0], layer: int = 1, head: int = 1,
                     average_heads: bool = False, marked_step: int | None = None,
                     language: str = ENGLISH) -> go.Figure:
    """The attention heatmap(s) for the selectors of the Translate tab (layer and head are 1-based), in
    ``language``. The page fills the same figure's frame (``view_frame``) with ``page_numbers``; these are for
    exports, the API and the tests that hold the two equal."""
    return figures.plotly_figure(attention_json(translation, kind, view, layer, head, average_heads, marked_step,
                                                language))


def attention_json(translation: Translation, kind: str, view: str = VIEWS[0], layer: int = 1, head: int = 1,
                   average_heads: bool = False, marked_step: int | None = None, language: str = ENGLISH) -> dict:
    """``attention_figure`` as JSON, as Plotly reads it."""
    kind = kind_key(kind)
    shown_layer = clamp(layer, 1, attention_tensor(translation, kind).shape[0])
    shown_head = None if average_heads else head

    def drawn(layer: int | None = None, head: int | None = None) -> torch.Tensor:
        """A map as one_map draws it (head 0: the mean of the heads); None: the one shown."""
        return one_map(translation, kind, shown_layer if layer is None else layer,
                       shown_head if head is None else head or None)[0]
    which = one_map(translation, kind, shown_layer, shown_head, language)[1]
    rows = attention_axes(translation, kind)[0]
    marked = None if kind == "encoder" or marked_step is None else clamp(marked_step, 1, len(rows)) - 1
    figure = VIEW_FIGURES[view]["mean" if average_heads else "heads"]
    return expanded(_kind_figure(translation, kind, figure, drawn, which, shown_layer, marked, language))


def view_frame(translation: Translation, kind: str, figure: str, language: str = ENGLISH) -> dict:
    """``figure`` (of ``FIGURES``) of ``kind`` as a frame the page fills (ui/drawing/frames.py) with the maps of the layer and
    head it shows (``map``), their subtitle (``which``), the ``layer`` and the ``step`` it outlines."""
    kind = kind_key(kind)
    marked = None if kind == "encoder" else hole("step") - 1
    built = _kind_figure(translation, kind, figure, lambda layer=None, head=None: hole("map", layer=layer, head=head),
                         "{which}", "{layer}", marked, language)
    built["layout"]["title"]["text"] = Template(built["layout"]["title"]["text"])
    return framed(built, figures.known())


def _kind_figure(translation: Translation, kind: str, figure: str, maps: Callable, which: str, layer, marked_row,
                 language: str) -> dict:
    """One of ``FIGURES`` of ``kind``: ``maps(layer, head)`` draws a map (None: the layer or head shown; head 0: the
    mean of the heads), ``which`` names the map shown, ``layer`` the layer whose heads are shown side by side."""
    layers, heads = attention_tensor(translation, kind).shape[:2]
    rows, columns, row_title, column_title = attention_axes(translation, kind, language)
    name, named = text(language, f"map.kind.{kind}"), titles(language)
    labels = dict(query_title=row_title, key_title=column_title, rows_are_steps=kind != "encoder", language=language)
    if figure == "map":
        return figures.heatmap_json(maps(), rows, columns, name, subtitle=which, marked_row=marked_row, **labels)
    head_names = [named["head"].format(head=h) for h in range(1, heads + 1)]
    layer_names = [named["layer"].format(layer=l) for l in range(1, layers + 1)]
    if figure == "layerHeads":
        return figures.grid_json([[maps(head=h) for h in range(1, heads + 1)]], rows, columns, name, [""],
                                 head_names, subtitle=named["layerHeads"].format(layer=layer), **labels)
    if figure == "everyMean":
        return figures.grid_json([[maps(l, 0)] for l in range(1, layers + 1)], rows, columns, name, layer_names,
                                 [named["mean"]], subtitle=named["everyMean"], **labels)
    return figures.grid_json([[maps(l, h) for h in range(1, heads + 1)] for l in range(1, layers + 1)], rows,
                             columns, name, layer_names, head_names, subtitle=named["everyHead"], **labels)


# --- what the page draws from ------------------------------------------------------------------------

def page_numbers(translation: Translation, kind: str = "cross", layer: int = 1, most: int | None = None,
                 sent: int = 0, language: str = ENGLISH, source_share: list[float] | None = None,
                 figure: str = "map") -> dict:
    """A translation's numbers, from which the page draws every view of the Translate tab (ui/static/explorer.js):
    the pieces, each step's candidates and caption, and the attention maps of every layer and head and their mean,
    as ``WEIGHT_DECIMALS``-decimal fixed-point numbers (the 4 decimals the page shows) in base64 (``map_block``).

    The maps travel in blocks of one kind and layer. Where all of them hold more than ``most`` numbers (default
    ``MOST_PAGE_NUMBERS``: a long sentence on a large model), those the page shows at once come whatever their size
    (``kind`` at ``layer``, and the cross-attention there for the step view), then the others in order while they
    fit; the page asks for the rest as it shows them (``map_block``). ``sent`` numbers the answer: the same
    sentence translated again is new to the page. Axis names and captions in ``language``; a step's caption says
    its ``source_share`` where it is given.

    The figures come as frames the page fills (``view_frame``, ``step_frames``): each kind's one map, and the
    ``figure`` (of ``FIGURES``) shown of ``kind``; the page asks for another as it shows it (``view_frame``)."""
    heads = translation.cross_attention.shape[1]
    maps = {}
    for name in ATTENTION_KINDS:
        rows, columns, row_title, column_title = attention_axes(translation, name, language)
        weights = attention_tensor(translation, name)
        maps[name] = {"layers": weights.shape[0], "rows": list(rows), "columns": list(columns),
                      "rowTitle": row_title, "columnTitle": column_title, "blocks": [None] * weights.shape[0]}
    block_numbers = {name: (heads + 1) * len(m["rows"]) * len(m["columns"]) for name, m in maps.items()}
    kind = kind_key(kind)
    shown = [(kind, clamp(layer, 1, maps[kind]["layers"])), ("cross", clamp(layer, 1, maps["cross"]["layers"]))]
    every = [(name, l) for name in maps for l in range(1, maps[name]["layers"] + 1)]
    budget = MOST_PAGE_NUMBERS if most is None else most
    for name, chosen in dict.fromkeys([*shown, *every]):
        if (name, chosen) in shown or block_numbers[name] <= budget:
            maps[name]["blocks"][chosen - 1] = map_block(translation, name, chosen)
            budget -= block_numbers[name]
    steps = [{**figures.candidates(translation.top_pieces[index], translation.top_probs[index],
                                   translation.predicted_pieces[index], language),
              "caption": step_caption(translation, index, language, source_share)}
             for index in range(translation.num_steps)]
    frames = {name: {shown: None for shown in FIGURES} for name in maps}
    for name, shown in dict.fromkeys([*((name, "map") for name in maps), (kind, figure)]):
        frames[name][shown] = view_frame(translation, name, shown, language)
    return {"sent": sent, "heads": heads, "decimals": WEIGHT_DECIMALS, "source": list(translation.source_pieces),
            "produced": list(translation.predicted_pieces), "forced": translation.forced_steps, "maps": maps,
            "steps": steps, "frames": frames,
            **step_frames(translation.source_pieces, len(translation.top_pieces[0]), language)}


def step_frames(source: list[str], candidates: int, language: str = ENGLISH) -> dict:
    """The step view's two figures as frames the page fills at each step (ui/drawing/frames.py): the top ``candidates``
    (with ``figures.candidates``' values and the ``step``), and where the step looked over the ``source`` pieces
    (its ``row`` of weights, the ``step`` and ``which`` map)."""
    return _step_frames(tuple(source), candidates, language)


@functools.lru_cache(maxsize=16)  # a search under way sends them with each step it shows
def _step_frames(source: tuple[str, ...], candidates: int, language: str) -> dict:
    named = titles(language)
    shown = {name: hole(name) for name in figures.CANDIDATES}
    return {"candidatesFrame": framed(figures.top_k_json(shown, candidates, Template(named["candidates"]),
                                                         language=language), figures.known()),
            "sourcesFrame": framed(figures.source_attention_json(hole("row"), source,
                                                                 Template(named["sourceAttention"]),
                                                                 language=language), figures.known())}


