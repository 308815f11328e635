"""The app: every tab's layout first, then what each declares to the others, then every event."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import typing
from collections.abc import Callable

import gradio as gr
import plotly.graph_objects as go
from starlette.middleware import Middleware

from transformer.files.checkpoint import Checkpoint, CheckpointError

from . import api
from .classes import class_page
from .drawing import figures
from .tabs import header, lessons
from .training.uploads import MAX_UPLOAD_BYTES
from .runtime import batching, costly, page_code
from .runtime.language import ENGLISH, LANGUAGES, LanguageRoutes, page_path, said, switch_html, text
from .runtime.later_pages import LaterPages, WaitForLaterPages
from .runtime.limits import BodySizeLimit, ClientShare
from .runtime.page import Page
from .services import Services
from .tabs import analysis, corpus, experiments, explain, inside, model, positions, train, translate

log = logging.getLogger(__name__)
# The tabs, in the page's order: each module has TAB_ID, TITLE, layout(page, checkpoint), declare(page), wire(page).
TABS = (translate, inside, experiments, explain, analysis, corpus, positions, model, train)
QUEUE_SIZE = 64
EXPORTS_KEPT_S = (600, 3600)  # Gradio's copies of files handed out: checked every 10 minutes, kept an hour
# The system's own fonts: nothing is fetched, and no glyph of a heading falls back to another font (the theme's
# shipped Source Sans Pro drew some capitals of bold headings from a fallback).
# Contrast of 4.5:1 or more (WCAG 2.1 AA, checked by axe-core in tests/app/test_accessibility.py): the default
# theme's grey info text (#bbbbc2, 1.9:1) and white on its orange buttons and tab labels (2.8:1) fall short.
THEME = gr.themes.Default(font=["system-ui", "-apple-system", "Segoe UI", "Roboto", "Helvetica", "Arial", "sans-serif"],
                          font_mono=["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"]).set(
    body_text_color_subdued="*neutral_600", block_info_text_color="*neutral_600", color_accent="*primary_700",
    button_primary_background_fill="*primary_700", button_primary_background_fill_hover="*primary_800",
    button_primary_text_color="white")
# The page's own scripts and styles (ui/static/, each in a file of its own), and what Python tells them.
def page_config(language: str) -> dict:
    """What the page's scripts are told, in the page's language."""
    return {"explorer": translate.page_settings(language), "figures": figures.page_settings(language),
            "rowPickers": [translate.STEP_PICKER, inside.QUERY_PICKER],
            "pointPickers": [corpus.POINT_PICKER], "plotlyUrl": page_code.plotly_url(),
            "lessons": lessons.page_settings(language), "liveRegions": [class_page.STUDENT_STATUS]}


def page_style(language: str) -> dict:
    return {"css_paths": list(page_code.STYLES), "theme": THEME, "head": page_code.head(page_config(language))}


PAGE_STYLE = page_style(ENGLISH)
STUDENTS_PAGE = f"/{class_page.STUDENT_PATH}/"
# Gradio's threads for events: its default for those that compute, and one more for each event that may wait
# without computing (translations gathering for a batch, costly events waiting their turn), so that waiting ones
# never hold up a step or a view.
COMPUTING_THREADS = 40
THREADS = COMPUTING_THREADS + batching.CONCURRENCY["concurrency_limit"] + costly.CONCURRENCY["concurrency_limit"]
# One school's class on a Space reaches it through one address (its network's); the students' page's requests, a
# few milliseconds each, are counted apart from the main page's, with room for this many phones behind one address.
PHONES_PER_ADDRESS = 40


def launch_options() -> dict:
    """What launch() needs besides the address, made afresh for each launch (Gradio writes into ``app_kwargs``).

    Gradio 6 takes the page's styles and head there. max_file_size: an upload is refused while it arrives, before it is
    stored; the only upload the app takes is a training TSV. Other request bodies are limited before they are
    parsed. No server-side rendering: it would need Node beside Python, for a page that renders in the browser.
    Threads: see THREADS.
    The lifespan builds the page in the other languages and the students' pages once the server serves, and
    mounts each beside the main page; a request for one waits until it is there (later_pages.py)."""
    share = Middleware(ClientShare, own_allowance={STUDENTS_PAGE: PHONES_PER_ADDRESS})
    languages = Middleware(LanguageRoutes, pages={"/": tuple(LANGUAGES), STUDENTS_PAGE: tuple(LANGUAGES)},
                           announcing=page_code.announcing)
    later = LaterPages()
    return {**PAGE_STYLE, "max_file_size": MAX_UPLOAD_BYTES, "ssr_mode": False, "max_threads": THREADS,
            "app_kwargs": {"middleware": [Middleware(BodySizeLimit), share, languages,
                                          Middleware(WaitForLaterPages, later=later)],
                           "lifespan": functools.partial(serve_pages, later=later)}}


Opening = tuple[str, Checkpoint, dict[str, CheckpointError]]  # the model a page opens with, and why others did not


def build_app(services: Services | None = None, default_model: str | None = None,
              queue_size: int = QUEUE_SIZE) -> gr.Blocks:
    """The English page, served at /, with what the server builds once it serves (``later_pages``): the students'
    pages and the page in the other languages, by the path each is served at."""
    services = services or Services.default()
    opening = first_that_loads(services, default_model)  # once: a later page is built without loading a model
    demo = build_page(services, default_model, queue_size, opening=opening)
    remember_signatures(demo)
    demo.later_pages = {
        **{page_path("/", language): LaterPage(language, functools.partial(build_page, services, default_model,
                                                                           queue_size, language, opening))
           for language in LANGUAGES if language != ENGLISH},
        **{page_path(STUDENTS_PAGE, language): LaterPage(language, functools.partial(build_students_page, services,
                                                                                     language))
           for language in LANGUAGES}}
    return demo


class LaterPage(typing.NamedTuple):
    """A page built once the server serves: its language, and what builds it."""
    language: str
    build: Callable[[], gr.Blocks]


def build_page(services: Services, default_model: str | None = None, queue_size: int = QUEUE_SIZE,
               language: str = ENGLISH, opening: Opening | None = None) -> gr.Blocks:
    """The page in ``language``: every tab's layout, then what each declares to the others, then every event.
    ``opening``: the model it opens with, as ``first_that_loads`` chose it (else chosen here)."""
    names = services.registry.names()
    default_model, checkpoint, broken = opening or first_that_loads(services, default_model)

    with gr.Blocks(title=text(language, "page.title"), delete_cache=EXPORTS_KEPT_S) as demo:
        page = Page(services, demo, language)
        gr.HTML(switch_html(language), elem_id="page-languages")
        header.layout(page, names, default_model, broken)
        lessons.layout(page)
        class_page.teacher_layout(page)
        with gr.Tabs() as tabs:
            for tab in TABS:
                with gr.Tab(said(tab.TITLE, language), id=tab.TAB_ID) as shown:
                    tab.layout(page, checkpoint)
                page.tabs[tab.TAB_ID] = shown
        # The tab on screen, kept here alone: set in the browser as a tab opens and by a handler that opens one, read
        # by handlers and by the page (explorerPage.redrawShownTab). And the tabs whose views of the last
        # translation are still to be drawn: a translation draws only the shown tab's.
        page.add(tabs=tabs, visible_tab=gr.Textbox(translate.TAB_ID, visible="hidden", max_length=40,
                                                   elem_id="visible-tab"),
                 tabs_waiting=gr.State([]))
        page.add_redraw_buttons(drawn_by_switches=translate.TAB_ID)

        for tab in TABS:
            tab.declare(page)
        page.wire_tabs()
        for tab in TABS:
            tab.wire(page)
        header.wire(page, demo)  # last: a model switch cancels the slow work every tab registered
        lessons.wire(page)
        class_page.wire_teacher(page)
        api.wire(page)
    demo.queue(max_size=queue_size, default_concurrency_limit=2)
    demo.named_components = page.components  # the page's components by name, for tests and tools
    return demo


def remember_signatures(blocks: gr.Blocks) -> None:
    """Work out once the constructor signature of each kind of component on a page.

    Gradio reads every component's constructor signature again (``inspect.signature``) whenever a visitor's
    session starts; on the main page that was half of a new session's CPU time, which a stranger opening a new
    session with each request made everyone else's translations wait for. ``inspect.signature`` returns a
    function's ``__signature__`` when it has one, so setting it to what it computes changes nothing but the time.

    A patch of Gradio itself, for the whole process: it sets ``__signature__`` on the ``__init__`` of Gradio's
    component classes (and ours), for every page built in it, once each. It changes nothing a session holds
    (tests/app/test_app.py builds one with and without it, alike); a Gradio that stopped reading signatures would
    leave it without effect. ARCHITECTURE.md lists it among the app's patches of its libraries.
    """
    for kind in {type(block) for block in blocks.blocks.values()}:
        for cls in kind.__mro__:
            init = cls.__dict__.get("__init__")
            if inspect.isfunction(init) and "__signature__" not in init.__dict__:
                init.__signature__ = inspect.signature(init)


def build_students_page(services: Services, language: str = ENGLISH) -> gr.Blocks:
    """The students' page of a class in ``language``, an app of its own: a phone's session holds its dozen
    components, not the main page's hundreds (a new session of the main page costs about 50 ms of CPU), and its
    events answer without the queue. Scripts find /class_question and /class_answer on it too."""
    with gr.Blocks(title=text(language, "class.title")) as students:
        page = Page(services, language=language)
        class_page.student_layout(page)
        class_page.wire_students(page, students)
        api.wire_class_endpoints(page, api.STUDENT_ENDPOINTS)
    # Scripts' clients (gradio_client) send even these events through the queue: room for every student of a full
    # class to wait at once, served a few at a time.
    students.queue(max_size=services.classes.max_students, default_concurrency_limit=4)
    return students


@contextlib.asynccontextmanager
async def serve_pages(app, later: LaterPages):
    """The server's lifespan: beside the English page at /, the page in each other language (/de, /fr) and the
    students' pages (/class, /class/de, /class/fr), built one at a time once the server serves and mounted while
    it runs (``LaterPages``). Which one a browser opens: ``LanguageRoutes``."""
    pages: dict[str, LaterPage] = app.get_blocks().later_pages
    mounted: list[gr.Blocks] = []

    async def mount(path: str, blocks: gr.Blocks) -> None:
        language = pages[path].language
        remember_signatures(blocks)
        gr.mount_gradio_app(app, blocks, path.rstrip("/"), ssr_mode=False,
                            footer_links=[] if path.startswith(STUDENTS_PAGE) else ["api", "settings"],
                            **page_style(language))
        mounted.append(blocks)
        blocks.run_startup_events()
        await blocks.run_extra_startup_events()

    building = later.start({path: page.build for path, page in pages.items()}, mount)
    figures_loading = asyncio.create_task(figure_classes_loaded_after(building))
    try:
        yield
    finally:
        building.cancel()
        figures_loading.cancel()
        for blocks in mounted:
            blocks.close(verbose=False)


async def figure_classes_loaded_after(building: asyncio.Task) -> None:
    """Plotly's figure classes, loaded once the later pages are built (an empty figure loads its own and its
    layout's): neither start-up nor a page needs them (0.2 s), but the first chart drawn on the server would wait
    for them."""
    await asyncio.wait([building])
    try:
        await asyncio.to_thread(lambda: go.Figure())  # looked up in the thread too: the lookup is what loads them
    except Exception:  # noqa: BLE001 - the first chart loads them instead; the server serves on
        log.exception("Plotly's figure classes could not be loaded ahead")


def first_that_loads(services: Services, preferred: str | None) -> Opening:
    """The preferred model, else the usual default, else any listed one that loads, and why those tried before it
    did not: one broken checkpoint (a truncated shard, weights still Git LFS pointers) must not keep the app from
    starting. With none loadable, start-up ends with every reason."""
    names = services.registry.names()
    if not names:
        raise SystemExit(f"no checkpoints found under {', '.join(map(str, services.registry.roots))}")
    candidates = [name for name in (preferred, services.registry.default_name()) if name in names]
    problems: dict[str, CheckpointError] = {}
    for name in dict.fromkeys(candidates + names):
        try:
            return name, services.registry.get(name), problems
        except CheckpointError as error:
            log.error("checkpoint %s does not load, so the app opens on another: %s", name, error)
            problems[name] = error
    raise SystemExit("no checkpoint loads:\n" + "\n".join(f"{name}: {why}" for name, why in problems.items()))


CLOSING_S = 0.5  # how long a closing test server waits for the requests still open


def close_app(demo: gr.Blocks) -> None:
    """Stop a demo launched with ``prevent_thread_lock`` (tests, benchmarks) and free its port.

    ``Blocks.close`` sets the server's asyncio stop event from the calling thread while the server's loop
    may be adding or dropping heartbeat waiters on it ("deque mutated during iteration"); the close then
    stops halfway and the port stays open. Setting the event on its own loop first leaves close nothing to race.
    Nor does it wait long for connections still open (a script's client keeps its heartbeat stream open until it
    is dropped): uvicorn would wait on them until Gradio gives up its thread after 5 s; it cancels them after
    ``CLOSING_S`` and still shuts the app down in order.
    """
    server = getattr(demo, "server", None)
    if server is not None:
        server.config.timeout_graceful_shutdown = CLOSING_S
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
