"""The Attention vs evidence tab: does attention explain the translation? Attribution and rollout beside
cross-attention, their agreement, and a pruning curve."""

from __future__ import annotations

import re

import gradio as gr

from transformer.data import load_multi30k
from transformer.errors import InputError
from transformer.files.checkpoint import Checkpoint
from transformer.paper.translation import Translation

from ..runtime import components
from ..runtime.chart import Chart
from ..runtime.language import ENGLISH, message, text
from ..runtime.page import Page
from ..runtime.worker import Callback
from ..services import Services, multi30k_available
from ..views import explain
from ..views.choices import MEAN_OF_HEADS, chosen_head, head_choices, other_candidates
from ..views.samples import sample_sentences

TAB_ID, TITLE = "explain", message("explain.title")  # the tab's id in the page, and its label

# The choices' English names are the values the page and scripts send; their words are explain.prune_kind.<kind>,
# explain.data.sample and explain.data.validation.
# The choices' values are their English words, as scripts send them.
PRUNE_KINDS = {text(ENGLISH, f"explain.prune_kind.{kind}"): kind for kind in ("cross", "encoder", "decoder")}
SAMPLE, VALIDATION = (text(ENGLISH, f"explain.data.{key}") for key in ("sample", "validation"))
VALIDATION_SENTENCES = 100  # enough for a BLEU that means something, few enough to prune in a class


def layout(page: Page, checkpoint: Checkpoint) -> None:
    words = page.words
    layers, heads = cross_attention_size(checkpoint)
    gr.Markdown(words("explain.intro"))
    with gr.Row():
        explain_method = components.Radio([(words(f"explain.method.{key}"), name)
                                           for name, key in explain.METHODS.items()],
                                          value=next(iter(explain.METHODS)), label=words("explain.evidence"), scale=3)
        explain_steps = components.Slider(8, 128, value=32, step=8, label=words("explain.steps"), scale=2)
        explain_button = gr.Button(words("explain.attribute_button"), variant="primary", scale=1)
    explain_summary = gr.Markdown(elem_id="explain-summary")
    with gr.Row():
        explain_attribution = Chart(label=words("explain.evidence"), elem_id="explain-attribution")
        with gr.Column():
            with gr.Row():
                explain_layer = components.Slider(1, layers, value=layers, step=1, label=words("explain.layer"))
                explain_head = components.Dropdown(head_choices(heads, page.language), value=MEAN_OF_HEADS,
                                                   label=words("explain.head"))
            explain_attention = Chart(label=words("explain.cross_attention"), elem_id="explain-attention")
    gr.Markdown(words("explain.agreement_note"))
    explain_agreement = gr.Dataframe(label=words("explain.agreement"), interactive=False,
                                     elem_id="explain-agreement")
    explain_sample_button = gr.Button(words("explain.sample_button"))
    with gr.Accordion(words("explain.rollout_section"), open=False):
        gr.Markdown(words("explain.encoder_rollout_note"))
        explain_encoder_rollout = Chart(label=words("explain.encoder_rollout"), elem_id="explain-encoder-rollout")
    page.add(explain_method=explain_method, explain_steps=explain_steps, explain_button=explain_button,
             explain_summary=explain_summary, explain_attribution=explain_attribution, explain_layer=explain_layer,
             explain_head=explain_head, explain_attention=explain_attention, explain_agreement=explain_agreement,
             explain_sample_button=explain_sample_button, explain_encoder_rollout=explain_encoder_rollout)
    contrast_layout(page)
    with gr.Accordion(words("explain.pruning_section"), open=False):
        gr.Markdown(words("explain.pruning_note"))
        with gr.Row():
            prune_kind = components.Radio([(words(f"explain.prune_kind.{kind}"), name)
                                           for name, kind in PRUNE_KINDS.items()],
                                          value="cross-attention", label=words("explain.attention_type"), scale=3)
            data = [(words("explain.data.sample"), SAMPLE)]
            if multi30k_available():
                data.append((words("explain.data.validation"), VALIDATION))
            prune_data = components.Radio(data, value=SAMPLE, label=words("explain.sentences"), scale=3)
            prune_button = gr.Button(words("explain.prune_button"), variant="primary", scale=1)
            prune_stop = gr.Button(words("explain.stop"), scale=0)
        prune_summary = gr.Markdown()
        prune_plot = Chart(label=words("explain.pruning_chart"), elem_id="prune-plot")
    page.add(prune_kind=prune_kind, prune_data=prune_data, prune_button=prune_button, prune_stop=prune_stop,
             prune_summary=prune_summary, prune_plot=prune_plot)


def contrast_layout(page: Page) -> None:
    """Why one step's token and not another: a step, a token to compare with, and the evidence for each."""
    words = page.words
    with gr.Accordion(words("explain.contrast_section"), open=False):
        gr.Markdown(words("explain.contrast_note"))
        with gr.Row():
            contrast_step = components.Slider(1, 2, value=1, step=1, label=words("explain.contrast_step"), scale=2)
            contrast_alternative = components.Dropdown([], label=words("explain.contrast_alternative"),
                                                       allow_custom_value=True, scale=2)
            contrast_method = components.Radio([(words(f"explain.method.{key}"), name)
                                                for name, key in explain.CONTRAST_METHODS.items()],
                                               value=next(iter(explain.CONTRAST_METHODS)),
                                               label=words("explain.evidence"), scale=2)
            contrast_button = gr.Button(words("explain.contrast_button"), variant="primary", scale=1)
        contrast_summary = gr.Markdown(elem_id="contrast-summary")
        contrast_plot = Chart(label=words("explain.contrast_chart"), elem_id="contrast-plot")
    page.add(contrast_step=contrast_step, contrast_alternative=contrast_alternative, contrast_method=contrast_method,
             contrast_button=contrast_button, contrast_summary=contrast_summary, contrast_plot=contrast_plot)


# --- handlers ------------------------------------------------------------------------------------

def on_attribute(services: Services, translation_model, translation_state, explain_method, explain_steps, explain_layer,
                 explain_head, language: str = ENGLISH) -> dict:
    checkpoint = services.registry.get(translation_model)
    view = services.costly.run(explain.attribution_view, checkpoint, translation_state, explain_method, explain_steps,
                               language)
    head = chosen_head(explain_head, checkpoint.model.config.n_heads)
    return {"explain_summary": view.summary, "explain_attribution": view.figure,
            "explain_encoder_rollout": explain.encoder_rollout_figure(translation_state, language),
            "explain_attention": explain.attention_beside(translation_state, explain_layer, head),
            "explain_agreement": explain.agreement_table(explain.agreement_rows(
                translation_state, view.attribution.scores, with_rollout=view.attribution.method != "rollout"),
                language)}


def on_attention(translation_state, explain_layer, explain_head) -> dict:
    if translation_state is None:
        return {}
    heads = translation_state.cross_attention.shape[1]
    return {"explain_attention": explain.attention_beside(translation_state, explain_layer,
                                                          chosen_head(explain_head, heads))}


def agreement_row_map(name: str, layers: int, language: str = ENGLISH) -> tuple[int, str] | None:
    """The layer and head picker's value of an agreement row's name ("L2H3", or a layer's mean of heads as the
    table writes it in ``language``); None for rollout, which has no single map."""
    if match := re.fullmatch(r"L(\d+)H(\d+)", name):
        return int(match[1]), match[2]
    return next(((layer, MEAN_OF_HEADS) for layer in range(1, layers + 1)
                 if name == explain.candidate_name(f"L{layer}", language)), None)


def on_agreement_row(translation_state, event: gr.SelectData, language: str = ENGLISH) -> dict:
    """A head's row ("L2H3", "L2 mean of heads") opens that map beside the evidence; rollout has no single map."""
    if translation_state is None:
        return {}
    chosen = agreement_row_map(str((event.row_value or [""])[0]), translation_state.cross_attention.shape[0],
                               language)
    if chosen is None:
        return {}
    layer, head = chosen
    return {"explain_layer": layer, "explain_head": head, **on_attention(translation_state, layer, head)}


def on_sample_agreement(services: Services, model, explain_method, explain_steps,
                        progress=gr.Progress(), language: str = ENGLISH) -> dict:
    checkpoint = services.registry.get(model)
    sentences = sample_sentences(checkpoint)

    def on_sentence(done, total):
        progress(done / total, desc=text(language, "explain.progress.sentence", done=done, total=total))
    table = services.costly.run(explain.sample_agreement, checkpoint, sentences, explain_method, explain_steps,
                                Callback(on_sentence), language)
    method = explain.method_key(explain_method)
    return {"explain_agreement": table,
            "explain_summary": text(language, "explain.sample_summary", count=len(sentences),
                                    method=message(f"explain.method.{method}") if method in explain.METHODS.values()
                                    else explain_method)}


CONTRAST_OUTPUTS = ("contrast_summary", "contrast_plot")


def on_contrast(services: Services, translation_model, translation_state, contrast_step, contrast_alternative,
                contrast_method, language: str = ENGLISH) -> dict:
    view = services.costly.run(explain.contrast_view, services.registry.get(translation_model), translation_state,
                               contrast_step, contrast_alternative, contrast_method, language)
    return {"contrast_summary": view.summary, "contrast_plot": view.figure}


def contrast_candidates(translation: Translation | None, step) -> dict:
    """A step's other candidates, the runner-up first, to compare its token with."""
    others = other_candidates(translation, step)
    return {"contrast_alternative": gr.Dropdown(others, value=others[0] if others else None)}


def on_contrast_step(translation_state, contrast_step) -> dict:
    return contrast_candidates(translation_state, contrast_step)


def pruning_sentences(checkpoint: Checkpoint, prune_data) -> tuple[list[str], list[str] | None]:
    """The sentences to prune on, and their references when they come from Multi30K."""
    if prune_data != VALIDATION:
        return sample_sentences(checkpoint), None
    training = checkpoint.info.get("training", {})
    if training.get("data") != "multi30k":
        raise InputError(message("explain.multi30k_only"))
    corpus = load_multi30k("val", training.get("src_lang", "en"), training.get("tgt_lang", "de"))
    return corpus.sources[:VALIDATION_SENTENCES], corpus.targets[:VALIDATION_SENTENCES]


def on_prune(services: Services, model, prune_kind, prune_data, progress=gr.Progress(),
             language: str = ENGLISH) -> dict:
    checkpoint = services.registry.get(model)
    sentences, references = pruning_sentences(checkpoint, prune_data)
    curves = services.costly.run(explain.pruning_curves, checkpoint, PRUNE_KINDS.get(prune_kind, "cross"),
                                 sentences, references, Callback(lambda done, what: progress(done, desc=what)),
                                 language)
    return {"prune_plot": explain.pruning_figure(curves, explain.pruning_labels(language), language),
            "prune_summary": explain.pruning_summary(curves, language)}


# --- what other events change here ---------------------------------------------------------------

def after_translation(translation: Translation, language: str = ENGLISH) -> dict:
    return {"explain_summary": text(language, "explain.press_attribute"),
            "explain_attribution": None, "explain_attention": None, "explain_agreement": None,
            "explain_encoder_rollout": None, "contrast_summary": "", "contrast_plot": None,
            "contrast_step": gr.Slider(1, max(2, translation.num_steps), value=1, step=1),
            **contrast_candidates(translation, 1)}


def cross_attention_size(checkpoint: Checkpoint) -> tuple[int, int]:
    """Layers and heads of cross-attention: the decoder's depth, whatever the encoder's."""
    config = checkpoint.model.config
    return config.n_decoder_layers, config.n_heads


def after_model_change(checkpoint: Checkpoint, language: str = ENGLISH) -> dict:
    layers, heads = cross_attention_size(checkpoint)
    return {"explain_layer": gr.Slider(1, layers, value=layers, step=1),
            "explain_head": gr.Dropdown(head_choices(heads, language), value=MEAN_OF_HEADS), "prune_plot": None,
            "prune_summary": ""}


ATTRIBUTION_OUTPUTS = ("explain_summary", "explain_attribution", "explain_attention", "explain_agreement",
                       "explain_encoder_rollout")


def declare(page: Page) -> None:
    page.when_translated(after_translation, (*ATTRIBUTION_OUTPUTS, *CONTRAST_OUTPUTS, "contrast_step",
                                             "contrast_alternative"), TAB_ID)
    page.when_model_changes(after_model_change, ("explain_layer", "explain_head", "prune_plot", "prune_summary"))


def wire(page: Page) -> None:
    c = page.components
    page.sentence_work += [
        page.on(c["explain_button"].click, on_attribute, ATTRIBUTION_OUTPUTS, keep_on_input_problem=True,
                costly=True),
        page.on(c["explain_sample_button"].click, on_sample_agreement, ("explain_agreement", "explain_summary"),
                keep_on_input_problem=True, costly=True)]
    page.sentence_work.append(page.on(c["contrast_button"].click, on_contrast, CONTRAST_OUTPUTS,
                                      keep_on_input_problem=True, costly=True))
    page.on(c["contrast_step"].input, on_contrast_step, ["contrast_alternative"], trigger_mode="always_last")
    pruning = page.on(c["prune_button"].click, on_prune, ("prune_plot", "prune_summary"), keep_on_input_problem=True,
                      costly=True)
    page.sentence_work.append(pruning)
    page.stops(c["prune_stop"], pruning)
    page.on([c["explain_layer"].input, c["explain_head"].input], on_attention, ["explain_attention"],
            trigger_mode="always_last", show_progress="hidden")
    page.on(c["explain_agreement"].select, on_agreement_row, ["explain_layer", "explain_head", "explain_attention"])
