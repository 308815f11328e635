"""The page's own scripts (ui/static/) run without a browser, in Node, with the page's config in one language: for
the tests that hold a rule written both in Python and in the page's script to the same answers."""

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
const {config, scripts, calls} = JSON.parse(fs.readFileSync(0, "utf8"));
globalThis.window = globalThis;
window.explorerPage = {config};
for (const path of scripts) vm.runInThisContext(fs.readFileSync(path, "utf8"), {filename: path});
const answers = calls.map(([rule, args]) => {
  try { return {value: window.explorer.rules[rule](...args)}; } catch (error) { return {error: String(error)}; }
});
process.stdout.write(JSON.stringify(answers));
"""


def page_rules(language: str, calls: list[tuple[str, list]]) -> list[dict]:
    """Each call ``(rule, arguments)`` of ``window.explorer.rules`` answered in a page of ``language``: ``{"value":
    ...}``, or ``{"error": "..."}`` where the rule threw."""
    given = {"config": page_config(language), "scripts": [str(STATIC / name) for name in SCRIPTS], "calls": calls}
    done = subprocess.run([NODE, "-e", HARNESS], input=json.dumps(given), capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
