"""Lessons for a class: each explains, asks and says what to look for, and its "Show me" sets up exactly the
view it talks about."""

import re

import numpy as np
import pytest

from transformer import interventions
from ui import lessons as lessons_panel
from ui import services
from ui.build import build_app
from ui.views import lessons
from ui.views.choices import ATTENTION_KINDS


def sentences(text: str) -> int:
    return len(re.findall(r"[.!?](?:\s|$)", text))


def test_there_are_at_least_eight_lessons_each_short_with_questions_and_what_to_look_for():
    assert len(lessons.LESSONS) >= 8
    for lesson in lessons.LESSONS:
        assert 2 <= sentences(lesson.explanation) <= 4, lesson.title
        assert 1 <= len(lesson.questions) <= 2 and all(q.endswith("?") or q.endswith(".") for q in lesson.questions)
        assert lesson.look_for
    titles = " ".join(lesson.title.lower() for lesson in lessons.LESSONS)
    for topic in ("where each word looks", "cannot see the future", "heads specialise", "positions matter",
                  "few heads matter", "trains", "computed", "explain"):
        assert topic in titles, topic


@pytest.mark.parametrize("choice", lessons.lesson_choices())
def test_show_me_sets_up_exactly_what_the_lesson_needs(app_services, choice):
    lesson = lessons.lesson_by_choice(choice)
    result = lessons_panel.set_up(app_services, choice, 60)
    translation = result["translation_state"]
    assert result["model"] == lesson.model and result["text"].value == lesson.sentence
    assert translation.source_text == lesson.sentence
    assert result["decoding"] == ("greedy" if lesson.beam == 1 else "beam")
    assert result["kind"] == ATTENTION_KINDS[lesson.kind] and result["view"] == lesson.view
    assert result["layer"].value == lesson.layer
    assert result["average"] == (lesson.head is None) and result["head"].interactive == (lesson.head is not None)
    if lesson.head is not None:
        assert result["head"].value == lesson.head
    expected_step = lesson.step or translation.num_steps
    assert result["step"].value == expected_step and f"Step {expected_step} of" in result["step_caption"]
    assert result["tabs"].selected == lesson.tab
    assert all(result[name] == value for name, value in lesson.extra.items())
    assert result["lesson_pair"].visible == (lesson.pair is not None)
    for run, side in zip(lesson.pair or (), ("left", "right")):
        caption, figure = result[f"pair_{side}_caption"], result[f"pair_{side}_plot"]
        shown = caption.replace("\\", "")  # markdown escapes
        if run.model not in app_services.registry.names():  # a Hub model this server has not opened
            assert figure is None and "not open on this server" in caption and "Open a model from the Hub" in caption
            continue
        assert run.sentence in shown and run.model in shown
        assert ("without the positional encoding" in caption) == (not run.positions)
        assert figure.data[0].type == "heatmap" and "Cross-attention" in figure.layout.title.text


def test_the_lessons_that_compare_two_runs_show_them_side_by_side_and_say_what_differs(app_services):
    compared = {lesson.title: lesson for lesson in lessons.LESSONS if lesson.pair}
    assert {"Positions matter", "Word order differs across languages"} <= set(compared)
    order = lessons.side_by_side(compared["Word order differs across languages"], app_services.registry.get,
                                 app_services.registry.names())
    assert "English → German" in order[0][0] and "English → French" in order[1][0]
    positions = lessons.side_by_side(compared["Positions matter"], app_services.registry.get,
                                     app_services.registry.names())
    translations = {caption.rsplit("→", 1)[1] for caption, _ in positions}
    assert len(translations) == 1, "without positions, who bites whom is lost: one translation for both"


def test_without_positions_both_sentences_get_the_same_attention_with_dog_and_man_trading_places(app_services):
    checkpoint = app_services.registry.get("multi30k-en-de")
    dog_first, man_first = (checkpoint.translate(sentence, 5, positions=False)
                            for sentence in ("The dog bites the man.", "The man bites the dog."))
    assert dog_first.predicted_pieces == man_first.predicted_pieces
    columns = list(range(len(dog_first.source_pieces)))
    dog, man = dog_first.source_pieces.index("▁dog"), dog_first.source_pieces.index("▁man")
    columns[dog], columns[man] = man, dog
    assert np.allclose(dog_first.cross_attention, man_first.cross_attention[..., columns], atol=1e-4)


def test_a_pair_whose_other_model_is_missing_shows_one_side_and_says_so_of_the_other(app_services):
    class WithoutFrench:
        def names(self):
            return [name for name in app_services.registry.names() if name != "multi30k-en-fr"]

        def get(self, name):
            return app_services.registry.get(name)

    lesson = next(lesson for lesson in lessons.LESSONS if lesson.title == "Word order differs across languages")
    shown = lessons_panel.pair_views(services.Services(WithoutFrench(), app_services.jobs, False), lesson, 60)
    assert shown["lesson_pair"].visible and shown["pair_left_plot"] is not None and shown["pair_right_plot"] is None
    assert "multi30k-en-fr** is not open on this server." in shown["pair_right_caption"].replace("\\", "")


def test_the_real_translator_lesson_sets_the_caption_model_beside_an_opus_mt_model_when_one_is_open(app_services):
    lesson = next(lesson for lesson in lessons.LESSONS if lesson.title == "A real translator")
    names = [*app_services.registry.names(), "Helsinki-NLP--opus-mt-en-de"]
    opened = lambda name: app_services.registry.get("multi30k-en-fr" if "opus" in name else name)  # noqa: E731
    (left, _), (right, figure) = lessons.side_by_side(lesson, opened, names, 60)
    assert "English → German" in left and lesson.sentence in left.replace("\\", "")
    assert figure is not None and "multi30k-en-fr" in right.replace("\\", "")  # the stand-in, under the Hub's name
    (_, _), (missing, nothing) = lessons.side_by_side(lesson, app_services.registry.get,
                                                      app_services.registry.names(), 60)
    assert nothing is None and "Open Helsinki\\-NLP/opus\\-mt\\-en\\-de under *Open a model from the Hub*" in missing


def test_the_lesson_on_one_weight_opens_inside_the_head_on_its_query(app_services):
    choice = next(c for c in lessons.lesson_choices() if "computed" in c)
    result = lessons_panel.after_set_up(app_services, lessons_panel.set_up(app_services, choice, 60), choice)
    assert result["inside_query"].value == 3 and result["inside_head"] == 2
    assert "layer 3, head 2.** Query 3 is step 3: it reads **▁Hund** and produced **▁rennt**" in result[
        "inside_summary"]


def test_the_first_lesson_says_what_the_model_really_does_at_its_step(app_services):
    result = lessons_panel.set_up(app_services, lessons.lesson_choices()[0], 60)
    translation = result["translation_state"]
    step = lessons.LESSONS[0].step
    assert translation.predicted_pieces[step - 1] == "▁Ball"
    assert translation.source_pieces[int(translation.cross_attention[2, 1, step - 1].argmax())] == "▁ball"


def test_choosing_a_lesson_shows_its_text():
    text = lessons_panel.on_lesson_choice(lessons.lesson_choices()[2])["lesson_text"]
    assert text.startswith("### Heads specialise") and "**Ask the class**" in text and "**Look for:**" in text


def test_where_training_is_off_the_training_lesson_stays_on_the_translate_tab(app_services):
    off = services.Services(app_services.registry, training=False)
    choice = next(c for c in lessons.lesson_choices() if "trains" in c)
    result = lessons_panel.set_up(off, choice, 60)
    assert result["tabs"].selected == "translate" and "train_data" not in result
    demo = build_app(off, "reverse-tiny")  # the page builds without the Train tab's components
    assert demo.get_config_file()["components"]


def test_the_positions_lesson_quotes_what_the_model_really_answers(app_services):
    checkpoint = app_services.registry.get("multi30k-en-de")
    answers = {interventions.without_positions(checkpoint, sentence, beam_size=5, max_length=60).after.text
               for sentence in ("The dog bites the man.", "The man bites the dog.")}
    assert len(answers) == 1
    lesson = next(lesson for lesson in lessons.LESSONS if lesson.title == "Positions matter")
    answer = answers.pop()
    assert f"('{answer}'" in lesson.look_for
    captions = [caption for caption, _ in lessons.side_by_side(lesson, app_services.registry.get, app_services.registry.names(), 60)]
    assert all(caption.replace("\\", "").endswith(f"→ *{answer}*") for caption in captions)


def test_the_word_order_lesson_says_what_the_two_models_really_do(app_services):
    """French 'ballon rouge' crosses English 'red ball' in layer 3, head 2; German 'roten Ball' keeps its order."""
    lesson = next(lesson for lesson in lessons.LESSONS if lesson.title == "Word order differs across languages")
    looked_at = {}
    for run in lesson.pair:
        translation = app_services.registry.get(run.model).translate(run.sentence, lesson.beam)
        weights = translation.cross_attention[lesson.layer - 1, lesson.head - 1]
        looked_at[run.model] = {piece: translation.source_pieces[int(weights[i].argmax())]
                                for i, piece in enumerate(translation.predicted_pieces)}
        if run.model == lesson.model:
            assert translation.predicted_pieces[lesson.step - 2: lesson.step] == ["▁ballon", "▁rouge"]
    assert looked_at["multi30k-en-fr"]["▁ballon"] == "▁ball" and looked_at["multi30k-en-fr"]["▁rouge"] == "▁red"
    assert looked_at["multi30k-en-de"]["▁roten"] == "▁red" and looked_at["multi30k-en-de"]["▁Ball"] == "▁ball"
