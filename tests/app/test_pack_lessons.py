"""The lessons an offline pack carries: those whose views its page draws, for the models it holds, each with what
Show me sets and its question answered by the model as the pack is made, every word in the reader's language."""

import pytest

from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS, load_checkpoint
from ui.runtime.language import LANGUAGES, said
from ui.views.choices import ATTENTION_KINDS, VIEWS
from ui.views.lessons import LESSONS, glossary, selector_values
from ui.views.pack_lessons import in_the_pack, pack_lessons
from ui.views.questions import predict_question

BOTH = ("multi30k-en-de", "multi30k-en-fr")


@pytest.fixture(scope="module")
def checkpoints():
    return {name: load_checkpoint(REPOSITORY_CHECKPOINTS / name, device="cpu") for name in (*BOTH, "reverse-tiny")}


@pytest.fixture(scope="module")
def both(checkpoints):
    return pack_lessons({name: checkpoints[name] for name in BOTH})


def test_a_pack_of_both_translators_shows_the_lessons_of_the_translate_tabs_views_alone(both):
    assert [lesson["key"] for lesson in both["lessons"]] == ["where_each_word_looks", "no_future", "word_order"]
    source_share = next(lesson for lesson in LESSONS if lesson.key == "source_or_prefix")
    assert source_share.tab == "translate" and not in_the_pack(source_share, set(BOTH)), \
        "the step captions' ALTI+ share is the server's"
    for language in LANGUAGES:
        shown, others = both["words"][language]["lessons"], both["words"][language]["needsApp"]
        assert len(shown) + len(others) == len(LESSONS)
        assert others[0] == f"3. {LESSONS[2].words(language).title}"


def test_the_lessons_are_those_of_the_models_packed(checkpoints):
    def keys(*names):
        return [lesson["key"] for lesson in pack_lessons({name: checkpoints[name] for name in names})["lessons"]]
    assert keys("multi30k-en-de") == ["where_each_word_looks", "no_future"]
    assert keys("multi30k-en-fr") == [], "word order compares it with the German model"
    assert keys("reverse-tiny") == ["attention_aligns"]


def test_show_me_sets_what_the_apps_show_me_sets(both):
    by_key = {lesson.key: lesson for lesson in LESSONS}
    for shown in both["lessons"]:
        lesson = by_key[shown["key"]]
        app = selector_values(lesson)  # what the app's Show me puts in the Translate tab's selectors
        assert (shown["model"], shown["sentence"], shown["step"], shown["focus"]) == \
            (lesson.model, lesson.sentence, lesson.step, lesson.focus)
        assert (ATTENTION_KINDS[shown["kind"]], shown["view"], shown["layer"], shown["head"], shown["average"],
                shown["decoding"]) == (app["kind"], app["view"], app["layer"], app["head"], app["average"],
                                       app["decoding"])
        assert shown["view"] in VIEWS
        assert shown["beam"] == (1 if app["decoding"] == "greedy" else max(2, lesson.beam)), "the app's beam size"
    word_order = both["lessons"][2]
    assert [run["model"] for run in word_order["pair"]] == list(BOTH)
    assert all((run["layer"], run["head"]) == (3, 2) for run in word_order["pair"])


def test_each_question_is_the_apps_answered_by_the_packed_models_in_every_language(both, checkpoints):
    by_key = {lesson.key: lesson for lesson in LESSONS}
    for shown in both["lessons"]:
        question = predict_question(by_key[shown["key"]], checkpoints.__getitem__)
        assert shown["answer"] == question.answer
        for language in LANGUAGES:
            said_here = both["words"][language]["lessons"][shown["key"]]["question"]
            assert said_here["text"] == said(question.text, language)
            assert said_here["choices"] == [said(choice, language) for choice in question.choices]
            assert said_here["answer"] == said(question.why, language)
        english = both["words"]["en"]["lessons"][shown["key"]]["question"]
        assert english["modelAnswer"] == f"The model's answer: {said(question.choices[question.answer], 'en')}."


def test_the_glossary_keeps_every_word_and_its_bold_terms(both):
    for language in LANGUAGES:
        paragraphs = both["words"][language]["glossary"]
        written = " ".join("".join(run["text"] for run in paragraph) for paragraph in paragraphs)
        assert "**" not in written and "&lt;" not in written and "<s>" in written
        bold = [run["text"] for paragraph in paragraphs for run in paragraph if run["strong"]]
        assert glossary(language).count("**") == 2 * len(bold)


def test_a_model_no_lesson_sets_gets_every_lesson_as_one_that_needs_the_app(checkpoints):
    lessons = pack_lessons({"my-model": checkpoints["multi30k-en-de"]})
    assert lessons["lessons"] == [] and len(lessons["words"]["de"]["needsApp"]) == len(LESSONS)
