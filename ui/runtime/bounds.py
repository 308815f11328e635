"""One place that bounds what every event of the page takes in, named API or not.

Any client can call any event (``/gradio_api/queue/join`` with its index), so a handler cannot assume a value came
from the component shown on the page. Before a handler runs, each value is checked against the component it is
for: a number is a finite number (Gradio's own check of its range lets None and NaN through), a choice is among the
choices, a text is a text, a table is no larger than the page offers. Anything
else is refused with one sentence and no traceback, in the page's language; the handler's own checks (the sentence,
the model) come after.
"""

from __future__ import annotations

import math

import gradio as gr
import pandas

from transformer.errors import InputError

from .language import Number, message
from .limits import MAX_BODY_BYTES

MAX_TEXT_CHARS = MAX_BODY_BYTES  # what a request can carry at all; a longer sentence is cut, with a note, later
MAX_TABLE_ROWS = 8  # the blackboard: a few tokens, worked by hand
MAX_TABLE_COLUMNS = 1 + 3 * 8  # a token and q, k, v of up to 8 numbers each
MAX_CHOSEN = 512  # heads ticked at once (opus-mt: 3 x 6 x 8 = 144)
MAX_CHOICE_CHARS = 200  # a model name, a head, a piece


def label_of(component, name: str) -> str:
    return getattr(component, "label", None) or name.replace("_", " ")


def check(component, value, name: str) -> None:
    """Refuse ``value`` for ``component`` (called ``name`` on the page) unless it is one the page could send. The
    refusal names the component by its label (in the page's language) and quotes what came, as it came."""
    what, sent = label_of(component, name), repr(str(value)[:40])
    if isinstance(component, (gr.Slider, gr.Number)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InputError(message("runtime.bounds.number", what=what, value=sent))
    elif isinstance(component, gr.Checkbox):
        if not isinstance(value, bool):
            raise InputError(message("runtime.bounds.checkbox", what=what, value=sent))
    elif isinstance(component, gr.CheckboxGroup):  # its choices follow the model: the handler reads each one
        if not isinstance(value, list) or len(value) > MAX_CHOSEN or not all(isinstance(v, str) for v in value):
            raise InputError(message("runtime.bounds.checkbox_group", what=what, most=MAX_CHOSEN))
    elif isinstance(component, gr.Radio):  # a fixed set on this page; none chosen where none was at first
        if value not in [choice[1] for choice in component.choices] and not (value is None and component.value is None):
            raise InputError(message("runtime.bounds.radio", what=what, value=sent))
    elif isinstance(component, gr.Dropdown) and component.multiselect:  # as a group of boxes: the handler checks
        if not isinstance(value, list) or len(value) > MAX_CHOSEN or not all(isinstance(v, str) for v in value):
            raise InputError(message("runtime.bounds.checkbox_group", what=what, most=MAX_CHOSEN))
    elif isinstance(component, gr.Dropdown):  # choices that follow the model (heads, pieces, model names)
        if value is not None and (not isinstance(value, (str, int, float)) or len(str(value)) > MAX_CHOICE_CHARS):
            raise InputError(message("runtime.bounds.dropdown", what=what, value=sent))
    elif isinstance(component, gr.Textbox):
        if value is not None and (not isinstance(value, str) or len(value) > MAX_TEXT_CHARS):
            raise InputError(message("runtime.bounds.text", what=what, most=Number(MAX_TEXT_CHARS, ",")))
    elif isinstance(component, gr.Dataframe):
        rows, columns = table_shape(value)
        if rows > MAX_TABLE_ROWS or columns > MAX_TABLE_COLUMNS:
            raise InputError(message("runtime.bounds.table", what=what, rows=MAX_TABLE_ROWS,
                                     columns=MAX_TABLE_COLUMNS))


def table_shape(value) -> tuple[int, int]:
    if isinstance(value, pandas.DataFrame):
        return value.shape
    if isinstance(value, dict):  # a table as the API sends it
        data = value.get("data") or []
        return len(data), max((len(row) for row in data if isinstance(row, list)), default=0)
    if isinstance(value, list):
        return len(value), max((len(row) for row in value if isinstance(row, list)), default=0)
    return 0, 0
