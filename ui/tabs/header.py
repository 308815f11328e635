"""The top of the page: the introduction and the model picker, and the two events that change what every tab shows:
opening the page (on a shared link's model, sentence and view) and switching the model (the tab on screen is drawn
at once, the others when they are opened)."""

from __future__ import annotations

import itertools

import gradio as gr

from transformer.errors import InputError
from transformer.files.checkpoint import Checkpoint

from ..runtime import components
from ..runtime.errors import as_html
from ..runtime.language import ENGLISH, said
from ..runtime.language import text as words_in
from ..runtime.limits import visiting_client
from ..runtime.model_names import checkpoint_name, in_language
from ..runtime.page import Page
from ..services import Services
from . import translate
from ..views import model as model_views
from ..views import share
from ..runtime.numbers import clamp
from ..views.languages import language_choices
from ..views.text import examples_for, source_label, text_for_model
from ..views.translate import layer_and_head_counts

OPENING_EVERY_S = 2.0  # how often a page asks how far the models opened at start are


def broken_markdown(broken: dict[str, Exception | str], language: str = ENGLISH) -> str:
    """The models that did not load, and why (the reasons as the server found them)."""
    models = words_in(language, "header.not_loaded.separator").join(
        words_in(language, "header.not_loaded.model", name=as_html(name), why=as_html(said(why, language)))
        for name, why in broken.items())
    return words_in(language, "header.not_loaded", models=models)


def layout(page: Page, names: list[str], default_model: str, broken: dict[str, Exception | str] | None = None) -> None:
    words = page.words
    gr.Markdown(words("header.intro"))
    if broken:
        gr.Markdown(broken_markdown(broken, page.language), elem_id="broken-models")
    with gr.Row():
        # Custom values: an API client may name a model trained after it connected; the registry checks every name.
        model = components.Dropdown(names, value=default_model, label=words("header.model"), scale=2,
                                    allow_custom_value=True, info=words("header.model.info"), elem_id="model-choice")
        # A multilingual model's languages: shown for such a model only (language_picker).
        source_language = components.Dropdown([], label=words("header.source_language"), scale=1, visible=False,
                                              info=words("header.source_language.info"))
        target_language = components.Dropdown([], label=words("header.target_language"), scale=1, visible=False,
                                              info=words("header.target_language.info"))
        model_status = gr.Markdown(elem_id="model-status")
    opening_status = gr.Markdown(elem_id="opening-status", visible=False)
    with gr.Accordion(words("header.hub"), open=False, visible=page.services.hub.enabled, elem_id="open-from-hub"):
        with gr.Row():
            # The placeholder is a Hub id, the same in every language.
            hub_id = gr.Textbox(label=words("header.hub.id"), placeholder="Helsinki-NLP/opus-mt-en-de", scale=3,
                                info=words("header.hub.id.info"))
            open_hub = gr.Button(words("header.hub.open"), scale=1)
        hub_status = gr.Markdown(elem_id="hub-status")
    page.add(model=model, source_language=source_language, target_language=target_language,
             model_status=model_status,
             typed_texts=gr.State({}),  # the last text typed for each kind of model: {"digits"|"text": text}
             # The last translation, and the model that made it (what the other tabs look into: translate.translated).
             translation_state=gr.State(None), translation_model=gr.State(default_model),
             hub_id=hub_id, open_hub=open_hub, hub_status=hub_status, opening_status=opening_status,
             opening_timer=gr.Timer(OPENING_EVERY_S, active=False),
             # A new value each time a switch has landed: the tab on screen then draws its views of it.
             model_switched=gr.Textbox("", visible="hidden"))
    page.when_model_changes(language_picker, ("source_language", "target_language"))


def language_picker(checkpoint: Checkpoint, language: str = ENGLISH) -> dict:
    """The languages of a multilingual model, named in ``language``, the two it translates between chosen; hidden
    for a model of one pair of languages."""
    if checkpoint.languages is None:
        return {"source_language": gr.Dropdown(visible=False), "target_language": gr.Dropdown(visible=False)}
    choices = language_choices(checkpoint.languages.tokens, language)
    return {"source_language": gr.Dropdown(choices=choices, value=checkpoint.pair[0], visible=True),
            "target_language": gr.Dropdown(choices=choices, value=checkpoint.pair[1], visible=True)}


def model_settings(checkpoint: Checkpoint, layer, head, language: str = ENGLISH) -> dict:
    """The status line and the layer and head sliders sized to the model (the values kept where they fit)."""
    layers, heads = layer_and_head_counts(checkpoint)
    return {"model_status": model_views.status_line(checkpoint, language),
            "layer": gr.Slider(1, layers, step=1, value=clamp(layer or 1, 1, layers)),
            "head": gr.Slider(1, heads, step=1, value=clamp(head or 1, 1, heads)),
            "beam_size": gr.Slider(info=translate.beam_info(checkpoint, language))}


def on_model(services: Services, model, text, typed_texts, decoding, beam_size, max_length, kind, view, layer, head,
             average, request: gr.Request = None, language: str = ENGLISH) -> dict:
    """Another model: every tab follows it, and the sentence (or one this model reads) is translated anew."""
    checkpoint = services.registry.get(model)
    shown, typed_texts = text_for_model(checkpoint, text, typed_texts)
    if not shown.strip():  # an emptied box: the new model still shows what it does, on its own example
        shown = examples_for(checkpoint)[0]
    layers, heads = layer_and_head_counts(checkpoint)
    layer, head = clamp(layer or 1, 1, layers), clamp(head or 1, 1, heads)
    # The box's text is sent only when it changes: whatever the user typed during the switch stays.
    label = source_label(checkpoint, language)
    box = gr.Textbox(label=label) if shown == text else gr.Textbox(value=shown, label=label)
    return {"model": model, **model_settings(checkpoint, layer, head, language), "text": box,
            "typed_texts": typed_texts, "model_switched": str(next(SWITCHES)),
            **translate.translation_views(services, model, shown, decoding, beam_size, max_length, kind, view, layer,
                                          head, average, language=language)}


def on_language(services: Services, model, source_language, target_language, text, typed_texts, decoding,
                beam_size, max_length, kind, view, layer, head, average, request: gr.Request = None,
                language: str = ENGLISH) -> dict:
    """Other languages for a multilingual model: a switch to the same model set for them (the source named only
    where it is not the model's default, so that a name stays short)."""
    default = services.registry.get(checkpoint_name(model)).languages
    source = source_language if default is None or source_language != default.source else None
    return on_model(services, in_language(model, target_language, source), text, typed_texts, decoding,
                    beam_size, max_length, kind, view, layer, head, average, request, language)


def on_open_from_hub(services: Services, hub_id, text, typed_texts, decoding, beam_size, max_length, kind, view,
                     layer, head, average, request: gr.Request, progress=gr.Progress(track_tqdm=True),
                     language: str = ENGLISH) -> dict:
    """Download and convert a Hub model (once per server), then switch every tab to it, as a model switch does."""
    hub_id = (hub_id or "").strip()
    progress(0, desc=words_in(language, "header.hub.opening", hub_id=hub_id))
    name = services.open_from_hub(hub_id, visiting_client(request))
    opened = on_model(services, name, text, typed_texts, decoding, beam_size, max_length, kind, view, layer, head,
                      average, request, language)
    # A Hub id has only letters, digits, '.', '-', '_' and one '/' (download.check_repo_id), so code spans show it as it is.
    return {**opened, "hub_status": words_in(language, "header.hub.opened", hub_id=hub_id, name=name)}


def on_open(services: Services, model, text, decoding, beam_size, max_length, kind, view, layer, head, average,
            request: gr.Request, language: str = ENGLISH) -> dict:
    """The first view, on the model, sentence, decoding and view a shared link names (read afresh: models trained
    since the server started are listed, and a link may name one)."""
    query = dict(request.query_params) if request else {}
    names = services.registry.names()
    values = share.parse_share_query(query, names)
    chosen = values.get("model", services.registry.opened_at_start() or model)
    try:
        checkpoint = services.registry.get(chosen)
    except InputError as error:  # a link naming a language its model does not have: the model's own language
        gr.Warning(as_html(said(error, language)))
        chosen = checkpoint_name(chosen)
        checkpoint = services.registry.get(chosen)
    values = share.fit_share_values(values, checkpoint)
    for problem in share.share_link_problems(query, names, checkpoint, language):
        gr.Warning(as_html(problem))
    text = values.get("text", text if chosen == model else text_for_model(checkpoint, text, {})[0])
    kind, view = values.get("kind", kind), values.get("view", view)
    layer, head = values.get("layer", layer), values.get("head", head)
    beam = values.get("beam", 1 if decoding == "greedy" else beam_size)
    decoding = "greedy" if beam == 1 else "beam"
    max_length = values.get("max", max_length)
    layers, heads = layer_and_head_counts(checkpoint)
    layer, head = clamp(layer or 1, 1, layers), clamp(head or 1, 1, heads)
    return {"model": chosen, **model_settings(checkpoint, layer, head, language),
            **opening_views(services, language),
            "text": gr.Textbox(value=text, label=source_label(checkpoint, language)),
            "kind": kind, "view": view, "decoding": decoding,
            "beam_size": gr.Slider(value=max(2, beam), interactive=decoding == "beam",
                                   info=translate.beam_info(checkpoint, language)),
            "max_length": max_length,
            **translate.translation_views(services, chosen, text, decoding, beam, max_length, kind, view, layer, head,
                                          average, language=language)}


def opening_views(services: Services, language: str = ENGLISH) -> dict:
    """What the server is opening at start and how far along it is (in ``language``), asked again every few seconds
    until done."""
    status = services.opening.status(language)
    return {"opening_status": gr.Markdown(status, visible=bool(status)),
            "opening_timer": gr.Timer(active=services.opening.underway)}


def on_opening_tick(services: Services, language: str = ENGLISH) -> dict:
    """How far along; once a model is ready, the model list shows it (the page's own model stays)."""
    return {**opening_views(services, language), "model": gr.Dropdown(choices=services.registry.names())}


SWITCHES = itertools.count(1)  # model switches landed, numbered for the page (model_switched)
OPENED = ("model", "model_status", "opening_status", "opening_timer", "layer", "head", "text", "kind", "view",
          "decoding", "beam_size", "max_length")


def wire(page: Page, demo: gr.Blocks) -> None:
    # A model switch draws the Translate tab's views; the tab on screen, if another, then draws its own as its
    # opening does, and the rest wait until opened (each output an event names costs every later event).
    switched = ["model", "model_status", "layer", "head", "beam_size", "text", "typed_texts", "model_switched",
                *translate.TRANSLATION_OUTPUTS, *page.translation_outputs(translate.TAB_ID), *page.model_outputs()]
    # always_last: a second pick while the first loads is not dropped, and the dropdown ends on it. On select, not
    # input: Gradio 6's dropdown sends input twice for one pick (as it is chosen, and as its list closes) and again
    # whenever it loses focus; select once, by mouse or keyboard.
    page.on(page["model"].select, page.model_changed(page.translated(on_model, translate.TAB_ID), asked="model"),
            switched, cancels=page.sentence_work, trigger_mode="always_last",
            progress_on=["model_status", *translate.PROGRESS_ON])
    page.on([page["source_language"].select, page["target_language"].select],
            page.model_changed(page.translated(on_language, translate.TAB_ID)), switched,
            cancels=page.sentence_work, trigger_mode="always_last", progress_on=["model_status", *translate.PROGRESS_ON])
    page.on(page["open_hub"].click, page.model_changed(page.translated(on_open_from_hub, translate.TAB_ID)),
            [*switched, "hub_status"], cancels=page.sentence_work, concurrency_limit=1,
            concurrency_id="open_from_hub", progress_on=["hub_status", *translate.PROGRESS_ON])
    # Once a switch has landed (not a second ask for the same model, answered with nothing: ModelsShown).
    page.in_browser(page["model_switched"].change, "explorerPage.redrawShownTab")
    # The page opens on the Translate tab: only its views answer the first translation.
    page.on(demo.load, page.model_changed(page.translated(on_open, translate.TAB_ID)),
            [*OPENED, *translate.TRANSLATION_OUTPUTS, *page.translation_outputs(translate.TAB_ID),
             *page.model_outputs()], progress_on=translate.PROGRESS_ON)
    page.on(page["opening_timer"].tick, on_opening_tick, ["opening_status", "opening_timer", "model"],
            show_progress="hidden")
