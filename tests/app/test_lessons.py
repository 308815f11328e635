"""Lessons for a class: each explains, asks and says what to look for, and its "Show me" sets up exactly the
view it talks about."""

import random
import re

import gradio as gr
import numpy as np
import pytest

from page_driver import PageDriver
from transformer.inside import interventions
from ui.tabs import lessons as lessons_panel
from ui import services
from ui.build import build_app
from ui.views import lessons
from ui.views import explorer as explorer_views
from ui.views.choices import ATTENTION_KINDS, VIEWS
from helpers import panels_drawn


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


@pytest.fixture(scope="module")
def page(app_services):
    """The whole app's page, its events run as a visitor's clicks run them."""
    driver = PageDriver(build_app(app_services))
    driver.run(driver.event("on_open", "ui.tabs.header"))
    return driver


def show_me(page: PageDriver, choice: str) -> dict:
    """Press Show me on a lesson; what it put on the page, by component name."""
    named = page.demo.named_components
    page.set(named["lesson_choice"], choice)
    result = page.run(page.event("on_show_me"))
    names = {component._id: name for name, component in named.items()}
    return {names[component._id]: value for component, value in result.items()}


def value(update):
    """A control's value in an answer: a value, or an update (gr.Slider(...)) holding one."""
    return getattr(update, "value", update)


def drawn_heatmap(views: dict):
    """The heatmap the page draws of the answer's numbers at the selection it sets (test_page_figures.py holds the
    page's figures equal to the server's)."""
    return explorer_views.attention_figure(views["translation_state"], views["kind"], views["view"],
                                            value(views["layer"]), value(views["head"]), views["average"],
                                            marked_step=value(views["step"]))


def assert_draws_what_it_promises(lesson: lessons.Lesson, views: dict, checkpoint) -> None:
    """The rendered views, not only the controls: the heatmap's title, how many heads it draws, the row it marks."""
    config = checkpoint.model.config
    layers, heads = max(config.n_encoder_layers, config.n_decoder_layers), config.n_heads
    translation = views["translation_state"]
    assert translation.source_text == lesson.sentence and views["text"].value == lesson.sentence
    figure = drawn_heatmap(views)
    title, traces = figure.layout.title.text, [trace for trace in figure.data if trace.type == "heatmap"]
    if lesson.view == VIEWS[0]:
        which = f"layer {lesson.layer}, mean of {heads} heads" if lesson.average else \
            f"layer {lesson.layer}, head {lesson.head}"
        assert which in title and len(traces) == 1, (lesson.title, title)
        if lesson.kind != "encoder":
            (mark,) = figure.layout.shapes
            assert (mark.y0 + mark.y1) / 2 == lesson.step - 1, lesson.title
    elif lesson.view == VIEWS[1]:
        assert f"layer {lesson.layer}, all heads" in title and panels_drawn(traces[0]) == heads, \
            (lesson.title, title)
    else:
        assert "every layer and head" in title and panels_drawn(traces[0]) == layers * heads, (lesson.title, title)
    assert views["average"] == lesson.average and views["head"].interactive == (not lesson.average)
    caption = views["page_numbers"]["steps"][lesson.step - 1]["caption"]
    assert views["step"].value == lesson.step and caption.startswith(f"Step {lesson.step} of")
    assert views["kind"] == ATTENTION_KINDS[lesson.kind] and views["view"] == lesson.view
    assert views["tabs"].constructor_args["selected"] == lesson.tab
    assert all(views[name] == value for name, value in lesson.extra.items())
    assert views["lesson_pair"].visible == (lesson.pair is not None)
    if lesson.action == "positions":
        assert views["experiment_after"] and views["word_order_section"].open
    if lesson.action == "importance":
        assert views["importance_plot"] is not None and views["importance_summary"]
    if lesson.action == "patching":
        assert views["patching_heads"] is not None and views["patching_section"].open
        assert value(views["patch_step"]) == lesson.step and "“▁sie” rather than “▁er”" in views["patching_summary"]
    if lesson.action == "layers":
        assert views["layers_section"].open and views["lens_section"].open and views["decoderlens_map"] is not None
        assert len(views["layers_state"]) == config.n_encoder_layers and views["tuned_plot"] is not None
    if lesson.action == "attribution":
        table = views["explain_agreement"]
        assert len(getattr(table, "data", table)) > 0  # a DataFrame, or a Styler of one


def random_clicks(page: PageDriver, rng: random.Random) -> None:
    """A visitor's own settings left behind: every control Show me resets moved elsewhere, the views redrawn."""
    named = page.demo.named_components
    for name in sorted(lessons_panel.control_defaults(named)):
        component = named[name]
        if isinstance(component, gr.Checkbox):
            page.set(component, rng.random() < 0.5)
        elif isinstance(component, gr.Slider):
            page.set(component, rng.randint(int(component.minimum), int(component.maximum)))
        elif isinstance(component, (gr.Radio, gr.Dropdown)) and component.choices \
                and not getattr(component, "multiselect", False):
            page.set(component, rng.choice(component.choices)[1])
    page.run(page.event("on_average", "ui.tabs.translate"))


@pytest.mark.slow
def test_show_me_draws_what_each_lesson_promises_in_order_and_in_reverse_after_random_clicks(page, app_services):
    choices = lessons.lesson_choices()
    for choice in choices:
        lesson = lessons.lesson_by_choice(choice)
        assert_draws_what_it_promises(lesson, show_me(page, choice), app_services.registry.get(lesson.model))
    rng = random.Random(0)
    for choice in reversed(choices):
        random_clicks(page, rng)
        lesson = lessons.lesson_by_choice(choice)
        assert_draws_what_it_promises(lesson, show_me(page, choice), app_services.registry.get(lesson.model))


def lesson_walk(length: int, seed: int = 0) -> list[str]:
    """Lessons in ``length`` orders: each lesson right after the training lesson (the smallest model), then at
    random, no lesson twice in a row."""
    choices = lessons.lesson_choices()
    training = "training"
    walk = [step for choice in choices if choice != training for step in (training, choice)]
    rng = random.Random(seed)
    while len(walk) < length + 1:
        walk.append(rng.choice([choice for choice in choices if choice != walk[-1]]))
    return walk


@pytest.mark.slow
def test_after_any_lesson_every_slider_of_every_tab_holds_a_value_within_its_own_range(page):
    """A value set without its range (the logit lens's step 3 left with a range of 2) makes Gradio refuse the next
    event that reads it, so the tab the lesson opens shows errors."""
    walk = lesson_walk(40)
    for before, choice in zip(walk, walk[1:]):
        show_me(page, choice)
        assert page.out_of_range() == {}, f"{choice} after {before}"


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

        def multilingual(self):
            return {}

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


def test_the_lesson_on_one_weight_opens_inside_the_head_on_its_query(page):
    result = show_me(page, "one_weight")
    assert result["inside_query"].value == 3 and result["inside_head"].value == 2
    assert "layer 3, head 2.** Query 3 is step 3: it reads **▁Hund** and produced **▁rennt**" in result[
        "inside_summary"]


def test_the_lesson_on_what_each_layer_knows_says_what_the_layers_really_write(page, app_services):
    lesson = lessons.lesson_by_choice("each_layer_knows")
    views = show_me(page, "each_layer_knows")
    by_layer = [translation.text for translation in views["layers_state"]]
    assert by_layer[0].endswith("auf den Bus im Regen.") and by_layer[1] == by_layer[2]
    assert by_layer[1].endswith("im Regen auf den Bus.")
    assert "From layer 2 on it writes the final translation" in str(views["decoderlens_summary"])
    assert "'auf den Bus im Regen'" in lesson.look_for and "'im Regen auf den Bus'" in lesson.look_for
    tuned = views["tuned_text"].split("\n")[-3]  # decoder layer 1's row: | 1 | logit | tuned |
    logit_kl, tuned_kl = (float(cell) for cell in tuned.strip("| ").split(" | ")[1:])
    assert tuned_kl < logit_kl / 2, "the tuned lens's KL is less than half the logit lens's at layer 1"


def test_the_first_lesson_says_what_the_model_really_does_at_its_step(app_services):
    result = lessons_panel.set_up(app_services, lessons.lesson_choices()[0])
    translation = result["translation_state"]
    step = lessons.LESSONS[0].step
    assert translation.predicted_pieces[step - 1] == "▁Ball"
    assert translation.source_pieces[int(translation.cross_attention[2, 1, step - 1].argmax())] == "▁ball"


def test_choosing_a_lesson_shows_its_text():
    text = lessons_panel.on_lesson_choice(lessons.lesson_choices()[2])["lesson_text"]
    assert text.startswith("### Heads specialise") and "**Ask the class**" in text and "**Look for:**" in text


def test_a_lesson_chosen_while_show_me_ran_keeps_its_text_and_puts_the_other_lessons_pair_away():
    word_order, first = lessons.lesson_choices()[4], lessons.lesson_choices()[0]
    assert lessons_panel.after_show_me(word_order, shown_lesson=word_order) == {}, "the pair Show me drew stays"
    settled = lessons_panel.after_show_me(first, shown_lesson=word_order)
    assert settled["lesson_text"].startswith("### " + lessons.LESSONS[0].title)
    assert settled["lesson_pair"].visible is False


def test_where_training_is_off_the_training_lesson_stays_on_the_translate_tab(app_services):
    off = services.Services(app_services.registry, training=False)
    result = lessons_panel.set_up(off, "training")
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


def test_a_lesson_is_named_by_its_key_so_reworded_titles_and_a_new_lesson_pair_every_question_with_its_own(
        monkeypatch):
    from ui.runtime import language
    from ui.views import questions
    asked_before = {lesson.key: questions.PREDICT[lesson.key] for lesson in lessons.LESSONS}
    english = language.table("en")  # the page's English words, read once: reworded in place for this test
    for lesson in lessons.LESSONS:
        monkeypatch.setitem(english, f"lessons.{lesson.key}.title", f"Reworded: {lesson.key[::-1]}")
    inserted = lessons.Lesson("where_each_word_looks_again", layer=3, head=2, step=9, focus="step-view")
    for part in ("title", "explanation", "ask.1", "look_for"):
        monkeypatch.setitem(english, f"lessons.{inserted.key}.{part}", f"A new lesson's {part}")
    monkeypatch.setattr(lessons, "LESSONS", (inserted, *lessons.LESSONS))
    for lesson in lessons.LESSONS[1:]:
        assert lessons.lesson_by_choice(lesson.key) is lesson
        assert questions.PREDICT[lessons.lesson_by_choice(lesson.key).key] is asked_before[lesson.key]
    assert [value for _, value in lessons.lesson_choice_labels()][1:] == list(asked_before)
    assert lessons.lesson_choice_labels()[1][0] == "2. Reworded: skool_drow_hcae_erehw"


def test_until_the_next_release_a_lessons_old_value_still_names_it():
    assert lessons.lesson_by_choice("3. Heads specialise") is lessons.LESSONS[2]
    assert lessons.lesson_by_choice("heads_specialise") is lessons.LESSONS[2]
    assert lessons.lesson_by_choice("no such lesson") is lessons.LESSONS[0]
