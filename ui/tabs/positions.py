"""The Positional encoding tab: the sinusoidal vectors that carry word order (section 3.5 of the paper)."""

from __future__ import annotations

import gradio as gr

from transformer.files.checkpoint import Checkpoint

from ..runtime import components
from ..runtime.chart import Chart
from ..runtime.language import ENGLISH, message
from ..runtime.page import Page
from ..views.positions import positional_views

TAB_ID, TITLE = "positions", message("positions.title")  # the tab's id in the page, and its label


def layout(page: Page, checkpoint: Checkpoint) -> None:
    words = page.words
    gr.Markdown(words("positions.intro"))
    with gr.Row():
        pe_d_model = components.Slider(8, 512, value=128, step=2, label="d_model")  # the paper's symbol
        pe_length = components.Slider(8, 256, value=64, step=1, label=words("positions.length"))
        pe_dimensions = gr.Textbox("0, 1, 10, 11, 60", label=words("positions.dimensions"),
                                   info=words("positions.dimensions.info"))
    pe_matrix = Chart(label=words("positions.matrix"))
    gr.Markdown(words("positions.note.matrix"))
    pe_lines = Chart(label=words("positions.lines"))
    gr.Markdown(words("positions.note.lines"))
    pe_dots = Chart(label=words("positions.dots"))
    gr.Markdown(words("positions.note.dots"))
    page.add(pe_d_model=pe_d_model, pe_length=pe_length, pe_dimensions=pe_dimensions, pe_matrix=pe_matrix,
             pe_lines=pe_lines, pe_dots=pe_dots)


def on_positions(pe_d_model, pe_length, pe_dimensions, language: str = ENGLISH) -> dict:
    matrix, lines, dots = positional_views(pe_d_model, pe_length, pe_dimensions, language)
    return {"pe_matrix": matrix, "pe_lines": lines, "pe_dots": dots}


def declare(page: Page) -> None:
    """Nothing elsewhere changes this tab."""


def wire(page: Page) -> None:
    c = page.components
    # Drawn when the tab opens, not with the page: most visitors never open it, and its three charts were 267 of
    # the 387 kB the page's first load received. The list of dimensions redraws when submitted or left, not on
    # every keystroke.
    page.on([page.tabs[TAB_ID].select, c["pe_d_model"].input, c["pe_length"].input, c["pe_dimensions"].submit,
             c["pe_dimensions"].blur], on_positions, ["pe_matrix", "pe_lines", "pe_dots"], trigger_mode="always_last")
