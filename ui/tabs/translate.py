"""The Translate tab: translate, step through the decoding, attention heatmaps, and forced decoding."""

from __future__ import annotations

import itertools

import gradio as gr
from gradio.components import Number

from transformer.errors import InputError
from transformer.files.checkpoint import Checkpoint
from transformer.paper.decoding import Translation

from .. import figures
from ..runtime import batching, components
from ..runtime.chart import Chart
from ..runtime.errors import warn
from ..runtime.page import Page
from ..services import Services
from ..views import exports
from ..views.choices import ATTENTION_KINDS, MEAN_OF_HEADS, VIEWS, chosen_head, head_options, require_translation
from ..views.text import MAX_INPUT_CHARS, examples_for, source_label
from ..views.translate import (DEFAULT_TARGET_TOKENS, MAX_BEAM, TARGET_TOKENS, TITLES, TranslateResult,
                               attention_tensor, forced_figures, layer_and_head_counts, length_penalty_origin,
                               map_block,
                               notes_markdown, page_numbers, run_forced, run_translation, source_pieces, step_view)

TAB_ID, TITLE = "translate", "Translate"  # the tab's id in the page, and its label

STEP_INTRO = ("## Step through the decoding\nMove the slider to replay the translation token by token: the candidates "
              "the model weighed, and where in the source it looked.")
HEATMAP_INTRO = ("## Attention heatmaps\nRows are queries (the position that looks), columns are keys (the positions "
                 "looked at); each row sums to 1. Hover for the exact weight. In decoder and cross-attention each row "
                 "is a decoding step: click a cell to go to its step.")
FORCED_INTRO = ("## Forced decoding: your own translation\nType your own translation of the sentence above (in "
                "the model's language: German for multi30k-en-de, French for multi30k-en-fr) and see how probable the model finds each token, and where it looks "
                "while reading it. Enter scores it.")


CHARTS = {"topK": "topk-plot", "stepAttention": "step-attention", "heatmap": "attention-plot"}  # their elem_ids

# The page draws every chart of the tab from a translation's numbers (page_numbers; ui/static/explorer.js). What
# its script needs to know of this tab, in the page's config:
PAGE_SETTINGS = {"kinds": ATTENTION_KINDS, "views": VIEWS, "titles": TITLES, "charts": CHARTS}
# A click on a cell of the heatmap, where its rows are decoding steps, moves the step view to that cell's step.
STEP_PICKER = {"charts": f"#{CHARTS['heatmap']}", "slider": "#step-slider", "shownNext": "step-view",
               "rowsMeta": figures.ROWS_ARE_STEPS}
SENT = itertools.count(1)  # each translation's numbers are new to the page, the same sentence's too


class UnboundedSlider(components.Slider):
    """A slider that hands a typed number past either end to its handler, which moves the slider to that end.
    Gradio's own refuses such a number while the page keeps showing it beside the previous step's view."""

    is_template = True  # drawn by Gradio's own slider

    def preprocess(self, payload: float) -> float:
        return Number.round_to_precision(components.a_number(self, payload), self.precision)


def layout(page: Page, checkpoint: Checkpoint) -> None:
    examples = examples_for(checkpoint)
    layers, heads = layer_and_head_counts(checkpoint)
    with gr.Row():
        with gr.Column(scale=3):
            # One line grows to four as the text wraps; Enter translates (Gradio submits on Enter only in a box
            # that starts with one line).
            text = gr.Textbox(label=source_label(checkpoint), value=examples[0], lines=1, max_lines=4,
                              max_length=MAX_INPUT_CHARS, elem_id="source-text",
                              info=f"Enter translates. At most {MAX_INPUT_CHARS:,} characters: a longer paste is "
                                   "cut there.")
            example_list = gr.Dataset(components=[gr.Textbox(visible=False)], samples=[[e] for e in examples],
                                      label="Examples", elem_id="examples")
        with gr.Column(scale=2):
            decoding = components.Radio(["greedy", "beam"], value="beam", label="Decoding")
            beam_size = components.Slider(2, MAX_BEAM, value=5, step=1, label="Beam size", elem_id="beam-size")
            max_length = components.Slider(*TARGET_TOKENS, value=DEFAULT_TARGET_TOKENS, step=1,
                                           label="Maximum target tokens", elem_id="max-tokens")
            translate_button = gr.Button("Translate", variant="primary", elem_id="translate-button")
    translation = gr.Textbox(label="Translation", interactive=False, elem_id="translation")
    notes = gr.Markdown()
    # Each piece's label is drawn in white on its colour: these keep 4.5:1 (WCAG AA).
    source_tokens = gr.HighlightedText(label="Source pieces the encoder saw (▁ starts a word)",
                                       color_map={"special": "#595959"})
    page.add(text=text, example_list=example_list, decoding=decoding, beam_size=beam_size, max_length=max_length,
             translate_button=translate_button, translation=translation, notes=notes, source_tokens=source_tokens)

    gr.Markdown(STEP_INTRO, elem_id="step-view")
    with gr.Row():
        previous_step = gr.Button("◀ previous", size="sm", scale=0)
        step = UnboundedSlider(1, 2, value=1, step=1, label="Step", elem_id="step-slider", scale=4)
        next_step = gr.Button("next ▶", size="sm", scale=0)
    with gr.Row():
        step_caption = gr.Markdown(elem_id="step-caption")
        look_inside = gr.Button("Look inside this step ▸", size="sm", scale=0, elem_id="look-inside")
    revealed = gr.HighlightedText(label="Translation so far, in pieces (▁ starts a word)",
                                  color_map={"current": "#b34700"}, elem_id="revealed")
    with gr.Row():
        top_k_plot = Chart(label="Top-k candidates", elem_id=CHARTS["topK"])
        step_attention_plot = Chart(label="Cross-attention of this step", elem_id=CHARTS["stepAttention"])
    # Mounted but not shown ("hidden"), so that their changes reach the page's script.
    page.add(previous_step=previous_step, step=step, next_step=next_step, step_caption=step_caption,
             look_inside=look_inside, page_numbers=gr.HTML(None, html_template="", visible="hidden",
                                  js_on_load="watch('value', () => explorer.arriving());"),
             maps_wanted=gr.Textbox("", visible="hidden"),
             more_maps=gr.HTML(None, html_template="", js_on_load=None, visible="hidden"),
             revealed=revealed, top_k_plot=top_k_plot, step_attention_plot=step_attention_plot)

    gr.Markdown(HEATMAP_INTRO)
    with gr.Row():
        kind = components.Radio(list(ATTENTION_KINDS.values()), value=ATTENTION_KINDS["cross"], label="Attention", scale=3,
                                elem_id="attention-kind")
        view = components.Radio(list(VIEWS), value=VIEWS[0], label="View", scale=3, elem_id="attention-view")
    with gr.Row():
        layer = components.Slider(1, layers, value=1, step=1, label="Layer", elem_id="layer-slider")
        head = components.Slider(1, heads, value=1, step=1, label="Head", elem_id="head-slider")
        average = gr.Checkbox(False, label="Average over heads", elem_id="average-heads")
    attention_plot = Chart(label="Attention", elem_id=CHARTS["heatmap"])
    with gr.Row():
        # Written when asked for, not at every translation: each file can be megabytes and is kept an hour.
        attention_prepare = gr.Button("Raw attention as JSON", size="sm", scale=0, elem_id="attention-prepare")
        attention_download = gr.DownloadButton("Download raw attention (JSON)", visible=False, size="sm", scale=0,
                                               elem_id="attention-download")
    page.add(kind=kind, view=view, layer=layer, head=head, average=average, attention_plot=attention_plot,
             attention_prepare=attention_prepare, attention_download=attention_download)

    gr.Markdown(FORCED_INTRO)
    own_translation = gr.Textbox(label="Your translation", lines=1, max_lines=4, max_length=MAX_INPUT_CHARS,
                                 info=f"At most {MAX_INPUT_CHARS:,} characters.")
    with gr.Row():
        forced_button = gr.Button("Score my translation")
        forced_layer = components.Slider(1, layers, value=layers, step=1, label="Layer of the cross-attention")
        forced_head = components.Dropdown(head_options(heads), value=MEAN_OF_HEADS, label="Head")
    with gr.Row():
        forced_probability_plot = Chart(label="Per-token probability", elem_id="forced-probability")
        forced_attention_plot = Chart(label="Cross-attention", elem_id="forced-attention")
    page.add(own_translation=own_translation, forced_button=forced_button, forced_layer=forced_layer,
             forced_head=forced_head, forced_probability_plot=forced_probability_plot,
             forced_attention_plot=forced_attention_plot, forced_state=gr.State(None))


# --- handlers ------------------------------------------------------------------------------------

# What the page's script reads and sets (ui/static/explorer.js): the selection, what it last asked the server
# for, and the step view it draws.
SELECTION = ("kind", "view", "layer", "head", "average", "step", "maps_wanted")
STEP_TEXT = ("step", "revealed", "step_caption", "maps_wanted")
TRANSLATION_OUTPUTS = ("translation_state", "translation_model", "translation", "notes", "source_tokens",
                       "attention_download", "page_numbers", "step")
# Where a translation under way shows (Gradio's timer and spinner); the charts are redrawn in place as it lands.
PROGRESS_ON = ("translation",)
MOST_BLOCKS_ASKED = 64  # maps of one kind and layer a page may ask for at once (a model view of every layer)


def translated(result: TranslateResult, step: int, model: str) -> dict:
    """What a Translate click and ``/translate`` both return: the translation kept for every other view with the
    name of the model that made it, its text, notes and source pieces, the step slider at ``step``, and the
    attention download hidden (each file can be megabytes, and Gradio keeps a copy: it is written only when asked
    for).

    The other tabs' handlers read the model from ``translation_model``, not from the model list: during a switch the
    list already names the new model while the translation is still the old one's."""
    translation = result.translation
    steps = translation.num_steps
    return {"translation_state": translation, "translation_model": model, "translation": translation.text,
            "notes": notes_markdown(result.notes), "source_tokens": source_pieces(translation),
            "attention_download": gr.DownloadButton(value=None, visible=False),
            "step": gr.Slider(1, max(2, steps), value=step, step=1, interactive=steps > 1)}


def translation_views(services: Services, model, text, decoding, beam_size, max_length, kind, view, layer, head,
                      average, step: int = 1) -> dict:
    """Translate ``text`` with ``model``: its text and notes, and the numbers the page draws every view of the tab
    from, at the selection it shows (the step view at ``step``: its first, where the decoding starts, unless a
    lesson says)."""
    result = run_translation(services.registry.get(model), text, decoding, beam_size, max_length)
    step = min(max(1, step), result.translation.num_steps)
    return {**translated(result, step, model),
            "page_numbers": page_numbers(result.translation, kind, layer, sent=next(SENT))}


def on_translate(services: Services, model, text, decoding, beam_size, max_length, kind, view, layer, head,
                 average) -> dict:
    return translation_views(services, model, text, decoding, beam_size, max_length, kind, view, layer, head,
                             average)


def on_maps_wanted(translation_state, maps_wanted) -> dict:
    """Maps the page lacks to draw what it shows ("sent:kind layer,..."; page_numbers left them out of a long
    translation), for the translation it shows."""
    if translation_state is None or not maps_wanted:
        return {}
    sent, _, keys = str(maps_wanted).partition(":")
    blocks = {}
    for key in keys.split(",")[:MOST_BLOCKS_ASKED]:
        kind, _, layer = key.partition(" ")
        if kind in ATTENTION_KINDS and layer.isdigit():
            if 1 <= int(layer) <= attention_tensor(translation_state, kind).shape[0]:
                blocks[f"{kind} {int(layer)}"] = map_block(translation_state, kind, int(layer))
    return {"more_maps": {"sent": int(sent) if sent.isdigit() else None, "blocks": blocks}}


def step_views(translation: Translation | None, step, layer, head, average) -> dict:
    """The step view at ``step`` as the server draws it (``/step``, for scripts; the page draws its own)."""
    if translation is None:
        return {"revealed": [], "top_k_plot": None, "step_attention_plot": None,
                "step_caption": "Translate a sentence to step through it."}
    view = step_view(translation, step, layer, None if average else head)
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


def on_forced(services: Services, model, text, own_translation, forced_layer, forced_head) -> dict:
    checkpoint = services.registry.get(model)
    result = run_forced(checkpoint, text, own_translation)
    warn(result.notes)
    probability, attention = forced_figures(result.translation, forced_layer,
                                            chosen_head(forced_head, checkpoint.model.config.n_heads))
    return {"forced_state": result.translation, "forced_probability_plot": probability,
            "forced_attention_plot": attention}


def on_forced_layer_or_head(forced_state, forced_layer, forced_head) -> dict:
    if forced_state is None:
        return {}
    heads = forced_state.cross_attention.shape[1]
    return {"forced_attention_plot": forced_figures(forced_state, forced_layer, chosen_head(forced_head, heads))[1]}


def require_sentence(text) -> None:
    """An empty box is a warning, and the last translation stays in view."""
    if not (text or "").strip():
        raise InputError("Type a sentence to translate first (the text box is empty).")


def on_translate_click(services: Services, model, text, decoding, beam_size, max_length, kind, view, layer,
                       head, average) -> dict:
    require_sentence(text)
    return on_translate(services, model, text, decoding, beam_size, max_length, kind, view, layer, head, average)


# --- what other events change here ---------------------------------------------------------------

def beam_info(checkpoint: Checkpoint) -> str:
    """Beam search starts from the length penalty this model's scores were made with; the slider says which."""
    return (f"Hypotheses kept at each step; finished ones are ranked by log P / length^α, "
            f"α = {checkpoint.length_penalty:g} ({length_penalty_origin(checkpoint)})")


def after_model_change(checkpoint: Checkpoint) -> dict:
    """Sliders sized to the model, the examples it reads; a score of another model's sentence is gone."""
    layers, heads = layer_and_head_counts(checkpoint)
    return {"example_list": gr.Dataset(samples=[[example] for example in examples_for(checkpoint)]),
            "forced_layer": gr.Slider(1, layers, value=layers, step=1),
            "forced_head": gr.Dropdown(head_options(heads), value=MEAN_OF_HEADS),
            "own_translation": "", "forced_state": None, "forced_probability_plot": None,
            "forced_attention_plot": None}


MODEL_OUTPUTS = ("example_list", "forced_layer", "forced_head", "own_translation", "forced_state",
                 "forced_probability_plot", "forced_attention_plot")


def after_translation(translation: Translation) -> dict:
    """A score of your own translation belongs to the sentence it was made for."""
    return {"forced_state": None, "forced_probability_plot": None, "forced_attention_plot": None}


def declare(page: Page) -> None:
    """What a model switch and a new translation change in this tab."""
    page.when_model_changes(after_model_change, MODEL_OUTPUTS)
    page.when_translated(after_translation, ("forced_state", "forced_probability_plot", "forced_attention_plot"),
                         TAB_ID)


def wire(page: Page) -> None:
    """The tab's events, once every tab has declared what a new translation changes in it."""
    c = page.components
    translated = [*TRANSLATION_OUTPUTS, *page.translation_outputs(TAB_ID)]
    # A model switch cancels a translation still running, so none lands under the new model's name.
    # Many at once: translations asked for together are decoded together (batching.py).
    asked = [c["translate_button"].click, c["text"].submit, c["example_list"].click]
    translations = [
        page.on(asked[:2], page.translated(on_translate_click, TAB_ID), translated, keep_on_input_problem=True,
                progress_on=PROGRESS_ON, **batching.CONCURRENCY),
        page.on(asked[2], page.translated(on_example_then_translate, TAB_ID), ["text", *translated],
                progress_on=PROGRESS_ON, **batching.CONCURRENCY)]
    page.sentence_work += translations
    page.on(c["attention_prepare"].click, on_prepare_attention, ["attention_download"], keep_on_input_problem=True)
    page.on(c["decoding"].input, on_decoding, ["beam_size"], show_progress="hidden", trigger_mode="always_last")
    # Every view of a translation is drawn in the page from its numbers, whatever brought them (this tab, the
    # page's opening, a model switch, a lesson), at the selection the page shows; so is a step, and a change of
    # attention type, view, layer, head or averaging. Sliders take typed numbers too: only the user's own moves
    # redraw, never a value a handler set.
    page.in_browser(c["page_numbers"].change, "(...values) => explorer.show(values)", ["page_numbers", *SELECTION],
                    STEP_TEXT)
    for trigger, move in ((c["step"].input, 0), (c["previous_step"].click, -1), (c["next_step"].click, 1)):
        page.in_browser(trigger, f"(...values) => explorer.step(values, {move})", SELECTION, STEP_TEXT)
    page.in_browser([c[name].input for name in ("kind", "view", "layer", "head", "average")],
                    "(...values) => explorer.select(values)", SELECTION, ["layer", "head", "maps_wanted"])
    page.on(c["average"].input, on_average, ["head"], show_progress="hidden")
    # Only maps a long translation did not bring are asked for, as the page shows them.
    page.on(c["maps_wanted"].change, on_maps_wanted, ["more_maps"], show_progress="hidden")
    page.in_browser(c["more_maps"].change, "(...values) => explorer.more(values)", ["more_maps"], [])
    page.sentence_work += [
        page.on([c["forced_button"].click, c["own_translation"].submit], on_forced,
                ["forced_state", "forced_probability_plot", "forced_attention_plot"], api_name="forced")]
    page.on([c["forced_layer"].input, c["forced_head"].input], on_forced_layer_or_head, ["forced_attention_plot"],
            show_progress="hidden")


def on_example_then_translate(services: Services, model, example_list, decoding, beam_size, max_length, kind, view,
                              layer, head, average) -> dict:
    """Clicking an example puts it in the box and translates it."""
    if not isinstance(example_list, (list, tuple)) or not example_list:
        raise InputError("Choose one of the examples.")
    text = example_list[0]
    return {"text": text, **on_translate(services, model, text, decoding, beam_size, max_length, kind, view, layer,
                                         head, average)}
