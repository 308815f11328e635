"""Lessons for a class, above every tab: pick one, read it, and "Show me" sets the app up exactly as it needs;
beside it the glossary and a large-text switch for the projector."""

from __future__ import annotations

import gradio as gr

from transformer.files.checkpoint import CheckpointError

from . import header
from ..runtime import components
from ..runtime.chart import Chart
from ..runtime.language import ENGLISH
from ..runtime.page import Page
from ..services import Services
from . import analysis, corpus, experiments, explain, translate
from . import inside as inside_tab
from ..views import lessons
from ..views.text import source_label
from ..views.translate import DEFAULT_TARGET_TOKENS


def layout(page: Page) -> None:
    """The lessons panel in the page's language: the list (English values, labels in its language), Show me, the
    projector's switches, the chosen lesson's text, its pair of runs; then the glossary."""
    with gr.Accordion(page.words("lessons.panel"), open=False, elem_id="lessons"):
        with gr.Row():
            lesson_choice = components.Dropdown(lessons.lesson_choice_labels(page.language),
                                                value=lessons.lesson_choices()[0],
                                                label=page.words("lessons.lesson"), scale=3)
            show_me = gr.Button(page.words("lessons.show_me"), variant="primary", scale=1, elem_id="show-me")
            large_text = gr.Checkbox(False, label=page.words("lessons.large_text"), scale=1, elem_id="large-text")
            safe_colours = gr.Checkbox(False, label=page.words("lessons.safe_colours"), scale=1,
                                       elem_id="safe-colours")
        lesson_text = gr.Markdown(lessons.lesson_markdown(lessons.LESSONS[0], page.language), elem_id="lesson-text")
        shown_lesson = gr.State(None)  # the lesson the last Show me set the page up for
        # The two runs a lesson compares, where it compares two: filled by Show me.
        with gr.Row(visible=False, elem_id="lesson-pair") as lesson_pair:
            with gr.Column():
                pair_left_caption = gr.Markdown()
                pair_left_plot = Chart(show_label=False)
            with gr.Column():
                pair_right_caption = gr.Markdown()
                pair_right_plot = Chart(show_label=False)
    with gr.Accordion(page.words("lessons.glossary_title"), open=False):
        gr.Markdown(lessons.glossary(page.language))
    page.add(lesson_choice=lesson_choice, show_me=show_me, large_text=large_text, safe_colours=safe_colours,
             lesson_text=lesson_text, shown_lesson=shown_lesson,
             lesson_pair=lesson_pair, pair_left_caption=pair_left_caption, pair_left_plot=pair_left_plot,
             pair_right_caption=pair_right_caption, pair_right_plot=pair_right_plot)


PAIR_OUTPUTS = ("lesson_pair", "pair_left_caption", "pair_left_plot", "pair_right_caption", "pair_right_plot")


def on_lesson_choice(lesson_choice, language: str = ENGLISH) -> dict:
    """The lesson's text; another lesson's pair of runs is put away until its Show me."""
    return {"lesson_text": lessons.lesson_markdown(lessons.lesson_by_choice(lesson_choice), language),
            "lesson_pair": gr.Row(visible=False)}


def after_show_me(lesson_choice, shown_lesson, language: str = ENGLISH) -> dict:
    """A lesson chosen while Show me was setting up another: the chosen one's text, and the other's pair put
    away. (Cancelling Show me when a lesson is chosen lost a Show me pressed right after choosing: the choice's
    event can reach the server after the press.)"""
    return {} if lesson_choice == shown_lesson else on_lesson_choice(lesson_choice, language)


def pair_views(services: Services, lesson: lessons.Lesson, max_length: int | None, language: str = ENGLISH) -> dict:
    """The lesson's two runs side by side, or nothing shown for a lesson of one run."""
    try:
        multilingual = services.registry.multilingual() if lesson.languages_pair else {}  # reads every config.json
        runs = lessons.side_by_side(lesson, services.registry.get, services.registry.names(), max_length, language,
                                    multilingual)
    except CheckpointError as error:  # set_up has loaded the lesson's own model; the pair's other one may be missing
        return {"lesson_pair": gr.Row(visible=True), "pair_left_plot": None, "pair_right_caption": "",
                "pair_left_caption": lessons.cannot_show(error, language), "pair_right_plot": None}
    if not runs:
        return {"lesson_pair": gr.Row(visible=False)}
    (left_caption, left_plot), (right_caption, right_plot) = runs
    return {"lesson_pair": gr.Row(visible=True), "pair_left_caption": left_caption, "pair_left_plot": left_plot,
            "pair_right_caption": right_caption, "pair_right_plot": right_plot}


def set_up(services: Services, lesson_choice, visible_tab=None, request: gr.Request = None,
           language: str = ENGLISH) -> dict:
    """The lesson's model, sentence, decoding and view, translated, on the lesson's tab, at its step. Its page's
    ``visible_tab`` and ``request`` are read by the page as it follows the switch (``TabChanges.translated``,
    ``model_changed``)."""
    lesson = lessons.lesson_by_choice(lesson_choice)
    checkpoint = services.registry.get(lesson.model)
    shown = lessons.selector_values(lesson)
    views = translate.translation_views(
        services, lesson.model, lesson.sentence, shown["decoding"], max(2, lesson.beam), DEFAULT_TARGET_TOKENS,
        shown["kind"], lesson.view, lesson.layer, shown["head"], shown["average"], step=lesson.step, language=language)
    settings = header.model_settings(checkpoint, lesson.layer, shown["head"], language=language)
    settings["head"] = gr.Slider(settings["head"].minimum, settings["head"].maximum, step=1, value=shown["head"],
                                 interactive=not shown["average"])
    training_there = lesson.tab != "train" or services.training
    return {"model": lesson.model, **settings, **views,
            **pair_views(services, lesson, DEFAULT_TARGET_TOKENS, language),
            "text": gr.Textbox(value=lesson.sentence, label=source_label(checkpoint, language)),
            "decoding": shown["decoding"],
            "beam_size": gr.Slider(value=max(2, lesson.beam), interactive=lesson.beam > 1,
                                   info=translate.beam_info(checkpoint, language)),
            "kind": shown["kind"], "view": lesson.view, "average": shown["average"],
            "alignment_layer": gr.Slider(**analysis.alignment_layers(checkpoint.model.config.n_decoder_layers)),
            # Where training is off (a public Space) the Train tab is not there: the lesson is read where it stands.
            "tabs": gr.Tabs(selected=lesson.tab if training_there else "translate"),
            **(lesson.extra if training_there else {})}


def after_set_up(services: Services, result: dict, lesson_choice, defaults: dict, language: str = ENGLISH) -> dict:
    """What the lesson opens on that the other tabs' answers to a new translation reset: the Inside tab's query,
    and the result the lesson is about (``Lesson.action``), computed with the controls' defaults."""
    lesson = lessons.lesson_by_choice(lesson_choice)
    translation = result["translation_state"]
    shown = lessons.selector_values(lesson)
    if lesson.query is not None:
        result.update(inside_tab.on_opened(
            services, lesson.model, translation, result["tabs_waiting"], shown["kind"], lesson.layer, shown["head"],
            lesson.query, lesson.step, 1.0, 0, 1.0, language=language))
        result.update(inside_tab.looking_at(services.registry.get(lesson.model), translation, shown["kind"],
                                            shown["head"], lesson.step))
    if lesson.tab == corpus.TAB_ID:  # the tab's views are drawn as it opens, which a lesson's switch does not do
        result.update(corpus.on_opened(services, lesson.model, None, translation, corpus.COLOURS[0], progress=None,
                                       language=language), corpus_colour=corpus.COLOURS[0])
    comparison = [defaults[name] for name in ("experiment_kind", "experiment_layer", "experiment_head",
                                              "experiment_measure")]
    if lesson.action == "positions":
        result.update(experiments.on_positions(services, lesson.model, translation, *comparison, language=language),
                      word_order_section=gr.Accordion(open=True))
    elif lesson.action == "importance":
        result.update(experiments.on_importance(services, lesson.model, translation, language=language))
    elif lesson.action == "attribution":
        result.update(explain.on_attribute(
            services, lesson.model, translation, defaults["explain_method"], defaults["explain_steps"],
            defaults["explain_layer"], defaults["explain_head"], language=language))
    elif lesson.action == "layers":
        result.update(inside_tab.on_opened(
            services, lesson.model, translation, result["tabs_waiting"], shown["kind"], lesson.layer, shown["head"],
            1, 1, 1.0, 0, 1.0, language=language))
        result.update(inside_tab.on_layers(services, lesson.model, translation, 1, language=language),
                      layers_section=gr.Accordion(open=True), lens_section=gr.Accordion(open=True))
    elif lesson.action == "patching":
        corrupted = lesson.extra["patch_corrupted"]
        step, alternatives = experiments.pair_choice(services.registry.get(lesson.model), translation, corrupted)
        result.update(experiments.on_patch(services, lesson.model, translation, corrupted, step, alternatives[0],
                                           progress=None, language=language),
                      patch_step=step, patch_alternative=gr.Dropdown(alternatives, value=alternatives[0]),
                      patching_section=gr.Accordion(open=True))
    return result


# Show me returns every control to its default but these: the model and lesson chosen, the page's own settings,
# the Train tab's (which shape no view: a lesson that trains sets its own through Lesson.extra), and the Corpus
# tab's (its views stay as they are, drawn at them, unless the lesson opens the tab and draws them anew).
KEPT = {"model", "lesson_choice", "large_text", "safe_colours", "hub_id", "train_data", "train_preset",
        "train_steps", "train_minutes", "train_upload", *corpus.CONTROLS}
CONTROLS = (gr.Slider, gr.Radio, gr.Checkbox, gr.CheckboxGroup, gr.Dropdown, gr.Number)


def control_defaults(components: dict) -> dict:
    """Every control that changes what a view draws, at the value the page was built with."""
    return {name: component.value for name, component in components.items()
            if isinstance(component, CONTROLS) and name not in KEPT}


def page_settings(language: str = ENGLISH) -> dict:
    """What the page shows of a lesson after its Show me (ui/static/page.js), in ``language``: by the lesson's value
    in the list (English in every language), the element it brings into sight and, beside it, the lesson's title,
    questions and what to look for; the headings of those parts; how long the view is outlined."""
    def beside(lesson: lessons.Lesson) -> dict:
        words = lesson.words(language)
        return {"focus": lesson.focus, "title": words.title, "questions": list(words.questions),
                "lookFor": words.look_for}
    return {"byChoice": {choice: beside(lesson) for choice, lesson in zip(lessons.lesson_choices(), lessons.LESSONS)},
            "parts": lessons.part_titles(language), "outlineMs": lessons.OUTLINE_MS}


def wire(page: Page) -> None:
    """After every tab has declared what a model switch and a translation change in it."""
    c = page.components
    prepared = page.model_changed(page.translated(set_up))
    defaults = control_defaults(page.components)

    def on_show_me(services: Services, lesson_choice, visible_tab, request: gr.Request = None) -> dict:
        # the lesson's tab drawn, the others wait; every word in the page's language
        set_up_views = prepared(services, lesson_choice, visible_tab, request, language=page.language)
        return {**after_set_up(services, {**defaults, **set_up_views}, lesson_choice, defaults, page.language),
                "shown_lesson": lesson_choice}

    extras = [name for lesson in lessons.LESSONS for name in lesson.extra if name in page.components]
    outputs = ["model", "model_status", "layer", "head", "beam_size", "text", "decoding", "kind", "view", "average",
               *defaults, *PAIR_OUTPUTS,
               *translate.TRANSLATION_OUTPUTS, *page.translation_outputs(), *page.model_outputs(), "tabs", *extras,
               *inside_tab.HEAD_OUTPUTS, "inside_kind", "inside_head", "lens_step", "lens_plot", "temperature_plot",
               *inside_tab.TUNED_OUTPUTS, *inside_tab.LAYERS_OUTPUTS, "layers_section", "lens_section",
               *experiments.COMPARISON_OUTPUTS, "importance_plot", "importance_summary", "word_order_section",
               *experiments.PATCHING_OUTPUTS, "patch_step", "patch_alternative", "patching_section",
               *explain.ATTRIBUTION_OUTPUTS, *corpus.CORPUS_VIEWS, "corpus_colour", "shown_lesson"]
    # "multiple": every press sets its lesson up. Under Gradio's default ("once") a press is dropped while the page
    # counts an earlier one as pending, and a teacher's press was seen lost with nothing pending (docs/test-suite.md).
    showing = page.on(c["show_me"].click, on_show_me, outputs, cancels=page.sentence_work, trigger_mode="multiple",
                      progress_on=["lesson_text", *translate.PROGRESS_ON])
    showing.then(None, [c["lesson_choice"]], None, js="(choice) => explorerPage.showLesson(choice)")
    page.then(showing, after_show_me, ["lesson_text", "lesson_pair"], show_progress="hidden")
    page.on(c["lesson_choice"].input, on_lesson_choice, ["lesson_text", "lesson_pair"], show_progress="hidden")
    page.in_browser(c["lesson_choice"].input, "explorerPage.putLessonAway")
    c["large_text"].change(None, c["large_text"], None, js="(large) => explorerDisplay.largeText(large)")
    c["safe_colours"].change(None, c["safe_colours"], None, js="(safe) => explorerDisplay.safeColours(safe)")
