"""A run's training curves: which panels and lines they are (``panels``, which the app's Plotly chart draws too),
and an SVG picture of them for a model card, drawn with the standard library alone.

A model card written by ``transformer.export`` needs neither Plotly nor a browser to render an image, so the
library draws its own: loss, learning rate and the validation score over updates, three panels side by side. The
card is English; the app passes its own words, in the page's language.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

PANEL_WIDTH, PANEL_HEIGHT, MARGIN = 380, 220, 56
TITLE_HEIGHT, LEGEND_HEIGHT = 40, 44


# The panels' and lines' words, by name; the card's are English, the app's in the page's language.
ENGLISH = {"loss": "loss (nats/token)", "learning_rate": "learning rate", "score": "validation score",
           "train_loss": "train loss (smoothed labels)", "val_loss": "validation loss", "bleu": "val BLEU (greedy)",
           "exact_match": "val exact match %", "update": "update"}


@dataclass
class Series:
    name: str
    points: list[tuple[float, float]]
    colour: str
    evaluated: bool = False  # measured at evaluations (few points, each marked), not at every logged update
    dashed: bool = False


def panels(steps: Sequence[dict], evals: Sequence[dict], words: dict[str, str] = ENGLISH) -> dict[str, list[Series]]:
    """The three panels' series (those with no points left out), titled and named in ``words``."""
    steps = [s for s in steps if "loss" in s and "lr" in s]
    evals = [e for e in evals if "val_loss" in e and "bleu" in e]
    shown = {
        words["loss"]: [Series(words["train_loss"], [(s["step"], s["loss"]) for s in steps], "#1f77b4"),
                        Series(words["val_loss"], [(e["step"], e["val_loss"]) for e in evals], "#ff7f0e", True)],
        words["learning_rate"]: [Series(words["learning_rate"], [(s["step"], s["lr"]) for s in steps], "#9467bd")],
        words["score"]: [Series(words["bleu"], [(e["step"], e["bleu"]) for e in evals], "#2ca02c", True),
                         Series(words["exact_match"], [(e["step"], 100 * e["exact_match"]) for e in evals
                                                       if "exact_match" in e], "#d62728", True, dashed=True)],
    }
    return {title: [series for series in all_series if series.points] for title, all_series in shown.items()}


def span(values: list[float]) -> tuple[float, float]:
    low, high = min(values), max(values)
    return (low - 0.5, high + 0.5) if low == high else (low, high)


def number(value: float) -> str:
    """An axis end as a reader writes it: 3,600 updates, 9.56 nats, 0.0015."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def panel_svg(title: str, series: list[Series], left: float, top: float) -> list[str]:
    """One panel: its frame, axis ends, lines and legend, with its top-left corner at (left, top)."""
    width, height = PANEL_WIDTH - MARGIN, PANEL_HEIGHT
    parts = [f'<text x="{left + width / 2}" y="{top - 8}" text-anchor="middle" font-size="14">{escape(title)}</text>',
             f'<rect x="{left}" y="{top}" width="{width}" height="{height}" fill="none" stroke="#999"/>']
    if not series:
        return parts + [f'<text x="{left + width / 2}" y="{top + height / 2}" text-anchor="middle" fill="#666">'
                        'nothing recorded</text>']
    (x0, x1), (y0, y1) = (span([p[axis] for s in series for p in s.points]) for axis in (0, 1))
    place = lambda x, y: (left + (x - x0) / (x1 - x0) * width, top + (1 - (y - y0) / (y1 - y0)) * height)  # noqa: E731
    parts += [f'<text x="{left - 4}" y="{top + 4}" text-anchor="end" font-size="11">{number(y1)}</text>',
              f'<text x="{left - 4}" y="{top + height}" text-anchor="end" font-size="11">{number(y0)}</text>',
              f'<text x="{left}" y="{top + height + 14}" font-size="11">{number(x0)}</text>',
              f'<text x="{left + width}" y="{top + height + 14}" text-anchor="end" font-size="11">{number(x1)}</text>',
              f'<text x="{left + width / 2}" y="{top + height + 14}" text-anchor="middle" font-size="11">'
              f'{ENGLISH["update"]}</text>']
    for i, s in enumerate(series):
        points = " ".join(f"{x:.1f},{y:.1f}" for x, y in (place(*p) for p in s.points))
        legend_y = top + height + 30 + 14 * i
        parts += [f'<polyline points="{points}" fill="none" stroke="{s.colour}" stroke-width="1.5"/>',
                  f'<line x1="{left}" y1="{legend_y - 4}" x2="{left + 18}" y2="{legend_y - 4}" stroke="{s.colour}" '
                  'stroke-width="2"/>',
                  f'<text x="{left + 24}" y="{legend_y}" font-size="11">{escape(s.name)}</text>']
    return parts


def training_curves_svg(steps: Sequence[dict], evals: Sequence[dict], title: str = "Training") -> str:
    """The SVG document: a title over the three panels."""
    shown = panels(steps, evals)
    width, height = len(shown) * PANEL_WIDTH + MARGIN, TITLE_HEIGHT + 20 + PANEL_HEIGHT + LEGEND_HEIGHT
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="sans-serif">',
             f'<rect width="{width}" height="{height}" fill="white"/>',
             f'<text x="{MARGIN}" y="24" font-size="16">{escape(title)}</text>']
    for i, (panel_title, series) in enumerate(shown.items()):
        parts += panel_svg(panel_title, series, MARGIN + i * PANEL_WIDTH, TITLE_HEIGHT + 20)
    return "\n".join(parts + ["</svg>"]) + "\n"
