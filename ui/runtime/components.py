"""Gradio's input components, refusing a bad value with a message but without a traceback in the server log.

Gradio prints a traceback for every value its components refuse (a slider number past its end, a choice not in
the list). A refused value is the client's mistake, already answered with a message; printed 30 lines at a time,
it lets any client flood the log.
"""

from __future__ import annotations

import math

import gradio as gr


def refused_quietly(preprocess, payload):
    """``preprocess(payload)``, with a refusal raised again without its traceback in the log; a payload of the
    wrong shape (None for a list, a list for a number), which Gradio's own code trips over, refused the same way."""
    try:
        return preprocess(payload)
    except gr.Error as error:
        raise gr.Error(error.message, duration=error.duration, title=error.title, print_exception=False) from None
    except (TypeError, ValueError, AttributeError, KeyError, IndexError):
        owner = getattr(preprocess, "__self__", None)
        label = getattr(owner, "label", None) or "This field"
        raise gr.Error(f"“{label}” cannot take {str(payload)[:40]!r}.", print_exception=False) from None


def a_number(component, payload):
    """A slider's or number field's payload if it is a finite number (Gradio's own check of its range lets None,
    NaN and text through to fail later with a traceback); refused quietly otherwise."""
    if isinstance(payload, bool) or not isinstance(payload, (int, float)) or not math.isfinite(payload):
        raise gr.Error(f"“{component.label or 'This field'}” needs a finite number, not {str(payload)[:40]!r}.",
                       print_exception=False)
    return payload


# Gradio finds a component's frontend through its first base class, so each names Gradio's own first.
class Slider(gr.Slider):
    is_template = True  # drawn by Gradio's own component

    def preprocess(self, payload):
        return refused_quietly(super().preprocess, a_number(self, payload))


class UnboundedSlider(Slider):
    """A slider that hands a typed number past either end to its handler, which moves the slider to that end (the
    Translate tab's step). Gradio's own refuses such a number while the page keeps showing it beside the previous
    step's view."""

    is_template = True  # drawn by Gradio's own slider

    def preprocess(self, payload: float) -> float:
        return gr.Number.round_to_precision(a_number(self, payload), self.precision)


class Radio(gr.Radio):
    is_template = True

    def preprocess(self, payload):
        return refused_quietly(super().preprocess, payload)


class Dropdown(gr.Dropdown):
    is_template = True

    def preprocess(self, payload):
        return refused_quietly(super().preprocess, payload)


class Number(gr.Number):
    is_template = True

    def preprocess(self, payload):
        return refused_quietly(super().preprocess, a_number(self, payload))


class CheckboxGroup(gr.CheckboxGroup):
    is_template = True

    def preprocess(self, payload):
        return refused_quietly(super().preprocess, payload)
