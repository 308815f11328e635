"""The Model tab: config, parameters per module, scores, the model card, and how the model learned."""

from __future__ import annotations

import gradio as gr

from transformer.files.checkpoint import Checkpoint

from ..drawing import charts
from ..runtime import components
from ..runtime.chart import Chart
from ..runtime.language import ENGLISH, message, text
from ..runtime.page import Page
from ..services import Services
from ..views import model as views
from ..views import offline_pack

TAB_ID, TITLE = "model", message("model.title")  # the tab's id in the page, and its label


def layout(page: Page, checkpoint: Checkpoint) -> None:
    words = page.words
    model_metrics = gr.Markdown()
    with gr.Row():
        model_config = gr.Dataframe(headers=[words("model.setting"), words("model.value")], label=words("model.config"),
                                    interactive=False)
        model_parameters = gr.Dataframe(headers=views.parameter_columns(page.language),
                                        label=words("model.parameters_per_module"), interactive=False)
    with gr.Accordion(words("model.how_it_learned"), open=True):
        history_curves = Chart(label=words("model.training_curves"))
        gr.Markdown(words("model.history_note"))
        history_step = components.Slider(1, 2, value=1, step=1, label=words("model.evaluation"),
                                         elem_id="history-slider")
        history_plot = Chart(label=words("model.probe_attention"), elem_id="history-plot")
    with gr.Accordion(words("model.card"), open=False):
        model_card = gr.Markdown()
    with gr.Accordion(words("model.offline"), open=False):
        gr.Markdown(words("model.offline.note"))
        offline_button = gr.Button(words("model.offline.button"), elem_id="offline-pack-button")
        offline_file = gr.File(label=words("model.offline.file"), interactive=False, elem_id="offline-pack-file")
    page.add(offline_button=offline_button, offline_file=offline_file,
             model_metrics=model_metrics, model_config=model_config, model_parameters=model_parameters,
             history_curves=history_curves, history_step=history_step, history_plot=history_plot,
             history_state=gr.State([]), model_card=model_card,
             model_tab_shows=gr.State(None))  # the model whose views the tab shows


def replay_slider(probes: list[dict]) -> gr.Slider:
    """One stop per evaluation, on the last; still when there is nothing to replay."""
    return gr.Slider(1, max(2, len(probes)), value=max(1, len(probes)), step=1, interactive=len(probes) > 1)


def model_views(checkpoint: Checkpoint, language: str = ENGLISH) -> dict:
    steps, evals, probes = views.checkpoint_history(checkpoint)
    curves = (charts.training_curves(steps, evals, text(language, "model.training"), language=language)
              if (steps or evals) else None)
    return {"model_metrics": views.metrics_markdown(checkpoint, language),
            "model_config": views.config_rows(checkpoint),
            "model_parameters": views.parameter_table(checkpoint, language),
            "model_card": views.card_markdown(checkpoint, language), "history_curves": curves,
            "history_step": replay_slider(probes), "history_plot": views.probe_figure(probes, len(probes), language),
            "history_state": probes}


def on_history_step(history_state, history_step, language: str = ENGLISH) -> dict:
    return {"history_plot": views.probe_figure(history_state, history_step, language)}


def on_opened(services: Services, translation_model, model_tab_shows, language: str = ENGLISH) -> dict:
    """The tab opened, or redrawn after a model switch: the views of the model the page shows, unless they show it
    already. (A switch drew them for every switch, 100-130 ms each, with the tab out of sight.)"""
    if translation_model == model_tab_shows:
        return {}
    return {**model_views(services.registry.get(translation_model), language), "model_tab_shows": translation_model}


def on_offline_pack(services: Services, translation_model) -> dict:
    """The model shown, as an offline pack's zip: made in the costly worker, or the one made before for it."""
    checkpoint = services.registry.get(translation_model)
    archive = services.costly.run(offline_pack.offline_archive, checkpoint, offline_pack.PACKS)
    return {"offline_file": str(archive)}


MODEL_VIEWS = ("model_metrics", "model_config", "model_parameters", "model_card", "history_curves", "history_step",
               "history_plot", "history_state")


def declare(page: Page) -> None:
    """Nothing: the tab draws its views when it is opened."""


def wire(page: Page) -> None:
    page.on(page.shown(TAB_ID), on_opened, [*MODEL_VIEWS, "model_tab_shows"], trigger_mode="always_last",
            progress_on=["model_metrics"])
    page.on(page["offline_button"].click, on_offline_pack, ["offline_file"], costly=True, keep_on_input_problem=True)
    # Sliders that handlers also set redraw on the user's own moves only (drag, number box, reset).
    history_step = page["history_step"]
    page.on([history_step.input, history_step.release], on_history_step, ["history_plot"],
            trigger_mode="always_last")
