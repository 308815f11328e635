"""The Model tab: config, parameters per module, scores, the model card, and how the model learned."""

from __future__ import annotations

import gradio as gr

from transformer.files.checkpoint import Checkpoint

from .. import figures
from ..runtime import components
from ..runtime.chart import Chart
from ..runtime.page import Page
from ..services import Services
from ..views import model as views

TAB_ID, TITLE = "model", "Model"  # the tab's id in the page, and its label

HISTORY_NOTE = ("At every evaluation during training, the cross-attention of a fixed probe sentence was saved. "
                "Slide to watch the alignment emerge from noise.")


def layout(page: Page, checkpoint: Checkpoint) -> None:
    model_metrics = gr.Markdown()
    with gr.Row():
        model_config = gr.Dataframe(headers=["setting", "value"], label="Config", interactive=False)
        model_parameters = gr.Dataframe(headers=["module", "parameters", "share"], label="Parameters per module",
                                        interactive=False)
    with gr.Accordion("How this model learned", open=True):
        history_curves = Chart(label="Training curves")
        gr.Markdown(HISTORY_NOTE)
        history_step = components.Slider(1, 2, value=1, step=1, label="Evaluation", elem_id="history-slider")
        history_plot = Chart(label="Probe attention", elem_id="history-plot")
    with gr.Accordion("Model card", open=False):
        model_card = gr.Markdown()
    page.add(model_metrics=model_metrics, model_config=model_config, model_parameters=model_parameters,
             history_curves=history_curves, history_step=history_step, history_plot=history_plot,
             history_state=gr.State([]), model_card=model_card,
             model_tab_shows=gr.State(None))  # the model whose views the tab shows


def replay_slider(probes: list[dict]) -> gr.Slider:
    """One stop per evaluation, on the last; still when there is nothing to replay."""
    return gr.Slider(1, max(2, len(probes)), value=max(1, len(probes)), step=1, interactive=len(probes) > 1)


def model_views(checkpoint: Checkpoint) -> dict:
    steps, evals, probes = views.checkpoint_history(checkpoint)
    return {"model_metrics": views.metrics_markdown(checkpoint), "model_config": views.config_rows(checkpoint),
            "model_parameters": views.parameter_table(checkpoint), "model_card": views.card_markdown(checkpoint),
            "history_curves": figures.training_curves(steps, evals, "Training") if (steps or evals) else None,
            "history_step": replay_slider(probes), "history_plot": views.probe_figure(probes, len(probes)),
            "history_state": probes}


def on_history_step(history_state, history_step) -> dict:
    return {"history_plot": views.probe_figure(history_state, history_step)}


def on_opened(services: Services, translation_model, model_tab_shows) -> dict:
    """The tab opened, or redrawn after a model switch: the views of the model the page shows, unless they show it
    already. (A switch drew them for every switch, 100-130 ms each, with the tab out of sight.)"""
    if translation_model == model_tab_shows:
        return {}
    return {**model_views(services.registry.get(translation_model)), "model_tab_shows": translation_model}


MODEL_VIEWS = ("model_metrics", "model_config", "model_parameters", "model_card", "history_curves", "history_step",
               "history_plot", "history_state")


def declare(page: Page) -> None:
    """Nothing: the tab draws its views when it is opened."""


def wire(page: Page) -> None:
    page.on(page.shown(TAB_ID), on_opened, [*MODEL_VIEWS, "model_tab_shows"], trigger_mode="always_last",
            progress_on=["model_metrics"])
    # Sliders that handlers also set redraw on the user's own moves only (drag, number box, reset).
    history_step = page["history_step"]
    page.on([history_step.input, history_step.release], on_history_step, ["history_plot"],
            trigger_mode="always_last")
