"""A rule the server and the page's script both apply answers alike: each is marked "mirrors" on both sides, and each
marked pair is run here on the same inputs, the page's in Node (tests/page_script.py), without a browser."""

import dataclasses
import math
import re
from pathlib import Path

import pytest

from page_script import needs_node, page_rules
from transformer.errors import InputError
from ui.runtime.language import LANGUAGES
from ui.runtime.numbers import clamp
from ui.views import choices
from ui.views import translate as translate_views

ROOT = Path(__file__).resolve().parents[2]
# Each mirrored rule of the page's scripts, and the Python it mirrors: compared here, and fill in
# tests/app/test_page_figures.py (every figure of the Translate tab's views).
MIRRORS = {"explorer.js:kindKey": "ui/views/choices.py:kind_key", "explorer.js:within": "ui/runtime/numbers.py:clamp",
           "explorer.js:whichMap": "ui/views/translate.py:subtitle",
           "explorer.js:revealedPieces": "ui/views/translate.py:revealed_pieces",
           "figures.js:fill": "ui/drawing/frames.py:filled"}

pytestmark = needs_node


def test_each_mirrored_rule_is_marked_on_both_sides_and_listed_here_with_its_comparison():
    marked = {}
    for script in sorted((ROOT / "ui/static").glob("*.js")):
        found = re.findall(r"Mirrors\s+(?://\s+)?`([\w/.]+:\w+)`[^\n]*\n\s*(?://[^\n]*\n\s*)*"
                           r"(?:const|function)\s+(\w+)", script.read_text(encoding="utf-8"))
        marked |= {f"{script.name}:{rule}": python for python, rule in found}
    assert marked == MIRRORS
    for rule, python in MIRRORS.items():
        path, name = python.split(":")
        source = (ROOT / path).read_text(encoding="utf-8")
        definition = source.split(f"def {name}(", 1)[1].split("\ndef ", 1)[0]
        assert f"`ui/static/{rule}`" in definition, f"{python} does not say it is mirrored by {rule}"


def test_an_attention_kind_is_read_alike_from_its_key_or_label_and_anything_else_refused():
    labels = [*choices.ATTENTION_KINDS, *choices.ATTENTION_KINDS.values(), "self", "", "Cross"]
    answers = page_rules("en", [("kindKey", [label]) for label in labels])
    for label, answer in zip(labels, answers):
        try:
            assert answer == {"value": choices.kind_key(label)}, label
        except InputError:
            assert "error" in answer, label


NUMBERS = [0, 1, 2, 2.7, "3", -4, -0.5, 99, "6", 1e9]


@pytest.mark.parametrize("high", [1, 6])
def test_a_number_is_brought_within_range_alike_and_what_is_not_a_number_is_1_in_the_page_refused_by_the_server(
        high):
    answers = page_rules("en", [("within", [value, high]) for value in [*NUMBERS, "abc", "", None]])
    assert [answer["value"] for answer in answers[:len(NUMBERS)]] == [clamp(value, 1, high) for value in NUMBERS]
    assert [answer["value"] for answer in answers[len(NUMBERS):]] == [1, 1, 1]
    for value in ("abc", "", None, math.nan):
        with pytest.raises(InputError):
            clamp(value, 1, high)


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_maps_subtitle_says_its_layer_and_head_alike_in_each_language(language):
    cases = [(1, 0, 8), (3, 4, 8), (2, 0, 1), (6, 8, 8)]
    answers = page_rules(language, [("whichMap", list(case)) for case in cases])
    assert [answer["value"] for answer in answers] == [
        translate_views.subtitle(layer, head or None, heads).in_(language) for layer, head, heads in cases]


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("forced", [0, 1])
def test_the_pieces_revealed_at_each_step_are_marked_alike(translation, language, forced):
    translation = dataclasses.replace(translation, forced_steps=forced)
    steps = range(1, translation.num_steps + 1)
    answers = page_rules(language, [("revealedPieces", [translation.predicted_pieces, forced, step])
                                    for step in steps])
    page = [[(piece["token"], piece["class_or_confidence"]) for piece in answer["value"]] for answer in answers]
    assert page == [translate_views.revealed_pieces(translation, step, language) for step in steps]
