"""The Experiments tab: switch heads off, rank heads, force a token, take word order away; each beside the
unmodified run of the sentence last translated."""

from __future__ import annotations

import random

import gradio as gr

from transformer.errors import InputError
from transformer.files.checkpoint import Checkpoint
from transformer.inside import interventions, patching
from transformer.paper.sentences import encode_source
from transformer.paper.translation import Translation

from ..runtime import batching, components
from ..runtime.chart import Chart
from ..runtime.language import ENGLISH, message, text
from ..runtime.page import Page
from ..runtime.worker import Callback
from ..services import Services
from ..views.choices import (ATTENTION_KINDS, MEAN_OF_HEADS, chosen_head, head_choices, other_candidates,
                             require_translation)
from ..views.experiments import (MEASURE_KEYS, MEASURES, comparison_attention, comparison_view, head_labels,
                                 importance_views, patching_view)
from ..views.samples import MINIMAL_PAIRS, SAMPLE_SIZE, sample_sentences
from ..views.translate import decoding_of, layer_and_head_counts
from . import translate as translate_tab

TAB_ID, TITLE = "experiments", message("experiments.title")  # the tab's id in the page, and its label


def layout(page: Page, checkpoint: Checkpoint) -> None:
    words = page.words
    layers, heads = layer_and_head_counts(checkpoint)
    gr.Markdown(words("experiments.intro"))
    experiment_sentence = gr.Textbox(label=words("experiments.sentence"), interactive=False)
    with gr.Accordion(words("experiments.switch_heads_off"), open=True):
        with gr.Row():
            ablate_encoder = components.CheckboxGroup([], label=words("experiments.encoder_heads"))
            ablate_decoder = components.CheckboxGroup([], label=words("experiments.decoder_heads"))
            ablate_cross = components.CheckboxGroup([], label=words("experiments.cross_heads"))
        with gr.Row():
            ablate_button = gr.Button(words("experiments.ablate_button"), variant="primary")
            importance_button = gr.Button(words("experiments.rank_sentence"))
            importance_sample_button = gr.Button(words("experiments.rank_sample", count=SAMPLE_SIZE))
        importance_plot = Chart(label=words("experiments.importance_chart"), elem_id="importance-plot")
        importance_summary = gr.Markdown()
    with gr.Accordion(words("experiments.override_token"), open=False):
        gr.Markdown(words("experiments.override_note"))
        with gr.Row():
            override_step = components.Slider(1, 2, value=1, step=1, label=words("experiments.step"))
            override_choice = components.Dropdown([], label=words("experiments.candidate"), allow_custom_value=True,
                                                  elem_id="override-choice")
            override_button = gr.Button(words("experiments.continue_button"))
    with gr.Accordion(words("experiments.word_order"), open=False) as word_order_section:
        gr.Markdown(words("experiments.word_order_note"))
        with gr.Row():
            no_positions_button = gr.Button(words("experiments.no_positions_button"))
            shuffle_button = gr.Button(words("experiments.shuffle_button"))
    patching_layout(page)
    gr.Markdown(words("experiments.result"))
    experiment_description = gr.Markdown(elem_id="experiment-description")
    with gr.Row():
        experiment_before = gr.Textbox(label=words("experiments.unmodified_translation"), interactive=False,
                                       elem_id="experiment-before")
        experiment_after = gr.Textbox(label=words("experiments.with_intervention"), interactive=False,
                                      elem_id="experiment-after")
    # The legend's words are the labels word_diff gives the words (in the page's language).
    experiment_diff = gr.HighlightedText(label=words("experiments.what_changed"),
                                         color_map={words("experiments.removed"): "#b42318",
                                                    words("experiments.added"): "#1a7f37"})
    experiment_probability = Chart(label=words("experiments.probability_chart"))
    with gr.Row():
        # The kinds' and measures' English names are the values handlers and scripts send; the labels translate.
        experiment_kind = components.Radio([(words(f"map.kind.{kind}"), name)
                                            for kind, name in ATTENTION_KINDS.items()],
                                           value=ATTENTION_KINDS["cross"], label=words("experiments.compare"),
                                           scale=3)
        experiment_layer = components.Slider(1, layers, value=layers, step=1, label=words("experiments.layer"),
                                             scale=2)
        experiment_head = components.Dropdown(head_choices(heads, page.language), value=MEAN_OF_HEADS,
                                              label=words("experiments.head"), scale=1)
        experiment_measure = components.Radio([(words(key), value) for key, value in zip(MEASURE_KEYS, MEASURES)],
                                              value=MEASURES[0], label=words("experiments.show"), scale=3,
                                              info=words("experiments.show_info"))
    with gr.Row():
        experiment_attention_before = Chart(label=words("experiments.unmodified"),
                                            elem_id="experiment-attention-before")
        experiment_attention_after = Chart(label=words("experiments.with_intervention"),
                                           elem_id="experiment-attention-after")
    page.add(experiment_sentence=experiment_sentence, ablate_encoder=ablate_encoder, ablate_decoder=ablate_decoder,
             ablate_cross=ablate_cross, ablate_button=ablate_button, importance_button=importance_button,
             importance_sample_button=importance_sample_button, importance_plot=importance_plot,
             importance_summary=importance_summary, override_step=override_step, override_choice=override_choice,
             override_button=override_button, no_positions_button=no_positions_button, shuffle_button=shuffle_button,
             experiment_description=experiment_description, experiment_before=experiment_before,
             experiment_after=experiment_after, experiment_diff=experiment_diff,
             experiment_probability=experiment_probability, experiment_kind=experiment_kind,
             experiment_layer=experiment_layer, experiment_head=experiment_head,
             experiment_measure=experiment_measure, experiment_attention_before=experiment_attention_before,
             experiment_attention_after=experiment_attention_after, last_comparison=gr.State(None),
             word_order_section=word_order_section)


def patching_layout(page: Page) -> None:
    """Activation patching between the sentence last translated and the same sentence changed."""
    words = page.words
    with gr.Accordion(words("experiments.patching_section"), open=False) as patching_section:
        gr.Markdown(words("experiments.patching_note"))
        patch_corrupted = gr.Textbox(label=words("experiments.corrupted_sentence"), lines=1, max_lines=3,
                                     placeholder=MINIMAL_PAIRS[0][1], elem_id="patch-corrupted")
        patch_examples = gr.Dataset(components=[gr.Textbox(visible=False), gr.Textbox(visible=False)],
                                    samples=[list(pair) for pair in MINIMAL_PAIRS],
                                    label=words("experiments.patch_examples"), elem_id="patch-examples")
        with gr.Row():
            patch_step = components.Slider(1, 2, value=1, step=1, label=words("experiments.step"), scale=2)
            patch_alternative = components.Dropdown([], label=words("experiments.patch_alternative"),
                                                    allow_custom_value=True, scale=2)
            patch_button = gr.Button(words("experiments.patch_button"), variant="primary", scale=1)
            patch_stop = gr.Button(words("experiments.stop"), scale=0)
        patching_summary = gr.Markdown(elem_id="patching-summary")
        patching_heads = Chart(label=words("experiments.patching_heads_chart"), elem_id="patching-heads")
        patching_positions = Chart(label=words("experiments.patching_positions_chart"), elem_id="patching-positions")
    page.add(patch_corrupted=patch_corrupted, patch_examples=patch_examples, patch_step=patch_step,
             patch_alternative=patch_alternative,
             patch_button=patch_button, patch_stop=patch_stop, patching_summary=patching_summary,
             patching_heads=patching_heads, patching_positions=patching_positions, patching_section=patching_section)


# --- handlers ------------------------------------------------------------------------------------

COMPARISON_OUTPUTS = ("last_comparison", "experiment_description", "experiment_before", "experiment_after",
                      "experiment_diff", "experiment_probability", "experiment_attention_before",
                      "experiment_attention_after")


def comparison_outputs(comparison: interventions.Comparison, checkpoint: Checkpoint, kind, layer, head,
                       measure, language: str = ENGLISH) -> dict:
    heads = comparison.before.cross_attention.shape[1]
    view = comparison_view(comparison, kind, layer, chosen_head(head, heads), measure, checkpoint, language)
    return {"last_comparison": comparison, "experiment_description": view.description,
            "experiment_before": view.before, "experiment_after": view.after, "experiment_diff": view.difference,
            "experiment_probability": view.probability, "experiment_attention_before": view.attention_before,
            "experiment_attention_after": view.attention_after}


def on_ablate(services: Services, translation_model, translation_state, ablate_encoder, ablate_decoder, ablate_cross,
              experiment_kind, experiment_layer, experiment_head, experiment_measure, language: str = ENGLISH) -> dict:
    if not (ablate_encoder or ablate_decoder or ablate_cross):
        raise InputError(message("experiments.tick_heads"))
    switched_off = {"encoder": ablate_encoder, "decoder": ablate_decoder, "cross": ablate_cross}
    source = require_translation(translation_state).source_text
    comparison = interventions.ablate_heads(services.registry.get(translation_model), source, switched_off,
                                            **decoding_of(translation_state))
    return comparison_outputs(comparison, services.registry.get(translation_model), experiment_kind, experiment_layer,
                              experiment_head, experiment_measure, language)


def on_override(services: Services, translation_model, translation_state, override_step, override_choice,
                experiment_kind, experiment_layer, experiment_head, experiment_measure,
                language: str = ENGLISH) -> dict:
    require_translation(translation_state)
    if not override_choice:
        raise InputError(message("experiments.choose_token"))
    comparison = interventions.override_token(services.registry.get(translation_model), translation_state,
                                              override_step, override_choice,
                                              decoding_of(translation_state)["max_length"])
    return comparison_outputs(comparison, services.registry.get(translation_model), experiment_kind, experiment_layer,
                              experiment_head, experiment_measure, language)


def on_positions(services: Services, translation_model, translation_state, experiment_kind, experiment_layer,
                 experiment_head, experiment_measure, language: str = ENGLISH) -> dict:
    source = require_translation(translation_state).source_text
    comparison = interventions.without_positions(services.registry.get(translation_model), source,
                                                 **decoding_of(translation_state))
    return comparison_outputs(comparison, services.registry.get(translation_model), experiment_kind, experiment_layer,
                              experiment_head, experiment_measure, language)


def on_shuffle(services: Services, translation_model, translation_state, experiment_kind, experiment_layer,
               experiment_head, experiment_measure, language: str = ENGLISH) -> dict:
    source = require_translation(translation_state).source_text
    comparison = interventions.shuffled_source(services.registry.get(translation_model), source,
                                               seed=random.randrange(2**32),  # each click a new order
                                               **decoding_of(translation_state))
    return comparison_outputs(comparison, services.registry.get(translation_model), experiment_kind, experiment_layer,
                              experiment_head, experiment_measure, language)


def on_comparison_attention(services: Services, translation_model, last_comparison, experiment_kind, experiment_layer,
                            experiment_head, experiment_measure, language: str = ENGLISH) -> dict:
    if last_comparison is None:
        return {}
    heads = last_comparison.before.cross_attention.shape[1]
    before, after = comparison_attention(last_comparison, experiment_kind, experiment_layer,
                                         chosen_head(experiment_head, heads), experiment_measure,
                                         services.registry.get(translation_model), language)
    return {"experiment_attention_before": before, "experiment_attention_after": after}


def on_importance(services: Services, translation_model, translation_state, language: str = ENGLISH) -> dict:
    importance = services.costly.run(interventions.head_importance, services.registry.get(translation_model),
                                     require_translation(translation_state))
    figure, summary = importance_views(importance, text(language, "experiments.importance_sentence"), language)
    return {"importance_plot": figure, "importance_summary": summary}


def on_importance_sample(services: Services, model, language: str = ENGLISH) -> dict:
    checkpoint = services.registry.get(model)
    sentences = sample_sentences(checkpoint)
    figure, summary = importance_views(services.costly.run(interventions.mean_head_importance, checkpoint, sentences),
                                       text(language, "experiments.importance_sample", count=len(sentences)),
                                       language)
    return {"importance_plot": figure, "importance_summary": summary}


PATCHING_OUTPUTS = ("patching_summary", "patching_heads", "patching_positions")


def on_patch(services: Services, translation_model, translation_state, patch_corrupted, patch_step, patch_alternative,
             progress=gr.Progress(), language: str = ENGLISH) -> dict:
    translation = require_translation(translation_state)
    if not (patch_corrupted or "").strip():
        raise InputError(message("experiments.type_corrupted"))

    def on_runs(done, total):
        if progress is not None:
            progress(done / total, desc=text(language, "experiments.progress.patching", done=done, total=total))
    view = services.costly.run(patching_view, services.registry.get(translation_model), translation, patch_corrupted,
                               patch_step, patch_alternative, Callback(on_runs), language)
    return {"patching_summary": view.summary, "patching_heads": view.heads, "patching_positions": view.positions}


def pair_choice(checkpoint: Checkpoint, translation: Translation, corrupted: str) -> tuple[int, list[str]]:
    """The step a changed sentence changes most, and the tokens to compare with there: the one its run prefers
    first, then the step's other candidates."""
    corrupted_ids, _ = encode_source(checkpoint.model, checkpoint.source_tokenizer, corrupted)
    step, preferred = patching.most_affected_step(checkpoint.model, translation, corrupted_ids)
    piece = checkpoint.target_tokenizer.piece(preferred)
    return step, [piece] + [other for other in other_candidates(translation, step) if other != piece]


def on_patch_pair(services: Services, translation_model, translation_state, patch_corrupted) -> dict:
    """A changed sentence typed: the step it changes most, and the token its run prefers there, are offered."""
    if translation_state is None or not (patch_corrupted or "").strip():
        return {}
    step, alternatives = pair_choice(services.registry.get(translation_model), translation_state, patch_corrupted)
    return {"patch_step": step, "patch_alternative": gr.Dropdown(alternatives, value=alternatives[0])}


def on_pair_example(services: Services, model, patch_examples, decoding, beam_size, max_length, kind, view, layer,
                    head, average, language: str = ENGLISH) -> dict:
    """Clicking an example pair translates its first sentence and puts its second in the changed sentence's box
    (the step and token it changes most follow, ``on_patch_pair``)."""
    if not isinstance(patch_examples, (list, tuple)) or len(patch_examples) < 2:
        raise InputError(message("translate.choose_example"))
    clean, changed = (str(sentence) for sentence in patch_examples[:2])
    return {"text": clean, "patch_corrupted": changed,
            **translate_tab.on_translate(services, model, clean, decoding, beam_size, max_length, kind, view, layer,
                                         head, average, language)}


def candidates(name: str, translation: Translation | None, step) -> dict:
    """The dropdown ``name`` offering a step's other candidates, runner-up first and chosen."""
    alternatives = other_candidates(translation, step)
    return {name: gr.Dropdown(alternatives, value=alternatives[0] if alternatives else None)}


def override_candidates(translation: Translation | None, step) -> dict:
    return candidates("override_choice", translation, step)


def on_override_step(translation_state, override_step) -> dict:
    return override_candidates(translation_state, override_step)


def on_patch_step(translation_state, patch_step) -> dict:
    return candidates("patch_alternative", translation_state, patch_step)


# --- what other events change here ---------------------------------------------------------------

def after_translation(translation: Translation) -> dict:
    """The new sentence is named; results for the previous one would mislead beside it, so they go."""
    return {"experiment_sentence": translation.source_text, "importance_plot": None, "importance_summary": "",
            "last_comparison": None, "experiment_description": "", "experiment_before": "", "experiment_after": "",
            "experiment_diff": None, "experiment_probability": None, "experiment_attention_before": None,
            "experiment_attention_after": None,
            "override_step": gr.Slider(1, max(2, translation.num_steps), value=1, step=1),
            **override_candidates(translation, 1), "patching_summary": "", "patching_heads": None,
            "patching_positions": None, "patch_step": gr.Slider(1, max(2, translation.num_steps), value=1, step=1),
            **candidates("patch_alternative", translation, 1)}


def after_model_change(checkpoint: Checkpoint, language: str = ENGLISH) -> dict:
    choices = head_labels(checkpoint)
    layers, heads = layer_and_head_counts(checkpoint)
    return {"ablate_encoder": gr.CheckboxGroup(choices["encoder"], value=[]),
            "ablate_decoder": gr.CheckboxGroup(choices["decoder"], value=[]),
            "ablate_cross": gr.CheckboxGroup(choices["cross"], value=[]),
            "experiment_layer": gr.Slider(1, layers, value=layers, step=1),
            "experiment_head": gr.Dropdown(head_choices(heads, language), value=MEAN_OF_HEADS)}


def declare(page: Page) -> None:
    page.when_translated(after_translation, ("experiment_sentence", "importance_plot", "importance_summary",
                                             *COMPARISON_OUTPUTS, "override_step", "override_choice",
                                             *PATCHING_OUTPUTS, "patch_step", "patch_alternative"), TAB_ID)
    page.when_model_changes(after_model_change, ("ablate_encoder", "ablate_decoder", "ablate_cross",
                                                 "experiment_layer", "experiment_head"))


def wire(page: Page) -> None:
    c = page.components
    page.sentence_work += [
        page.on(c["ablate_button"].click, on_ablate, COMPARISON_OUTPUTS, keep_on_input_problem=True),
        page.on(c["override_button"].click, on_override, COMPARISON_OUTPUTS, keep_on_input_problem=True),
        page.on(c["no_positions_button"].click, on_positions, COMPARISON_OUTPUTS, keep_on_input_problem=True),
        page.on(c["shuffle_button"].click, on_shuffle, COMPARISON_OUTPUTS, keep_on_input_problem=True),
        page.on(c["importance_button"].click, on_importance, ("importance_plot", "importance_summary"),
                keep_on_input_problem=True, costly=True),
        page.on(c["importance_sample_button"].click, on_importance_sample, ("importance_plot", "importance_summary"),
                keep_on_input_problem=True, costly=True),
    ]
    patching = page.on(c["patch_button"].click, on_patch, PATCHING_OUTPUTS, keep_on_input_problem=True, costly=True)
    page.sentence_work.append(patching)
    page.stops(c["patch_stop"], patching)
    page.on(c["override_step"].input, on_override_step, ["override_choice"], trigger_mode="always_last")
    page.on(c["patch_step"].input, on_patch_step, ["patch_alternative"], trigger_mode="always_last")
    page.on(c["patch_corrupted"].submit, on_patch_pair, ["patch_step", "patch_alternative"],
            trigger_mode="always_last")
    translated = [*translate_tab.TRANSLATION_OUTPUTS, *page.translation_outputs(TAB_ID)]
    example = page.on(c["patch_examples"].click, page.translated(on_pair_example, TAB_ID),
                      ["text", "patch_corrupted", *translated], progress_on=["patching_summary"],
                      **batching.CONCURRENCY)
    page.sentence_work.append(example)
    page.then(example, on_patch_pair, ["patch_step", "patch_alternative"], show_progress="hidden")
    page.on([c["experiment_kind"].input, c["experiment_layer"].input, c["experiment_head"].input,
             c["experiment_measure"].input],
            on_comparison_attention, ["experiment_attention_before", "experiment_attention_after"],
            trigger_mode="always_last", show_progress="hidden")
