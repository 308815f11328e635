"""Transformer attention explorer: the Gradio app. Layout and event wiring only.

Everything shown is computed by tested functions in ``transformer.explorer``
and ``transformer.figures``. Run ``python app.py`` and open http://127.0.0.1:7860.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import html
import inspect
import logging
import os
import random
import secrets
import time
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402

from transformer import analysis, explorer, figures, interventions, jobs as training_jobs  # noqa: E402
from transformer.checkpoint import REPOSITORY_CHECKPOINTS, CheckpointError  # noqa: E402
from transformer.data import SYNTHETIC_TASKS, DataError, multi30k_dir  # noqa: E402

log = logging.getLogger("app")

# Written for this project; not taken from the training data.
EXAMPLES = [
    "A young girl is playing with a red ball in the park.",
    "Two men are sitting on a bench and reading the newspaper.",
    "The dog jumps over the fence to catch the ball.",
    "A woman in a blue dress sings on a small stage.",
    "Three children are building a sandcastle on the beach.",
]
REVERSE_EXAMPLES = ["3 1 4 1 5 9 2 6", "1 2 3 4 5 6 7", "9 8 7 0 0 1"]

INTRO = """# Transformer attention explorer
Type an English sentence and watch a Transformer (Vaswani et al., 2017) trained from scratch by this project
translate it into German **one token at a time**. Then look inside: every head of every layer of the encoder
self-attention, the decoder's masked self-attention and the encoder-decoder (cross) attention.
The bundled English→German model learned from 29,000 image captions (Multi30K), so it translates sentences that
describe a scene best; greetings, questions or news are far from anything it has read."""

PE_NOTES = {
    "matrix": "Each row is the vector added to the token embedding at that position. Left columns (low dimensions) "
              "oscillate fast, right columns slowly: together they act like the hands of a clock with many speeds, "
              "so every position gets a unique pattern (section 3.5 of the paper).",
    "lines": "Even dimensions are sines, odd ones cosines, with wavelengths growing geometrically from 2π to "
             "10000·2π. Pick dimensions far apart to see the difference in frequency.",
    "dots": "The dot product of two position vectors depends only on their distance, and falls off as positions "
            "move apart: a bright band along the diagonal. This is what lets attention learn relative offsets.",
}


def _as_html(problem: Exception | str) -> str:
    """Gradio shows messages as HTML: escaped, a "<unk>" or a file name with "<" in it stays visible."""
    return html.escape(str(problem), quote=False)


@contextlib.contextmanager
def _as_user_message(name: str):
    try:
        yield
    except (explorer.InputError, CheckpointError, DataError, training_jobs.JobError) as error:
        raise gr.Error(_as_html(error), print_exception=False) from None
    except gr.Error:
        raise
    except Exception:  # a bug or a resource problem: log it, tell the user plainly
        log.exception("unexpected error in %s", name)
        raise gr.Error("Something went wrong while computing this view; the server log has details. "
                       "Try again, or try a shorter sentence.", print_exception=False) from None


def keeps_results_on_input_problems(outputs: int):
    """For actions of the page only (no API): a problem with the input is a warning, and the results already
    shown stay as they were; ``gr.Error`` would cover each output with an error badge until it is dismissed."""
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except explorer.InputError as problem:
                gr.Warning(_as_html(problem))
                return gr.skip() if outputs == 1 else (gr.skip(),) * outputs
        return wrapper
    return decorate


def user_errors(fn):
    """Show problems as a clear message in the UI, never as a stack trace (generators included)."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def streaming(*args, **kwargs):
            with _as_user_message(fn.__name__):
                yield from fn(*args, **kwargs)
        return streaming

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with _as_user_message(fn.__name__):
            return fn(*args, **kwargs)
    return wrapper


TRAIN_INTRO = """Train a small Transformer yourself and watch it learn. Synthetic tasks (copy, reverse, sort) need no
download and reach near-perfect accuracy in about a minute; watch the cross-attention below turn from noise into a
clean diagonal (copy) or anti-diagonal (reverse). One job runs at a time on this server; finished models appear in
the model list at the top."""


# Keyboard users must see where they are: Gradio's sliders and radio buttons show no focus mark of their own.
FOCUS_CSS = """
input[type=range]:focus-visible, input[type=number]:focus-visible { outline: 3px solid #ff7f0e; outline-offset: 2px; }
label:has(input[type=radio]:focus-visible), label:has(input[type=checkbox]:focus-visible) {
    outline: 3px solid #ff7f0e; outline-offset: 2px;
}
"""


def examples_for(checkpoint) -> list[str]:
    return REVERSE_EXAMPLES if explorer.uses_digits(checkpoint) else EXAMPLES


def multi30k_available() -> bool:
    try:
        multi30k_dir(download=False)
        return True
    except DataError:
        return False


def progress_html(job) -> str:
    percent = round(100 * explorer.job_progress(job))
    return (f'<div style="display:flex;gap:.6em;align-items:center"><progress value="{percent}" max="100" '
            f'style="width:100%;height:1.2em"></progress><span>{percent}%</span></div>')


def build_app(registry: explorer.ModelRegistry | None = None, default_model: str | None = None,
              jobs: training_jobs.JobManager | None = None, queue_size: int = 64) -> gr.Blocks:
    jobs = jobs or training_jobs.JobManager()
    registry = registry or explorer.ModelRegistry([REPOSITORY_CHECKPOINTS, jobs.published_dir])
    names = registry.names()
    default_model = default_model if default_model in names else registry.default_name()
    if default_model is None:
        raise SystemExit(f"no checkpoints found under {', '.join(map(str, registry.roots))}")
    default_checkpoint = registry.get(default_model)
    examples = examples_for(default_checkpoint)

    # Files handed to browsers (exports, downloads) are removed from Gradio's cache after a day.
    with gr.Blocks(title="Transformer attention explorer", delete_cache=(3600, 86400)) as demo:
        translation_state = gr.State(None)
        link_switched_model = gr.State(False)  # the page was opened by a shared link naming another model
        typed_texts = gr.State({})  # the last text typed for each kind of model: {"digits"|"text": text}
        gr.Markdown(INTRO)
        with gr.Row():
            model_name = gr.Dropdown(names, value=default_model, label="Model", scale=2,
                                     info="Bundled checkpoints and those trained in this app")
            model_status = gr.Markdown(elem_id="model-status")

        with gr.Tabs() as tabs:
            with gr.Tab("Translate", id="translate"):
                with gr.Row():
                    with gr.Column(scale=3):
                        # One line grows to four as the text wraps; Enter translates (Gradio submits on Enter only
                        # in a box that starts with one line).
                        text = gr.Textbox(label=explorer.source_label(default_checkpoint), value=examples[0],
                                          lines=1, max_lines=4, max_length=explorer.MAX_INPUT_CHARS,
                                          elem_id="source-text",
                                          info=f"Enter translates. At most {explorer.MAX_INPUT_CHARS:,} characters: "
                                               "a longer paste is cut there.")
                        example_list = gr.Examples(examples, inputs=text, label="Examples")
                    with gr.Column(scale=2):
                        decoding = gr.Radio(["greedy", "beam"], value="beam", label="Decoding")
                        beam_size = gr.Slider(2, explorer.MAX_BEAM, value=5, step=1, label="Beam size",
                                              elem_id="beam-size")
                        max_length = gr.Slider(*explorer.TARGET_TOKENS, value=60, step=1,
                                               label="Maximum target tokens", elem_id="max-tokens")
                        translate_button = gr.Button("Translate", variant="primary", elem_id="translate-button")
                translation = gr.Textbox(label="Translation", interactive=False, elem_id="translation")
                notes = gr.Markdown()
                source_tokens = gr.HighlightedText(label="Source pieces the encoder saw (▁ starts a word)",
                                                   color_map={"special": "#cccccc"})

                gr.Markdown("## Step through the decoding\nMove the slider to replay the translation token by "
                            "token: the candidates the model weighed, and where in the source it looked.")
                with gr.Row():
                    previous_step = gr.Button("◀ previous", size="sm", scale=0)
                    step = gr.Slider(1, 2, value=1, step=1, label="Step", elem_id="step-slider", scale=4)
                    next_step = gr.Button("next ▶", size="sm", scale=0)
                step_caption = gr.Markdown(elem_id="step-caption")
                revealed = gr.HighlightedText(label="Translation so far, in pieces (▁ starts a word)",
                                              color_map={"current": "#ff7f0e"})
                with gr.Row():
                    top_k_plot = gr.Plot(label="Top-k candidates", elem_id="topk-plot")
                    step_attention_plot = gr.Plot(label="Cross-attention of this step", elem_id="step-attention")

                gr.Markdown("## Attention heatmaps\nRows are queries (the position that looks), columns are keys "
                            "(the positions looked at); each row sums to 1. Hover for the exact weight.")
                with gr.Row():
                    kind = gr.Radio(list(explorer.ATTENTION_KINDS.values()),
                                    value=explorer.ATTENTION_KINDS["cross"], label="Attention", scale=3)
                    view = gr.Radio(list(explorer.VIEWS), value=explorer.VIEWS[0], label="View", scale=3)
                with gr.Row():
                    layer = gr.Slider(1, 6, value=1, step=1, label="Layer", elem_id="layer-slider")
                    head = gr.Slider(1, 8, value=1, step=1, label="Head", elem_id="head-slider")
                    average = gr.Checkbox(False, label="Average over heads")
                attention_plot = gr.Plot(label="Attention", elem_id="attention-plot")
                attention_download = gr.DownloadButton("Download raw attention (JSON)", visible=False)

                gr.Markdown("## Forced decoding: your own translation\nType your own translation of the sentence "
                            "above (German, for the English-German model) and see how probable the model finds "
                            "each token, and where it looks while reading it. Enter scores it.")
                own_translation = gr.Textbox(label="Your translation", lines=1, max_lines=4,
                                             max_length=explorer.MAX_INPUT_CHARS,
                                             info=f"At most {explorer.MAX_INPUT_CHARS:,} characters.")
                forced_button = gr.Button("Score my translation")
                with gr.Row():
                    forced_probability_plot = gr.Plot(label="Per-token probability", elem_id="forced-probability")
                    forced_attention_plot = gr.Plot(label="Cross-attention", elem_id="forced-attention")

            with gr.Tab("Experiments", id="experiments"):
                gr.Markdown("Change the model and see what follows, on the sentence last translated in the "
                            "Translate tab. Every result is shown beside the unmodified run.")
                experiment_sentence = gr.Textbox(label="Sentence (the last one translated)", interactive=False)
                with gr.Accordion("Switch heads off", open=True):
                    with gr.Row():
                        ablate_encoder = gr.CheckboxGroup([], label="Encoder self-attention heads")
                        ablate_decoder = gr.CheckboxGroup([], label="Decoder self-attention heads")
                        ablate_cross = gr.CheckboxGroup([], label="Cross-attention heads")
                    with gr.Row():
                        ablate_button = gr.Button("Translate with these heads off", variant="primary")
                        importance_button = gr.Button("Rank every head (this sentence)")
                        importance_sample_button = gr.Button("Rank every head (20 validation sentences)")
                    importance_plot = gr.Plot(label="Head importance")
                    importance_summary = gr.Markdown()
                with gr.Accordion("Override a token", open=False):
                    gr.Markdown("Pick a decoding step and force another token there; the model continues "
                                "greedily from it. The unmodified run keeps the model's own token at that step and "
                                "continues greedily too, so only the forced token differs (after beam search it "
                                "can differ from the translation shown).")
                    with gr.Row():
                        override_step = gr.Slider(1, 2, value=1, step=1, label="Step")
                        override_choice = gr.Dropdown([], label="Candidate from the top-k", allow_custom_value=True,
                                                      elem_id="override-choice")
                        override_button = gr.Button("Continue from this token")
                with gr.Accordion("Take word order away", open=False):
                    gr.Markdown("Without positional encodings the model sees a bag of words; shuffling the source "
                                "shows what word order carries.")
                    with gr.Row():
                        no_positions_button = gr.Button("Remove the positional encoding")
                        shuffle_button = gr.Button("Shuffle the source words")
                gr.Markdown("### Result")
                with gr.Row():
                    experiment_before = gr.Textbox(label="Unmodified translation", interactive=False,
                                                   elem_id="experiment-before")
                    experiment_after = gr.Textbox(label="With the intervention", interactive=False,
                                                  elem_id="experiment-after")
                experiment_diff = gr.HighlightedText(label="What changed (words)",
                                                     color_map={"removed": "#f4a6a6", "added": "#a6e3a6"})
                experiment_probability = gr.Plot(label="Per-token probability")
                experiment_kind = gr.Radio(list(explorer.ATTENTION_KINDS.values()),
                                           value=explorer.ATTENTION_KINDS["cross"], label="Attention to compare")
                with gr.Row():
                    experiment_attention_before = gr.Plot(label="Attention, unmodified")
                    experiment_attention_after = gr.Plot(label="Attention, with the intervention")
                last_comparison = gr.State(None)

            with gr.Tab("Analysis", id="analysis"):
                analysis_sentence = gr.Textbox(label="Sentence (the last one translated in the Translate tab)",
                                               interactive=False)
                with gr.Accordion("Beam search as a tree", open=True):
                    with gr.Row():
                        tree_beam = gr.Slider(2, explorer.MAX_BEAM, value=4, step=1, label="Beam size")
                        tree_penalty = gr.Slider(0.0, 2.0, value=1.0, step=0.1, label="Length penalty α")
                        tree_button = gr.Button("Show the beam", variant="primary")
                    tree_plot = gr.Plot(label="Beam tree", elem_id="beam-tree")
                    gr.Markdown("Final hypotheses, best first (score = log P / length^α). Click one to see its "
                                "cross-attention.")
                    hypotheses_table = gr.Dataframe(headers=["rank", "translation", "log P", "length", "score"],
                                                    interactive=False)
                    hypothesis_plot = gr.Plot(label="Cross-attention of the chosen hypothesis")
                    hypotheses_state = gr.State(None)
                with gr.Accordion("Word alignment", open=True):
                    with gr.Row():
                        alignment_layer = gr.Slider(1, 6, value=6, step=1, label="Layer")
                        alignment_head = gr.Dropdown(["mean of heads"], value="mean of heads", label="Head")
                    alignment_plot = gr.Plot(label="Alignment", elem_id="alignment-plot")
                with gr.Accordion("Head statistics", open=True):
                    gr.Markdown("Entropy (low: focused), mean distance attended in positions, share of attention "
                                "on `<s>`/`</s>` (a common 'no-op' sink) and diagonality (1: each query looks at its "
                                "own position, or the stretched diagonal for cross-attention). Sort with the ⋮ menu "
                                "in a column's header; click a row to open that head's heatmap.")
                    with gr.Row():
                        statistics_button = gr.Button("Statistics for this sentence")
                        statistics_sample_button = gr.Button("Statistics over 20 validation sentences")
                    statistics_caption = gr.Markdown()
                    statistics_table = gr.Dataframe(headers=explorer.STATISTICS_HEADERS, interactive=False,
                                                    elem_id="statistics-table")
                    statistics_head_plot = gr.Plot(label="Heatmap of the chosen head")
                with gr.Accordion("Export and share", open=True):
                    with gr.Row():
                        csv_button = gr.Button("Raw attention as CSV")
                        npz_button = gr.Button("Raw attention as NPZ")
                        svg_button = gr.Button("The Translate tab's heatmap as SVG")
                        share_button = gr.Button("Link to this sentence and view")
                    export_file = gr.File(label="Download", interactive=False)
                    share_link = gr.Textbox(label="Link", interactive=False, buttons=["copy"])

            with gr.Tab("Positional encoding", id="positions"):
                gr.Markdown("The Transformer has no recurrence, so word order enters only through these vectors, "
                            "added to the embeddings: PE(pos, 2i) = sin(pos / 10000^(2i/d)), "
                            "PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).")
                with gr.Row():
                    pe_d_model = gr.Slider(8, 512, value=128, step=2, label="d_model")
                    pe_length = gr.Slider(8, 256, value=64, step=1, label="positions")
                    pe_dimensions = gr.Textbox("0, 1, 10, 11, 60", label="dimensions to plot (comma-separated)",
                                               info="Enter or click elsewhere to redraw.")
                pe_matrix = gr.Plot(label="The encoding matrix")
                gr.Markdown(PE_NOTES["matrix"])
                pe_lines = gr.Plot(label="Dimensions across positions")
                gr.Markdown(PE_NOTES["lines"])
                pe_dots = gr.Plot(label="Dot products between positions")
                gr.Markdown(PE_NOTES["dots"])

            with gr.Tab("Model", id="model"):
                model_metrics = gr.Markdown()
                with gr.Row():
                    model_config = gr.Dataframe(headers=["setting", "value"], label="Config", interactive=False)
                    model_parameters = gr.Dataframe(headers=["module", "parameters", "share"],
                                                    label="Parameters per module", interactive=False)
                with gr.Accordion("How this model learned", open=True):
                    history_curves = gr.Plot(label="Training curves")
                    gr.Markdown("At every evaluation during training, the cross-attention of a fixed probe sentence "
                                "was saved. Slide to watch the alignment emerge from noise.")
                    history_step = gr.Slider(1, 2, value=1, step=1, label="Evaluation", elem_id="history-slider")
                    history_plot = gr.Plot(label="Probe attention", elem_id="history-plot")
                    history_state = gr.State([])
                with gr.Accordion("Model card", open=False):
                    model_card = gr.Markdown()

            with gr.Tab("Train", id="train") as train_tab:
                if training_jobs.training_disabled():
                    gr.Markdown(f"Training is turned off on this server (`{training_jobs.DISABLE_VARIABLE}` is set), "
                                "as is usual for a public demo. Run the app on your own machine to train models.")
                    train_controls = None
                else:
                    gr.Markdown(TRAIN_INTRO)
                    data_choices = list(SYNTHETIC_TASKS) + (["multi30k"] if multi30k_available() else []) + ["upload"]
                    with gr.Row():
                        train_data = gr.Radio(data_choices, value="reverse", label="Data",
                                              info="upload: your own parallel TSV (per line: a source sentence, "
                                                   "a tab, its translation)")
                        train_upload = gr.File(label=f"Parallel TSV, at most {training_jobs.MAX_UPLOAD_BYTES // 10**6} MB",
                                               file_types=[".tsv", ".txt"], type="filepath", visible=False)
                    with gr.Row():
                        train_preset = gr.Radio(list(training_jobs.APP_PRESETS), value="tiny", label="Model size")
                        train_steps = gr.Slider(20, training_jobs.MAX_STEPS, value=400, step=10, label="Updates",
                                                elem_id="train-steps")
                        train_minutes = gr.Slider(0.5, training_jobs.MAX_MINUTES, value=3, step=0.5,
                                                  label="Time limit (minutes)", elem_id="train-minutes")
                    preset_info = gr.Markdown(elem_id="preset-info")
                    with gr.Row():
                        start_button = gr.Button("Start training", variant="primary", elem_id="start-training")
                        stop_button = gr.Button("Stop", elem_id="stop-training")
                    train_status = gr.Markdown(elem_id="train-status")
                    train_progress = gr.HTML(progress_html(None))
                    train_curves = gr.Plot(label="Curves", elem_id="train-curves")
                    gr.Markdown("### Attention as it forms\nAt every evaluation the cross-attention of a fixed "
                                "sentence is captured; slide to replay how the pattern emerged.")
                    replay = gr.Slider(1, 2, value=1, step=1, label="Evaluation", elem_id="replay-slider")
                    replay_plot = gr.Plot(label="Probe attention", elem_id="replay-plot")
                    trained_download = gr.DownloadButton("Download the trained checkpoint (zip)", visible=False)
                    # While this tab is open, a visitor sees the server's job as it runs, whoever started it.
                    job_clock, seen_job = gr.Timer(2.0, active=False), gr.State(None)
                    train_controls = True

        # --- handlers: thin adapters from widget values to explorer functions ---
        def layer_and_head_sliders(checkpoint, layer_value=None, head_value=None):
            layers, heads = explorer.layer_and_head_counts(checkpoint)
            return (gr.Slider(1, layers, step=1, label="Layer", value=layer_value),
                    gr.Slider(1, heads, step=1, label="Head", value=head_value))

        def require(tr):
            if tr is None:
                raise explorer.InputError("Translate a sentence first.")
            return tr

        def text_for(checkpoint, current_text, typed):
            """The input box for this model, and what the user typed for each kind of model (digits, words).

            Text that suits the model is left alone, so whatever the user typed meanwhile is never overwritten.
            Text for the other kind of model is put aside and replaced by what was last typed for this kind, or
            an example: switching to the digits model and back brings the user's sentence back.
            """
            typed = {**(typed or {})}
            if current_text and current_text.strip():
                typed[explorer.text_kind(current_text)] = current_text
            suitable = explorer.suitable_text(checkpoint, current_text,
                                              {"digits": REVERSE_EXAMPLES[0], "text": EXAMPLES[0], **typed})
            label = explorer.source_label(checkpoint)
            box = gr.Textbox(label=label) if suitable == current_text else gr.Textbox(suitable, label=label)
            return box, typed

        def length_penalty_controls(checkpoint):
            """Beam search in both tabs starts from the length penalty this model's scores were made with."""
            alpha = checkpoint.length_penalty
            scored = "length_penalty" in checkpoint.metrics and bool(checkpoint.metrics.get("scores"))
            whose = "this model's scores used" if scored else "neutral: this model has no scores to choose by"
            return (gr.Slider(info=f"Hypotheses kept at each step; finished ones are ranked by log P / length^α, "
                                   f"α = {alpha:g} ({whose})"),
                    gr.Slider(value=alpha, info=f"α = {alpha:g}: {whose}"))

        @user_errors
        def on_model(name, current_text, layer_value=1, head_value=1, typed=None):
            checkpoint = registry.get(name)
            layers, heads = explorer.layer_and_head_counts(checkpoint)
            config = checkpoint.model.config
            status = (f"**{name}**: {checkpoint.model.num_parameters() / 1e6:.2f}M parameters, "
                      f"{config.n_encoder_layers}+{config.n_decoder_layers} layers, {config.n_heads} heads, "
                      f"on {checkpoint.model.device}.")
            card = "\n".join(line for line in checkpoint.card.splitlines() if not line.startswith("!["))
            return (status, explorer.metrics_markdown(checkpoint), explorer.config_rows(checkpoint),
                    explorer.parameter_table(checkpoint), card or "No model card.",
                    *layer_and_head_sliders(checkpoint, min(int(layer_value or 1), layers),
                                            min(int(head_value or 1), heads)),
                    *text_for(checkpoint, current_text, typed),
                    gr.Dataset(samples=[[example] for example in examples_for(checkpoint)]),
                    *length_penalty_controls(checkpoint))

        @user_errors
        def check_sentence(sentence) -> None:
            explorer.clean_text(sentence)  # an empty box raises

        @user_errors
        def on_translate(name, sentence, decoding_mode, beam, max_tokens):
            checkpoint = registry.get(name)
            result = explorer.run_translation(checkpoint, sentence, decoding_mode, beam, max_tokens)
            tr = result.translation
            return (tr, tr.text, "\n".join(f"- {n}" for n in result.notes), explorer.source_tokens_view(tr),
                    gr.Slider(1, max(2, tr.num_steps), value=tr.num_steps, step=1, label="Step",
                              interactive=tr.num_steps > 1),
                    gr.DownloadButton(value=explorer.attention_json_file(tr), visible=True))

        @user_errors
        def on_step(tr, step_value, layer_value, head_value, average_heads):
            if tr is None:
                return [], None, None, "Translate a sentence to step through it."
            return explorer.step_view(tr, step_value, layer_value, None if average_heads else head_value)

        @user_errors
        def on_attention(tr, kind_value, view_value, layer_value, head_value, average_heads):
            if tr is None:
                return None
            return explorer.attention_figure(tr, kind_value, view_value, layer_value, head_value, average_heads)

        def move_step(tr, step_value, delta):
            if tr is None:
                return step_value
            return max(1, min(tr.num_steps, int(step_value) + delta))

        @user_errors
        def on_forced(name, sentence, target):
            result = explorer.run_forced(registry.get(name), sentence, target)
            for note in result.notes:
                gr.Warning(_as_html(note))
            return explorer.forced_figures(result.translation)

        @user_errors
        def on_model_heads(name):
            choices = explorer.head_choices(registry.get(name))
            return tuple(gr.CheckboxGroup(choices[kind], value=[]) for kind in interventions.KINDS)

        experiment_outputs = [last_comparison, experiment_before, experiment_after, experiment_diff,
                              experiment_probability, experiment_attention_before, experiment_attention_after]

        @user_errors
        @keeps_results_on_input_problems(len(experiment_outputs))
        def on_ablate(name, tr, encoder_heads, decoder_heads, cross_heads, kind_value):
            if not (encoder_heads or decoder_heads or cross_heads):
                raise explorer.InputError("Tick the heads to switch off first (encoder, decoder or cross-attention).")
            comparison = interventions.ablate_heads(registry.get(name), require(tr).source_text,
                                                    {"encoder": encoder_heads, "decoder": decoder_heads,
                                                     "cross": cross_heads}, **explorer.decoding_of(tr))
            return (comparison, *explorer.comparison_views(comparison, kind_value))

        @user_errors
        @keeps_results_on_input_problems(outputs=2)
        def on_importance(name, tr):
            return explorer.importance_views(interventions.head_importance(registry.get(name), require(tr)),
                                             "Head importance for this sentence")

        @user_errors
        def on_importance_sample(name):
            checkpoint = registry.get(name)
            sentences = explorer.importance_sample(checkpoint)
            return explorer.importance_views(interventions.mean_head_importance(checkpoint, sentences),
                                             f"Head importance, mean over {len(sentences)} sentences")

        @user_errors
        def on_override_step(tr, step_value):
            if tr is None:
                return gr.Dropdown([])
            index = max(1, min(tr.num_steps, int(step_value))) - 1
            alternatives = [piece for piece in tr.top_pieces[index] if piece != tr.predicted_pieces[index]]
            return gr.Dropdown(alternatives, value=alternatives[0] if alternatives else None)

        @user_errors
        @keeps_results_on_input_problems(len(experiment_outputs))
        def on_override(name, tr, step_value, token, kind_value):
            require(tr)
            if not token:
                raise explorer.InputError("Choose or type the token to force.")
            comparison = interventions.override_token(registry.get(name), tr, step_value, token,
                                                      explorer.decoding_of(tr)["max_length"])
            return (comparison, *explorer.comparison_views(comparison, kind_value))

        @user_errors
        @keeps_results_on_input_problems(len(experiment_outputs))
        def on_positions(name, tr, kind_value):
            comparison = interventions.without_positions(registry.get(name), require(tr).source_text,
                                                         **explorer.decoding_of(tr))
            return (comparison, *explorer.comparison_views(comparison, kind_value))

        @user_errors
        @keeps_results_on_input_problems(len(experiment_outputs))
        def on_shuffle(name, tr, kind_value):
            comparison = interventions.shuffled_source(registry.get(name), require(tr).source_text,
                                                       seed=random.randrange(2**32),  # each click a new order
                                                       **explorer.decoding_of(tr))
            return (comparison, *explorer.comparison_views(comparison, kind_value))

        @user_errors
        def on_experiment_kind(comparison, kind_value):
            if comparison is None:
                return None, None
            return explorer.comparison_views(comparison, kind_value)[4:]

        # Slow results for one sentence and model: switching the model cancels those still running, so none can
        # land after the switch has cleared its outputs.
        sentence_work = [
            ablate_button.click(on_ablate, [model_name, translation_state, ablate_encoder, ablate_decoder,
                                            ablate_cross, experiment_kind], experiment_outputs, api_name=False),
            importance_button.click(on_importance, [model_name, translation_state],
                                    [importance_plot, importance_summary], api_name=False),
            importance_sample_button.click(on_importance_sample, model_name, [importance_plot, importance_summary],
                                           api_name=False),
            override_button.click(on_override, [model_name, translation_state, override_step, override_choice,
                                                experiment_kind], experiment_outputs, api_name=False),
            no_positions_button.click(on_positions, [model_name, translation_state, experiment_kind],
                                      experiment_outputs, api_name=False),
            shuffle_button.click(on_shuffle, [model_name, translation_state, experiment_kind], experiment_outputs,
                                 api_name=False),
        ]
        override_step.change(on_override_step, [translation_state, override_step], override_choice, api_name=False)
        experiment_kind.change(on_experiment_kind, [last_comparison, experiment_kind],
                               [experiment_attention_before, experiment_attention_after], api_name=False)
        # The step goes back to 1, which fires no change when it was 1 already: the candidates are listed here.
        (translation_state.change(
            lambda tr: gr.Slider(1, max(2, tr.num_steps if tr else 2), value=1, step=1, label="Step"),
            translation_state, override_step, api_name=False)
         .then(on_override_step, [translation_state, override_step], override_choice, api_name=False))

        @user_errors
        @keeps_results_on_input_problems(outputs=3)
        def on_tree(name, tr, beam, penalty):
            figure, rows, hypotheses = explorer.beam_view(registry.get(name), require(tr).source_text, beam, penalty)
            return figure, rows, hypotheses

        @user_errors
        def on_hypothesis(name, beam_state, event: gr.SelectData):
            if not beam_state:
                return None
            rank = int(event.row_value[0]) - 1 if event.row_value else event.index[0]  # rows may be sorted
            return explorer.hypothesis_attention(registry.get(name), beam_state, rank)

        @user_errors
        def on_alignment(tr, layer_value, head_value):
            if tr is None:
                return None
            return explorer.alignment_view(tr, layer_value, None if head_value == "mean of heads" else int(head_value))

        @user_errors
        def alignment_controls(tr):
            if tr is None:
                return gr.Slider(), gr.Dropdown()
            layers, heads = tr.cross_attention.shape[:2]
            return (gr.Slider(1, layers, value=layers, step=1, label="Layer"),
                    gr.Dropdown(["mean of heads"] + [str(h + 1) for h in range(heads)], value="mean of heads"))

        @user_errors
        @keeps_results_on_input_problems(outputs=2)
        def on_statistics(tr):
            return (explorer.statistics_rows(analysis.head_statistics(require(tr))),
                    "**This sentence.** Click a row to open that head's heatmap.")

        @user_errors
        def on_statistics_sample(name):
            checkpoint = registry.get(name)
            sentences = explorer.importance_sample(checkpoint)
            return (explorer.statistics_rows(explorer.sample_statistics(checkpoint, sentences)),
                    f"**Mean over {len(sentences)} validation sentences.** Click a row to open that head's heatmap "
                    "on the sentence last translated.")

        @user_errors
        def on_statistics_row(tr, event: gr.SelectData):
            if tr is None or not event.row_value:
                return None
            kind_value, layer_value, head_value = event.row_value[0], int(event.row_value[1]), int(event.row_value[2])
            return explorer.attention_figure(tr, kind_value, explorer.VIEWS[0], layer_value, head_value)

        @user_errors
        def on_share(name, tr, kind_value, view_value, layer_value, head_value, request: gr.Request):
            base = str(request.url).split("?")[0].split("gradio_api")[0] if request else ""
            decoding = explorer.decoding_of(require(tr))
            return base + "?" + explorer.share_query(name, tr.source_text, kind_value, view_value, layer_value,
                                                     head_value, decoding["beam_size"], decoding["max_length"])

        def on_shared_link(current_model, request: gr.Request):
            query = dict(request.query_params) if request else {}
            # The model list is read afresh: models trained since the server started appear, and a link may name one.
            names = registry.names()
            values = explorer.parse_share_query(query, names)
            chosen = values.get("model", current_model)
            checkpoint = registry.get(chosen)
            values = explorer.fit_share_values(values, checkpoint)
            for problem in explorer.share_link_problems(query, names, checkpoint):
                gr.Warning(_as_html(problem))
            return (gr.Dropdown(choices=names, value=chosen),
                    gr.Textbox(value=values["text"]) if "text" in values else gr.Textbox(),
                    gr.Radio(value=values["kind"]) if "kind" in values else gr.Radio(),
                    gr.Radio(value=values["view"]) if "view" in values else gr.Radio(),
                    *layer_and_head_sliders(checkpoint, values.get("layer", 1), values.get("head", 1)),
                    gr.Radio(value="greedy" if values["beam"] == 1 else "beam") if "beam" in values else gr.Radio(),
                    gr.Slider(value=values["beam"]) if values.get("beam", 1) > 1 else gr.Slider(),
                    gr.Slider(value=values["max"]) if "max" in values else gr.Slider(),
                    chosen != current_model)

        def unless_link_switched_model(fn):
            """``fn`` on page load, unless a shared link chose another model: model_name.change's chain then does
            this work, and two chains translating at once could overwrite what the user types next."""
            def run(switched, *args):
                return gr.skip() if switched else fn(*args)
            run.__name__ = fn.__name__
            return run

        sentence_work.append(tree_button.click(on_tree, [model_name, translation_state, tree_beam, tree_penalty],
                                               [tree_plot, hypotheses_table, hypotheses_state], api_name=False))
        # A new translation names its sentence in Experiments and Analysis, and clears results computed for the
        # previous sentence (or model): beside the new one they would mislead, and a row or hypothesis clicked
        # there would open the wrong heatmap.
        earlier_results = {tree_plot: None, hypotheses_table: None, hypotheses_state: None, hypothesis_plot: None,
                           statistics_table: None, statistics_caption: "", statistics_head_plot: None,
                           importance_plot: None, importance_summary: "", last_comparison: None,
                           experiment_before: "", experiment_after: "", experiment_diff: None,
                           experiment_probability: None, experiment_attention_before: None,
                           experiment_attention_after: None, forced_probability_plot: None,
                           forced_attention_plot: None}

        def on_new_translation(tr):
            sentence = tr.source_text if tr else ""
            return {**earlier_results, experiment_sentence: sentence, analysis_sentence: sentence}

        translation_state.change(on_new_translation, translation_state,
                                 [*earlier_results, experiment_sentence, analysis_sentence], api_name=False)
        hypotheses_table.select(on_hypothesis, [model_name, hypotheses_state], hypothesis_plot, api_name=False)
        (translation_state.change(alignment_controls, translation_state, [alignment_layer, alignment_head],
                                  api_name=False)
         .then(on_alignment, [translation_state, alignment_layer, alignment_head], alignment_plot, api_name=False))
        for control in (alignment_layer, alignment_head):
            control.change(on_alignment, [translation_state, alignment_layer, alignment_head], alignment_plot,
                           api_name=False)
        statistics_outputs = [statistics_table, statistics_caption]
        sentence_work.append(statistics_button.click(on_statistics, translation_state, statistics_outputs,
                                                     api_name=False))
        sentence_work.append(statistics_sample_button.click(on_statistics_sample, model_name, statistics_outputs,
                                                            api_name=False))
        statistics_table.select(on_statistics_row, translation_state, statistics_head_plot,
                                api_name=False)
        csv_button.click(user_errors(lambda tr: explorer.attention_csv_file(require(tr))), translation_state,
                         export_file, api_name=False)
        npz_button.click(user_errors(lambda tr: explorer.attention_npz_file(require(tr))), translation_state,
                         export_file, api_name=False)
        svg_button.click(user_errors(lambda *args: explorer.figure_svg_file(
            explorer.attention_figure(require(args[0]), *args[1:]), "attention")),
            [translation_state, kind, view, layer, head, average], export_file, api_name=False)
        share_button.click(on_share, [model_name, translation_state, kind, view, layer, head], share_link,
                           api_name=False)

        def on_history(name):
            steps, evals, probes = explorer.checkpoint_history(registry.get(name))
            curves = figures.training_curves(steps, evals, "Training") if (steps or evals) else None
            return (curves, gr.Slider(1, max(2, len(probes)), value=max(1, len(probes)), step=1, label="Evaluation",
                                      interactive=len(probes) > 1),
                    explorer.probe_figure(probes, len(probes)), probes)

        model_name.change(user_errors(on_history), model_name, [history_curves, history_step, history_plot,
                                                                history_state], api_name=False)
        # Sliders that handlers also set redraw on the user's own moves only (drag, number box, reset): a redraw
        # started by a handler's update could reach the server after the next update and be refused as out of range.
        gr.on([history_step.input, history_step.release], user_errors(explorer.probe_figure),
              [history_state, history_step], history_plot, api_name=False, trigger_mode="always_last")

        model_inputs = [model_name, text, layer, head, typed_texts]
        model_outputs = [model_status, model_metrics, model_config, model_parameters, model_card, layer, head, text,
                         typed_texts, example_list.dataset, beam_size, tree_penalty]
        translate_inputs = [model_name, text, decoding, beam_size, max_length]
        translate_outputs = [translation_state, translation, notes, source_tokens, step, attention_download]
        step_inputs = [translation_state, step, layer, head, average]
        step_outputs = [revealed, top_k_plot, step_attention_plot, step_caption]
        attention_inputs = [translation_state, kind, view, layer, head, average]

        def translate_then_render(trigger, api_name):
            # An empty box is refused by a check with no outputs, so the last translation stays in view rather
            # than under error badges; the API endpoint itself still answers an empty sentence with an error.
            (trigger(check_sentence, text, None, api_name=False, show_progress="hidden")
             .success(on_translate, translate_inputs, translate_outputs, api_name=api_name)
             .then(on_step, step_inputs, step_outputs, api_name=False)
             .then(on_attention, attention_inputs, attention_plot, api_name=False))

        translate_then_render(translate_button.click, "translate")
        translate_then_render(text.submit, False)
        translate_then_render(example_list.load_input_event.then, False)  # clicking an example translates it
        decoding.change(lambda mode: gr.Slider(interactive=mode == "beam"), decoding, beam_size, api_name=False)
        # Only the user's own moves trigger a redraw here: after a translation the chain above redraws once.
        # Sliders also take typed numbers, and Gradio refuses one out of range with a message; the redraws
        # they feed keep their last view rather than showing error badges over it.
        step.input(on_step, step_inputs, step_outputs, api_name="step", trigger_mode="always_last",
                   show_progress="hidden")
        for button, delta in ((previous_step, -1), (next_step, +1)):
            (button.click(lambda tr, s, delta=delta: move_step(tr, s, delta), [translation_state, step], step,
                          api_name=False)
             .then(on_step, step_inputs, step_outputs, api_name=False))
        for control in (kind, view):
            control.change(on_attention, attention_inputs, attention_plot, api_name=False, show_progress="hidden")

        def on_attention_and_step(tr, kind_value, view_value, layer_value, head_value, average_heads, step_value):
            return (on_attention(tr, kind_value, view_value, layer_value, head_value, average_heads),
                    *on_step(tr, step_value, layer_value, head_value, average_heads))

        for control in (layer, head, average):  # one event for both views: a number out of range is refused once
            control.change(on_attention_and_step, [*attention_inputs, step], [attention_plot, *step_outputs],
                           api_name=False, show_progress="hidden")
        sentence_work += [
            forced_button.click(on_forced, [model_name, text, own_translation],
                                [forced_probability_plot, forced_attention_plot], api_name="forced"),
            own_translation.submit(on_forced, [model_name, text, own_translation],
                                   [forced_probability_plot, forced_attention_plot], api_name=False)]
        model_name.change(on_model_heads, model_name, [ablate_encoder, ablate_decoder, ablate_cross], api_name=False)
        model_name.change(  # a German sentence typed for multi30k-en-de is no translation for a digits model
            user_errors(lambda name, own: own if not own or explorer.suits(registry.get(name), own) else ""),
            [model_name, own_translation], own_translation, api_name=False)
        # This chain also draws the first view when a shared link names another model (the load chain below
        # then stands aside).
        (model_name.change(on_model, model_inputs, model_outputs, api_name="select_model",
                           cancels=sentence_work)
         .then(lambda: None, None, translation_state, api_name=False)
         .then(on_translate, translate_inputs, translate_outputs, api_name=False)
         .then(on_step, step_inputs, step_outputs, api_name=False)
         .then(on_attention, attention_inputs, attention_plot, api_name=False))

        if train_controls:
            def model_choices():
                return gr.Dropdown(choices=registry.names())

            def job_progress(job):  # status line, progress bar, curves
                return explorer.job_status_markdown(job), progress_html(job), explorer.job_curves(job)

            def job_replay(job):  # the evaluation slider and the latest probe attention
                probes = job.probes if job else []
                return (gr.Slider(1, max(2, len(probes)), value=max(1, len(probes)), step=1, label="Evaluation",
                                  interactive=len(probes) > 1),
                        explorer.probe_figure(probes, len(probes)))

            def job_download(job):
                finished = job is not None and job.checkpoint is not None
                return gr.DownloadButton(value=jobs.archive(job.checkpoint) if finished else None, visible=finished)

            def job_outputs(job):
                return (*job_progress(job), *job_replay(job), job_download(job))

            def visitor(request: gr.Request | None) -> str:
                """Who is asking: their session; a request without one is nobody's, so it can stop no one's job."""
                if request is None or not request.session_hash:
                    return f"anonymous-{secrets.token_hex(8)}"
                return request.session_hash

            @user_errors
            def on_start(data, upload, preset_name, steps, minutes, request: gr.Request):
                jobs.start(training_jobs.JobRequest(data=data, preset=preset_name, steps=steps, minutes=minutes,
                                                    upload=upload), owner=visitor(request))
                while True:  # stream the job's progress to whoever started it
                    job = jobs.current
                    yield job_outputs(job)
                    if job.status != "running":
                        return
                    time.sleep(1.0)

            @user_errors
            def on_preset(data, preset_name):
                count = training_jobs.parameter_count(preset_name, data if data in SYNTHETIC_TASKS else "text")
                return f"**{preset_name}**: {count:,} parameters."

            train_outputs = [train_status, train_progress, train_curves, replay, replay_plot, trained_download]
            # A refused start is a message, and leaves the job's outputs as they were (no error badges over
            # them: show_progress="hidden"; the progress bar is the tab's own). The model list is refreshed in
            # its own step, after a job only.
            (start_button.click(on_start, [train_data, train_upload, train_preset, train_steps, train_minutes],
                                train_outputs, api_name="train", concurrency_id="train", concurrency_limit=4,
                                show_progress="hidden")
             .success(model_choices, None, model_name, api_name="models"))

            @user_errors
            def on_stop(request: gr.Request):
                gr.Info(jobs.stop(owner=visitor(request)))

            stop_button.click(on_stop, None, None, api_name="stop_training")

            def on_leave(request: gr.Request):  # closing or reloading the page ends a visitor's session
                jobs.release(visitor(request))

            demo.unload(on_leave)
            gr.on([replay.input, replay.release],
                  user_errors(lambda index: explorer.probe_figure(jobs.current.probes if jobs.current else [], index)),
                  replay, replay_plot, api_name=False)
            for control in (train_data, train_preset):
                control.change(on_preset, [train_data, train_preset], preset_info, api_name=False)
            # The drop zone only where it is used; a file dropped there stays when the choice changes.
            train_data.change(lambda data: gr.update(visible=data == "upload"), train_data, train_upload,
                              api_name=False, show_progress="hidden")
            demo.load(on_preset, [train_data, train_preset], preset_info, api_name=False)
            demo.load(user_errors(lambda: job_outputs(jobs.current)), None, train_outputs, api_name=False)

            @user_errors
            def on_clock(seen, request: gr.Request):
                """Another visitor's view of the job, redrawn when it moved on: the replay only when an evaluation
                came in (so an earlier one stays open), the model list once it published. Its starter is
                watching the start button's stream instead."""
                job = jobs.current
                unchanged = (*[gr.skip()] * len(train_outputs), gr.skip(), seen)
                if job is None or (job.status == "running" and job.owner == visitor(request)):
                    return unchanged
                now = {"name": job.name, "status": job.status, "step": job.step, "evaluations": len(job.evals),
                       "checkpoint": job.checkpoint}
                if now == seen:
                    return unchanged
                seen = seen or {}
                new_job_or_phase = (seen.get("name"), seen.get("status")) != (job.name, job.status)
                new_evaluation = new_job_or_phase or seen.get("evaluations") != now["evaluations"]
                published = job.checkpoint is not None and seen.get("checkpoint") != job.checkpoint
                return (*job_progress(job), *(job_replay(job) if new_evaluation else (gr.skip(),) * 2),
                        job_download(job) if new_job_or_phase else gr.skip(),
                        model_choices() if published else gr.skip(), now)

            job_clock.tick(on_clock, seen_job, [*train_outputs, model_name, seen_job], api_name=False,
                           show_progress="hidden")

            def clock(active):
                return lambda: gr.Timer(active=active)

            for tab in tabs.children:
                tab.select(clock(tab is train_tab), None, job_clock, api_name=False)

        pe_inputs = [pe_d_model, pe_length, pe_dimensions]
        # The list of dimensions redraws when submitted or left, not on every keystroke.
        for trigger in (pe_d_model.change, pe_length.change, pe_dimensions.submit, pe_dimensions.blur):
            trigger(user_errors(explorer.positional_views), pe_inputs, [pe_matrix, pe_lines, pe_dots],
                    api_name=False)

        # Open on a working example, or on the sentence and view of a shared link. Everything that depends on the
        # model waits for the link to choose it.
        opened = demo.load(user_errors(on_shared_link), model_name,
                           [model_name, text, kind, view, layer, head, decoding, beam_size, max_length,
                            link_switched_model], api_name=False)
        for fn, outputs in ((on_model_heads, [ablate_encoder, ablate_decoder, ablate_cross]),
                            (user_errors(on_history), [history_curves, history_step, history_plot, history_state])):
            opened.then(unless_link_switched_model(fn), [link_switched_model, model_name], outputs, api_name=False)
        first_view = [(on_model, model_inputs, model_outputs),
                      (on_translate, translate_inputs, translate_outputs), (on_step, step_inputs, step_outputs),
                      (on_attention, attention_inputs, attention_plot)]
        event = opened
        for fn, inputs, outputs in first_view:
            event = event.then(unless_link_switched_model(fn), [link_switched_model, *inputs], outputs,
                               api_name=False)
        demo.load(user_errors(explorer.positional_views), pe_inputs, [pe_matrix, pe_lines, pe_dots], api_name=False)
    demo.queue(max_size=queue_size, default_concurrency_limit=2)
    return demo


def close_app(demo: gr.Blocks) -> None:
    """Stop a demo launched with ``prevent_thread_lock`` (tests, benchmarks) and free its port.

    ``Blocks.close`` sets the server's asyncio stop event from the calling thread while the server's loop
    may be adding or dropping heartbeat waiters on it ("deque mutated during iteration"); the close then
    stops halfway and the port stays open. Setting the event on its own loop first leaves close nothing to race.
    """
    try:
        apps = {id(app): app for app in (demo.app, getattr(demo, "server_app", None)) if app is not None}
        for app in apps.values() if demo.is_running else ():
            event = app.stop_event
            loop = getattr(event, "_loop", None)  # bound to the server's loop once anyone waits on it
            if loop is not None and loop.is_running():
                async def stop(event=event) -> None:
                    event.set()
                asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=10)
    finally:
        demo.close(verbose=False)


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    figures.quiet_image_export_logs()
    parser = argparse.ArgumentParser(description="Transformer attention explorer")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (GRADIO_SERVER_NAME, set by Hugging Face Spaces, wins when set)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", 7860)))
    parser.add_argument("--share", action="store_true", help="also open a temporary public gradio.live link")
    parser.add_argument("--checkpoint", help="checkpoint directory to open (its folder's checkpoints are listed too)")
    args = parser.parse_args(argv)
    jobs = training_jobs.JobManager()
    roots = [REPOSITORY_CHECKPOINTS, jobs.published_dir]
    default = None
    if args.checkpoint:
        path = Path(args.checkpoint).resolve()
        roots.insert(0, path.parent)
        default = path.name
    demo = build_app(explorer.ModelRegistry(roots), default, jobs)
    demo.launch(server_name=os.environ.get("GRADIO_SERVER_NAME") or args.host, server_port=args.port,
                share=args.share, footer_links=["api", "settings"], css=FOCUS_CSS)


if __name__ == "__main__":
    main()
