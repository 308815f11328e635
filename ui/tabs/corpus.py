"""The Corpus tab: what each head does over many sentences, its queries and keys in one picture, the corpus's
tokens nearest to one of the last translation, and the translations that owe least to their source. A click opens
a sentence in Translate, on its head and step."""

from __future__ import annotations

import json
from pathlib import Path

import gradio as gr

from transformer.errors import InputError
from transformer.files.checkpoint import Checkpoint
from transformer.inside.corpus_run import Decoding
from transformer.inside.one_head import KINDS

from ..runtime import components
from ..runtime.chart import Chart
from ..runtime.language import ENGLISH, message, text
from ..runtime.page import Page
from ..runtime.worker import Callback, Stopped
from ..services import Services
from ..views import corpus as views
from ..views.choices import ATTENTION_KINDS
from ..views.translate import layer_and_head_counts
from . import translate

TAB_ID, TITLE = "corpus", message("corpus.title")  # the tab's id in the page, and its label
# Its tables hold sentences, which are values in their own language (tests read the page's words without them).
FIRST_HEAD = ("cross", 1)  # the head the tab shows first: cross-attention's first head, in its last layer
COLOURS = ("position", "token")
# A click on a chart under one of these sets the hidden box to the point's customdata, as JSON: what it opens
# (ui/static/page.js, pointPickers). The heads map's cells open a head, the picture's points a sentence.
POINT_PICKER = {"charts": "#corpus-heads, #corpus-space", "box": "#corpus-pick"}


def layout(page: Page, checkpoint: Checkpoint) -> None:
    words = page.words
    layers, heads = layer_and_head_counts(checkpoint)
    gr.Markdown(words("corpus.intro", limit=views.MAX_SENTENCES))
    with gr.Row():
        corpus_upload = gr.File(label=words("corpus.upload", limit=views.MAX_SENTENCES,
                                            megabytes=views.MAX_FILE_BYTES // 10**6),
                                file_types=[".tsv", ".txt"], type="filepath", scale=2)
        with gr.Column(scale=1):
            corpus_run = gr.Button(words("corpus.run_upload"), variant="primary")
            corpus_default = gr.Button(words("corpus.run_default"))
            corpus_stop = gr.Button(words("corpus.stop"))
    corpus_status = gr.Markdown(elem_id="corpus-status")
    with gr.Accordion(words("corpus.heads.title"), open=True):
        gr.Markdown(words("corpus.heads.note"))
        corpus_heads = Chart(label=words("corpus.heads.map"), elem_id="corpus-heads")
        corpus_heads_table = gr.Dataframe(headers=views.headers(views.HEADS_HEADERS, page.language),
                                          label=words("corpus.heads.table"), interactive=False, wrap=True,
                                          max_height=360, elem_classes=["sentences"])
    with gr.Accordion(words("corpus.space.section"), open=True):
        gr.Markdown(words("corpus.space.note"))
        with gr.Row():
            corpus_kind = components.Dropdown([(words(f"map.kind.{kind}"), kind) for kind in KINDS],
                                              value=FIRST_HEAD[0], label=words("corpus.kind"))
            corpus_layer = components.Slider(1, max(2, layers), value=layers, step=1, label=words("corpus.layer"))
            corpus_head = components.Slider(1, max(2, heads), value=FIRST_HEAD[1], step=1,
                                            label=words("corpus.head"))
            corpus_colour = components.Radio([(words(f"corpus.colour.{way}"), way) for way in COLOURS],
                                             value=COLOURS[0], label=words("corpus.colour"))
        corpus_space = Chart(label=words("corpus.space.chart"), elem_id="corpus-space")
    with gr.Accordion(words("corpus.search.title"), open=True):
        gr.Markdown(words("corpus.search.note"))
        with gr.Row():
            corpus_token = components.Dropdown([], label=words("corpus.search.token"),
                                               info=words("corpus.search.token_info"), scale=3)
            corpus_search = gr.Button(words("corpus.search.button"), scale=1)
        corpus_neighbours = gr.Dataframe(headers=views.headers(views.NEIGHBOUR_HEADERS, page.language),
                                         label=words("corpus.search.table"), interactive=False, wrap=True,
                                         elem_id="corpus-neighbours", elem_classes=["sentences"])
    with gr.Accordion(words("corpus.least.title"), open=True):
        gr.Markdown(words("corpus.least.note"))
        corpus_least_summary = gr.Markdown()
        corpus_least = gr.Dataframe(headers=views.headers(views.LEAST_HEADERS, page.language),
                                    label=words("corpus.least.table"), interactive=False, wrap=True,
                                    max_height=420, elem_id="corpus-least", elem_classes=["sentences"])
    with gr.Row(equal_height=True):
        corpus_sentence = components.Number(1, precision=0, minimum=1, label=words("corpus.open.sentence"))
        corpus_step = components.Number(0, precision=0, minimum=0, label=words("corpus.open.step"),
                                        info=words("corpus.open.step_info"))
        corpus_open = gr.Button(words("corpus.open.button"))
    page.add(corpus_upload=corpus_upload, corpus_run=corpus_run, corpus_default=corpus_default,
             corpus_stop=corpus_stop, corpus_status=corpus_status, corpus_heads=corpus_heads,
             corpus_heads_table=corpus_heads_table, corpus_kind=corpus_kind, corpus_layer=corpus_layer,
             corpus_head=corpus_head, corpus_colour=corpus_colour, corpus_space=corpus_space,
             corpus_token=corpus_token, corpus_search=corpus_search, corpus_neighbours=corpus_neighbours,
             corpus_least_summary=corpus_least_summary, corpus_least=corpus_least, corpus_sentence=corpus_sentence,
             corpus_step=corpus_step, corpus_open=corpus_open,
             corpus_pick=gr.Textbox(visible="hidden", max_length=200, elem_id="corpus-pick"),
             corpus_shown=gr.State(None))  # {model, folder, name, total}: the run the tab shows


# Its controls: a lesson leaves them as they are (its views stay drawn at them) unless it opens the tab.
CONTROLS = ("corpus_kind", "corpus_layer", "corpus_head", "corpus_colour", "corpus_token", "corpus_sentence",
            "corpus_step", "corpus_upload")
CORPUS_VIEWS = ("corpus_status", "corpus_heads", "corpus_heads_table", "corpus_least", "corpus_least_summary",
                "corpus_kind", "corpus_layer", "corpus_head", "corpus_space", "corpus_token", "corpus_neighbours",
                "corpus_sentence", "corpus_shown")


def shown_run(services: Services, model: str, corpus: views.Corpus, translation, colour, progress,
              language: str = ENGLISH) -> dict:
    """``corpus`` run with ``model`` (what is saved reused, what is missing computed in the worker with its
    progress shown, until Stop), and every view of it."""
    checkpoint = services.registry.get(model)
    folder = views.run_folder(services.jobs.runs_dir, checkpoint, corpus)
    if not views.is_complete(folder, corpus, services.corpora):
        def on_chunk(done, total):
            if progress is not None:
                progress(done / total, desc=text(language, "corpus.progress", done=done, total=total))
        try:
            services.costly.run(views.run_in_folder, checkpoint, corpus, str(folder), Callback(on_chunk))
        except Stopped:
            pass  # what is saved is shown; a run started again goes on from there
        finally:
            services.corpora.forget(folder)
        views.prune_runs(services.jobs.runs_dir, services.corpora)  # a run was made: the oldest may go
    opened = services.corpora.get(folder)
    if not opened.run.sentences:
        raise InputError(message("corpus.error.nothing_yet"))
    shown = {"model": model, "folder": str(folder), "name": corpus.name, "total": len(corpus.sources)}
    layers, heads = layer_and_head_counts(checkpoint)
    kind, layer, head = views.head_choice(checkpoint, FIRST_HEAD[0], layers, FIRST_HEAD[1])
    return {"corpus_status": views.status_text(corpus.name, opened, len(corpus.sources), language),
            "corpus_heads": views.heads_figure(opened, model, language),
            "corpus_heads_table": views.heads_rows(opened, language),
            "corpus_least": views.least_rows(opened), "corpus_least_summary": views.least_note(opened, language),
            "corpus_kind": kind, "corpus_layer": gr.Slider(1, max(2, layers), value=layer),
            "corpus_head": gr.Slider(1, max(2, heads), value=head),
            **head_views(services, shown, kind, layer, head, colour, language),
            "corpus_token": token_dropdown(translation, language),
            "corpus_sentence": gr.Number(value=1, maximum=len(opened.run.sentences)), "corpus_shown": shown}


def head_views(services: Services, corpus_shown: dict, kind: str, layer: int, head: int, colour,
               language: str = ENGLISH) -> dict:
    """A head's queries and keys over the corpus."""
    opened, checkpoint = opened_run(services, corpus_shown)
    return {"corpus_space": views.space_figure(opened, checkpoint, kind, layer, head,
                                               colour if colour in COLOURS else COLOURS[0], language),
            "corpus_neighbours": None}


def opened_run(services: Services, corpus_shown: dict | None):
    """The run the page shows and its model; a run no longer kept (the oldest leave the disk) is asked for again."""
    if not corpus_shown:
        raise InputError(message("corpus.error.no_run"))
    try:
        opened = services.corpora.get(corpus_shown["folder"])
    except (InputError, OSError):
        raise InputError(message("corpus.error.no_run")) from None
    return opened, services.registry.get(corpus_shown["model"])


def on_opened(services: Services, translation_model, corpus_shown, translation_state, corpus_colour,
              progress=gr.Progress(), language: str = ENGLISH) -> dict:
    """The tab opened, or redrawn after a model switch: the model's own corpus, unless the tab shows a run of it."""
    if corpus_shown and corpus_shown["model"] == translation_model and \
            (services.corpora.held(corpus_shown["folder"]) or Path(corpus_shown["folder"]).is_dir()):
        return {}
    checkpoint = services.registry.get(translation_model)
    return shown_run(services, translation_model, views.default_corpus(checkpoint), translation_state,
                     corpus_colour, progress, language)


def on_run_default(services: Services, translation_model, translation_state, corpus_colour,
                   progress=gr.Progress(), language: str = ENGLISH) -> dict:
    checkpoint = services.registry.get(translation_model)
    return shown_run(services, translation_model, views.default_corpus(checkpoint), translation_state,
                     corpus_colour, progress, language)


def on_run_upload(services: Services, translation_model, corpus_upload, translation_state, corpus_colour,
                  progress=gr.Progress(), language: str = ENGLISH) -> dict:
    if not corpus_upload:
        raise InputError(message("corpus.error.no_file"))
    return shown_run(services, translation_model, views.uploaded_corpus(corpus_upload), translation_state,
                     corpus_colour, progress, language)


def on_head(services: Services, corpus_shown, corpus_kind, corpus_layer, corpus_head, corpus_colour,
            language: str = ENGLISH) -> dict:
    _, checkpoint = opened_run(services, corpus_shown)
    kind, layer, head = views.head_choice(checkpoint, corpus_kind, corpus_layer, corpus_head)
    return {"corpus_layer": layer, "corpus_head": head,  # as drawn: a decoder shallower than the encoder, say
            **head_views(services, corpus_shown, kind, layer, head, corpus_colour, language)}


def on_search(services: Services, corpus_shown, translation_model, translation_state, corpus_kind, corpus_layer,
              corpus_head, corpus_token) -> dict:
    opened, checkpoint = opened_run(services, corpus_shown)
    if translation_state is not None and translation_model != corpus_shown["model"]:
        raise InputError(message("corpus.error.other_model"))
    kind, layer, head = views.head_choice(checkpoint, corpus_kind, corpus_layer, corpus_head)
    return {"corpus_neighbours": views.nearest_rows(opened, checkpoint, translation_state, kind, layer, head,
                                                    corpus_token)}


def open_in_translate(services: Services, corpus_shown, sentence, step, corpus_kind, corpus_layer, corpus_head,
                      view, max_length, language: str = ENGLISH) -> dict:
    """A corpus sentence translated in the Translate tab as the run translated it, on the corpus's head and at
    ``step`` (its lowest-share step where none is given)."""
    opened, checkpoint = opened_run(services, corpus_shown)
    source, sentence, step = views.opening(opened, sentence, step)
    kind, layer, head = views.head_choice(checkpoint, corpus_kind, corpus_layer, corpus_head)
    beam = Decoding.default(checkpoint).beam
    decoding = "beam" if beam > 1 else "greedy"
    model = corpus_shown["model"]
    result = translate.translation_views(services, model, source, decoding, max(2, beam), max_length,
                                         ATTENTION_KINDS[kind], view, layer, head, False, step=step,
                                         language=language)
    return {**result, "text": source, "decoding": decoding, "beam_size": max(2, beam), "kind": ATTENTION_KINDS[kind],
            "layer": layer, "head": head, "average": False, "tabs": gr.Tabs(selected=translate.TAB_ID),
            "corpus_sentence": sentence, "corpus_step": step}


def on_open_sentence(services: Services, corpus_shown, corpus_sentence, corpus_step, corpus_kind, corpus_layer,
                     corpus_head, view, max_length, language: str = ENGLISH) -> dict:
    return open_in_translate(services, corpus_shown, corpus_sentence, corpus_step, corpus_kind, corpus_layer,
                             corpus_head, view, max_length, language)


def on_least_select(services: Services, corpus_shown, corpus_kind, corpus_layer, corpus_head, view, max_length,
                    chosen: gr.SelectData, language: str = ENGLISH) -> dict:
    """A row of the least-source list: its sentence, on its lowest-share step."""
    row = getattr(chosen, "row_value", None)
    if not isinstance(row, list) or not row:
        return {}
    return open_in_translate(services, corpus_shown, row[0], None, corpus_kind, corpus_layer, corpus_head, view,
                             max_length, language)


def on_pick(services: Services, corpus_shown, corpus_pick, corpus_kind, corpus_layer, corpus_head, corpus_colour, view,
            max_length, language: str = ENGLISH) -> dict:
    """A click on a chart (``POINT_PICKER``): a cell of the heads map opens its head's queries and keys; a point of
    the picture opens its sentence in Translate, on the head and at the point's step."""
    try:
        picked = json.loads(corpus_pick or "null")
    except (ValueError, RecursionError):
        picked = None
    if isinstance(picked, list) and len(picked) == 3 and picked[0] in KINDS:
        kind, layer, head = picked
        _, checkpoint = opened_run(services, corpus_shown)
        kind, layer, head = views.head_choice(checkpoint, kind, layer, head)
        return {"corpus_kind": kind, "corpus_layer": layer, "corpus_head": head,
                **head_views(services, corpus_shown, kind, layer, head, corpus_colour, language)}
    if isinstance(picked, list) and len(picked) == 2:
        sentence, step = picked
        return open_in_translate(services, corpus_shown, sentence, step, corpus_kind, corpus_layer, corpus_head, view,
                                 max_length, language)
    raise InputError(message("corpus.error.pick"))


def after_translation(translation, language: str = ENGLISH) -> dict:
    """A new translation: its tokens to search the corpus from."""
    return {"corpus_token": token_dropdown(translation, language), "corpus_neighbours": None}


def token_dropdown(translation, language: str = ENGLISH) -> gr.Dropdown:
    """The translation's tokens, none chosen: the search then starts from the first on the head's side."""
    return gr.Dropdown(views.token_choices(translation, language), value=None)


def declare(page: Page) -> None:
    """A translation gives the token search its tokens. A model switch leaves the tab's run for the next opening,
    which runs the new model's own corpus."""
    page.when_translated(after_translation, ["corpus_token", "corpus_neighbours"], TAB_ID)


def wire(page: Page) -> None:
    c = page.components
    corpus_events = list(CORPUS_VIEWS)
    opening = page.on(page.shown(TAB_ID), on_opened, corpus_events, costly=True, trigger_mode="always_last",
                      progress_on=["corpus_status"])
    running = [page.on(c["corpus_default"].click, on_run_default, corpus_events, costly=True,
                       keep_on_input_problem=True, progress_on=["corpus_status"]),
               page.on(c["corpus_run"].click, on_run_upload, corpus_events, costly=True, keep_on_input_problem=True,
                       progress_on=["corpus_status"])]
    for event in (opening, *running):
        page.stops(c["corpus_stop"], event)
    head_outputs = ["corpus_space", "corpus_neighbours", "corpus_layer", "corpus_head"]
    page.on([c["corpus_kind"].input, c["corpus_layer"].input, c["corpus_layer"].release, c["corpus_head"].input,
             c["corpus_head"].release, c["corpus_colour"].input],
            on_head, head_outputs, keep_on_input_problem=True, trigger_mode="always_last", progress_on=["corpus_space"])
    page.on(c["corpus_search"].click, on_search, ["corpus_neighbours"], keep_on_input_problem=True)
    opens = ["text", "decoding", "beam_size", "kind", "layer", "head", "average", *translate.TRANSLATION_OUTPUTS,
             *page.translation_outputs(translate.TAB_ID), "tabs", "corpus_sentence", "corpus_step"]
    opening_sentences = [
        page.on(c["corpus_open"].click, page.translated(on_open_sentence, shown=translate.TAB_ID), opens,
                keep_on_input_problem=True, progress_on=["corpus_status"]),
        page.on(c["corpus_least"].select, page.translated(on_least_select, shown=translate.TAB_ID), opens,
                keep_on_input_problem=True, progress_on=["corpus_status"]),
        page.on(c["corpus_pick"].submit, page.translated(on_pick, shown=translate.TAB_ID),
                [*opens, "corpus_kind", *head_outputs], keep_on_input_problem=True, progress_on=["corpus_space"])]
    for event in opening_sentences:  # a cell of the heads map stays here: the step view waits for Translate
        page.brings_into_sight(event, translate.STEP_VIEW_ID)
