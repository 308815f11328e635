"""The Analysis tab: beam search as a tree, word alignment, head statistics, exports and share links."""

from __future__ import annotations

import gradio as gr

from transformer.files.checkpoint import Checkpoint
from transformer.inside import analysis
from transformer.paper.decoding import Translation

from ..runtime import components
from ..runtime.chart import Chart
from ..runtime.page import Page
from ..services import Services
from ..views import exports, share
from ..views.analysis import (STATISTICS_HEADERS, alignment_view, beam_view, hypothesis_attention,
                              sample_statistics, statistics_rows)
from ..views.choices import MEAN_OF_HEADS, VIEWS, chosen_head, head_options, require_translation
from ..views.samples import SAMPLE_SIZE, sample_sentences
from ..views.translate import MAX_BEAM, attention_figure, decoding_of, length_penalty_origin

TAB_ID, TITLE = "analysis", "Analysis"  # the tab's id in the page, and its label

STATISTICS_NOTE = ("Entropy (low: focused), mean distance attended in positions, share of attention on `<s>`/`</s>` "
                   "(a common 'no-op' sink) and diagonality (1: each query looks at its own position, or the "
                   "stretched diagonal for cross-attention). Sort with the ⋮ menu in a column's header; click a row "
                   "to open that head's heatmap.")


def layout(page: Page, checkpoint: Checkpoint) -> None:
    analysis_sentence = gr.Textbox(label="Sentence (the last one translated in the Translate tab)",
                                   interactive=False)
    with gr.Accordion("Beam search as a tree", open=True):
        with gr.Row():
            tree_beam = components.Slider(2, MAX_BEAM, value=4, step=1, label="Beam size")
            tree_penalty = components.Slider(0.0, 2.0, value=1.0, step=0.1, label="Length penalty α")
            tree_button = gr.Button("Show the beam", variant="primary")
        tree_plot = Chart(label="Beam tree", elem_id="beam-tree")
        gr.Markdown("Final hypotheses, best first (score = log P / length^α). Click one to see its cross-attention.")
        hypotheses_table = gr.Dataframe(headers=["rank", "translation", "log P", "length", "score"],
                                        interactive=False)
        hypothesis_plot = Chart(label="Cross-attention of the chosen hypothesis")
    with gr.Accordion("Word alignment", open=True):
        with gr.Row():
            alignment_layer = components.Slider(1, 6, value=6, step=1, label="Layer")
            alignment_head = components.Dropdown([MEAN_OF_HEADS], value=MEAN_OF_HEADS, label="Head")
        alignment_plot = Chart(label="Alignment", elem_id="alignment-plot")
    with gr.Accordion("Head statistics", open=True):
        gr.Markdown(STATISTICS_NOTE)
        with gr.Row():
            statistics_button = gr.Button("Statistics for this sentence")
            statistics_sample_button = gr.Button(f"Statistics over {SAMPLE_SIZE} sample sentences")
        statistics_caption = gr.Markdown()
        statistics_table = gr.Dataframe(headers=STATISTICS_HEADERS, interactive=False, elem_id="statistics-table")
        statistics_head_plot = Chart(label="Heatmap of the chosen head")
    with gr.Accordion("Export and share", open=True):
        with gr.Row():
            csv_button = gr.Button("Raw attention as CSV")
            npz_button = gr.Button("Raw attention as NPZ")
            svg_button = gr.Button("The Translate tab's heatmap as SVG")
            share_button = gr.Button("Link to this sentence and view")
        export_file = gr.File(label="Download", interactive=False)
        share_link = gr.Textbox(label="Link", interactive=False, buttons=["copy"])
    page.add(analysis_sentence=analysis_sentence, tree_beam=tree_beam, tree_penalty=tree_penalty,
             tree_button=tree_button, tree_plot=tree_plot, hypotheses_table=hypotheses_table,
             hypothesis_plot=hypothesis_plot, hypotheses_state=gr.State(None), alignment_layer=alignment_layer,
             alignment_head=alignment_head, alignment_plot=alignment_plot, statistics_button=statistics_button,
             statistics_sample_button=statistics_sample_button, statistics_caption=statistics_caption,
             statistics_table=statistics_table, statistics_head_plot=statistics_head_plot, csv_button=csv_button,
             npz_button=npz_button, svg_button=svg_button, share_button=share_button, export_file=export_file,
             share_link=share_link)


# --- handlers ------------------------------------------------------------------------------------

def on_tree(services: Services, translation_model, translation_state, tree_beam, tree_penalty) -> dict:
    source = require_translation(translation_state).source_text
    figure, rows, hypotheses = services.costly.run(beam_view, services.registry.get(translation_model), source,
                                                   tree_beam,
                                                   tree_penalty)
    return {"tree_plot": figure, "hypotheses_table": rows, "hypotheses_state": hypotheses}


def on_hypothesis(services: Services, translation_model, hypotheses_state, event: gr.SelectData) -> dict:
    if not hypotheses_state:
        return {}
    rank = int(event.row_value[0]) - 1 if event.row_value else event.index[0]  # rows may be sorted
    return {"hypothesis_plot": hypothesis_attention(services.registry.get(translation_model), hypotheses_state, rank)}


def on_alignment(translation_state, alignment_layer, alignment_head) -> dict:
    if translation_state is None:
        return {}
    heads = translation_state.cross_attention.shape[1]
    return {"alignment_plot": alignment_view(translation_state, alignment_layer,
                                             chosen_head(alignment_head, heads))}


def on_statistics(translation_state) -> dict:
    return {"statistics_table": statistics_rows(analysis.head_statistics(require_translation(translation_state))),
            "statistics_caption": "**This sentence.** Click a row to open that head's heatmap."}


def on_statistics_sample(services: Services, model) -> dict:
    checkpoint = services.registry.get(model)
    sentences = sample_sentences(checkpoint)
    return {"statistics_table": statistics_rows(services.costly.run(sample_statistics, checkpoint, sentences)),
            "statistics_caption": f"**Mean over {len(sentences)} sample sentences.** Click a row to open that "
                                  "head's heatmap on the sentence last translated."}


def on_statistics_row(translation_state, event: gr.SelectData) -> dict:
    if translation_state is None or not event.row_value:
        return {}
    kind, layer, head = event.row_value[0], int(event.row_value[1]), int(event.row_value[2])
    return {"statistics_head_plot": attention_figure(translation_state, kind, VIEWS[0], layer, head)}


def on_csv(translation_state) -> dict:
    return {"export_file": exports.attention_csv_file(require_translation(translation_state))}


def on_npz(translation_state) -> dict:
    return {"export_file": exports.attention_npz_file(require_translation(translation_state))}


def on_svg(translation_state, kind, view, layer, head, average) -> dict:
    figure = attention_figure(require_translation(translation_state), kind, view, layer, head, average)
    return {"export_file": exports.figure_svg_file(figure, "attention")}


def on_share(translation_model, translation_state, kind, view, layer, head, request: gr.Request) -> dict:
    base = str(request.url).split("?")[0].split("gradio_api")[0] if request else ""
    decoding = decoding_of(require_translation(translation_state))
    return {"share_link": base + "?" + share.share_query(translation_model, translation_state.source_text, kind,
                                                         view, layer,
                                                         head, decoding["beam_size"], decoding["max_length"])}


# --- what other events change here ---------------------------------------------------------------

def after_translation(translation: Translation) -> dict:
    """The new sentence is named and aligned; a tree, statistics or hypothesis of the previous one would open the
    wrong heatmap beside it, so they go."""
    layers, heads = translation.cross_attention.shape[:2]
    beam = decoding_of(translation)["beam_size"]
    return {"analysis_sentence": translation.source_text, "tree_plot": None, "hypotheses_table": None,
            # The tree starts from the beam the translation was made with (greedy: the smallest beam).
            "tree_beam": max(2, beam),
            "hypotheses_state": None, "hypothesis_plot": None, "statistics_table": None, "statistics_caption": "",
            "statistics_head_plot": None, "export_file": None, "share_link": "",
            "alignment_layer": gr.Slider(1, layers, value=layers, step=1),
            "alignment_head": gr.Dropdown(head_options(heads), value=MEAN_OF_HEADS),
            "alignment_plot": alignment_view(translation, layers, None)}


def after_model_change(checkpoint: Checkpoint) -> dict:
    """Beam search starts from the length penalty this model's scores were made with."""
    alpha = checkpoint.length_penalty
    return {"tree_penalty": gr.Slider(value=alpha, info=f"α = {alpha:g}: {length_penalty_origin(checkpoint)}")}


def declare(page: Page) -> None:
    page.when_translated(after_translation, ("analysis_sentence", "tree_beam", "tree_plot", "hypotheses_table",
                                             "hypotheses_state", "hypothesis_plot", "statistics_table",
                                             "statistics_caption", "statistics_head_plot", "export_file",
                                             "share_link", "alignment_layer", "alignment_head", "alignment_plot"),
                         TAB_ID)
    page.when_model_changes(after_model_change, ("tree_penalty",))


def wire(page: Page) -> None:
    c = page.components
    page.sentence_work += [
        page.on(c["tree_button"].click, on_tree, ("tree_plot", "hypotheses_table", "hypotheses_state"),
                keep_on_input_problem=True, costly=True),
        page.on(c["statistics_button"].click, on_statistics, ("statistics_table", "statistics_caption"),
                keep_on_input_problem=True),
        page.on(c["statistics_sample_button"].click, on_statistics_sample, ("statistics_table", "statistics_caption"),
                keep_on_input_problem=True, costly=True),
    ]
    page.on(c["hypotheses_table"].select, on_hypothesis, ["hypothesis_plot"])
    page.on(c["statistics_table"].select, on_statistics_row, ["statistics_head_plot"])
    page.on([c["alignment_layer"].input, c["alignment_head"].input], on_alignment, ["alignment_plot"],
            trigger_mode="always_last", show_progress="hidden")
    page.on(c["csv_button"].click, on_csv, ["export_file"], keep_on_input_problem=True)
    page.on(c["npz_button"].click, on_npz, ["export_file"], keep_on_input_problem=True)
    page.on(c["svg_button"].click, on_svg, ["export_file"], keep_on_input_problem=True)
    page.on(c["share_button"].click, on_share, ["share_link"], keep_on_input_problem=True)
