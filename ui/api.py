"""The named endpoints for gradio_client users, kept stable whatever the page's own events become.

The page answers a click with one event that changes many views; these answer with the few values the
README documents, through the same handlers.
"""

from __future__ import annotations

import gradio as gr


from .header import model_settings
from .page import Page
from .services import Services
from .tabs.model import after_model_change as model_tab
from .tabs.translate import STEP_VIEWS, step_views, translated
from .views import exports
from .views.choices import require_translation
from .views.text import source_label, text_for_model
from .views.translate import run_translation


def translate(services: Services, model, text, decoding, beam_size, max_length) -> dict:
    """/translate: the translation, its notes, the source pieces, the step slider and the attention download."""
    result = run_translation(services.registry.get(model), text, decoding, beam_size, max_length)
    return translated(result, step=result.translation.num_steps)


def step(translation_state, step, layer, head, average) -> dict:
    """/step: the step view of the session's last translation (the pieces so far, candidates, attention, caption)."""
    return step_views(translation_state, step, layer, head, average)


def attention(translation_state) -> dict:
    """/attention: the raw attention of the client's last translation, as a JSON file (translate's --json)."""
    written = exports.attention_json_file(require_translation(translation_state))
    return {"attention_download": gr.DownloadButton(value=written, visible=True)}


def select_model(services: Services, model, text, layer, head, typed_texts) -> dict:
    """/select_model: the model's status, Model-tab tables and card, sliders sized to it, and the input box."""
    checkpoint = services.registry.get(model)
    text, typed_texts = text_for_model(checkpoint, text, typed_texts)
    return {**model_settings(checkpoint, layer, head), **model_tab(checkpoint),
            "text": gr.Textbox(value=text, label=source_label(checkpoint)), "typed_texts": typed_texts}


def models(services: Services) -> dict:
    """/models: the model list, read afresh (models trained since the page opened are in it)."""
    return {"model": gr.Dropdown(choices=services.registry.names())}


def wire(page: Page) -> None:
    # API-only triggers: invisible, so no click on the page ever runs them.
    with gr.Row(visible=False):
        triggers = {name: gr.Button(visible=False) for name in ("translate", "step", "attention", "select_model", "models")}
    page.on(triggers["translate"].click, translate,
            ["translation", "notes", "source_tokens", "step", "attention_download", "translation_state"],
            api_name="translate")
    page.on(triggers["step"].click, step, STEP_VIEWS, api_name="step", queue=False)
    page.on(triggers["attention"].click, attention, ["attention_download"], api_name="attention")
    page.on(triggers["select_model"].click, select_model,
            ["model_status", "model_metrics", "model_config", "model_parameters", "model_card", "layer", "head",
             "text", "typed_texts"], api_name="select_model")
    page.on(triggers["models"].click, models, ["model"], api_name="models")
