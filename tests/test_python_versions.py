"""The code runs on every Python from 3.10, a ZeroGPU Space's oldest, to 3.13: it parses under 3.10's grammar and
uses none of the standard library's names that came later. This machine has only one Python, so the check reads
the code: Python's own parser at ``feature_version=(3, 10)`` for the syntax, and the names added in 3.11, 3.12 and
3.13 (from "What's New In Python") for the library. Unlike vermin, it finds a method by its name on any value
(``error.add_note(...)``, 3.11), which a checker that follows types misses on a value held in a variable."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OLDEST = (3, 10)
SOURCES = sorted(str(path.relative_to(ROOT)) for folder in ("transformer", "ui", "tests", "benchmarks", "tools")
                 for path in (ROOT / folder).rglob("*.py")) + ["app.py"]
# Methods and attributes added after 3.10, found by their name whatever they are called on.
NEWER_ATTRIBUTES = {
    "add_note": "3.11",
    "file_digest": "3.11", "TaskGroup": "3.11", "timeout_at": "3.11", "StrEnum": "3.11", "ReprEnum": "3.11",
    "LiteralString": "3.11", "assert_never": "3.11", "assert_type": "3.11", "reveal_type": "3.11",
    "dataclass_transform": "3.11", "Never": "3.11", "Self": "3.11", "Required": "3.11", "NotRequired": "3.11",
    "exception": "3.11 (sys.exception)", "getbufferprocessor": "3.11", "exp2": "3.11", "cbrt": "3.11",
    "batched": "3.12", "override": "3.12", "walk": "3.12 (Path.walk; os.walk is older)", "TypeAliasType": "3.12",
    "get_protocol_members": "3.13", "is_protocol": "3.13", "ReadOnly": "3.13", "TypeIs": "3.13",
    "copy_file_range": "3.13", "PythonFinalizationError": "3.13",
}
# Names of the standard library that came later, met as plain names (a builtin or an imported name).
NEWER_NAMES = {"ExceptionGroup": "3.11", "BaseExceptionGroup": "3.11", "EncodingWarning": "3.10",
               "PythonFinalizationError": "3.13"}
NEWER_MODULES = {"tomllib": "3.11", "wsgiref.types": "3.11"}
# Names that are newer only on one module (sys.exception) or that older modules have too (os.walk, ast.walk).
ONLY_ON = {"exception": {"sys"}}
OLDER_OWNERS = {"walk": {"os", "ast"}}


def newer_uses(source: str) -> list[str]:
    """Each use in ``source`` of a name or method that Python 3.10 lacks, with its line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in NEWER_ATTRIBUTES:
            owner = node.value.id if isinstance(node.value, ast.Name) else None
            if owner not in OLDER_OWNERS.get(node.attr, set()) and owner in ONLY_ON.get(node.attr, {owner}):
                found.append(f"{node.lineno}: .{node.attr} ({NEWER_ATTRIBUTES[node.attr]})")
        elif isinstance(node, ast.Name) and node.id in NEWER_NAMES:
            found.append(f"{node.lineno}: {node.id} ({NEWER_NAMES[node.id]})")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"{node.lineno}: import {module} ({NEWER_MODULES[module]})" for module in modules
                      if module in NEWER_MODULES]
            if isinstance(node, ast.ImportFrom) and node.module in ("typing", "enum", "asyncio", "itertools"):
                found += [f"{node.lineno}: from {node.module} import {alias.name} ({NEWER_ATTRIBUTES[alias.name]})"
                          for alias in node.names if alias.name in NEWER_ATTRIBUTES]
    return found


@pytest.mark.parametrize("path", SOURCES)
def test_the_code_parses_under_the_oldest_pythons_grammar_and_uses_nothing_newer(path):
    source = (ROOT / path).read_text(encoding="utf-8")
    ast.parse(source, filename=path, feature_version=OLDEST)
    assert newer_uses(source) == []


@pytest.mark.parametrize(("code", "why"), [
    ("try:\n    pass\nexcept ValueError as error:\n    value = error\n    value.add_note('x')\n", ".add_note (3.11)"),
    ("raise ExceptionGroup('two', [ValueError()])\n", "ExceptionGroup (3.11)"),
    ("import tomllib\n", "import tomllib (3.11)"),
    ("from typing import Self\n", "from typing import Self (3.11)"),
    ("import itertools\nitertools.batched([1, 2], 1)\n", ".batched (3.12)"),
    ("import sys\nsys.exception()\n", ".exception (3.11 (sys.exception))"),
])
def test_the_check_finds_what_3_10_lacks_even_a_method_on_a_value_in_a_variable(code, why):
    assert [use.split(": ", 1)[1] for use in newer_uses(code)] == [why]


def test_the_check_reads_newer_syntax_as_the_oldest_python_would():
    with pytest.raises(SyntaxError):
        ast.parse("try:\n    pass\nexcept* ValueError:\n    pass\n", feature_version=OLDEST)
    with pytest.raises(SyntaxError):
        ast.parse("type Vector = list[float]\n", feature_version=OLDEST)
    assert newer_uses("import os, logging\nos.walk('.')\nlogging.exception('x')\n") == []
