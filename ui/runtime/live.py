"""Work seen as it happens: a streaming handler (a generator) runs work that reports as it goes in a thread of its
own, and yields its newest report whenever one has come, then what it returns; a Stop button asks it to end.

Only the newest report is shown: when reports come faster than a page takes them (a fast model, a slow network),
the page skips some and never falls behind the work.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .costly import CORES


@dataclass(frozen=True)
class Done:
    """What the work returned: the last thing ``as_it_happens`` yields."""

    value: object


@dataclass(frozen=True)
class _Failed:
    error: BaseException


def as_it_happens(work: Callable, *args, **kwargs) -> Iterator:
    """Runs ``work(*args, on_step=report, **kwargs)`` in a thread of its own and yields each report it makes
    (the newest, where several came while the last was shown; the last one always), then ``Done(what it
    returned)``; an error it raised is raised here, so the handler's own messages apply."""
    reports: queue.SimpleQueue = queue.SimpleQueue()

    def run():
        CORES.for_ordinary_event()  # this thread computes as the event's own would
        try:
            reports.put(Done(work(*args, on_step=reports.put, **kwargs)))
        except BaseException as error:  # noqa: BLE001 - raised again in the handler's thread
            reports.put(_Failed(error))

    threading.Thread(target=run, daemon=True, name=f"live-{getattr(work, '__name__', 'work')}").start()
    while True:
        item = reports.get()
        while not isinstance(item, (Done, _Failed)):  # the newest of the reports that have come
            try:
                newer = reports.get_nowait()
            except queue.Empty:
                break
            if isinstance(newer, (Done, _Failed)):  # the last report is always shown
                yield item
            item = newer
        if isinstance(item, _Failed):
            raise item.error
        yield item
        if isinstance(item, Done):
            return


class Stops:
    """Each page's Stop: the work a page runs as it happens takes an event while it runs (``running``), which the
    page's Stop button sets (``stop``). A Stop pressed while nothing runs changes nothing."""

    def __init__(self):
        self.running_now: dict[str, threading.Event] = {}
        self.lock = threading.Lock()

    @contextlib.contextmanager
    def running(self, page: str | None) -> Iterator[threading.Event]:
        stop = threading.Event()
        if page is None:  # a call without a page (a script) has no Stop button
            yield stop
            return
        with self.lock:
            self.running_now[page] = stop
        try:
            yield stop
        finally:
            with self.lock:
                if self.running_now.get(page) is stop:
                    del self.running_now[page]

    def stop(self, page: str | None) -> None:
        with self.lock:
            stop = self.running_now.get(page) if page else None
        if stop is not None:
            stop.set()
