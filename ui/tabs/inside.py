"""The Inside a head tab: the arithmetic of one head on the last translation, what each key adds, the merging of
heads, the logit lens beside the tuned lens and temperature, what each encoder layer knows (DecoderLens), and
equation 1 on numbers small enough for a blackboard."""

from __future__ import annotations

import gradio as gr

from transformer.files.checkpoint import Checkpoint
from transformer.paper.translation import Translation

from ..runtime import components
from ..runtime.chart import Chart
from ..runtime.language import ENGLISH, message, text
from ..runtime.page import Page
from ..runtime.worker import Callback, Stopped
from ..services import Services
from ..views import inside, layers as layer_views
from ..views.choices import ATTENTION_KINDS
from ..runtime.numbers import clamp
from ..views.translate import layer_and_head_counts

TAB_ID, TITLE = "inside", message("inside.title")  # the tab's id in the page, and its label

# What the tab says until a sentence is translated (a message: the page writes it in its language).
WAITING = message("inside.waiting")
WAITING_LAYERS = message("inside.layers.waiting")
# A click on a cell of the whole head's maps looks inside its row's query (ui/static/page.js).
HEAD_VIEW_ID = "inside-head"  # the head and query shown: where the Translate tab's "look inside" brings the page
QUERY_PICKER = {"charts": "#inside-maps", "slider": "#inside-query", "shownNext": "inside-summary", "rowsMeta": None}


def layout(page: Page, checkpoint: Checkpoint) -> None:
    layers, heads = layer_and_head_counts(checkpoint)
    words = page.words
    gr.Markdown(words("inside.intro"))
    with gr.Row(elem_id=HEAD_VIEW_ID):
        # The kinds' English names are the values handlers and scripts read; each is labelled in the page's words.
        kinds = [(words(f"map.kind.{kind}"), name) for kind, name in ATTENTION_KINDS.items()]
        inside_kind = components.Radio(kinds, value=ATTENTION_KINDS["cross"], label=words("inside.attention"),
                                       scale=3)
        inside_layer = components.Slider(1, layers, value=layers, step=1, label=words("inside.layer"))
        inside_head = components.Slider(1, heads, value=1, step=1, label=words("inside.head"))
        inside_query = components.Slider(1, 2, value=1, step=1, label=words("inside.query"), elem_id="inside-query")
    inside_summary = gr.Markdown(words("inside.waiting"), elem_id="inside-summary")
    inside_table = gr.Dataframe(label=words("inside.table"), interactive=False, wrap=True,
                                elem_id="inside-arithmetic")
    gr.Markdown(words("inside.note.arithmetic"))
    inside_contributions = Chart(label=words("inside.contributions"), elem_id="inside-contributions")
    gr.Markdown(words("inside.note.contributions"))
    inside_vectors = Chart(label=words("inside.vectors"))
    gr.Markdown(words("inside.note.vectors"))
    inside_merge = gr.Markdown()
    inside_cache = gr.Markdown()
    page.add(inside_kind=inside_kind, inside_layer=inside_layer, inside_head=inside_head, inside_query=inside_query,
             inside_summary=inside_summary, inside_table=inside_table, inside_contributions=inside_contributions,
             inside_vectors=inside_vectors, inside_merge=inside_merge, inside_cache=inside_cache)
    with gr.Accordion(words("inside.maps"), open=False):
        gr.Markdown(words("inside.note.maps"))
        with gr.Row(elem_id="inside-maps"):
            maps = {f"inside_map_{name}": Chart(label=words(f"inside.map.{name}"))
                    for name in ("weights", "head", "layer")}
        page.add(**maps)
    lens_layout(page)
    layers_layout(page, checkpoint)
    blackboard_layout(page)


def lens_layout(page: Page) -> None:
    words = page.words
    with gr.Accordion(words("inside.lens"), open=False, elem_id="lens-section") as lens_section:
        gr.Markdown(words("inside.note.lens"))
        lens_plot = Chart(label=words("inside.lens.plot"), elem_id="logit-lens")
        gr.Markdown(words("inside.note.tuned"))
        tuned_plot = Chart(label=words("inside.tuned.plot"), elem_id="tuned-lens")
        tuned_text = gr.Markdown(elem_id="tuned-lens-kl")
        with gr.Row():
            tuned_train = gr.Button(words("inside.tuned.train"), visible=False, elem_id="tuned-lens-train")
            tuned_stop = gr.Button(words("inside.tuned.stop"), variant="stop", visible=False)
        gr.Markdown(words("inside.note.temperature"))
        with gr.Row():
            lens_step = components.Slider(1, 2, value=1, step=1, label=words("inside.lens.step"))
            temperature = components.Slider(0.1, 3.0, value=1.0, step=0.05, label=words("inside.lens.temperature"))
            sample_top_k = components.Slider(0, 50, value=0, step=1, label=words("inside.lens.top_k"))
            sample_top_p = components.Slider(0.05, 1.0, value=1.0, step=0.05, label=words("inside.lens.top_p"))
        temperature_plot = Chart(label=words("inside.lens.distribution"), elem_id="temperature-plot")
        with gr.Row():
            sample_seed = components.Number(0, precision=0, minimum=0, label=words("inside.lens.seed"), scale=1)
            sample_button = gr.Button(words("inside.lens.sample"), scale=1)
            sampled = gr.Markdown(elem_id="sampled-translation")
    page.add(lens_section=lens_section, lens_plot=lens_plot, tuned_plot=tuned_plot, tuned_text=tuned_text,
             tuned_train=tuned_train, tuned_stop=tuned_stop, lens_step=lens_step, temperature=temperature,
             sample_top_k=sample_top_k,
             sample_top_p=sample_top_p, temperature_plot=temperature_plot, sample_seed=sample_seed,
             sample_button=sample_button, sampled=sampled)


def layers_layout(page: Page, checkpoint: Checkpoint) -> None:
    """What each encoder layer knows: the translation from every one of them, one chosen with its cross-attention."""
    words = page.words
    encoder_layers = checkpoint.model.config.n_encoder_layers
    with gr.Accordion(words("inside.layers"), open=False, elem_id="layers-section") as layers_section:
        gr.Markdown(words("inside.note.layers"))
        decoderlens_layer = components.Slider(1, max(2, encoder_layers), value=1, step=1,
                                              label=words("inside.layers.layer"), elem_id="decoderlens-layer")
        decoderlens_summary = gr.Markdown(words("inside.layers.waiting"), elem_id="decoderlens-summary")
        with gr.Row(elem_id="decoderlens"):
            with gr.Column(scale=2, min_width=320):
                decoderlens_table = gr.Markdown(elem_id="decoderlens-table")
            with gr.Column(scale=3, min_width=320):
                decoderlens_map = Chart(label=words("inside.layers.map"), elem_id="decoderlens-map")
    page.add(layers_section=layers_section, decoderlens_layer=decoderlens_layer,
             decoderlens_summary=decoderlens_summary, decoderlens_table=decoderlens_table,
             decoderlens_map=decoderlens_map, layers_state=gr.State(None), layers_open=gr.State(False))


def blackboard_layout(page: Page) -> None:
    words = page.words
    with gr.Accordion(words("inside.blackboard"), open=False):
        gr.Markdown(words("inside.blackboard.intro"))
        with gr.Row():
            blackboard_d = components.Radio([2, 3, 4], value=2, label=words("inside.blackboard.d_k"))
            blackboard_causal = gr.Checkbox(False, label=words("inside.blackboard.causal"))
            blackboard_button = gr.Button(words("inside.blackboard.compute"), variant="primary")
        blackboard_table = gr.Dataframe(inside.blackboard_example(page.language), interactive=True,
                                        label=words("inside.blackboard.table"), elem_id="blackboard-table")
        with gr.Row():
            blackboard_steps = gr.Markdown()
            blackboard_plot = Chart(label=words("inside.blackboard.plot"))
    page.add(blackboard_d=blackboard_d, blackboard_causal=blackboard_causal, blackboard_button=blackboard_button,
             blackboard_table=blackboard_table, blackboard_steps=blackboard_steps, blackboard_plot=blackboard_plot)


# --- handlers ------------------------------------------------------------------------------------

HEAD_OUTPUTS = ("inside_query", "inside_layer", "inside_summary", "inside_table", "inside_contributions", "inside_vectors",
                "inside_merge", "inside_cache", "inside_map_weights", "inside_map_head", "inside_map_layer")


def on_inside(services: Services, translation_model, translation_state, inside_kind, inside_layer, inside_head,
              inside_query, language: str = ENGLISH) -> dict:
    checkpoint = services.registry.get(translation_model)
    if translation_state is None:
        return {"inside_summary": WAITING}
    queries = inside.query_count(translation_state, inside_kind)
    query = clamp(inside_query, 1, queries)
    layers = inside.layers_of(checkpoint, inside_kind)  # the encoder and decoder may differ in depth
    layer = clamp(inside_layer, 1, layers)
    view = inside.inside_view(checkpoint, translation_state, inside_kind, layer, inside_head, query, language)
    weights, head_adds, layer_adds = inside.contribution_maps(checkpoint, translation_state, inside_kind, layer,
                                                              inside_head)
    return {"inside_query": gr.Slider(1, max(2, queries), value=query, step=1),
            "inside_layer": gr.Slider(1, layers, value=layer, step=1),
            "inside_summary": view.summary, "inside_table": view.table, "inside_contributions": view.contributions,
            "inside_vectors": view.vectors, "inside_merge": view.merge, "inside_cache": view.cache,
            "inside_map_weights": weights, "inside_map_head": head_adds, "inside_map_layer": layer_adds}


def on_lens(services: Services, translation_model, translation_state, lens_step, temperature, sample_top_k,
            sample_top_p, language: str = ENGLISH) -> dict:
    if translation_state is None:
        return {}
    sampling = inside.sampling_settings(temperature, sample_top_k, sample_top_p, 0)
    checkpoint = services.registry.get(translation_model)
    lens, distribution = inside.lens_figures(checkpoint, translation_state, lens_step, sampling, language)
    return {"lens_plot": lens, "temperature_plot": distribution,
            **tuned_views(checkpoint, translation_state, services.lenses.get(checkpoint), language)}


def tuned_views(checkpoint: Checkpoint, translation: Translation, lens, language: str = ENGLISH) -> dict:
    """The tuned lens beside the logit lens, or the button that trains one for a model that has none."""
    figure, kl = layer_views.lens_views(checkpoint, translation, lens, language)
    return {"tuned_plot": figure, "tuned_text": kl, "tuned_train": gr.Button(visible=lens is None),
            "tuned_stop": gr.Button(visible=lens is None)}


def on_train_lens(services: Services, translation_model, translation_state, progress=gr.Progress(),
                  language: str = ENGLISH) -> dict:
    """A tuned lens trained for the model shown, in the worker, one at a time (the costly slot), with its progress
    and Stop; kept beside the server's Hub models, so every later visitor reads it at once."""
    checkpoint = services.registry.get(translation_model)
    if services.lenses.get(checkpoint) is None:
        def on_progress(stage, done, total):
            if progress is not None:
                progress(done / max(total, 1), desc=text(language, f"inside.tuned.progress.{stage}", done=done,
                                                         total=total))
        try:
            services.costly.run(layer_views.train_and_keep, checkpoint, str(services.lenses.folder_for(checkpoint)),
                                Callback(on_progress))
        except Stopped:
            pass  # nothing is kept of a lens stopped half-trained: the button trains one anew
    if translation_state is None:
        return {}
    return tuned_views(checkpoint, translation_state, services.lenses.get(checkpoint), language)


def layer_views_of(by_layer, layer) -> dict:
    """The DecoderLens views of encoder layer ``layer`` of ``by_layer`` (every encoder layer's translation)."""
    layer = clamp(layer, 1, len(by_layer))
    return {"decoderlens_layer": gr.Slider(1, max(2, len(by_layer)), value=layer, step=1),
            "decoderlens_summary": layer_views.layer_summary(by_layer, layer),
            "decoderlens_map": layer_views.layer_map(by_layer, layer)}


def on_layers(services: Services, translation_model, translation_state, decoderlens_layer,
              language: str = ENGLISH) -> dict:
    """The section opened (or the lesson's Show me): the sentence translated from every encoder layer at once."""
    if translation_state is None:
        return {"layers_open": True}
    by_layer = layer_views.layer_translations(services.registry.get(translation_model), translation_state)
    return {"layers_state": by_layer, "layers_open": True,
            "decoderlens_table": layer_views.layers_table(by_layer, language),
            **layer_views_of(by_layer, decoderlens_layer)}


def on_layer_shown(layers_state, decoderlens_layer) -> dict:
    """Another encoder layer chosen: its translation and cross-attention, from what the section computed (the
    table of every layer stays as it is)."""
    if not layers_state:
        return {}
    return layer_views_of(layers_state, decoderlens_layer)


def on_temperature(services: Services, translation_model, translation_state, lens_step, temperature, sample_top_k,
                   sample_top_p, language: str = ENGLISH) -> dict:
    if translation_state is None:
        return {}
    sampling = inside.sampling_settings(temperature, sample_top_k, sample_top_p, 0)
    return {"temperature_plot": inside.temperature_figure(services.registry.get(translation_model),
                                                          translation_state, lens_step, sampling,
                                                          language=language)}


def on_sample(services: Services, translation_model, translation_state, temperature, sample_top_k, sample_top_p,
              sample_seed, language: str = ENGLISH) -> dict:
    sampling = inside.sampling_settings(temperature, sample_top_k, sample_top_p, sample_seed or 0)
    return {"sampled": inside.sampled_translation(services.registry.get(translation_model), translation_state,
                                                  sampling, language),
            "sample_seed": sampling.seed + 1}  # the text names this draw's seed; the next click draws anew


def reset_if_waiting(translation_state, tabs_waiting) -> dict:
    """What a translation made while this tab was hidden resets here, if that still waits (``Page.views_for``)."""
    waiting = list(tabs_waiting or ())
    if TAB_ID not in waiting or translation_state is None:
        return {"visible_tab": TAB_ID}
    return {**after_translation(translation_state), "tabs_waiting": [tab for tab in waiting if tab != TAB_ID],
            "visible_tab": TAB_ID}


def on_opened(services: Services, translation_model, translation_state, tabs_waiting, inside_kind, inside_layer,
              inside_head, inside_query, lens_step, temperature, sample_top_k, sample_top_p, layers_open=False,
              decoderlens_layer=1, language: str = ENGLISH) -> dict:
    """The tab opened: what a translation made meanwhile resets here first, in the same round trip as the views
    (drawn at the query and step it resets to); the layers' section, where it is open, read anew."""
    reset = reset_if_waiting(translation_state, tabs_waiting)
    if "inside_query" in reset:
        inside_query, lens_step = first_rows(translation_state)
    reading = on_layers(services, translation_model, translation_state, decoderlens_layer, language) \
        if layers_open and "inside_query" in reset else {}
    return {**reset, **on_inside(services, translation_model, translation_state, inside_kind, inside_layer, inside_head,
                                 inside_query, language),
            **on_lens(services, translation_model, translation_state, lens_step, temperature, sample_top_k,
                      sample_top_p, language), **reading}


def on_look_inside(services: Services, translation_model, translation_state, tabs_waiting, step, layer, head, average,
                   lens_step, temperature, sample_top_k, sample_top_p, language: str = ENGLISH) -> dict:
    """From the Translate tab's step: this tab, on the cross-attention query of that step, in the layer and head
    shown there (head 1 when the heads are averaged)."""
    kind, head = ATTENTION_KINDS["cross"], 1 if average else head
    return {**reset_if_waiting(translation_state, tabs_waiting), "tabs": gr.Tabs(selected=TAB_ID),
            **looking_at(services.registry.get(translation_model), translation_state, kind, head, step),
            **on_inside(services, translation_model, translation_state, kind, layer, head, step, language),
            **on_lens(services, translation_model, translation_state, step, temperature, sample_top_k, sample_top_p,
                      language)}


def looking_at(checkpoint: Checkpoint, translation: Translation | None, kind, head, step) -> dict:
    """The selectors set to look at ``head`` and ``step`` from elsewhere (a step of the Translate tab, a lesson),
    each with the range it has for this model and sentence: a value set without it would outlive a range left from
    another model or sentence, and Gradio would refuse the tab's next event."""
    heads = layer_and_head_counts(checkpoint)[1]
    steps = translation.num_steps if translation is not None else 1
    return {"inside_kind": kind, "inside_head": gr.Slider(1, heads, value=clamp(head, 1, heads), step=1),
            "lens_step": gr.Slider(1, max(2, steps), value=clamp(step, 1, steps), step=1, interactive=steps > 1)}


def closed_layers() -> dict:
    return {"layers_open": False}


def on_blackboard(blackboard_table, blackboard_causal, language: str = ENGLISH) -> dict:
    steps, figure = inside.blackboard(blackboard_table, blackboard_causal, language)
    return {"blackboard_steps": steps, "blackboard_plot": figure}


def on_blackboard_size(blackboard_d, blackboard_table, blackboard_causal, language: str = ENGLISH) -> dict:
    table = inside.blackboard_table(blackboard_d, blackboard_table, language)
    return {"blackboard_table": table, **on_blackboard(table, blackboard_causal, language)}


# --- what other events change here ---------------------------------------------------------------

def after_translation(translation: Translation) -> dict:
    """A new sentence: its rows to pick from; the views are drawn when the tab is opened or a selector moves."""
    steps = translation.num_steps
    query, lens_step = first_rows(translation)
    return {"inside_query": gr.Slider(1, max(2, steps), value=query, step=1), "inside_summary": WAITING,
            "inside_table": None, "inside_contributions": None, "inside_vectors": None, "inside_merge": "",
            "inside_cache": "", "inside_map_weights": None, "inside_map_head": None, "inside_map_layer": None,
            "lens_plot": None, "temperature_plot": None, "sampled": "", "tuned_plot": None, "tuned_text": "",
            "lens_step": gr.Slider(1, max(2, steps), value=lens_step, step=1, interactive=steps > 1),
            "layers_state": None, "decoderlens_summary": WAITING_LAYERS, "decoderlens_table": "",
            "decoderlens_map": None}


def first_rows(translation: Translation) -> tuple[int, int]:
    """The query and the logit lens's step a new sentence opens on."""
    return min(2, translation.num_steps), 1


def after_model_change(checkpoint: Checkpoint) -> dict:
    layers, heads = layer_and_head_counts(checkpoint)
    encoder_layers = checkpoint.model.config.n_encoder_layers
    return {"inside_layer": gr.Slider(1, layers, value=layers, step=1),
            "inside_head": gr.Slider(1, heads, value=1, step=1),
            "decoderlens_layer": gr.Slider(1, max(2, encoder_layers), value=1, step=1)}


INSIDE_RESET = ("inside_query", "inside_summary", "inside_table", "inside_contributions", "inside_vectors",
                "inside_merge", "inside_cache", "inside_map_weights", "inside_map_head", "inside_map_layer", "lens_plot",
                "temperature_plot", "sampled", "lens_step", "tuned_plot", "tuned_text", "layers_state",
                "decoderlens_summary", "decoderlens_table", "decoderlens_map")
TUNED_OUTPUTS = ("tuned_plot", "tuned_text", "tuned_train", "tuned_stop")
LAYERS_OUTPUTS = ("layers_state", "layers_open", "decoderlens_layer", "decoderlens_summary", "decoderlens_table",
                  "decoderlens_map")


def declare(page: Page) -> None:
    page.when_translated(after_translation, INSIDE_RESET, TAB_ID, drawn_on_opening=False)  # on_opened draws it
    page.when_model_changes(after_model_change, ("inside_layer", "inside_head", "decoderlens_layer"))


def wire(page: Page) -> None:
    c = page.components
    page.on(page.shown(TAB_ID), on_opened, [*HEAD_OUTPUTS, "lens_plot", "temperature_plot", *INSIDE_RESET,
                                           *TUNED_OUTPUTS, *LAYERS_OUTPUTS, "tabs_waiting", "visible_tab"],
            trigger_mode="always_last", progress_on=["inside_summary"])
    page.on([c["inside_kind"].input, c["inside_layer"].input, c["inside_head"].input, c["inside_query"].input],
            on_inside, HEAD_OUTPUTS, trigger_mode="always_last", show_progress="hidden")
    page.on([c["lens_step"].input, c["temperature"].input, c["sample_top_k"].input, c["sample_top_p"].input],
            on_temperature, ["temperature_plot"], trigger_mode="always_last", show_progress="hidden")
    page.on(c["sample_button"].click, on_sample, ["sampled", "sample_seed"], keep_on_input_problem=True)
    training = page.on(c["tuned_train"].click, on_train_lens, TUNED_OUTPUTS, costly=True, progress_on=["tuned_text"])
    page.stops(c["tuned_stop"], training)
    page.on(c["layers_section"].expand, on_layers, LAYERS_OUTPUTS, costly=True, trigger_mode="always_last",
            progress_on=["decoderlens_summary"])
    page.on(c["layers_section"].collapse, closed_layers, ["layers_open"], show_progress="hidden")
    page.on(c["decoderlens_layer"].input, on_layer_shown, ["decoderlens_layer", "decoderlens_summary",
                                                           "decoderlens_map"], trigger_mode="always_last",
            show_progress="hidden")
    looking = page.on(c["look_inside"].click, on_look_inside,  # the Translate tab's step view, looked into here
                      ["tabs", "inside_kind", "inside_head", "lens_step", *HEAD_OUTPUTS, "lens_plot",
                       "temperature_plot", *INSIDE_RESET, *TUNED_OUTPUTS, "tabs_waiting", "visible_tab"])
    page.brings_into_sight(looking, HEAD_VIEW_ID)
    page.on([c["blackboard_button"].click, c["blackboard_causal"].input], on_blackboard,
            ["blackboard_steps", "blackboard_plot"], keep_on_input_problem=True)
    page.on(c["blackboard_d"].input, on_blackboard_size, ["blackboard_table", "blackboard_steps", "blackboard_plot"],
            keep_on_input_problem=True)
