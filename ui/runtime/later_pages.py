"""Pages built once the server serves (the students' pages, the page in other languages), so that it serves the
English page as soon as that is built.

Gradio keeps the block a page is being built into in class attributes (``gradio.context.Context.block`` and
``root_block``), which every thread shares: a component that a handler makes as its answer (``gr.Slider(...)``)
while another thread builds a page would be added to that page. So a page is built while no handler's code runs
(``HANDLERS``: ``Page.handler`` runs each handler's code inside ``HANDLERS.handling()``), and a request for a page
not built yet waits until it is (``WaitForLaterPages``), never answered "not found".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable

from .language import text
from .limits import asking_language, refuse

log = logging.getLogger(__name__)


class HandlersOrBuilding:
    """Handlers run side by side, and a page is built in a moment when none runs: a readers-writer lock whose
    readers go first. A handler waits only while a page is being built (a fraction of a second); a page waits for
    a moment with no handler running, however long one takes (a computation of a minute at start-up must not hold
    up every visitor's clicks behind it). A handler that a handler calls does not wait on itself."""

    def __init__(self):
        self._changed = threading.Condition()
        self._handling = 0
        self._building = False
        self._depth = threading.local()

    @contextlib.contextmanager
    def handling(self):
        depth = getattr(self._depth, "value", 0)
        if not depth:
            with self._changed:
                self._changed.wait_for(lambda: not self._building)
                self._handling += 1
        self._depth.value = depth + 1
        try:
            yield
        finally:
            self._depth.value = depth
            if not depth:
                with self._changed:
                    self._handling -= 1
                    self._changed.notify_all()

    @contextlib.contextmanager
    def building(self):
        with self._changed:
            self._changed.wait_for(lambda: not self._handling and not self._building)
            self._building = True
        try:
            yield
        finally:
            with self._changed:
                self._building = False
                self._changed.notify_all()


HANDLERS = HandlersOrBuilding()


class LaterPages:
    """The pages built once the server serves, by the path each is served at, and whether each is built yet.

    ``start(builders, mount)`` builds them one at a time, each in a thread while no handler runs, and hands each
    to ``mount`` on the server's loop: the longest paths first, so that a page is mounted before any whose path
    holds its own (Starlette takes the first mount a path is under: /class/de/ is not /class/'s). ``ready(path)``
    waits until the page a path belongs to is mounted (False if building it failed)."""

    def __init__(self):
        self.paths: list[str] = []
        self.outcome: dict[str, bool] = {}  # by path, once settled: mounted, or failed
        self._settled: dict[str, asyncio.Event] = {}

    def start(self, builders: dict[str, Callable[[], object]],
              mount: Callable[[str, object], Awaitable[None]]) -> asyncio.Task:
        self.paths = sorted(builders, key=len, reverse=True)
        self._settled = {page: asyncio.Event() for page in self.paths}
        return asyncio.create_task(self._build_all(builders, mount))

    def page_of(self, path: str) -> str | None:
        return next((page for page in self.paths
                     if path == page.rstrip("/") or path.startswith(page.rstrip("/") + "/")), None)

    async def ready(self, path: str) -> bool:
        page = self.page_of(path)
        if page is None:
            return True
        await self._settled[page].wait()
        return self.outcome[page]

    async def _build_all(self, builders, mount) -> None:
        for page in self.paths:
            try:
                blocks = await asyncio.to_thread(self._built, builders[page])
                await mount(page, blocks)
                self.outcome[page] = True
            except Exception:  # said in the log and refused; the other pages still come
                log.exception("the page at %s could not be built", page)
                self.outcome[page] = False
            self._settled[page].set()

    @staticmethod
    def _built(build: Callable[[], object]):
        with HANDLERS.building():
            return build()


class WaitForLaterPages:
    """ASGI middleware: a request for a page that is built after the server serves waits until it is built (a
    fraction of a second after start-up); if building it failed, 503 with a sentence saying so."""

    def __init__(self, app, later: LaterPages):
        self.app, self.later = app, later

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and not await self.later.ready(scope["path"]):
            return await refuse(send, 503, text(asking_language(scope), "runtime.page_not_built"))
        return await self.app(scope, receive, send)
