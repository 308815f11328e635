"""Every problem the library raises for a person names itself by a code and values; its sentence is written once,
in transformer/problems.json, so that the app can say it in any language."""

import ast
import string
from pathlib import Path

import pytest

from transformer.data import DataError
from transformer.errors import SENTENCES, Explained, InputError, MissingFile
from transformer.files.hub import HubError

LIBRARY = Path(__file__).resolve().parents[2] / "transformer"


def problem_kinds() -> set[str]:
    """The names of Explained and of every class the library derives from it."""
    kinds, found = {"Explained"}, True
    trees = [ast.parse(path.read_text(encoding="utf-8")) for path in LIBRARY.rglob("*.py")]
    while found:
        found = False
        for node in (node for tree in trees for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
            bases = {getattr(base, "id", None) or getattr(base, "attr", None) for base in node.bases}
            if node.name not in kinds and bases & kinds:
                kinds.add(node.name)
                found = True
    return kinds


def raised_problems(source: str, kinds: set[str]) -> list[tuple[int, str | None, set[str], bool]]:
    """Each problem made in ``source``: its line, its code (None: none), the values it passes, and whether it
    carries a sentence of its own."""
    made = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and (getattr(node.func, "id", None) or getattr(node.func, "attr", None)) in kinds:
            named = {keyword.arg: keyword.value for keyword in node.keywords if keyword.arg}
            code = named["code"].value if isinstance(named.get("code"), ast.Constant) else None
            made.append((node.lineno, code, set(named) - {"code"}, bool(node.args)))
    return made


def placeholders(sentence: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(sentence) if name}


KINDS = problem_kinds()
SOURCES = sorted(str(path.relative_to(LIBRARY)) for path in LIBRARY.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES)
def test_every_problem_the_library_makes_names_its_code_and_values_and_no_sentence_of_its_own(path):
    for line, code, values, own_sentence in raised_problems((LIBRARY / path).read_text(encoding="utf-8"), KINDS):
        if path == "errors.py":  # Explained's own remaking of itself
            continue
        assert code is not None and not own_sentence, f"{path}:{line}: name it by a code in problems.json"
        assert code in SENTENCES, f"{path}:{line}: {code} has no sentence in problems.json"
        assert placeholders(SENTENCES[code]) == values, f"{path}:{line}: {code} takes other values"


def test_every_sentence_is_one_a_problem_is_named_by():
    named = {code for path in SOURCES
             for _, code, _, _ in raised_problems((LIBRARY / path).read_text(encoding="utf-8"), KINDS)}
    assert set(SENTENCES) == named - {None}


def test_the_checks_find_a_problem_raised_with_english_or_without_a_code():
    source = ("raise InputError('too big')\nraise HubError(code='hub.too_big', repo_id=r, size=1, limit=2)\n"
              "raise InputError(f'{x} is wrong', code='a.b')\nraise ValueError('a bug')\n")
    assert raised_problems(source, KINDS) == [(1, None, set(), True), (2, "hub.too_big", {"repo_id", "size", "limit"},
                                                                        False), (3, "a.b", set(), True)]


def test_a_problem_says_its_sentence_with_its_values_numbers_grouped_in_thousands():
    error = HubError(code="hub.too_big", repo_id="Helsinki-NLP/opus-mt-en-zh", size=1200, limit=600)
    assert str(error) == SENTENCES["hub.too_big"].format(repo_id="Helsinki-NLP/opus-mt-en-zh", size="1,200",
                                                         limit="600")
    assert (error.code, error.values["size"]) == ("hub.too_big", 1200), "a reader in another language says it anew"


def test_a_problem_without_a_server_s_directory_keeps_its_code():
    error = DataError(code="data.missing", path="/srv/app/data/train.tsv").without("/srv/app/")
    assert (error.code, error.values, str(error)) == ("data.missing", {"path": "data/train.tsv"},
                                                      SENTENCES["data.missing"].format(path="data/train.tsv"))
    assert str(Explained("a test's own words").without("own ")) == "a test's words"
    missing = MissingFile(code="tokenizer.not_found", path="/srv/app/m/tokenizer.model")
    wrapping = DataError(code="data.bad_gzip", name="/srv/app/x.gz", error=missing).without("/srv/app/")
    assert "/srv/app/" not in str(wrapping) and wrapping.values["error"].values == {"path": "m/tokenizer.model"}
    assert isinstance(wrapping.values["error"], MissingFile), "what it wraps is still one of ours, said anew"
    assert isinstance(InputError(code="decoding.top_k", value=-1), ValueError)
