"""The Translate tab: translate, step through the decoding, attention heatmaps, and forced decoding."""

from __future__ import annotations

import itertools
import json

import gradio as gr
from gradio.components import Number

from transformer.checkpoint import Checkpoint
from transformer.decoding import Translation
from transformer.errors import InputError

from .. import batching, components, figures
from ..errors import warn
from ..page import Page
from ..services import Services
from ..views import exports
from ..views.choices import ATTENTION_KINDS, MEAN_OF_HEADS, VIEWS, chosen_head, head_options, require_translation
from ..views.text import MAX_INPUT_CHARS, examples_for, source_label
from ..views.translate import (DEFAULT_TARGET_TOKENS, MAX_BEAM, TARGET_TOKENS, TranslateResult, attention_figure,
                               forced_figures, frames_hold_every_map, layer_and_head_counts, length_penalty_origin,
                               notes_markdown, run_forced, run_translation, source_pieces, step_view, view_frames)

TAB_ID = "translate"  # the tab's id in the page (build.py)

STEP_INTRO = ("## Step through the decoding\nMove the slider to replay the translation token by token: the candidates "
              "the model weighed, and where in the source it looked.")
HEATMAP_INTRO = ("## Attention heatmaps\nRows are queries (the position that looks), columns are keys (the positions "
                 "looked at); each row sums to 1. Hover for the exact weight. In decoder and cross-attention each row "
                 "is a decoding step: click a cell to go to its step.")
FORCED_INTRO = ("## Forced decoding: your own translation\nType your own translation of the sentence above (in "
                "the model's language: German for multi30k-en-de, French for multi30k-en-fr) and see how probable the model finds each token, and where it looks "
                "while reading it. Enter scores it.")


# What the page holds of a translation's view frames (``page_frames``), as the page's script says after a change of
# layer, head, averaging, attention type or view: the server then draws only what the page could not.
CHOSEN_SELECTION, EVERY_SELECTION, DRAWN_IN_PAGE = "the chosen head's steps", "every head's maps", "drawn in the page"
CHARTS = {"topK": "topk-plot", "stepAttention": "step-attention", "heatmap": "attention-plot"}  # their elem_ids

# Stepping needs no server, nor does a layer, head or attention type in the one-head view once every head's maps
# have come (``view_frames``): ui/static/explorer.js draws a view from its frames. What it needs to know of this tab:
PAGE_SETTINGS = {"cross": ATTENTION_KINDS["cross"], "oneHead": VIEWS[0], "chosenSelection": CHOSEN_SELECTION,
                 "everySelection": EVERY_SELECTION, "drawnInPage": DRAWN_IN_PAGE, "charts": CHARTS,
                 # every head's frames are asked for once the browser is idle, at most this long after a translation
                 # (where it cannot tell, as Safari before 2025, idleFallbackMs after)
                 "idleMs": 2000, "idleFallbackMs": 200}
# A click on a cell of the heatmap, where its rows are decoding steps, moves the step view to that cell's step.
STEP_PICKER = {"charts": f"#{CHARTS['heatmap']}", "slider": "#step-slider", "shownNext": "step-view",
               "rowsMeta": figures.ROWS_ARE_STEPS}


# Every change of selection the server draws, none dropped (the page counts their answers), one at a time in the
# order made: the answers land in that order. (Those the page drew return at once; the others are a few tens of
# milliseconds of the CPU, a model view a few hundred.)
SELECTIONS_IN_ORDER = {"trigger_mode": "multiple", "concurrency_id": "selection", "concurrency_limit": 1}
class PageDrawnPlot(gr.Plot):
    """A chart the page also draws itself (explorer.js), without telling Gradio. Each figure the server sends is
    numbered, so that Gradio draws it even where it equals the last one Gradio drew, which the page's may since
    have replaced (a step, then the same sentence translated again)."""

    is_template = True  # drawn by Gradio's own plot
    sent = itertools.count()

    def postprocess(self, value):
        data = super().postprocess(value)
        if data is not None and data.type == "plotly":
            data.plot = f'{data.plot[:-1]},"sent":{next(self.sent)}}}'  # a key Plotly's drawing ignores
        return data


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
        top_k_plot = PageDrawnPlot(label="Top-k candidates", elem_id=CHARTS["topK"])
        step_attention_plot = PageDrawnPlot(label="Cross-attention of this step", elem_id=CHARTS["stepAttention"])
    page.add(previous_step=previous_step, step=step, next_step=next_step, step_caption=step_caption,
             look_inside=look_inside, view_frames=gr.Textbox(None, visible=False),
             page_frames=gr.Radio([CHOSEN_SELECTION, EVERY_SELECTION, DRAWN_IN_PAGE], value=CHOSEN_SELECTION,
                                  visible=False),
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
    attention_plot = PageDrawnPlot(label="Attention", elem_id=CHARTS["heatmap"])
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
        forced_probability_plot = gr.Plot(label="Per-token probability", elem_id="forced-probability")
        forced_attention_plot = gr.Plot(label="Cross-attention", elem_id="forced-attention")
    page.add(own_translation=own_translation, forced_button=forced_button, forced_layer=forced_layer,
             forced_head=forced_head, forced_probability_plot=forced_probability_plot,
             forced_attention_plot=forced_attention_plot, forced_state=gr.State(None))


# --- handlers ------------------------------------------------------------------------------------

STEP_VIEWS = ("revealed", "top_k_plot", "step_attention_plot", "step_caption")
# What a step moves in the page (explorer.step); the frames it is drawn from travel with every step view the server
# draws, and every head's with a translation soon after it.
STEP_AND_FRAMES = ("view_frames", "step", *STEP_VIEWS)
STEP_INPUTS = ("view_frames", "step", "layer", "head", "average", *STEP_VIEWS)
STEP_OUTPUTS = ("step", "revealed", "step_caption")  # and the two charts, drawn in place
SELECT_INPUTS = ("view_frames", "kind", "view", "layer", "head", "average", "step", "step_attention_plot")
SELECT_OUTPUTS = ("page_frames",)  # and the charts, drawn in place
TRANSLATION_OUTPUTS = ("translation_state", "translation", "notes", "source_tokens", "attention_download",
                       "attention_plot", *STEP_AND_FRAMES)


def step_views(translation: Translation | None, step, layer, head, average) -> dict:
    """The step view at ``step``, and the frames from which the page draws every other step."""
    if translation is None:
        return {"revealed": [], "top_k_plot": None, "step_attention_plot": None, "view_frames": None,
                "step_caption": "Translate a sentence to step through it."}
    head = None if average else head
    view = step_view(translation, step, layer, head)
    return {"step": view.step, "revealed": view.revealed, "top_k_plot": view.candidates,
            "step_attention_plot": view.source_attention, "step_caption": view.caption,
            "view_frames": frames_text(view_frames(translation, layer, head))}


def frames_text(frames: dict) -> str:
    """The frames as the page keeps them: one text, parsed by its script once, not a value Gradio tracks deeply."""
    return json.dumps(frames, separators=(",", ":"), allow_nan=False)


def on_every_head(translation_state) -> dict:
    """Once a new translation is drawn: the frames of every layer, head and attention type, from which the page
    then draws a change of them itself (where they fit; else the page keeps asking the server)."""
    if translation_state is None or not frames_hold_every_map(translation_state):
        return {}
    return {"view_frames": frames_text(view_frames(translation_state, every_selection=True))}


def translated(result: TranslateResult, step: int) -> dict:
    """What a Translate click and ``/translate`` both return: the translation kept for every other view, its text,
    notes and source pieces, the step slider at ``step``, and the attention download hidden (each file can be
    megabytes, and Gradio keeps a copy: it is written only when asked for)."""
    translation = result.translation
    steps = translation.num_steps
    return {"translation_state": translation, "translation": translation.text,
            "notes": notes_markdown(result.notes), "source_tokens": source_pieces(translation),
            "attention_download": gr.DownloadButton(value=None, visible=False),
            "step": gr.Slider(1, max(2, steps), value=step, step=1, interactive=steps > 1)}


def translation_views(checkpoint: Checkpoint, text, decoding, beam_size, max_length, kind, view, layer, head,
                      average, step: int = 1) -> dict:
    """Translate ``text`` and draw every view of the tab from it, the step view at ``step`` (its first: where
    the decoding starts; its last says only that the sentence ended), whose row the heatmap marks."""
    result = run_translation(checkpoint, text, decoding, beam_size, max_length)
    step = min(max(1, step), result.translation.num_steps)
    return {**step_views(result.translation, step, layer, head, average), **translated(result, step),
            "attention_plot": attention_figure(result.translation, kind, view, layer, head, average,
                                               marked_step=step)}


def on_translate(services: Services, model, text, decoding, beam_size, max_length, kind, view, layer, head,
                 average) -> dict:
    return translation_views(services.registry.get(model), text, decoding, beam_size, max_length, kind, view,
                             layer, head, average)


def on_attention(translation_state, page_frames, kind, view, layer, head, average) -> dict:
    """The heatmap, unless the page drew it from its frames."""
    if translation_state is None or page_frames == DRAWN_IN_PAGE:
        return {}
    return {"attention_plot": attention_figure(translation_state, kind, view, layer, head, average)}


def on_layer_or_head(translation_state, page_frames, kind, view, layer, head, average, step) -> dict:
    """Both views that show a layer and head, in one answer (a number out of range is refused once), unless the
    page drew them. Unless the page holds every head's frames, they come too (or, where they do not fit, the new
    selection's steps): the frames sent after a translation are then never fewer than those it already has."""
    if page_frames == DRAWN_IN_PAGE:
        return {}
    views = {**on_attention(translation_state, page_frames, kind, view, layer, head, average),
             **step_views(translation_state, step, layer, head, average)}
    if page_frames == EVERY_SELECTION:
        views.pop("view_frames")
    else:
        views.update(on_every_head(translation_state))
    return views


def on_average(translation_state, page_frames, kind, view, layer, head, average, step) -> dict:
    """Averaging makes the head slider mean nothing, so it is disabled meanwhile."""
    return {"head": gr.Slider(interactive=not average),
            **on_layer_or_head(translation_state, page_frames, kind, view, layer, head, average, step)}


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
    translated = [*TRANSLATION_OUTPUTS, *page.translation_outputs()]
    # A model switch cancels a translation still running, so none lands under the new model's name.
    # Many at once: translations asked for together are decoded together (batching.py).
    asked = [c["translate_button"].click, c["text"].submit, c["example_list"].click]
    translations = [
        page.on(asked[:2], page.translated(on_translate_click), translated, keep_on_input_problem=True,
                **batching.CONCURRENCY),
        page.on(asked[2], page.translated(on_example_then_translate), ["text", *translated], **batching.CONCURRENCY)]
    # Every head's frames follow each new translation, whatever made it (this tab, the page's opening, a model
    # switch, a lesson), asked for once the browser has drawn it: built meanwhile, they took the CPU from its
    # drawing. A newer translation asked for, a model switch or a lesson cancels them, so none lands beside another
    # sentence's views.
    every_head = page.on(c["translation_state"].change, on_every_head, ["view_frames"], show_progress="hidden",
                         trigger_mode="always_last", js="(...values) => explorer.onceIdle(values)")
    gr.on(asked, None, cancels=[every_head], queue=False)
    page.sentence_work += [*translations, every_head]
    page.on(c["attention_prepare"].click, on_prepare_attention, ["attention_download"], keep_on_input_problem=True)
    page.on(c["decoding"].input, on_decoding, ["beam_size"], show_progress="hidden", trigger_mode="always_last")
    # Sliders take typed numbers too: only the user's own moves redraw, never a value a handler set.
    # Stepping is drawn in the page from the frames sent with the step views: no round trip.
    for trigger, move in ((c["step"].input, 0), (c["previous_step"].click, -1), (c["next_step"].click, 1)):
        page.in_browser(trigger, f"(...values) => explorer.step(values, {move})", STEP_INPUTS, STEP_OUTPUTS)
    # So is a change of layer, head or attention type once every head's frames have come; the server, told what the
    # page drew, draws the rest (SELECTIONS_IN_ORDER), and the page counts its answers: where one is still to come,
    # the server draws the page's change too, so that the last answer is the last change.
    for triggers, fn, outputs in (([c["kind"].input, c["view"].input], on_attention, ["attention_plot"]),
                                  ([c["layer"].input, c["head"].input], on_layer_or_head,
                                   ["attention_plot", *STEP_AND_FRAMES]),
                                  (c["average"].input, on_average, ["head", "attention_plot", *STEP_AND_FRAMES])):
        drawn = page.in_browser(triggers, "(...values) => explorer.select(values)", SELECT_INPUTS, SELECT_OUTPUTS)
        answered = page.then(drawn, fn, outputs, show_progress="hidden", **SELECTIONS_IN_ORDER)
        answered.then(None, js="() => explorer.answered()", queue=False)
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
