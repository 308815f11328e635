"""The app: every tab's layout first, then what each declares to the others, then every event."""

from __future__ import annotations

import asyncio
import logging

import gradio as gr
from starlette.middleware import Middleware

from transformer.checkpoint import Checkpoint, CheckpointError

from . import accessibility, api, class_page, header, lessons
from .jobs import MAX_UPLOAD_BYTES
from .limits import BodySizeLimit, ClientShare
from .page import Page
from .services import Services
from .tabs import analysis, experiments, explain, inside, model, positions, train, translate

# Keyboard users must see where they are: Gradio's sliders and radio buttons show no focus mark of their own.
# The large-text switch of the lessons panel enlarges labels and chart text for a projector.
FOCUS_CSS = lessons.LARGE_TEXT_CSS + """
/* A chart wider than a phone's screen (a heatmap of a long sentence) scrolls sideways inside its own frame. */
.block:has(> div > .js-plotly-plot), div:has(> .js-plotly-plot) { overflow-x: auto; }
/* The students' page of a class is reached by its link: no bar of pages over either page (gr.Navbar's visible=False
   leaves it drawn in Gradio 6.31). */
.nav-holder { display: none; }
/* The model view (every layer and head) is taller than a projector's screen: it scrolls inside its own frame. */
#attention-plot { max-height: 92vh; overflow-y: auto; }
/* Focus always visible (WCAG 2.4.7), one ring for every control a keyboard reaches: Gradio shows some focus only by
   a border's colour (text boxes, dropdowns) or not at all (sliders); a radio button's also rings its label. */
:is(button, a, summary, textarea, input, [role=tab], [tabindex]):focus-visible {
    outline: 3px solid #b34700; outline-offset: 2px;
}
label:has(input[type=radio]:focus-visible), label:has(input[type=checkbox]:focus-visible) {
    outline: 3px solid #b34700; outline-offset: 2px;
}
"""
log = logging.getLogger(__name__)
QUEUE_SIZE = 64
EXPORTS_KEPT_S = (600, 3600)  # Gradio's copies of files handed out: checked every 10 minutes, kept an hour
# What launch() needs besides the address (Gradio 6 takes the page's CSS there). max_file_size: an upload is
# refused while it arrives, before it is stored; the only upload the app takes is a training TSV. Other request
# bodies are limited before they are parsed.
# The system's own fonts: nothing is fetched, and no glyph of a heading falls back to another font (the theme's
# shipped Source Sans Pro drew some capitals of bold headings from a fallback).
# Contrast of 4.5:1 or more (WCAG 2.1 AA, checked by axe-core in tests/app/test_accessibility.py): the default
# theme's grey info text (#bbbbc2, 1.9:1) and white on its orange buttons and tab labels (2.8:1) fall short.
THEME = gr.themes.Default(font=["system-ui", "-apple-system", "Segoe UI", "Roboto", "Helvetica", "Arial", "sans-serif"],
                          font_mono=["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"]).set(
    body_text_color_subdued="*neutral_600", block_info_text_color="*neutral_600", color_accent="*primary_700",
    button_primary_background_fill="*primary_700", button_primary_background_fill_hover="*primary_800",
    button_primary_text_color="white")
LAUNCH_OPTIONS = {"css": FOCUS_CSS + accessibility.CHART_TEXT_CSS, "theme": THEME,
                  "head": (lessons.LARGE_CHARTS_JS + lessons.SAFE_COLOURS_JS + accessibility.EMPTY_PLACEHOLDER_ROLE_JS
                           + accessibility.CHART_TEXT_JS),
                  "max_file_size": MAX_UPLOAD_BYTES,
                  "app_kwargs": {"middleware": [Middleware(BodySizeLimit), Middleware(ClientShare)]}}


def build_app(services: Services | None = None, default_model: str | None = None,
              queue_size: int = QUEUE_SIZE) -> gr.Blocks:
    services = services or Services.default()
    names = services.registry.names()
    default_model, checkpoint, broken = first_that_loads(services, default_model)

    with gr.Blocks(title="Transformer attention explorer", delete_cache=EXPORTS_KEPT_S) as demo:
        page = Page(services)
        header.layout(page, names, default_model, broken)
        lessons.layout(page)
        class_page.teacher_layout(page)
        with gr.Tabs() as tabs:
            with gr.Tab("Translate", id="translate"):
                translate.layout(page, checkpoint)
            with gr.Tab("Inside a head", id="inside") as inside_tab:
                inside.layout(page, checkpoint)
            with gr.Tab("Experiments", id="experiments"):
                experiments.layout(page, checkpoint)
            with gr.Tab("Attention vs evidence", id="explain"):
                explain.layout(page, checkpoint)
            with gr.Tab("Analysis", id="analysis"):
                analysis.layout(page, checkpoint)
            with gr.Tab("Positional encoding", id="positions") as positions_tab:
                positions.layout(page)
            with gr.Tab("Model", id="model"):
                model.layout(page)
            with gr.Tab("Train", id="train") as train_tab:
                train.layout(page)
        page.add(tabs=tabs)

        for tab in (translate, inside, experiments, explain, analysis, positions, model, train):
            tab.declare(page)
        translate.wire(page)
        inside.wire(page, inside_tab)
        experiments.wire(page)
        explain.wire(page)
        analysis.wire(page)
        positions.wire(page, positions_tab)
        model.wire(page)
        train.wire(page, demo, tabs, train_tab)
        header.wire(page, demo)  # last: a model switch cancels the slow work every tab registered
        lessons.wire(page)
        class_page.wire_teacher(page)
        api.wire(page)
    with demo.route("Class", f"/{class_page.STUDENT_PATH}", show_in_navbar=False) as student_page:
        class_page.student_layout(page)
        class_page.wire_students(page, student_page)
    demo.queue(max_size=queue_size, default_concurrency_limit=2)
    demo.named_components = page.components  # the page's components by name, for tests and tools
    return demo


def first_that_loads(services: Services, preferred: str | None) -> tuple[str, Checkpoint, dict[str, str]]:
    """The preferred model, else the usual default, else any listed one that loads, and why those tried before it
    did not: one broken checkpoint (a truncated shard, weights still Git LFS pointers) must not keep the app from
    starting. With none loadable, start-up ends with every reason."""
    names = services.registry.names()
    if not names:
        raise SystemExit(f"no checkpoints found under {', '.join(map(str, services.registry.roots))}")
    candidates = [name for name in (preferred, services.registry.default_name()) if name in names]
    problems: dict[str, str] = {}
    for name in dict.fromkeys(candidates + names):
        try:
            return name, services.registry.get(name), problems
        except CheckpointError as error:
            log.error("checkpoint %s does not load, so the app opens on another: %s", name, error)
            problems[name] = str(error)
    raise SystemExit("no checkpoint loads:\n" + "\n".join(f"{name}: {why}" for name, why in problems.items()))


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
