"""Gradio's input components, refusing a bad value with a message but without a traceback in the server log.

Gradio prints a traceback for every value its components refuse (a slider number past its end, a choice not in
the list). A refused value is the client's mistake, already answered with a message; printed 30 lines at a time,
it lets any client flood the log.
"""

from __future__ import annotations

import gradio as gr


class QuietRefusals:
    def preprocess(self, payload):
        try:
            return super().preprocess(payload)
        except gr.Error as error:
            raise gr.Error(error.message, duration=error.duration, title=error.title,
                           print_exception=False) from None


class Slider(QuietRefusals, gr.Slider):
    is_template = True  # drawn by Gradio's own component


class Radio(QuietRefusals, gr.Radio):
    is_template = True


class Dropdown(QuietRefusals, gr.Dropdown):
    is_template = True


class Number(QuietRefusals, gr.Number):
    is_template = True


class CheckboxGroup(QuietRefusals, gr.CheckboxGroup):
    is_template = True
