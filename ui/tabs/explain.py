"""The Attention vs evidence tab: does attention explain the translation? Attribution and rollout beside
cross-attention, their agreement, and a pruning curve."""

from __future__ import annotations

import re

import gradio as gr

from transformer.data import load_multi30k
from transformer.errors import InputError
from transformer.files.checkpoint import Checkpoint
from transformer.paper.decoding import Translation

from ..runtime import components
from ..runtime.chart import Chart
from ..runtime.page import Page
from ..runtime.worker import Callback
from ..services import Services, multi30k_available
from ..views import explain
from ..views.choices import MEAN_OF_HEADS, chosen_head, head_options
from ..views.samples import sample_sentences

TAB_ID, TITLE = "explain", "Attention vs evidence"  # the tab's id in the page, and its label

PRUNE_KINDS = {"cross-attention": "cross", "encoder self-attention": "encoder", "decoder self-attention": "decoder"}
SAMPLE, VALIDATION = "sample sentences that ship with the app", "Multi30K validation, first 100 (with references)"
VALIDATION_SENTENCES = 100  # enough for a BLEU that means something, few enough to prune in a class


def layout(page: Page, checkpoint: Checkpoint) -> None:
    layers, heads = cross_attention_size(checkpoint)
    gr.Markdown("## Does attention explain the translation?\n" + explain.NOTES["intro"])
    with gr.Row():
        explain_method = components.Radio(list(explain.METHODS), value="integrated gradients", label="Evidence", scale=3)
        explain_steps = components.Slider(8, 128, value=32, step=8, label="Integration steps", scale=2)
        explain_button = gr.Button("Attribute the last translation", variant="primary", scale=1)
    explain_summary = gr.Markdown(elem_id="explain-summary")
    with gr.Row():
        explain_attribution = Chart(label="Evidence", elem_id="explain-attribution")
        with gr.Column():
            with gr.Row():
                explain_layer = components.Slider(1, layers, value=layers, step=1, label="Layer of the cross-attention")
                explain_head = components.Dropdown(head_options(heads), value=MEAN_OF_HEADS, label="Head")
            explain_attention = Chart(label="Cross-attention", elem_id="explain-attention")
    gr.Markdown(explain.NOTES["agreement"])
    explain_agreement = gr.Dataframe(label="Agreement with the evidence, best first", interactive=False,
                                     elem_id="explain-agreement")
    explain_sample_button = gr.Button("Agreement over the sample sentences")
    with gr.Accordion("Rollout inside the encoder", open=False):
        gr.Markdown(explain.NOTES["encoder_rollout"])
        explain_encoder_rollout = Chart(label="Encoder rollout", elem_id="explain-encoder-rollout")
    page.add(explain_method=explain_method, explain_steps=explain_steps, explain_button=explain_button,
             explain_summary=explain_summary, explain_attribution=explain_attribution, explain_layer=explain_layer,
             explain_head=explain_head, explain_attention=explain_attention, explain_agreement=explain_agreement,
             explain_sample_button=explain_sample_button, explain_encoder_rollout=explain_encoder_rollout)
    with gr.Accordion("Pruning: how many heads does the translation need?", open=False):
        gr.Markdown(explain.NOTES["pruning"])
        with gr.Row():
            prune_kind = components.Radio(list(PRUNE_KINDS), value="cross-attention", label="Attention type", scale=3)
            prune_data = components.Radio([SAMPLE] + ([VALIDATION] if multi30k_available() else []), value=SAMPLE,
                                  label="Sentences", scale=3)
            prune_button = gr.Button("Prune head by head", variant="primary", scale=1)
            prune_stop = gr.Button("Stop", scale=0)
        prune_summary = gr.Markdown()
        prune_plot = Chart(label="Pruning curve", elem_id="prune-plot")
    page.add(prune_kind=prune_kind, prune_data=prune_data, prune_button=prune_button, prune_stop=prune_stop,
             prune_summary=prune_summary, prune_plot=prune_plot)


# --- handlers ------------------------------------------------------------------------------------

def on_attribute(services: Services, translation_model, translation_state, explain_method, explain_steps, explain_layer,
                 explain_head) -> dict:
    checkpoint = services.registry.get(translation_model)
    view = services.costly.run(explain.attribution_view, checkpoint, translation_state, explain_method, explain_steps)
    head = chosen_head(explain_head, checkpoint.model.config.n_heads)
    return {"explain_summary": view.summary, "explain_attribution": view.figure,
            "explain_encoder_rollout": explain.encoder_rollout_figure(translation_state),
            "explain_attention": explain.attention_beside(translation_state, explain_layer, head),
            "explain_agreement": explain.agreement_table(explain.agreement_rows(
                translation_state, view.attribution.scores, with_rollout=view.attribution.method != "rollout"))}


def on_attention(translation_state, explain_layer, explain_head) -> dict:
    if translation_state is None:
        return {}
    heads = translation_state.cross_attention.shape[1]
    return {"explain_attention": explain.attention_beside(translation_state, explain_layer,
                                                          chosen_head(explain_head, heads))}


def on_agreement_row(translation_state, event: gr.SelectData) -> dict:
    """A head's row ("L2H3", "L2 mean of heads") opens that map beside the evidence; rollout has no single map."""
    match = re.fullmatch(r"L(\d+)(?:H(\d+)| mean of heads)", str((event.row_value or [""])[0]))
    if translation_state is None or not match:
        return {}
    layer, head = int(match[1]), match[2] or MEAN_OF_HEADS
    return {"explain_layer": layer, "explain_head": head, **on_attention(translation_state, layer, head)}


def on_sample_agreement(services: Services, model, explain_method, explain_steps,
                        progress=gr.Progress()) -> dict:
    checkpoint = services.registry.get(model)
    sentences = sample_sentences(checkpoint)
    table = services.costly.run(explain.sample_agreement, checkpoint, sentences, explain_method, explain_steps,
                                Callback(lambda done, total: progress(done / total, desc=f"sentence {done} of {total}")))
    return {"explain_agreement": table,
            "explain_summary": f"**Agreement over {len(sentences)} sample sentences** ({explain_method}), each on "
                               "the model's own greedy translation."}


def pruning_sentences(checkpoint: Checkpoint, prune_data) -> tuple[list[str], list[str] | None]:
    """The sentences to prune on, and their references when they come from Multi30K."""
    if prune_data != VALIDATION:
        return sample_sentences(checkpoint), None
    training = checkpoint.info.get("training", {})
    if training.get("data") != "multi30k":
        raise InputError("Multi30K references fit only a model trained on Multi30K; use the sample sentences.")
    corpus = load_multi30k("val", training.get("src_lang", "en"), training.get("tgt_lang", "de"))
    return corpus.sources[:VALIDATION_SENTENCES], corpus.targets[:VALIDATION_SENTENCES]


def on_prune(services: Services, model, prune_kind, prune_data, progress=gr.Progress()) -> dict:
    checkpoint = services.registry.get(model)
    sentences, references = pruning_sentences(checkpoint, prune_data)
    curves = services.costly.run(explain.pruning_curves, checkpoint, PRUNE_KINDS.get(prune_kind, "cross"),
                                 sentences, references, Callback(lambda done, what: progress(done, desc=what)))
    return {"prune_plot": explain.pruning_figure(curves, list(explain.PRUNING_ORDERS)),
            "prune_summary": explain.pruning_summary(curves)}


# --- what other events change here ---------------------------------------------------------------

def after_translation(translation: Translation) -> dict:
    return {"explain_summary": "Press **Attribute the last translation** to put evidence beside its attention.",
            "explain_attribution": None, "explain_attention": None, "explain_agreement": None,
            "explain_encoder_rollout": None}


def cross_attention_size(checkpoint: Checkpoint) -> tuple[int, int]:
    """Layers and heads of cross-attention: the decoder's depth, whatever the encoder's."""
    config = checkpoint.model.config
    return config.n_decoder_layers, config.n_heads


def after_model_change(checkpoint: Checkpoint) -> dict:
    layers, heads = cross_attention_size(checkpoint)
    return {"explain_layer": gr.Slider(1, layers, value=layers, step=1),
            "explain_head": gr.Dropdown(head_options(heads), value=MEAN_OF_HEADS), "prune_plot": None,
            "prune_summary": ""}


ATTRIBUTION_OUTPUTS = ("explain_summary", "explain_attribution", "explain_attention", "explain_agreement",
                       "explain_encoder_rollout")


def declare(page: Page) -> None:
    page.when_translated(after_translation, ATTRIBUTION_OUTPUTS, TAB_ID)
    page.when_model_changes(after_model_change, ("explain_layer", "explain_head", "prune_plot", "prune_summary"))


def wire(page: Page) -> None:
    c = page.components
    page.sentence_work += [
        page.on(c["explain_button"].click, on_attribute, ATTRIBUTION_OUTPUTS, keep_on_input_problem=True,
                costly=True),
        page.on(c["explain_sample_button"].click, on_sample_agreement, ("explain_agreement", "explain_summary"),
                keep_on_input_problem=True, costly=True)]
    pruning = page.on(c["prune_button"].click, on_prune, ("prune_plot", "prune_summary"), keep_on_input_problem=True,
                      costly=True)
    page.sentence_work.append(pruning)
    c["prune_stop"].click(None, cancels=[pruning], api_visibility="private")
    page.on([c["explain_layer"].input, c["explain_head"].input], on_attention, ["explain_attention"],
            trigger_mode="always_last", show_progress="hidden")
    page.on(c["explain_agreement"].select, on_agreement_row, ["explain_layer", "explain_head", "explain_attention"])
