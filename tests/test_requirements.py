"""Every package the app and the library import is declared in requirements.txt, and the tests' own in
requirements-dev.txt: a fresh install has what the code needs, not what another package happened to bring."""

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OWN = {"transformer", "ui", "app", "tests", "helpers", "benchmarks", "common"}


def imported_packages(paths) -> set[str]:
    """Top-level names of the packages the files import, anywhere in them, the standard library's left out."""
    names = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names.add(node.module.split(".")[0])
    return {name for name in names if name not in sys.stdlib_module_names and name not in OWN}


def declared(requirements: str) -> set[str]:
    """The distributions a requirements file names (and the files it includes), lower-cased, - for _."""
    names = set()
    for line in (ROOT / requirements).read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("-r "):
            names |= declared(line[3:].strip())
        elif line:
            names.add(re.split(r"[<>=!~\[ ;]", line)[0].lower().replace("_", "-"))
    return names


def distributions(packages: set[str]) -> dict[str, set[str]]:
    found = packages_distributions()
    return {package: {name.lower().replace("_", "-") for name in found.get(package, [package])}
            for package in packages}


def test_every_package_the_app_and_the_library_import_is_a_requirement():
    code = [ROOT / "app.py", *(ROOT / "transformer").rglob("*.py"), *(ROOT / "ui").rglob("*.py")]
    runtime = declared("requirements.txt")
    missing = {package: names for package, names in distributions(imported_packages(code)).items()
               if not names & runtime}
    assert missing == {}


def test_every_package_the_tests_import_is_a_development_requirement():
    development = declared("requirements-dev.txt")
    own = {path.stem for path in (ROOT / "tests").rglob("*.py")} | {path.name for path in (ROOT / "tests").iterdir()}
    imported = imported_packages((ROOT / "tests").rglob("*.py")) - own
    missing = {package: names for package, names in distributions(imported).items() if not names & development}
    assert missing == {}
