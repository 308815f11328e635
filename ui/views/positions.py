"""The Positional encoding tab: the sinusoidal table of section 3.5, its dimensions, and position similarity."""

from __future__ import annotations

import plotly.graph_objects as go

from transformer.paper.model import sinusoidal_table

from .. import figures
from .choices import clamp

MAX_PE_LINES = 12  # more lines in one chart are a tangle with a legend longer than the chart

NOTES = {
    "matrix": "Each row is the vector added to the token embedding at that position. Left columns (low dimensions) "
              "oscillate fast, right columns slowly: together they act like the hands of a clock with many speeds, "
              "so every position gets a unique pattern (section 3.5 of the paper).",
    "lines": "Even dimensions are sines, odd ones cosines, with wavelengths growing geometrically from 2π to "
             "10000·2π. Pick dimensions far apart to see the difference in frequency.",
    "dots": "The dot product of two position vectors depends only on their distance, and falls off as positions "
            "move apart: a bright band along the diagonal. This is what lets attention learn relative offsets.",
}


def positional_views(d_model: int, length: int, dimensions: str) -> tuple[go.Figure, go.Figure, go.Figure]:
    """(the encoding matrix, the chosen dimensions across positions, dot products between positions)."""
    asked = clamp(d_model, 2, 1024)
    d_model = asked + asked % 2
    length = clamp(length, 2, 512)
    table = sinusoidal_table(length, d_model)
    chosen, ignored = [], []
    for part in str(dimensions).replace(";", ",").split(","):
        part = part.strip()
        if part.isdigit() and int(part) < d_model:
            chosen.append(int(part))
        elif part:
            ignored.append(part)
    title = "Chosen dimensions across positions"
    chosen = list(dict.fromkeys(chosen))  # a dimension asked twice is one line
    if len(chosen) > MAX_PE_LINES:
        title += f"<br><sup>the first {MAX_PE_LINES} of {len(chosen)} dimensions asked for</sup>"
        chosen = chosen[:MAX_PE_LINES]
    if not chosen:
        chosen = [0, 1, 4, 5, d_model // 2]
        title = "Dimensions 0, 1, 4, 5 and d_model/2 across positions"
    if ignored:
        title += (f"<br><sup>ignored {figures.escape(', '.join(ignored)[:80])}: dimensions are whole numbers "
                  f"from 0 to {d_model - 1}</sup>")
    matrix_title = f"PE matrix: {length} positions × {d_model} dimensions"
    if d_model != asked:
        matrix_title += f"<br><sup>d_model {asked} rounded up to {d_model}: dimensions come in (sin, cos) pairs</sup>"
    return (figures.positional_encoding_heatmap(table, matrix_title),
            figures.positional_encoding_lines(table, chosen, title),
            figures.position_similarity(table, "PE(i) · PE(j): how alike two positions look"))
