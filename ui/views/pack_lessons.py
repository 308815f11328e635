"""The lessons an offline pack carries (``python -m transformer.pack``, docs/offline-pack.md): those whose views the
pack's page draws, each with what Show me sets, its words, and its question with the answer its model computes now,
as the pack is made; the glossary; and the titles of the lessons that need the app. Every word in English, German
and French, written out here, so that the page only shows them."""

from __future__ import annotations

import html
import re

from transformer.files.checkpoint import Checkpoint

from ..runtime.language import LANGUAGES, said, text
from .lessons import (LESSONS, OUTLINE_MS, Lesson, PairedRun, glossary, lesson_choice_labels, part_titles,
                      run_direction, run_layer_note)
from .questions import Question, predict_question

# The tab whose views the pack's page has: a lesson that opens another, or computes a result there (an action),
# needs the app.
PACKED_TAB = "translate"
# The words of the lessons panel, beside each lesson's own.
PANEL_WORDS = ("lessons.panel", "lessons.lesson", "lessons.show_me", "lessons.glossary_title",
               "class.teacher.reveal", "pack.lessons.predict", "pack.lessons.needs_app")


def in_the_pack(lesson: Lesson, models: set[str]) -> bool:
    """Whether the pack of ``models`` shows the lesson: it sets up the Translate tab's views alone, from numbers
    the page computes, and every model it sets or compares is packed."""
    compared = lesson.pair or ()
    return (lesson.tab == PACKED_TAB and lesson.action is None and not lesson.needs_source_share
            and all(run.positions for run in compared) and {lesson.model, *(run.model for run in compared)} <= models)


def show_me(lesson: Lesson) -> dict:
    """What the pack's Show me sets, by the names its page reads (the view and kind as the page's radios hold
    them), and the pair's runs as ``lessons.drawn`` draws them."""
    return {"key": lesson.key, "model": lesson.model, "sentence": lesson.sentence,
            "decoding": "greedy" if lesson.beam == 1 else "beam", "beam": lesson.beam, "kind": lesson.kind,
            "view": lesson.view, "layer": lesson.layer, "head": lesson.head, "average": lesson.average,
            "step": lesson.step, "focus": lesson.focus,
            "pair": [{"model": run.model, "sentence": run.sentence, "layer": run.layer or lesson.layer,
                      "head": None if run.layer else lesson.shown_head} for run in lesson.pair or ()]}


def glossary_paragraphs(language: str) -> list[list[dict]]:
    """The glossary's Markdown as paragraphs of runs, ``{"text", "strong"}``, which the page puts in as text: as
    Markdown reads it, a blank line parts paragraphs and a line break is a space."""
    paragraphs = []
    for paragraph in re.split(r"\n\s*\n", glossary(language)):
        runs = re.split(r"\*\*(.+?)\*\*", " ".join(paragraph.split("\n")))  # odd places: the bold words
        paragraphs.append([{"text": html.unescape(run), "strong": bool(i % 2)} for i, run in enumerate(runs) if run])
    return paragraphs


def numbered_title(lesson: Lesson, language: str) -> str:
    """"3. Heads specialise": the lesson as the app's lesson list shows it."""
    return next(label for label, key in lesson_choice_labels(language) if key == lesson.key)


def pair_heading(run: PairedRun, checkpoints: dict[str, Checkpoint], language: str) -> str:
    """A compared run as its caption names it: "English → French · multi30k-en-fr"."""
    return f"{run_direction(checkpoints[run.model], language)} · {run.model}{run_layer_note(run, language)}"


def lesson_words(lesson: Lesson, question: Question, checkpoints: dict[str, Checkpoint], language: str) -> dict:
    """What the panel says of one lesson in ``language``: its text, its pair's headings and its question."""
    words = lesson.words(language)
    return {"title": numbered_title(lesson, language), "explanation": words.explanation,
            "ask": list(words.questions), "lookFor": words.look_for,
            "pair": [pair_heading(run, checkpoints, language) for run in lesson.pair or ()],
            "question": {"text": said(question.text, language),
                         "choices": [said(choice, language) for choice in question.choices],
                         "answer": said(question.why, language),
                         "modelAnswer": text(language, "class.model_answer",
                                             choice=question.choices[question.answer])}}


def pack_lessons(checkpoints: dict[str, Checkpoint]) -> dict:
    """The lessons part of a pack of ``checkpoints`` (its name in the pack -> the model): each lesson it shows,
    with its question asked of those models, and every word the panel says, by language."""
    shown = [lesson for lesson in LESSONS if in_the_pack(lesson, set(checkpoints))]
    asked = {lesson.key: predict_question(lesson, checkpoints.__getitem__) for lesson in shown}
    words = {language: {
        "panel": {key: text(language, key) for key in PANEL_WORDS},
        "parts": part_titles(language),
        "lessons": {lesson.key: lesson_words(lesson, asked[lesson.key], checkpoints, language) for lesson in shown},
        "glossary": glossary_paragraphs(language),
        "needsApp": [numbered_title(lesson, language) for lesson in LESSONS if lesson not in shown],
    } for language in LANGUAGES}
    return {"lessons": [{**show_me(lesson), "answer": asked[lesson.key].answer} for lesson in shown],
            "words": words, "outlineMs": OUTLINE_MS}
