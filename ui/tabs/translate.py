"""The Translate tab: translate, step through the decoding, attention heatmaps, and forced decoding."""

from __future__ import annotations

import itertools

import gradio as gr
from gradio.components import Component

from transformer.errors import InputError
from transformer.files.checkpoint import Checkpoint
from transformer.paper.translation import Translation

from ..drawing import figures
from ..runtime import batching, components
from ..runtime.chart import Chart
from ..runtime.costly import page_of
from ..runtime.live import Done, as_it_happens
from ..runtime.errors import warn
from ..runtime.language import DECIMAL_MARK, ENGLISH, Number, message, table
from ..runtime.language import text as words_in
from ..runtime.page import Page
from ..runtime.page_data import PageData
from ..services import Services
from ..views import exports, live
from ..views.choices import (ATTENTION_KINDS, MEAN_OF_HEADS, VIEWS, attention_kind_choices, chosen_head,
                             head_choices, require_translation, view_choices)
from ..views.text import MAX_INPUT_CHARS, examples_for, source_label
from ..views.explorer import FIGURES, VIEW_FIGURES, page_numbers, view_frame
from ..views.translate import (DEFAULT_TARGET_TOKENS, MAX_BEAM, TARGET_TOKENS, TranslateResult, attention_tensor,
                               beams_of, forced_figures, layer_and_head_counts, length_penalty_origin, map_block,
                               marked_pieces, notes_markdown, run_forced, run_translation, source_pieces, step_view,
                               titles)

TAB_ID, TITLE = "translate", message("translate.title")  # the tab's id in the page, and its label

CHARTS = {"topK": "topk-plot", "stepAttention": "step-attention", "heatmap": "attention-plot"}  # their elem_ids
# The words of every chart as text (ui/static/chart_text.js), by its name for each: translate.chart.<key>.
CHART_TEXT_WORDS = {"asText": "as_text", "untitled": "untitled", "more": "more", "row": "row", "column": "column",
                    "strongest": "strongest", "cell": "cell", "series": "series", "point": "point",
                    "values": "values", "value": "value"}


def page_settings(language: str = ENGLISH) -> dict:
    """The page draws every chart of the tab from a translation's numbers (page_numbers; ui/static/explorer.js):
    what its script needs to know of this tab, in the page's config, with its words in ``language`` (the kinds'
    and views' values stay English: the radios send them). ``words.chartText``: the words of ui/static/chart_text.js,
    which says every chart of the page as text."""
    words, named = table(language), titles(language)
    return {"kinds": ATTENTION_KINDS, "viewFigures": VIEW_FIGURES, "charts": CHARTS,
            "which": {"oneHead": named["oneHead"], "meanOfHeads": named["meanOfHeads"]},
            "words": {"noTranslation": words["translate.step.none"], "current": words["translate.piece.current"],
                      "forced": words["translate.piece.forced"],
                      "chartText": {"decimalMark": DECIMAL_MARK[language],
                                    **{name: words[f"translate.chart.{key}"]
                                       for name, key in CHART_TEXT_WORDS.items()}}}}


# A click on a cell of the heatmap, where its rows are decoding steps, moves the step view to that cell's step.
STEP_VIEW_ID = "step-view"  # the step view's top: where a click that opens it on a step brings the page
STEP_PICKER = {"charts": f"#{CHARTS['heatmap']}", "slider": "#step-slider", "shownNext": STEP_VIEW_ID,
               "rowsMeta": figures.ROWS_ARE_STEPS}
SENT = itertools.count(1)  # each translation's numbers are new to the page, the same sentence's too


def layout(page: Page, checkpoint: Checkpoint) -> None:
    sentence_layout(page, checkpoint)
    step_layout(page)
    heatmap_layout(page, checkpoint)
    forced_layout(page, checkpoint)


def sentence_layout(page: Page, checkpoint: Checkpoint) -> None:
    """The sentence, how to decode it, and its translation with notes and the pieces the encoder saw."""
    examples, words = examples_for(checkpoint), page.words
    with gr.Row():
        with gr.Column(scale=3):
            # One line grows to four as the text wraps; Enter translates (Gradio submits on Enter only in a box
            # that starts with one line).
            text = gr.Textbox(label=source_label(checkpoint, page.language), value=examples[0], lines=1, max_lines=4,
                              max_length=MAX_INPUT_CHARS, elem_id="source-text",
                              info=words("translate.source.info", most=Number(MAX_INPUT_CHARS, ",")))
            example_list = gr.Dataset(components=[gr.Textbox(visible=False)], samples=[[e] for e in examples],
                                      label=words("translate.examples"), elem_id="examples")
        with gr.Column(scale=2):
            # The values stay English: handlers and scripts read them.
            decoding = components.Radio([(words(f"translate.decoding.{way}"), way) for way in ("greedy", "beam")],
                                        value="beam", label=words("translate.decoding"))
            beam_size = components.Slider(2, MAX_BEAM, value=5, step=1, label=words("translate.beam_size"),
                                          elem_id="beam-size")
            max_length = components.Slider(*TARGET_TOKENS, value=DEFAULT_TARGET_TOKENS, step=1,
                                           label=words("translate.max_tokens"), elem_id="max-tokens")
            with gr.Row():
                translate_button = gr.Button(words("translate.button"), variant="primary", elem_id="translate-button")
                # Ends a long search where it is; what it has is then shown as a finished translation.
                translate_stop = gr.Button(words("translate.stop"), variant="secondary", scale=0,
                                           elem_id="stop-button")
    translation = gr.Textbox(label=words("translate.translation"), interactive=False, elem_id="translation")
    notes = gr.Markdown()
    # Each piece's label is drawn in white on its colour: these keep 4.5:1 (WCAG AA).
    source_tokens = gr.HighlightedText(label=words("translate.source_pieces"),
                                       color_map={words("translate.piece.special"): "#595959"})
    page.add(text=text, example_list=example_list, decoding=decoding, beam_size=beam_size, max_length=max_length,
             translate_button=translate_button, translate_stop=translate_stop, translation=translation, notes=notes,
             source_tokens=source_tokens)


def step_layout(page: Page) -> None:
    """Stepping through the decoding: the slider, the step's caption, the pieces so far and its two charts."""
    words = page.words
    gr.Markdown(words("translate.step.intro"), elem_id=STEP_VIEW_ID)
    with gr.Row():
        previous_step = gr.Button(words("translate.step.previous"), size="sm", scale=0)
        step = components.UnboundedSlider(1, 2, value=1, step=1, label=words("translate.step"), elem_id="step-slider", scale=4)
        next_step = gr.Button(words("translate.step.next"), size="sm", scale=0)
    with gr.Row():
        step_caption = gr.Markdown(elem_id="step-caption")
        look_inside = gr.Button(words("translate.step.look_inside"), size="sm", scale=0, elem_id="look-inside")
    revealed = gr.HighlightedText(label=words("translate.revealed"),
                                  color_map={words("translate.piece.current"): "#b34700",
                                             words("translate.piece.forced"): "#595959"}, elem_id="revealed")
    with gr.Row():
        top_k_plot = Chart(label=words("translate.top_k"), elem_id=CHARTS["topK"])
        step_attention_plot = Chart(label=words("translate.step_attention"), elem_id=CHARTS["stepAttention"])
    # Mounted but not shown ("hidden"), so that their changes reach the page's script.
    page.add(previous_step=previous_step, step=step, next_step=next_step, step_caption=step_caption,
             look_inside=look_inside, page_numbers=PageData(js_on_load="watch('value', () => explorer.arriving());"),
             live_step=PageData(),  # a step as decided
             maps_wanted=gr.Textbox("", visible="hidden"), more_maps=PageData(),
             revealed=revealed, top_k_plot=top_k_plot, step_attention_plot=step_attention_plot)


def heatmap_layout(page: Page, checkpoint: Checkpoint) -> None:
    """The attention heatmaps: which kind, view, layer and head, and the raw attention to download."""
    layers, heads = layer_and_head_counts(checkpoint)
    words = page.words
    gr.Markdown(words("translate.heatmap.intro"))
    with gr.Row():
        # Labelled in the page's language; the values stay English (scripts send them).
        kind = components.Radio(attention_kind_choices(page.language), value=ATTENTION_KINDS["cross"],
                                label=words("translate.kind"), scale=3, elem_id="attention-kind")
        view = components.Radio(view_choices(page.language), value=VIEWS[0], label=words("translate.view"), scale=3,
                                elem_id="attention-view")
    with gr.Row():
        layer = components.Slider(1, layers, value=1, step=1, label=words("translate.layer"), elem_id="layer-slider")
        head = components.Slider(1, heads, value=1, step=1, label=words("translate.head"), elem_id="head-slider")
        average = gr.Checkbox(False, label=words("translate.average"), elem_id="average-heads")
    attention_plot = Chart(label=words("translate.heatmap"), elem_id=CHARTS["heatmap"])
    with gr.Row():
        # Written when asked for, not at every translation: each file can be megabytes and is kept an hour.
        attention_prepare = gr.Button(words("translate.attention.prepare"), size="sm", scale=0,
                                      elem_id="attention-prepare")
        attention_download = gr.DownloadButton(words("translate.attention.download"), visible=False, size="sm",
                                               scale=0, elem_id="attention-download")
    page.add(kind=kind, view=view, layer=layer, head=head, average=average, attention_plot=attention_plot,
             attention_prepare=attention_prepare, attention_download=attention_download)


def forced_layout(page: Page, checkpoint: Checkpoint) -> None:
    """Forced decoding: the visitor's own translation, scored token by token."""
    layers, heads = layer_and_head_counts(checkpoint)
    words = page.words
    gr.Markdown(words("translate.forced.intro"))
    own_translation = gr.Textbox(label=words("translate.forced.own"), lines=1, max_lines=4,
                                 max_length=MAX_INPUT_CHARS,
                                 info=words("translate.forced.own.info", most=Number(MAX_INPUT_CHARS, ",")))
    with gr.Row():
        forced_button = gr.Button(words("translate.forced.button"))
        forced_layer = components.Slider(1, layers, value=layers, step=1, label=words("translate.forced.layer"))
        forced_head = components.Dropdown(head_choices(heads, page.language), value=MEAN_OF_HEADS,
                                          label=words("translate.head"))
    with gr.Row():
        forced_probability_plot = Chart(label=words("translate.forced.probability"), elem_id="forced-probability")
        forced_attention_plot = Chart(label=words("translate.forced.attention"), elem_id="forced-attention")
    page.add(own_translation=own_translation, forced_button=forced_button, forced_layer=forced_layer,
             forced_head=forced_head, forced_probability_plot=forced_probability_plot,
             forced_attention_plot=forced_attention_plot, forced_state=gr.State(None))


# --- handlers ------------------------------------------------------------------------------------

# What the page's script reads and sets (ui/static/explorer.js): the selection, what it last asked the server
# for, and the step view it draws.
SELECTORS = ("kind", "view", "layer", "head", "average", "step")
SELECTION = (*SELECTORS, "maps_wanted")
STEP_TEXT = ("step", "revealed", "step_caption", "maps_wanted")
TRANSLATION_OUTPUTS = ("translation_state", "translation_model", "translation", "notes", "source_tokens",
                       "attention_download", "page_numbers", "step")
LIVE_OUTPUTS = ("translation", "live_step", "notes", "source_tokens")  # what a step of a search under way sets
# Where a translation under way shows (Gradio's timer and spinner); the charts are redrawn in place as it lands.
PROGRESS_ON = ("translation",)
MOST_BLOCKS_ASKED = 64  # maps of one kind and layer a page may ask for at once (a model view of every layer)


def translated(result: TranslateResult, step: int, model: str, language: str = ENGLISH) -> dict:
    """What a Translate click and ``/translate`` both return: the translation kept for every other view with the
    name of the model that made it, its text, notes and source pieces, the step slider at ``step``, and the
    attention download hidden (each file can be megabytes, and Gradio keeps a copy: it is written only when asked
    for).

    The other tabs' handlers read the model from ``translation_model``, not from the model list: during a switch the
    list already names the new model while the translation is still the old one's."""
    translation = result.translation
    steps = translation.num_steps
    return {"translation_state": translation, "translation_model": model, "translation": translation.text,
            "notes": notes_markdown(result.notes), "source_tokens": source_pieces(translation, language),
            "attention_download": gr.DownloadButton(value=None, visible=False),
            "step": gr.Slider(1, max(2, steps), value=step, step=1, interactive=steps > 1)}


def translation_views(services: Services, model, text, decoding, beam_size, max_length, kind, view, layer, head,
                      average, step: int = 1, language: str = ENGLISH) -> dict:
    """Translate ``text`` with ``model``: its text and notes (in ``language``), and the numbers the page draws every
    view of the tab from, at the selection it shows (the step view at ``step``: its first, where the decoding
    starts, unless a lesson says)."""
    result = run_translation(services.registry.get(model), text, decoding, beam_size, max_length, language=language)
    return views_of_translation(result, model, kind, view, layer, average, step, next(SENT), language)


def views_of_translation(result: TranslateResult, model: str, kind, view, layer, average, step: int, sent: int,
                         language: str = ENGLISH) -> dict:
    """A finished translation as the tab shows it: ``translated``'s values and the numbers of every view, with the
    frame of the ``view`` shown (its heads ``average``d or not)."""
    step = min(max(1, step), result.translation.num_steps)
    figure = VIEW_FIGURES.get(view, VIEW_FIGURES[VIEWS[0]])["mean" if average else "heads"]
    return {**translated(result, step, model, language),
            "page_numbers": page_numbers(result.translation, kind, layer, sent=sent, language=language,
                                         source_share=result.source_share, figure=figure)}


def on_translate_click(services: Services, model, text, decoding, beam_size, max_length, kind, view, layer, head,
                      average, page_session: gr.Request = None, language: str = ENGLISH):
    """A Translate click, seen as it happens: the translation so far and the step view of each step the moment the
    search decides it (``live_step``, drawn by the page), then every view of the finished translation. The page's
    Stop ends the search where it is: what it has is then shown as a translation cut short."""
    require_sentence(text)
    checkpoint, sent = services.registry.get(model), next(SENT)
    source = live.source_pieces_read(checkpoint, text)
    beam = beams_of(decoding, beam_size)
    shown = None  # the hypothesis the page shows: a beam search reports its best one again while others go on
    with services.stops.running(page_of(page_session)) as stop:
        for update in as_it_happens(run_translation, checkpoint, text, decoding, beam_size, max_length,
                                    language=language, stop=stop):
            if isinstance(update, Done):
                yield views_of_translation(update.value, model, kind, view, layer, average, 1, sent, language)
            elif update.tokens != shown:
                # The first step shown also replaces the last translation's notes and pieces with this one's.
                first = {"notes": "", "source_tokens": marked_pieces(source, language)} if shown is None else {}
                shown = update.tokens
                yield {**first, "translation": live.text_so_far(checkpoint, update),
                       "live_step": live.live_numbers(checkpoint, update, source, layer,
                                                      None if average else head, beam, sent, language)}


def on_stop(services: Services, page_session: gr.Request = None) -> dict:
    """The Stop button: the translation this page decodes ends at its next step, with what it has."""
    services.stops.stop(page_of(page_session))
    return {}


def on_translate(services: Services, model, text, decoding, beam_size, max_length, kind, view, layer, head,
                 average, language: str = ENGLISH) -> dict:
    return translation_views(services, model, text, decoding, beam_size, max_length, kind, view, layer, head,
                             average, language=language)


def on_maps_wanted(translation_state, maps_wanted, language: str = ENGLISH) -> dict:
    """What the page lacks to draw what it shows ("sent:kind layer,kind figure,..."): maps page_numbers left out
    of a long translation, and frames of views it had not shown, for the translation it shows."""
    if translation_state is None or not maps_wanted:
        return {}
    sent, _, keys = str(maps_wanted).partition(":")
    blocks, frames = {}, {}
    for key in keys.split(",")[:MOST_BLOCKS_ASKED]:
        kind, _, which = key.partition(" ")
        if kind not in ATTENTION_KINDS:
            continue
        if which in FIGURES:
            frames.setdefault(kind, {})[which] = view_frame(translation_state, kind, which, language)
        elif which.isdigit() and 1 <= int(which) <= attention_tensor(translation_state, kind).shape[0]:
            blocks[f"{kind} {int(which)}"] = map_block(translation_state, kind, int(which))
    return {"more_maps": {"sent": int(sent) if sent.isdigit() else None, "blocks": blocks, "frames": frames}}


def step_views(translation: Translation | None, step, layer, head, average, language: str = ENGLISH) -> dict:
    """The step view at ``step`` as the server draws it (``/step``, for scripts; the page draws its own)."""
    if translation is None:
        return {"revealed": [], "top_k_plot": None, "step_attention_plot": None,
                "step_caption": words_in(language, "translate.step.none")}
    view = step_view(translation, step, layer, None if average else head, language)
    return {"step": view.step, "revealed": view.revealed, "top_k_plot": view.candidates,
            "step_attention_plot": view.source_attention, "step_caption": view.caption}


def on_average(average) -> dict:
    """Averaging makes the head slider mean nothing, so it is disabled meanwhile."""
    return {"head": gr.Slider(interactive=not average)}


def on_prepare_attention(translation_state) -> dict:
    written = exports.attention_json_file(require_translation(translation_state))
    return {"attention_download": gr.DownloadButton(value=written, visible=True)}


def on_decoding(decoding) -> dict:
    return {"beam_size": gr.Slider(interactive=decoding == "beam")}


def on_forced(services: Services, model, text, own_translation, forced_layer, forced_head,
              language: str = ENGLISH) -> dict:
    checkpoint = services.registry.get(model)
    result = run_forced(checkpoint, text, own_translation, language=language)
    warn(result.notes)
    probability, attention = forced_figures(result.translation, forced_layer,
                                            chosen_head(forced_head, checkpoint.model.config.n_heads), language)
    return {"forced_state": result.translation, "forced_probability_plot": probability,
            "forced_attention_plot": attention}


def on_forced_layer_or_head(forced_state, forced_layer, forced_head, language: str = ENGLISH) -> dict:
    if forced_state is None:
        return {}
    heads = forced_state.cross_attention.shape[1]
    return {"forced_attention_plot": forced_figures(forced_state, forced_layer, chosen_head(forced_head, heads),
                                                    language)[1]}


def require_sentence(text) -> None:
    """An empty box is a warning, and the last translation stays in view."""
    if not (text or "").strip():
        raise InputError(message("translate.empty"))


# --- what other events change here ---------------------------------------------------------------

def beam_info(checkpoint: Checkpoint, language: str = ENGLISH) -> str:
    """Beam search starts from the length penalty this model's scores were made with; the slider says which."""
    return words_in(language, "translate.beam.info", alpha=Number(checkpoint.length_penalty, "g"),
                origin=length_penalty_origin(checkpoint, language))


def after_model_change(checkpoint: Checkpoint, language: str = ENGLISH) -> dict:
    """Sliders sized to the model, the examples it reads; a score of another model's sentence is gone."""
    layers, heads = layer_and_head_counts(checkpoint)
    return {"example_list": gr.Dataset(samples=[[example] for example in examples_for(checkpoint)]),
            "forced_layer": gr.Slider(1, layers, value=layers, step=1),
            "forced_head": gr.Dropdown(head_choices(heads, language), value=MEAN_OF_HEADS),
            "own_translation": "", "forced_state": None, "forced_probability_plot": None,
            "forced_attention_plot": None}


MODEL_OUTPUTS = ("example_list", "forced_layer", "forced_head", "own_translation", "forced_state",
                 "forced_probability_plot", "forced_attention_plot")


def after_translation(translation: Translation) -> dict:
    """A score of your own translation belongs to the sentence it was made for."""
    return {"forced_state": None, "forced_probability_plot": None, "forced_attention_plot": None}


def value_set(update):
    """The value an answer gives a component (a component made anew, Gradio's update dict, or a value), or None
    where it sets other properties alone."""
    if isinstance(update, Component):
        return update.constructor_args.get("value")
    if isinstance(update, dict) and update.get("__type__") == "update":
        return update.get("value")
    return update


def with_selection(values: dict) -> dict:
    """An answer that brings a translation's numbers names in them the selectors it sets, at the values it sets:
    the page draws the numbers at those (explorer.show), since its script reads the selectors as they were before
    the answer. The selectors it leaves alone are read in the page, where the visitor may have moved them."""
    numbers = values.get("page_numbers")
    if not isinstance(numbers, dict):
        return values
    chosen = {name: value_set(values[name]) for name in SELECTORS if name in values}
    return {**values, "page_numbers": {**numbers, "selection": {name: value for name, value in chosen.items()
                                                                if value is not None}}}


def declare(page: Page) -> None:
    """What a model switch and a new translation change in this tab."""
    page.when_model_changes(after_model_change, MODEL_OUTPUTS)
    page.when_translated(after_translation, ("forced_state", "forced_probability_plot", "forced_attention_plot"),
                         TAB_ID)


def wire(page: Page) -> None:
    """The tab's events, once every tab has declared what a new translation changes in it."""
    c = page.components
    page.joins(with_selection)  # whichever event brings a translation's numbers
    translated = [*TRANSLATION_OUTPUTS, *LIVE_OUTPUTS, *page.translation_outputs(TAB_ID)]
    # A model switch cancels a translation still running, so none lands under the new model's name.
    # Many at once: translations asked for together are decoded together (batching.py).
    asked = [c["translate_button"].click, c["text"].submit, c["example_list"].click]
    translations = [
        page.on(asked[:2], page.translated(on_translate_click, TAB_ID), translated, keep_on_input_problem=True,
                progress_on=PROGRESS_ON, **batching.CONCURRENCY),
        page.on(asked[2], page.translated(on_example_then_translate, TAB_ID), ["text", *translated],
                progress_on=PROGRESS_ON, **batching.CONCURRENCY)]
    page.sentence_work += translations
    page.on(c["translate_stop"].click, on_stop, [], queue=False, show_progress="hidden")
    page.in_browser(c["live_step"].change, "explorer.live", ["live_step"], ["revealed", "step_caption"])
    page.on(c["attention_prepare"].click, on_prepare_attention, ["attention_download"], keep_on_input_problem=True)
    page.on(c["decoding"].input, on_decoding, ["beam_size"], show_progress="hidden", trigger_mode="always_last")
    # Every view of a translation is drawn in the page from its numbers, whatever brought them (this tab, the
    # page's opening, a model switch, a lesson), at the selection the page shows; so is a step, and a change of
    # attention type, view, layer, head or averaging. Sliders take typed numbers too: only the user's own moves
    # redraw, never a value a handler set.
    page.in_browser(c["page_numbers"].change, "explorer.show", ["page_numbers", *SELECTION], STEP_TEXT)
    for trigger, move in ((c["step"].input, 0), (c["previous_step"].click, -1), (c["next_step"].click, 1)):
        page.in_browser(trigger, f"(named) => explorer.step(named, {move})", SELECTION, STEP_TEXT)
    page.in_browser([c[name].input for name in ("kind", "view", "layer", "head", "average")],
                    "explorer.select", SELECTION, ["layer", "head", "maps_wanted"])
    page.on(c["average"].input, on_average, ["head"], show_progress="hidden")
    # Only maps a long translation did not bring are asked for, as the page shows them.
    page.on(c["maps_wanted"].change, on_maps_wanted, ["more_maps"], show_progress="hidden")
    page.in_browser(c["more_maps"].change, "explorer.more", ["more_maps"])
    page.sentence_work += [
        page.on([c["forced_button"].click, c["own_translation"].submit], on_forced,
                ["forced_state", "forced_probability_plot", "forced_attention_plot"], api_name="forced")]
    page.on([c["forced_layer"].input, c["forced_head"].input], on_forced_layer_or_head, ["forced_attention_plot"],
            show_progress="hidden")


def on_example_then_translate(services: Services, model, example_list, decoding, beam_size, max_length, kind, view,
                              layer, head, average, page_session: gr.Request = None, language: str = ENGLISH):
    """Clicking an example puts it in the box and translates it, as a click on Translate does."""
    if not isinstance(example_list, (list, tuple)) or not example_list:
        raise InputError(message("translate.choose_example"))
    sentence = example_list[0]
    for values in on_translate_click(services, model, sentence, decoding, beam_size, max_length, kind, view, layer,
                                     head, average, page_session, language):
        yield {"text": sentence, **values}
