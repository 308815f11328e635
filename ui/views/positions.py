"""The Positional encoding tab: the sinusoidal table of section 3.5, its dimensions, and position similarity."""

from __future__ import annotations

import plotly.graph_objects as go

from transformer.paper.model import sinusoidal_table

from ..drawing import charts, figures
from ..runtime.language import ENGLISH, text
from ..runtime.numbers import clamp

MAX_PE_LINES = 12  # more lines in one chart are a tangle with a legend longer than the chart


def positional_views(d_model: int, length: int, dimensions: str,
                     language: str = ENGLISH) -> tuple[go.Figure, go.Figure, go.Figure]:
    """(the encoding matrix, the chosen dimensions across positions, dot products between positions), their
    titles in ``language``."""
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
    title = text(language, "positions.lines.title")
    chosen = list(dict.fromkeys(chosen))  # a dimension asked twice is one line
    if len(chosen) > MAX_PE_LINES:
        title += text(language, "positions.lines.first", most=MAX_PE_LINES, asked=len(chosen))
        chosen = chosen[:MAX_PE_LINES]
    if not chosen:
        chosen = [0, 1, 4, 5, d_model // 2]
        title = text(language, "positions.lines.fallback")
    if ignored:
        title += text(language, "positions.lines.ignored", ignored=figures.escape(", ".join(ignored)[:80]),
                      last=d_model - 1)
    matrix_title = text(language, "positions.matrix.title", length=length, d_model=d_model)
    if d_model != asked:
        matrix_title += text(language, "positions.matrix.rounded", asked=asked, d_model=d_model)
    return (charts.positional_encoding_heatmap(table, matrix_title, language=language),
            charts.positional_encoding_lines(table, chosen, title, language=language),
            charts.position_similarity(table, text(language, "positions.dots.title"), language=language))
