"""The page's own scripts (ui/static/) run without a browser, in Node, with the page's config in one language: for
the tests that hold what the page's script computes (a rule written in both Python and the script, a figure it
fills from the server's frame) to the server's answers."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ui.build import page_config

NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="Node is not installed (apt-get install nodejs)")
STATIC = Path(__file__).resolve().parents[1] / "ui" / "static"
# The scripts the rules live in, in the order the page's head loads them (figures.js before explorer.js).
SCRIPTS = ("figures.js", "explorer.js")
HARNESS = """
const fs = require("fs"), vm = require("vm");
const {config, scripts, shared, calls} = JSON.parse(fs.readFileSync(0, "utf8"));
globalThis.window = globalThis;
window.explorerPage = {config};
window.shared = shared;
for (const path of scripts) vm.runInThisContext(fs.readFileSync(path, "utf8"), {filename: path});
const answers = calls.map(([expression, args]) => {
  try { return {value: vm.runInThisContext(expression)(...args)}; } catch (error) { return {error: String(error)}; }
});
process.stdout.write(JSON.stringify(answers));
"""


def page_calls(language: str, calls: list[tuple[str, list]], shared=None) -> list[dict]:
    """Each call ``(function, arguments)`` answered by the page's scripts in a page of ``language``: ``function`` is
    a script expression (``"explorer.rules.kindKey"``, ``"(v) => explorer.figures(shared.numbers, v)"``), and
    ``shared`` what such an expression may read as ``shared`` (sent once). Each answer is ``{"value": ...}``, or
    ``{"error": "..."}`` where the function threw."""
    given = {"config": page_config(language), "scripts": [str(STATIC / name) for name in SCRIPTS],
             "shared": shared, "calls": calls}
    done = subprocess.run([NODE, "-e", HARNESS], input=json.dumps(given), capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def page_rules(language: str, calls: list[tuple[str, list]]) -> list[dict]:
    """Each call ``(rule, arguments)`` of ``window.explorer.rules``, as ``page_calls`` answers it."""
    return page_calls(language, [(f"explorer.rules.{rule}", arguments) for rule, arguments in calls])
