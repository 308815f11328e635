"""The page's own scripts and styles (``ui/static/``), put in its head once, and the one JSON config that tells them
what Python knows (component ids, choices' labels, the lessons' views)."""

from __future__ import annotations

import json
from pathlib import Path

STATIC = Path(__file__).with_name("static")
# In this order: page.js reads the config and gives the others its watch over charts.
SCRIPTS = ("page.js", "display.js", "chart_text.js", "explorer.js")
STYLES = (STATIC / "page.css",)


def config_script(config: dict) -> str:
    """``window.explorerConfig``: JSON is a script's literal; a "<" is escaped so no text closes the script."""
    text = json.dumps(config, separators=(",", ":"), allow_nan=False, ensure_ascii=False).replace("<", "\\u003c")
    return f"<script>window.explorerConfig = {text};</script>"


def head(config: dict) -> str:
    """The page's head: the config, then every script, read from its file."""
    scripts = (f"<script>\n{(STATIC / name).read_text(encoding='utf-8')}</script>" for name in SCRIPTS)
    return config_script(config) + "".join(scripts)
