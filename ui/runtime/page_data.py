"""A value only the page's own scripts read (ui/static/explorer.js), never shown: sent as one JSON text.

Gradio's page handles a nested value node by node at each update (it clones and compares it as it stores it), a
text as one value: for a translation's numbers and the frames they fill (1,700 nodes) that was 20 ms of a click
and twice the garbage, measured in Chromium's profiler on the 2-core AMD EPYC. The page's script parses it.
"""

from __future__ import annotations

import json

import gradio as gr


class PageData(gr.HTML):
    """A hidden value for the page's script: the handler's dict, sent as JSON text (explorer.js parses it)."""

    def __init__(self, value=None, *, js_on_load: str | None = None, **kwargs):
        super().__init__(value, **{"html_template": "", "visible": "hidden", **kwargs}, js_on_load=js_on_load)

    def postprocess(self, value):
        if value is None or isinstance(value, str):
            return value
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
