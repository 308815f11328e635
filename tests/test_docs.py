"""What the docs name is there and said once: a file, folder or checkpoint of the project that the README,
ARCHITECTURE.md, docs/ or the requirements name is in the repository, or a command shown beside it makes it; the
README's lists are the code's; each named measured figure is given in one doc."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ["README.md", "ARCHITECTURE.md", "requirements.txt", "requirements-dev.txt",
        *sorted(str(path.relative_to(ROOT)) for path in (ROOT / "docs").glob("*.md"))]
# A path of the project as a doc writes it: from one of its top-level folders, to a word or a slash (not a full stop).
PROJECT_PATH = re.compile(r"(?<![\w./-])(app\.py|\.ci/run|"
                          r"(?:ui|transformer|tests|benchmarks|docs|tools|checkpoints|assets)/(?:[\w./-]*[\w/])?)")


def named_paths(text: str) -> set[str]:
    return set(PROJECT_PATH.findall(text))


def made_by_commands(text: str) -> set[str]:
    """What the commands a doc shows write: ``--out PATH``, and an export's destination."""
    written = re.findall(r"--out\s+(\S+)", text) + re.findall(r"transformer\.export\s+\S+\s+(\S+)", text)
    return {path.rstrip(".,;:)`") for path in written}


@pytest.mark.parametrize("doc", DOCS)
def test_every_path_a_doc_names_is_in_the_repository_or_made_by_a_command_it_shows(doc):
    text = (ROOT / doc).read_text(encoding="utf-8")
    assert sorted(path for path in named_paths(text) - made_by_commands(text) if not (ROOT / path).exists()) == []


def test_the_path_check_reads_paths_in_prose_in_backticks_and_in_commands():
    text = ("See `ui/gpu.py` and ui/runtime/, then run python benchmarks/x.py --out checkpoints/a. "
            "python -m transformer.export runs/r/averaged checkpoints/b (not runs/ nor myui/x.py)")
    assert named_paths(text) == {"ui/gpu.py", "ui/runtime/", "benchmarks/x.py", "checkpoints/a", "checkpoints/b"}
    assert made_by_commands(text) == {"checkpoints/a", "checkpoints/b"}


def test_the_readme_names_every_endpoint_the_page_declares():
    declared = {name for path in (ROOT / "ui").rglob("*.py")
                for name in re.findall(r"api_name=\"(\w+)\"", path.read_text(encoding="utf-8"))}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert {"translate", "keep_stopped_model"} <= declared
    assert sorted(name for name in declared if f"`/{name}`" not in readme) == []


def readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_shows_every_command_the_library_has_and_no_other():
    commands = {path.stem for path in (ROOT / "transformer").glob("*.py")
                if 'if __name__ == "__main__"' in path.read_text(encoding="utf-8")}
    commands |= {path.parent.name for path in (ROOT / "transformer").glob("*/__main__.py")}
    assert {"translate", "corpus", "train"} <= commands
    assert set(re.findall(r"python -m transformer\.(\w+)", readme())) == commands


def test_the_readmes_table_of_settings_is_the_apps_own():
    from ui.runtime.settings import SETTINGS
    table = readme().split("Environment variables a host may set", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"`(EXPLORER_\w+)`", table)) == set(SETTINGS)
    named_anywhere = {name for doc in DOCS for name in
                      re.findall(r"\bEXPLORER_[A-Z_]*[A-Z]\b", (ROOT / doc).read_text(encoding="utf-8"))}
    assert sorted(named_anywhere - set(SETTINGS)) == []


# Each measured figure the docs name, and the one doc that gives its numbers; every other doc links to it.
NAMED_FIGURES = {
    "the page's first load": ("docs/browser-latency.md", r"first[ _]load|page is usable|usable (?:about|after)"),
    "the first translation drawn": ("docs/browser-latency.md", r"first[ _]translation|first step (?:drawn|within)"),
    "the app's start-up": ("docs/benchmarks.md", r"start-up"),
    "the worker's copy of a model": ("docs/reliability.md", r"copy of the (?:bundled )?model|model copy"),
    "a visitor's slowdown beside costly work": ("docs/fair-share.md", r"slowdown"),
    "the suite's time": ("docs/test-suite.md", r"(?:whole|test) suite"),
    "our decoding against `generate`": ("docs/benchmarks.md", r"of `generate`|`generate`'s time"),
    "bfloat16 against float32": ("docs/benchmarks.md", r"bfloat16 against|against \S+ in float32"),
    "the alignment error rate": ("docs/corpus.md", r"\bAER\b"),
    "the mutation score": ("docs/test-suite.md", r"\bkilled\b"),
}
# A measured number: with its unit, or a ratio below 1; a goal (after ≤, ≥, < or >) is not a measurement.
MEASURED = re.compile(r"(?<![≤≥<>\w.,])(?<![≤≥<>] )\d[\d,]*(?:\.\d+)?\s?(?:ms|s|min|MB|GB|KB|%|×|x)(?!\w)"
                      r"|(?<![\w.])0\.\d+")


def figures_given_elsewhere(texts: dict[str, str]) -> list[tuple[str, str, int]]:
    """(figure, doc, line) wherever a doc other than the figure's own gives it a number."""
    found = []
    for figure, (owner, names) in NAMED_FIGURES.items():
        for doc, text in texts.items():
            if doc == owner:
                continue
            found += [(figure, doc, number) for number, line in enumerate(text.splitlines(), 1)
                      if re.search(names, line, re.IGNORECASE) and MEASURED.search(line)]
    return found


def test_each_named_figure_is_given_in_one_doc_and_linked_from_the_others():
    texts = {doc: (ROOT / doc).read_text(encoding="utf-8") for doc in DOCS if doc.endswith(".md")}
    assert set(owner for owner, _ in NAMED_FIGURES.values()) <= set(texts)
    assert figures_given_elsewhere(texts) == []


def test_the_figure_check_finds_a_number_given_twice_but_not_a_goal_or_a_link():
    texts = {"docs/browser-latency.md": "first load 1,234 ms\n",
             "README.md": "The page is usable about 1.2 s after it opens.\n"
                          "A first load ≤ 1,000 ms is the goal; figures in "
                          "[browser-latency.md](docs/browser-latency.md).\n",
             "docs/corpus.md": "AER 62.4%, ALTI+ at layer 3.\n",
             "docs/multilingual.md": "greedy takes 0.571 of `generate`'s time\n"}
    assert figures_given_elsewhere(texts) == [("the page's first load", "README.md", 1),
                                              ("our decoding against `generate`", "docs/multilingual.md", 1)]
