"""The app's handlers, called as plain functions: what each one changes on the page, by component name."""


import gradio as gr
import numpy as np
import pytest

from transformer import data as datasets
from transformer.data import DataError
from transformer.errors import InputError
from ui.tabs import header
from ui.runtime import components
from ui.runtime.page import Page
from ui.tabs import analysis, experiments, explain, inside, model, positions, train, translate
from ui.views import samples
from ui.views.choices import ATTENTION_KINDS, VIEWS
from ui.views.translate import map_block

TAB_MODULES = (translate, inside, experiments, explain, analysis, positions, model, train)
DIGITS = "3 1 4 1 5 9"
CROSS = ATTENTION_KINDS["cross"]


@pytest.fixture(scope="module")
def page(app_services):
    """The Translate and Experiments tabs laid out on a page that is never served."""
    page = Page(app_services)
    with gr.Blocks():
        header.layout(page, app_services.registry.names(), "reverse-tiny")
        checkpoint = app_services.registry.get("reverse-tiny")
        translate.layout(page, checkpoint)
        experiments.layout(page, checkpoint)
    translate.declare(page)
    experiments.declare(page)
    return page


def translated(app_services, text=DIGITS, decoding="greedy", layer=1, head=1, average=False, view=VIEWS[0]):
    return translate.on_translate(app_services, "reverse-tiny", text, decoding, 4, 40, CROSS, view, layer, head,
                                  average)


def test_a_translation_brings_its_text_and_the_numbers_the_page_draws_every_view_from_at_its_first_step(
        app_services):
    """The first step is where decoding starts; the last says only that the sentence ended."""
    views = translated(app_services)
    translation = views["translation_state"]
    assert views["translation"] == translation.text == "9 5 1 4 1 3"
    assert views["step"].maximum == translation.num_steps and views["step"].value == 1
    numbers = views["page_numbers"]
    assert numbers["produced"] == translation.predicted_pieces and len(numbers["steps"]) == translation.num_steps
    assert all(None not in maps["blocks"] for maps in numbers["maps"].values()), "every map of a short sentence"
    assert translated(app_services)["page_numbers"]["sent"] > numbers["sent"], \
        "the same sentence again is new to the page, which draws it at the step the slider is put to"
    assert set(views) == set(translate.TRANSLATION_OUTPUTS), "it names exactly the tab's translation views"


def test_an_empty_box_is_refused_with_a_message_and_changes_nothing(app_services, page):
    with pytest.raises(InputError, match="empty"):
        next(translate.on_translate_click(app_services, "reverse-tiny", "  ", "greedy", 4, 40, CROSS, VIEWS[0], 1, 1,
                                          False))
    outputs = list(translate.TRANSLATION_OUTPUTS)
    run = page.handler(translate.on_translate_click, keep_on_input_problem=True, outputs=outputs)
    with pytest.warns(UserWarning, match="the text box is empty"):  # outside a request, gr.Warning warns
        (values,) = run("reverse-tiny", "", "greedy", 4, 40, CROSS, VIEWS[0], 1, 1, False)
    assert set(values) == {page[name] for name in outputs}
    assert all(isinstance(value, type(gr.skip())) and value == gr.skip() for value in values.values())


def test_averaging_over_heads_disables_the_head_slider():
    assert translate.on_average(True)["head"].interactive is False
    assert translate.on_average(False)["head"].interactive is True


def test_a_typed_step_past_either_end_is_handed_to_the_page_which_moves_the_slider_there():
    """Gradio's own slider would refuse it while still showing it; the page's step script clamps it
    (test_browser.py)."""
    with gr.Blocks():
        slider = components.UnboundedSlider(1, 5, step=1)
    assert slider.preprocess(99) == 99


def test_maps_a_long_translation_left_out_come_when_the_page_asks_for_them(app_services):
    translation = translated(app_services)["translation_state"]
    layers = translation.decoder_attention.shape[0]
    more = translate.on_maps_wanted(translation, f"12:decoder {layers},cross 1,encoder 99,nonsense 1,decoder x")
    assert more["more_maps"]["sent"] == 12, "for the translation the page shows (it drops any other's)"
    assert more["more_maps"]["blocks"] == {f"decoder {layers}": map_block(translation, "decoder", layers),
                                           "cross 1": map_block(translation, "cross", 1)}, "past the model: nothing"
    assert translate.on_maps_wanted(translation, "") == {} and translate.on_maps_wanted(None, "3:cross 1") == {}


def test_a_new_translation_clears_scores_made_for_the_last_sentence(app_services, page):
    result = page.translated(translate.on_translate, "translate")(app_services, "reverse-tiny", DIGITS, "greedy", 4,
                                                                  40, CROSS, VIEWS[0], 1, 1, False)
    cleared = set(page.translation_outputs())
    assert {"forced_state", "forced_probability_plot", "forced_attention_plot"} <= cleared
    assert all(result[name] is None for name in ("forced_state", "forced_probability_plot",
                                                 "forced_attention_plot"))
    assert result["translation"] == "9 5 1 4 1 3", "the hooks add to the translation, never replace it"


def test_a_translation_draws_the_shown_tab_and_another_tab_the_same_views_once_it_is_opened(app_services):
    page = Page(app_services)  # what every tab declares a translation changes in it
    for tab in TAB_MODULES:
        tab.declare(page)
    def shown_on(visible_tab):  # a translation made while the page shows visible_tab
        def translate_there(services, model, text, decoding, beam_size, max_length, kind, view, layer, head, average,
                            visible_tab):
            return translate.on_translate(services, model, text, decoding, beam_size, max_length, kind, view, layer,
                                          head, average)
        return page.translated(translate_there)(
            app_services, "multi30k-en-de", "A dog runs across the grass.", "beam", 5, 40, CROSS, VIEWS[0], 1, 1,
            False, visible_tab)
    on_analysis, on_translate = shown_on("analysis"), shown_on("translate")
    with pytest.raises(TypeError, match="visible_tab"):
        page.translated(translate.on_translate)  # neither a tab it belongs to nor the one shown: refused when wired
    assert "alignment_plot" in on_analysis and "alignment_plot" not in on_translate, "only the shown tab's work"
    assert {"inside", "experiments", "explain", "analysis"} <= set(on_translate["tabs_waiting"])
    assert "analysis" not in on_analysis["tabs_waiting"] and "translate" in on_analysis["tabs_waiting"]
    opened = page.opened_views("analysis")(on_translate["translation_state"], on_translate["tabs_waiting"])
    assert opened["alignment_plot"].to_json() == on_analysis["alignment_plot"].to_json(), "the same views, later"
    assert opened["analysis_sentence"] == on_analysis["analysis_sentence"]
    assert "analysis" not in opened["tabs_waiting"]
    assert page.opened_views("analysis")(on_translate["translation_state"], opened["tabs_waiting"]) == {}, \
        "drawn once per translation"


def test_switching_model_brings_a_sentence_it_reads_and_fits_the_sliders(app_services):
    views = header.on_model(app_services, "reverse-tiny", "A dog runs.", {}, "greedy", 4, 40, CROSS, VIEWS[0],
                            9, 9, False)
    checkpoint = app_services.registry.get("reverse-tiny")
    config = checkpoint.model.config
    assert views["typed_texts"] == {"text": "A dog runs."}, "the English sentence is kept for English models"
    assert views["text"].value.replace(" ", "").isdigit()
    assert views["layer"].maximum == config.n_decoder_layers and views["layer"].value == config.n_decoder_layers
    assert views["head"].value == config.n_heads
    assert views["translation"] == views["translation_state"].text


def test_a_switch_to_the_model_a_page_shows_or_is_switching_to_is_made_once(app_services):
    """A page's ask for the model it shows, or is switching to, changes nothing (the same model picked again, a
    second ask while the first is under way); another page, or another model, is switched to."""
    page = Page(app_services)
    for tab in TAB_MODULES:
        tab.declare(page)
    switch = page.model_changed(page.translated(header.on_model, translate.TAB_ID), asked="model")
    ran = []
    def count(services, model, request: gr.Request = None):
        ran.append(model)
        return {"model": model}
    counted = page.model_changed(count, asked="model")

    def asked(model, session):
        return counted(app_services, model, request=gr.Request(session_hash=session))

    asked("reverse-tiny", "page-a")
    asked("reverse-tiny", "page-a")  # picked again while the first is under way
    asked("reverse-tiny", "page-b")
    asked("multi30k-en-de", "page-a")
    asked("reverse-tiny", "page-a")
    assert ran == ["reverse-tiny", "reverse-tiny", "multi30k-en-de", "reverse-tiny"]
    views = switch(app_services, "reverse-tiny", "A dog runs.", {}, "greedy", 4, 40, CROSS, VIEWS[0], 1, 1, False,
                   request=gr.Request(session_hash="page-a"))
    assert views == {}, "page-a shows reverse-tiny already"
    page.models_shown.shown("page-a", "multi30k-en-de")  # a lesson, or the page's opening, switched it
    views = switch(app_services, "reverse-tiny", "A dog runs.", {}, "greedy", 4, 40, CROSS, VIEWS[0], 1, 1, False,
                   request=gr.Request(session_hash="page-a"))
    assert views["model"].value == "reverse-tiny" and views["translation"]


def test_a_switch_that_fails_leaves_the_page_on_the_model_it_showed(app_services):
    page = Page(app_services)
    page.models_shown.shown("page-a", "reverse-tiny")
    def switch(services, model, request: gr.Request = None):
        return {"model": app_services.registry.get(model).name}
    failing = page.model_changed(switch, asked="model")
    with pytest.raises(Exception):
        failing(app_services, "no-such-model", request=gr.Request(session_hash="page-a"))
    with pytest.raises(TypeError, match="gr.Request"):
        page.model_changed(lambda services, model: {}, asked="model")  # which page switches: unknown
    with page.models_shown.switching("page-a", "reverse-tiny") as new:
        assert not new, "the page still shows the model it showed"
    with page.models_shown.switching("page-a", "no-such-model") as new:
        assert new, "asking for it again tries again"


def test_the_model_tab_draws_the_model_the_page_shows_when_it_opens_and_once(app_services):
    """A model switch leaves the Model tab alone (its views took 100-130 ms of every switch); opening the tab, or
    its redraw after a switch, draws the model that made the page's translation, and nothing while it shows it."""
    opened = model.on_opened(app_services, "reverse-tiny", None)
    assert opened["model_tab_shows"] == "reverse-tiny" and ["d_model", "64"] in opened["model_config"]
    assert model.on_opened(app_services, "reverse-tiny", "reverse-tiny") == {}
    switched = model.on_opened(app_services, "multi30k-en-de", "reverse-tiny")
    assert ["d_model", "256"] in switched["model_config"] and set(model.MODEL_VIEWS) < set(switched)


def test_a_handler_naming_a_component_that_does_not_exist_fails_loudly(page, caplog):
    def on_typo() -> dict:
        return {"translaton": "oops"}

    with pytest.raises(gr.Error, match="Something went wrong"):  # the visitor sees no stack trace
        page.handler(on_typo, outputs=["translation"])()
    assert "returned values for no component: ['translaton']" in caplog.text, "the server log names the typo"


def test_an_answer_bringing_a_translation_names_in_its_numbers_the_selectors_it_sets(app_services):
    """The page's script draws new numbers at the selectors as they were before the answer that brought them
    (Gradio stores an answer's values one by one): the numbers name those the same answer sets, at their values."""
    page = Page(app_services)
    with gr.Blocks():
        header.layout(page, app_services.registry.names(), "reverse-tiny")
        translate.layout(page, app_services.registry.get("reverse-tiny"))
    page.joins(translate.with_selection)
    views = translated(app_services)  # a Translate click sets the step alone

    def answer() -> dict:
        return {**views, "layer": gr.Slider(1, 2, value=2), "head": gr.Slider(interactive=False), "kind": CROSS}

    sent = page.handler(answer)()
    assert sent[page["page_numbers"]]["selection"] == {"step": 1, "layer": 2, "kind": CROSS}
    assert "selection" not in views["page_numbers"], "the handler's own values are left as they were"
    assert translate.with_selection({"step": 3}) == {"step": 3}, "an answer without numbers is sent as it is"


def test_a_handler_reads_the_components_its_parameters_name(page):
    assert page.inputs_of(translate.on_maps_wanted) == [page[name] for name in ("translation_state", "maps_wanted")]


@pytest.fixture
def no_multi30k(monkeypatch, tmp_path):
    """A machine without Multi30K: no directory named, nothing cached, and any attempt to find it fails."""
    monkeypatch.delenv("MULTI30K_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def unavailable(*args, **kwargs):
        raise DataError("Multi30K is not on this machine")
    monkeypatch.setattr(datasets, "multi30k_dir", unavailable)


def test_head_ranking_over_the_sample_uses_sentences_that_ship_with_the_app(app_services, no_multi30k):
    checkpoint = app_services.registry.get("multi30k-en-de")
    sentences = samples.sample_sentences(checkpoint)
    assert len(sentences) == samples.SAMPLE_SIZE and len(set(sentences)) == samples.SAMPLE_SIZE
    assert set(sentences) <= set(samples.SAMPLE_FILE.read_text(encoding="utf-8").splitlines())
    views = experiments.on_importance_sample(app_services, "multi30k-en-de")
    config = checkpoint.model.config
    assert f"mean over {samples.SAMPLE_SIZE} sample sentences" in views["importance_plot"].layout.title.text
    assert np.asarray(views["importance_plot"].data[0].z).shape == (config.n_encoder_layers, config.n_heads)


def test_head_statistics_over_the_sample_work_offline(app_services, no_multi30k):
    views = analysis.on_statistics_sample(app_services, "multi30k-en-de")
    config = app_services.registry.get("multi30k-en-de").model.config
    heads = config.n_heads * (config.n_encoder_layers + 2 * config.n_decoder_layers)
    assert len(views["statistics_table"]) == heads, "one row per head of every kind"
    assert f"Mean over {samples.SAMPLE_SIZE} sample sentences" in views["statistics_caption"]


def test_a_digits_model_ranks_its_heads_on_fresh_task_examples(app_services):
    sentences = samples.sample_sentences(app_services.registry.get("reverse-tiny"))
    assert len(sentences) == samples.SAMPLE_SIZE and all(s.replace(" ", "").isdigit() for s in sentences)


def test_switching_model_with_an_empty_box_translates_the_new_models_example(app_services):
    views = header.on_model(app_services, "reverse-tiny", "", {}, "greedy", 4, 40, CROSS, VIEWS[0], 1, 1, False)
    assert views["text"].value == views["translation_state"].source_text
    assert views["translation"], "the new model shows what it does"


def test_switching_model_leaves_a_suitable_sentence_in_the_box_alone(app_services):
    """Sending the value back would overwrite whatever was typed while the model loaded."""
    views = header.on_model(app_services, "reverse-tiny", "4 5 6", {}, "greedy", 4, 40, CROSS, VIEWS[0], 1, 1,
                            False)
    assert views["text"].value is None and views["translation"] == "6 5 4"


def test_raw_attention_is_written_only_when_asked_for(app_services, tmp_path, monkeypatch):
    written = []
    original = translate.exports.attention_json_file
    monkeypatch.setattr(translate.exports, "attention_json_file", lambda tr: written.append(tr) or original(tr))
    views = translated(app_services)
    assert not written and views["attention_download"].visible is False, "a translation writes no file"
    prepared = translate.on_prepare_attention(views["translation_state"])["attention_download"]
    assert written and prepared.visible is True and prepared.value["orig_name"] == "attention.json"
    with pytest.raises(InputError, match="Translate a sentence first"):
        translate.on_prepare_attention(None)


class Declarations:
    """Stands where a tab's ``declare`` expects the page, and keeps what it declares."""

    def __init__(self):
        self.after_translation, self.after_model_change = [], []

    def when_translated(self, fn, outputs, tab, **options):
        self.after_translation.append((fn, tuple(outputs)))

    def when_model_changes(self, fn, outputs):
        self.after_model_change.append((fn, tuple(outputs)))


@pytest.mark.parametrize("tab", TAB_MODULES, ids=lambda tab: tab.__name__.rsplit(".", 1)[1])
def test_what_a_tab_declares_a_translation_or_a_model_switch_changes_is_exactly_what_it_changes(
        tab, app_services, translation):
    """A tab names its outputs before any call (Gradio needs them to build the page) and returns them by name
    after: the two lists are held equal here, so neither can grow without the other."""
    declared = Declarations()
    tab.declare(declared)
    for fn, outputs in declared.after_translation:
        assert sorted(fn(translation)) == sorted(outputs), fn.__qualname__
    for fn, outputs in declared.after_model_change:
        assert sorted(fn(app_services.registry.get("multi30k-en-de"))) == sorted(outputs), fn.__qualname__


def test_a_pages_generator_ends_on_values_that_change_nothing_and_a_scripts_on_its_last(app_services):
    """Gradio sends a generator's last values again when it ends: the page's big answer is not sent twice, and a
    script (an event with an api_name) reads the last real values as its answer."""
    page = Page(app_services)
    page.add(notes=gr.Markdown())

    def counting():
        yield {"notes": "one"}
        yield {"notes": "two"}
    for_page = list(page.handler(counting, outputs=["notes"])())
    for_script = list(page.handler(counting, outputs=["notes"], page_only=False)())
    assert [values[page["notes"]] for values in for_script] == ["one", "two"]
    assert for_page[:2] == for_script and for_page[2] == {page["notes"]: gr.skip()}

