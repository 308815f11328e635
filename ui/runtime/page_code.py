"""The page's own scripts and styles (``ui/static/``), put in its head once, and the one JSON config that tells them
what Python knows (component ids, choices' labels, the lessons' views)."""

from __future__ import annotations

import json
from pathlib import Path

import gradio as gr
import plotly

STATIC = Path(__file__).parents[1] / "static"  # ui/static
# The Plotly.js that plotly's Python package ships, for the figures that package builds: the page's one Plotly.
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
# In this order: page.js reads the config and gives the others its watch over charts; explorer.js draws with the
# figures of figures.js on the charts of charts.js.
SCRIPTS = ("sight.js", "page.js", "display.js", "chart_text.js", "charts.js", "figures.js", "explorer.js")
STYLES = (STATIC / "page.css",)


def config_script(config: dict) -> str:
    """``window.explorerConfig``: JSON is a script's literal; a "<" is escaped so no text closes the script."""
    text = json.dumps(config, separators=(",", ":"), allow_nan=False, ensure_ascii=False).replace("<", "\\u003c")
    return f"<script>window.explorerConfig = {text};</script>"


def head(config: dict) -> str:
    """The page's head: the config, then every script, read from its file."""
    scripts = (f"<script>\n{(STATIC / name).read_text(encoding='utf-8')}</script>" for name in SCRIPTS)
    return config_script(config) + "".join(scripts)


def announcing(language: str) -> bytes:
    """What language.LanguageRoutes puts first in a page's head: static/language.js, which tells the browser the
    page's language before Gradio starts (Gradio puts ``head`` in the page only once it runs)."""
    script = (STATIC / "language.js").read_text(encoding="utf-8")
    return f'<script data-language="{language}">{script}</script>'.encode("utf-8")


def plotly_url() -> str:
    """Where the page loads Plotly.js from (ui/static/charts.js, when it draws its first chart): plotly's own package,
    served by Gradio (no CDN); relative, so that the students' page mounted at /class finds it too."""
    gr.set_static_paths([PLOTLY_JS])
    return f"gradio_api/file={PLOTLY_JS.as_posix()}"
