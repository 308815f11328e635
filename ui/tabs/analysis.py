"""The Analysis tab: beam search as a tree, word alignment, head statistics, exports and share links."""

from __future__ import annotations

import gradio as gr

from transformer.files.checkpoint import Checkpoint
from transformer.inside import analysis
from transformer.inside.alignment import METHODS
from transformer.paper.translation import Translation

from ..runtime import components
from ..runtime.chart import Chart
from ..runtime.language import ENGLISH, Number, message, text
from ..runtime.page import Page
from ..services import Services
from ..views import exports, share
from ..views.analysis import (HYPOTHESES_HEADERS, STATISTICS_HEADERS, alignment_scores_text, alignment_view,
                              beam_view, head_figure, hypothesis_attention, sample_statistics, statistics_kind,
                              statistics_rows)
from ..views.choices import MEAN_OF_HEADS, chosen_head, head_choices, require_translation
from ..views.languages import LANGUAGES_HEADERS, MOST_LANGUAGES, language_choices, many_languages_view
from ..views.samples import SAMPLE_SIZE, sample_sentences
from ..views.explorer import attention_figure
from ..views.translate import MAX_BEAM, decoding_of, length_penalty_origin

TAB_ID, TITLE = "analysis", message("analysis.title")  # the tab's id in the page, and its label


def layout(page: Page, checkpoint: Checkpoint) -> None:
    words = page.words
    analysis_sentence = gr.Textbox(label=words("analysis.sentence"), interactive=False)
    with gr.Accordion(words("analysis.beam_section"), open=True):
        with gr.Row():
            tree_beam = components.Slider(2, MAX_BEAM, value=4, step=1, label=words("analysis.beam_size"))
            tree_penalty = components.Slider(0.0, 2.0, value=1.0, step=0.1, label=words("analysis.length_penalty"))
            tree_button = gr.Button(words("analysis.show_beam"), variant="primary")
        tree_plot = Chart(label=words("analysis.beam_chart"), elem_id="beam-tree")
        gr.Markdown(words("analysis.hypotheses_note"))
        hypotheses_table = gr.Dataframe(headers=[words(key) for key in HYPOTHESES_HEADERS], interactive=False)
        hypothesis_plot = Chart(label=words("analysis.hypothesis_chart"))
    with gr.Accordion(words("analysis.alignment_section"), open=True):
        with gr.Row():
            alignment_method = components.Dropdown(alignment_method_choices(page.language), value=METHODS[0],
                                                   label=words("analysis.alignment_method"),
                                                   info=words("analysis.alignment_method.info"))
            alignment_layer = components.Slider(**alignment_layers(checkpoint.model.config.n_decoder_layers),
                                                label=words("analysis.layer"))
            alignment_head = components.Dropdown(head_choices(0, page.language), value=MEAN_OF_HEADS,
                                                 label=words("analysis.head"))
        alignment_plot = Chart(label=words("analysis.alignment_chart"), elem_id="alignment-plot")
        alignment_scores = gr.Markdown(elem_id="alignment-scores")
    # A multilingual model's: shown for such a model only (after_model_change).
    with gr.Accordion(words("languages.section"), open=True, visible=False) as languages_section:
        gr.Markdown(words("languages.note", most=MOST_LANGUAGES))
        with gr.Row():
            many_targets = components.Dropdown([], multiselect=True, max_choices=MOST_LANGUAGES, scale=3,
                                               label=words("languages.targets"))
            languages_button = gr.Button(words("languages.button"), variant="primary", scale=1)
        languages_plot = Chart(label=words("languages.chart"), elem_id="languages-plot")
        languages_table = gr.Dataframe(headers=[words(key) for key in LANGUAGES_HEADERS], interactive=False,
                                       wrap=True)
    with gr.Accordion(words("analysis.statistics_section"), open=True):
        gr.Markdown(words("analysis.statistics_note"))
        with gr.Row():
            statistics_button = gr.Button(words("analysis.statistics_button"))
            statistics_sample_button = gr.Button(words("analysis.statistics_sample_button", count=SAMPLE_SIZE))
        statistics_caption = gr.Markdown()
        statistics_table = gr.Dataframe(headers=[words(key) for key in STATISTICS_HEADERS], interactive=False,
                                        elem_id="statistics-table")
        statistics_head_plot = Chart(label=words("analysis.statistics_head_chart"))
    with gr.Accordion(words("analysis.export_section"), open=True):
        with gr.Row():
            csv_button = gr.Button(words("analysis.csv_button"))
            npz_button = gr.Button(words("analysis.npz_button"))
            svg_button = gr.Button(words("analysis.svg_button"))
            share_button = gr.Button(words("analysis.share_button"))
        export_file = gr.File(label=words("analysis.download"), interactive=False)
        share_link = gr.Textbox(label=words("analysis.link"), interactive=False, buttons=["copy"])
    page.add(analysis_sentence=analysis_sentence, tree_beam=tree_beam, tree_penalty=tree_penalty,
             tree_button=tree_button, tree_plot=tree_plot, hypotheses_table=hypotheses_table,
             hypothesis_plot=hypothesis_plot, hypotheses_state=gr.State(None), alignment_method=alignment_method,
             alignment_scores=alignment_scores, alignment_layer=alignment_layer,
             alignment_head=alignment_head, alignment_plot=alignment_plot, statistics_button=statistics_button,
             statistics_sample_button=statistics_sample_button, statistics_caption=statistics_caption,
             statistics_table=statistics_table, statistics_head_plot=statistics_head_plot, csv_button=csv_button,
             npz_button=npz_button, svg_button=svg_button, share_button=share_button, export_file=export_file,
             share_link=share_link, languages_section=languages_section, many_targets=many_targets,
             languages_button=languages_button, languages_plot=languages_plot, languages_table=languages_table)


# --- handlers ------------------------------------------------------------------------------------

def on_tree(services: Services, translation_model, translation_state, tree_beam, tree_penalty,
            language: str = ENGLISH) -> dict:
    source = require_translation(translation_state).source_text
    figure, rows, hypotheses = services.costly.run(beam_view, services.registry.get(translation_model), source,
                                                   tree_beam, tree_penalty, language)
    return {"tree_plot": figure, "hypotheses_table": rows, "hypotheses_state": hypotheses}


def on_hypothesis(services: Services, translation_model, hypotheses_state, event: gr.SelectData,
                  language: str = ENGLISH) -> dict:
    if not hypotheses_state:
        return {}
    rank = int(event.row_value[0]) - 1 if event.row_value else event.index[0]  # rows may be sorted
    return {"hypothesis_plot": hypothesis_attention(services.registry.get(translation_model), hypotheses_state, rank,
                                                    language)}


def on_languages(services: Services, translation_model, translation_state, many_targets,
                 language: str = ENGLISH) -> dict:
    """The last sentence into each language chosen, in one batch, side by side."""
    source = require_translation(translation_state).source_text
    figure, rows = services.costly.run(many_languages_view, services.registry.get(translation_model), source,
                                       many_targets, language)
    return {"languages_plot": figure, "languages_table": rows}


def on_alignment(services: Services, translation_model, translation_state, alignment_method, alignment_layer,
                 alignment_head, language: str = ENGLISH) -> dict:
    if translation_state is None:
        return {}
    heads = translation_state.cross_attention.shape[1]
    head = chosen_head(alignment_head, heads)
    # What a layer brings (norm, alti) is computed on the model: one pass over the sentence, as a step caption's is.
    checkpoint = services.registry.get(translation_model) if alignment_method in ("norm", "alti") else None
    return {"alignment_plot": alignment_view(translation_state, alignment_layer, head, language, alignment_method,
                                             checkpoint)}


def alignment_layers(layers: int) -> dict:
    """The alignment's layer slider for a model of ``layers`` decoder layers: every one, the last chosen (upper
    layers align best). A lesson on another model sets it so too: the page's default could lie outside its range."""
    return {"minimum": 1, "maximum": layers, "value": layers, "step": 1}


def alignment_method_choices(language: str) -> list[tuple[str, str]]:
    return [(text(language, f"analysis.method.{method}"), method) for method in METHODS]


def on_statistics(translation_state, language: str = ENGLISH) -> dict:
    return {"statistics_table": statistics_rows(analysis.head_statistics(require_translation(translation_state)),
                                                language),
            "statistics_caption": text(language, "analysis.caption_sentence")}


def on_statistics_sample(services: Services, model, language: str = ENGLISH) -> dict:
    checkpoint = services.registry.get(model)
    sentences = sample_sentences(checkpoint)
    return {"statistics_table": statistics_rows(services.costly.run(sample_statistics, checkpoint, sentences),
                                                language),
            "statistics_caption": text(language, "analysis.caption_sample", count=len(sentences))}


def on_statistics_row(translation_state, event: gr.SelectData, language: str = ENGLISH) -> dict:
    if translation_state is None or not event.row_value:
        return {}
    kind, layer, head = event.row_value[0], int(event.row_value[1]), int(event.row_value[2])
    return {"statistics_head_plot": head_figure(translation_state, statistics_kind(kind, language), layer, head,
                                                language)}


def on_csv(translation_state) -> dict:
    return {"export_file": exports.attention_csv_file(require_translation(translation_state))}


def on_npz(translation_state) -> dict:
    return {"export_file": exports.attention_npz_file(require_translation(translation_state))}


def on_svg(translation_state, kind, view, layer, head, average, language: str = ENGLISH) -> dict:
    figure = attention_figure(require_translation(translation_state), kind, view, layer, head, average,
                              language=language)
    return {"export_file": exports.figure_svg_file(figure, "attention")}


def on_share(translation_model, translation_state, kind, view, layer, head, request: gr.Request) -> dict:
    base = str(request.url).split("?")[0].split("gradio_api")[0] if request else ""
    decoding = decoding_of(require_translation(translation_state))
    return {"share_link": base + "?" + share.share_query(translation_model, translation_state.source_text, kind,
                                                         view, layer,
                                                         head, decoding["beam_size"], decoding["max_length"])}


# --- what other events change here ---------------------------------------------------------------

def after_translation(translation: Translation, language: str = ENGLISH) -> dict:
    """The new sentence is named and aligned; a tree, statistics or hypothesis of the previous one would open the
    wrong heatmap beside it, so they go."""
    layers, heads = translation.cross_attention.shape[:2]
    beam = decoding_of(translation)["beam_size"]
    return {"analysis_sentence": translation.source_text, "tree_plot": None, "hypotheses_table": None,
            # The tree starts from the beam the translation was made with (greedy: the smallest beam).
            "tree_beam": max(2, beam),
            "hypotheses_state": None, "hypothesis_plot": None, "statistics_table": None, "statistics_caption": "",
            "statistics_head_plot": None, "export_file": None, "share_link": "", "languages_plot": None,
            "languages_table": None,
            "alignment_method": gr.Dropdown(alignment_method_choices(language), value=METHODS[0]),
            "alignment_layer": gr.Slider(**alignment_layers(layers)),
            "alignment_head": gr.Dropdown(head_choices(heads, language), value=MEAN_OF_HEADS),
            "alignment_plot": alignment_view(translation, layers, None, language)}


def after_model_change(checkpoint: Checkpoint, language: str = ENGLISH) -> dict:
    """Beam search starts from the length penalty this model's scores were made with; a multilingual model offers
    its languages side by side (starting from the one it translates into)."""
    alpha = checkpoint.length_penalty
    languages = checkpoint.languages
    return {"alignment_scores": alignment_scores_text(checkpoint, language),
            "tree_penalty": gr.Slider(value=alpha, info=text(language, "analysis.penalty_info",
                                                             alpha=Number(alpha, "g"),
                                                             origin=length_penalty_origin(checkpoint, language))),
            "languages_section": gr.Accordion(visible=languages is not None),
            "many_targets": gr.Dropdown(choices=language_choices(languages.tokens, language) if languages else [],
                                        value=[checkpoint.pair[1]] if languages else [], multiselect=True)}


def declare(page: Page) -> None:
    page.when_translated(after_translation, ("analysis_sentence", "tree_beam", "tree_plot", "hypotheses_table",
                                             "hypotheses_state", "hypothesis_plot", "statistics_table",
                                             "statistics_caption", "statistics_head_plot", "export_file",
                                             "share_link", "alignment_method", "alignment_layer", "alignment_head",
                                             "alignment_plot",
                                             "languages_plot", "languages_table"),
                         TAB_ID)
    page.when_model_changes(after_model_change, ("alignment_scores", "tree_penalty", "languages_section",
                                                 "many_targets"))


def wire(page: Page) -> None:
    c = page.components
    page.sentence_work += [
        page.on(c["tree_button"].click, on_tree, ("tree_plot", "hypotheses_table", "hypotheses_state"),
                keep_on_input_problem=True, costly=True),
        page.on(c["statistics_button"].click, on_statistics, ("statistics_table", "statistics_caption"),
                keep_on_input_problem=True),
        page.on(c["statistics_sample_button"].click, on_statistics_sample, ("statistics_table", "statistics_caption"),
                keep_on_input_problem=True, costly=True),
        page.on(c["languages_button"].click, on_languages, ("languages_plot", "languages_table"),
                keep_on_input_problem=True, costly=True),
    ]
    page.on(c["hypotheses_table"].select, on_hypothesis, ["hypothesis_plot"])
    page.on(c["statistics_table"].select, on_statistics_row, ["statistics_head_plot"])
    page.on([c["alignment_method"].input, c["alignment_layer"].input, c["alignment_head"].input], on_alignment,
            ["alignment_plot"], trigger_mode="always_last", show_progress="hidden")
    page.on(c["csv_button"].click, on_csv, ["export_file"], keep_on_input_problem=True)
    page.on(c["npz_button"].click, on_npz, ["export_file"], keep_on_input_problem=True)
    page.on(c["svg_button"].click, on_svg, ["export_file"], keep_on_input_problem=True)
    page.on(c["share_button"].click, on_share, ["share_link"], keep_on_input_problem=True)
