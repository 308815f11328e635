"""Work seen as it happens: a streaming handler (a generator) runs work that reports as it goes in another thread,
and yields its newest report whenever one has come, then what it returns; a Stop button asks it to end.

The work runs in a thread of ``WORKERS``. Reports are shown at most ``SHOWN_EVERY_S`` apart, the newest each time:
a page that redrew every step of a fast model would spend the CPU the decoding needs (a slow classroom computer
serves the page too), and would show a blur. While many are watched at once, further apart (``WATCHED``): each
report shown costs the server too.
"""

from __future__ import annotations

import contextlib
import contextvars
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from .costly import CORES


SHOWN_EVERY_S = 0.25  # four redraws a second at most: a reader follows the words appearing
# Reports shown a second among all the work watched at once. Each costs the server Gradio's postprocessing of the
# event's outputs and a message on its stream, taken from the decoding: a class of 40 with half of them watching
# (benchmarks/load_test.py --streaming 0.5) had p95 3.3-3.5 s with each report shown 0.25 s apart, 2.7-3.0 s with
# 0.5 s. A visitor alone, or a few, still see four a second.
SHOWN_PER_S = 40
# The threads the work runs in, kept between events: a new thread would build torch's pool of compute threads
# anew for every translation (0.2 s of a 0.4 s one at opus-mt's shapes, measured). More than any streaming
# event's concurrency limit (translations: batching.CONCURRENCY), so none waits for a thread (work a closed
# event abandons ends at its next step: Stops).
WORKERS = ThreadPoolExecutor(max_workers=64, thread_name_prefix="live")


class Watched:
    """How many works are watched as they happen at once, and so how far apart each one's reports are shown. A work
    counts from its event's start, also while its translation waits for a batch: it will report soon."""

    def __init__(self):
        self.count = 0
        self.lock = threading.Lock()

    @contextlib.contextmanager
    def one(self) -> Iterator[None]:
        with self.lock:
            self.count += 1
        try:
            yield
        finally:
            with self.lock:
                self.count -= 1

    def every_s(self, least: float) -> float:
        """``least`` apart, or further, so that all of them together show at most ``SHOWN_PER_S`` a second."""
        return max(least, self.count / SHOWN_PER_S)


WATCHED = Watched()


@dataclass(frozen=True)
class Done:
    """What the work returned: the last thing ``as_it_happens`` yields."""

    value: object


@dataclass(frozen=True)
class _Failed:
    error: BaseException


def as_it_happens(work: Callable, *args, every_s: float = SHOWN_EVERY_S, **kwargs) -> Iterator:
    """Runs ``work(*args, on_step=report, **kwargs)`` in a thread of ``WORKERS``, in the event's context (Gradio's
    request: a ZeroGPU call reads the visitor from it), and yields its reports as it makes them, the first at once
    and then the newest at most once every ``every_s`` seconds (those in between are skipped; further apart while
    many are watched, ``WATCHED``, so ``every_s`` is the least), then ``Done(what it returned)``; an error it
    raised is raised here, so the handler's own messages apply. Closed early (the page left, the event cancelled),
    work not yet started is not started."""
    reports: queue.SimpleQueue = queue.SimpleQueue()

    def run():
        CORES.for_ordinary_event()  # this thread computes as the event's own would
        try:
            reports.put(Done(work(*args, on_step=reports.put, **kwargs)))
        except BaseException as error:  # noqa: BLE001 - raised again in the handler's thread
            reports.put(_Failed(error))

    started = WORKERS.submit(contextvars.copy_context().run, run)
    shown_at, waiting = None, None  # when a report was last yielded; the newest one not yet yielded
    try:
        with WATCHED.one():
            while True:
                apart = WATCHED.every_s(every_s)
                for item in _come(reports, None if waiting is None else shown_at + apart - time.monotonic()):
                    if isinstance(item, _Failed):
                        raise item.error
                    if isinstance(item, Done):
                        yield item
                        return
                    waiting = item
                if waiting is not None and (shown_at is None or time.monotonic() - shown_at >= apart):
                    yield waiting
                    shown_at, waiting = time.monotonic(), None
    finally:
        started.cancel()


def _come(reports: queue.SimpleQueue, wait_s: float | None) -> list:
    """What has come on ``reports``, in order, once something has (or ``wait_s`` has passed: nothing)."""
    try:
        come = [reports.get(timeout=None if wait_s is None else max(0.0, wait_s))]
    except queue.Empty:
        return []
    while not isinstance(come[-1], (Done, _Failed)):
        try:
            come.append(reports.get_nowait())
        except queue.Empty:
            break
    return come


class Stops:
    """Each page's Stop: the work a page runs as it happens takes an event while it runs (``running``), which the
    page's Stop button sets (``stop``), for every such work the page runs. A Stop pressed while nothing runs changes
    nothing. Work whose page is gone (the event closed before it ended) is stopped too."""

    def __init__(self):
        self.running_now: dict[str, set[threading.Event]] = {}
        self.lock = threading.Lock()

    @contextlib.contextmanager
    def running(self, page: str | None) -> Iterator[threading.Event]:
        stop = threading.Event()
        if page is not None:  # a call without a page (a script) has no Stop button
            with self.lock:
                self.running_now.setdefault(page, set()).add(stop)
        try:
            yield stop
        finally:
            stop.set()  # done, or abandoned: a search still going for nobody ends at its next step
            if page is not None:
                with self.lock:
                    events = self.running_now.get(page, set())
                    events.discard(stop)
                    if not events:
                        self.running_now.pop(page, None)

    def stop(self, page: str | None) -> None:
        with self.lock:
            events = list(self.running_now.get(page, ())) if page else []
        for stop in events:
            stop.set()
