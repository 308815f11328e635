"""A figure with holes: what the page needs to draw a view many times (another head, layer or step) from numbers,
its every rule (sizes, labels, ticks, spacing, titles, colours, hover text) decided by the server once.

A figure builder of ``ui/drawing/figures.py`` is called with a ``Hole`` where a value is to come from the page (a map's
weights, the step outlined, a step's candidates) and with a ``{placeholder}`` in a title; ``framed`` turns what it
builds into JSON the page fills (ui/static/figures.js, ``fill``) and ``filled`` is the same fill here, which the
tests hold equal to the figure the server draws of the same numbers. What a frame holds besides plain JSON:

- ``{"$": name, "plus": k, ...}``, a hole: the value ``name`` (plus ``k``), or, where that value is a function, what
  it answers for the hole's other fields (a map of ``layer`` and ``head``: the page's own weights);
- ``{"$template": text}``: a text whose ``{placeholders}`` are filled with the values of their names;
- ``{"$outer": [rows, columns, joiner]}``: every row's text joined to every column's (a heatmap's hover text, a
  cell each: sent as its rows and columns);
- ``{"$panels": [[panel, ...], ...], "gap": value, "apart": [rows, columns]}``: matrices laid out as one, each row
  of panels side by side and the rows one under the other, ``apart`` rows and columns of ``gap`` between neighbours
  (a grid of small multiples drawn as one heatmap: a map's weights, or its hover texts);
- ``{"$ref": i}``: the frame's ``shared[i]``, a part the figure repeats, sent once.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field

REPEATED_CHARACTERS = 64  # a part repeated in a figure is sent once when its JSON is at least this long
PLACEHOLDER = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Hole:
    """Where a value comes from the page: ``name``'s value plus ``plus``; ``where`` names which one when the value
    is a function (``layer``, ``head``: None for the ones the page shows)."""

    name: str
    plus: float = 0
    where: tuple[tuple[str, object], ...] = field(default=())

    def __add__(self, number: float) -> Hole:
        return Hole(self.name, self.plus + number, self.where)

    def __sub__(self, number: float) -> Hole:
        return self + -number

    def as_json(self) -> dict:
        return {"$": self.name, **dict(self.where), **({"plus": self.plus} if self.plus else {})}


def hole(name: str, **where) -> Hole:
    """A hole for ``name``'s value; ``where`` given (None: left to the page)."""
    return Hole(name, where=tuple((key, value) for key, value in where.items() if value is not None))


@dataclass(frozen=True)
class Template:
    """A text with ``{placeholders}`` the page fills (a title naming the layer and head shown)."""

    text: str


@dataclass(frozen=True)
class Outer:
    """A table of texts, each row's joined to each column's: ``rows[i] + joiner + columns[j]`` in cell (i, j)."""

    rows: tuple[str, ...]
    columns: tuple[str, ...]
    joiner: str

    def table(self) -> list[list[str]]:
        return [[f"{row}{self.joiner}{column}" for column in self.columns] for row in self.rows]


@dataclass(frozen=True)
class Panels:
    """Matrices laid out as one (``panels[r][c]``, each a nested list, a hole or an ``Outer``), ``apart`` rows and
    columns of ``gap`` between neighbours: one heatmap draws a grid of them far faster than a heatmap per panel
    (a subplot each)."""

    panels: tuple[tuple[object, ...], ...]
    gap: object = None
    apart: tuple[int, int] = (1, 1)


def grid_panel(queries: int, keys: int, rows_apart: int, columns_apart: int) -> dict:
    """A grid's panels by name, as its trace's meta carries them for the page (ui/static/page.js, chart_text.js):
    each panel's size, and the rows and columns between panels."""
    return {"queries": queries, "keys": keys, "rowsApart": rows_apart, "columnsApart": columns_apart}


def joined(panels: list[list[list[list]]], gap=None, apart: tuple[int, int] = (1, 1)) -> list[list]:
    """``Panels`` written out, as the page's ``joined`` writes them (ui/static/figures.js)."""
    rows_apart, columns_apart = apart
    lines: list[list] = []
    for r, row in enumerate(panels):
        for i in range(len(row[0])):
            line: list = []
            for c, panel in enumerate(row):
                line.extend([gap] * (columns_apart if c else 0) + list(panel[i]))
            if r and not i:
                lines.extend([gap] * len(line) for _ in range(rows_apart))
            lines.append(line)
    return lines


def expanded(figure):
    """A figure built without holes as Plotly reads it: every ``Outer`` and ``Panels`` written out."""
    if isinstance(figure, Outer):
        return figure.table()
    if isinstance(figure, Panels):
        return joined([[expanded(panel) for panel in row] for row in figure.panels], figure.gap, figure.apart)
    if isinstance(figure, dict):
        return {key: expanded(value) for key, value in figure.items()}
    if isinstance(figure, list):
        return [expanded(value) for value in figure]
    if isinstance(figure, (Hole, Template)):
        raise TypeError(f"a figure with a hole is drawn by filling it: {figure}")
    return figure


def _encoded(figure):
    """Holes, templates and tables as the page reads them; the rest as it is."""
    if isinstance(figure, Hole):
        return figure.as_json()
    if isinstance(figure, Template):
        return {"$template": figure.text}
    if isinstance(figure, Outer):
        return {"$outer": [list(figure.rows), list(figure.columns), figure.joiner]}
    if isinstance(figure, Panels):
        return {"$panels": [[_encoded(panel) for panel in row] for row in figure.panels], "gap": figure.gap,
                "apart": list(figure.apart)}
    if isinstance(figure, dict):
        return {key: _encoded(value) for key, value in figure.items()}
    if isinstance(figure, (list, tuple)):
        return [_encoded(value) for value in figure]
    return figure


def _has_hole(part) -> bool:
    if isinstance(part, dict):
        return "$" in part or "$template" in part or any(_has_hole(value) for value in part.values())
    if isinstance(part, list):
        return any(_has_hole(value) for value in part)
    return False


def framed(figure: dict, known: dict | None = None) -> dict:
    """A figure built with holes as the page fills it: ``{"figure": ..., "shared": [...]}``, each part that holds
    no hole and repeats (at least ``REPEATED_CHARACTERS`` of JSON) sent once in ``shared``, and each part equal to
    one of the values the page ``known``s already (its config: ``figures.known()``) a hole of that name."""
    known_parts = {json.dumps(_encoded(value), sort_keys=True): name for name, value in (known or {}).items()}

    def without_known(part):
        if isinstance(part, (dict, list)) and (name := known_parts.get(json.dumps(part, sort_keys=True))):
            return {"$": name}
        if isinstance(part, dict):
            return {key: without_known(value) for key, value in part.items()}
        if isinstance(part, list):
            return [without_known(value) for value in part]
        return part
    encoded = without_known(_encoded(figure))
    seen: Counter = Counter()

    def count(part) -> None:
        if isinstance(part, (dict, list)):
            if not _has_hole(part):
                seen[json.dumps(part, sort_keys=True)] += 1
            for value in (part.values() if isinstance(part, dict) else part):
                count(value)
    count(encoded)
    shared: list = []
    index: dict[str, int] = {}

    def compact(part):
        if isinstance(part, (dict, list)) and not _has_hole(part):
            key = json.dumps(part, sort_keys=True)
            if seen[key] > 1 and len(key) >= REPEATED_CHARACTERS:
                if key not in index:
                    index[key] = len(shared)
                    shared.append(part)
                return {"$ref": index[key]}
        if isinstance(part, dict):
            return {key: compact(value) for key, value in part.items()}
        if isinstance(part, list):
            return [compact(value) for value in part]
        return part
    return {"figure": compact(encoded), "shared": shared}


def filled(frame: dict, values: dict) -> dict:
    """The figure a frame draws with ``values``. Mirrored by `ui/static/figures.js:fill`, which draws the Translate
    tab's views in the page (tests/app/test_page_figures.py holds the two alike)."""
    shared = frame["shared"]

    def fill(part):
        if isinstance(part, list):
            return [fill(value) for value in part]
        if not isinstance(part, dict):
            return part
        if "$ref" in part:
            return fill(shared[part["$ref"]])
        if "$outer" in part:
            rows, columns, joiner = fill(part["$outer"])
            return Outer(tuple(rows), tuple(columns), joiner).table()
        if "$panels" in part:
            return joined(fill(part["$panels"]), part["gap"], tuple(part["apart"]))
        if "$template" in part:
            return PLACEHOLDER.sub(lambda found: str(values.get(found[1], found[0])), part["$template"])
        if "$" in part:
            value = values[part["$"]]
            where = {key: value for key, value in part.items() if key not in ("$", "plus")}
            value = value(**where) if callable(value) else value
            return value + part["plus"] if "plus" in part else value
        return {key: fill(value) for key, value in part.items()}
    return fill(frame["figure"])
