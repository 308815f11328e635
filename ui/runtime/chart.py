"""A chart the page draws with Plotly in place: Gradio's ``gr.HTML`` holding a figure (ui/static/charts.js, with the
Plotly.js of plotly's own package: ``page_code.PLOTLY_JS``)."""

from __future__ import annotations

import functools
import json

import gradio as gr
import plotly.graph_objects as go
from gradio.components.plot import PlotData

from .language import ENGLISH

TEMPLATE = '<div class="page-chart"></div>'


class Chart(gr.HTML):
    """A Plotly chart: a ``go.Figure`` (or one built as JSON) from a handler, or a value the page draws from its numbers (one with
    ``for_page(language)``, as ``AttentionMap``, in the language of the page the chart is on), is drawn by the page
    on the chart already shown (Plotly.react), or the page draws its own figures into it (explorer.js); None
    empties it.

    Gradio's Plot draws every new value on a new chart, twice, and cannot be drawn into by the page."""

    def __init__(self, value=None, *, label: str | None = None, elem_id: str | None = None, show_label: bool = False,
                 **kwargs):
        # ``label`` names the chart to Gradio (API, tests); the page shows the figure's own title instead.
        self.page_language = ENGLISH  # set by the page it is added to: the words a value drawn from numbers shows
        super().__init__(self.postprocess(value), label=label, show_label=False, html_template=TEMPLATE,
                         js_on_load="explorerCharts.mount(element, props, watch);",
                         elem_id=elem_id, elem_classes=["chart"], container=True, padding=False,
                         apply_default_css=False, **kwargs)

    def postprocess(self, value):
        """A figure as Gradio's Plot sends one, so that scripts read a chart as they always have; a value with
        ``for_page()`` as the numbers the page draws it from."""
        if value is None:  # most charts as a page is built: asking for go.Figure would load all of Plotly's figures
            return None
        if isinstance(value, go.Figure):
            return PlotData(type="plotly", plot=value.to_json()).model_dump()
        if isinstance(value, dict) and set(value) == {"data", "layout"}:  # a figure built as JSON (figures.laid_out)
            return PlotData(type="plotly", plot=json.dumps(value, ensure_ascii=False)).model_dump()
        if hasattr(value, "for_page"):  # numbers the page draws (ui/views/translate.py, AttentionMap)
            return value.for_page(self.page_language)
        return value

    def preprocess(self, payload):
        return payload

    def api_info(self) -> dict:
        return plot_schema()  # one dict for every chart and session: Gradio copies a schema before it edits one


@functools.cache
def plot_schema() -> dict:
    """What a chart's value looks like to a script. Gradio asks each chart for it three times whenever a visitor's
    session starts, and pydantic builds it anew each time (a third of a new session's cost on this page)."""
    return PlotData.model_json_schema()
