"""Costly events (attribution and head ranking over sample sentences, pruning, a beam tree): shared fairly.

They run one at a time, on half the cores and in a process of their own (worker.py), so a class translating
meanwhile keeps the other cores and the server's interpreter; and each visitor of a public server spends at most
a budget of CPU-seconds on them in a window of time, so one visitor within the rate limit cannot keep that one
slot to themselves. A visitor past the budget is told when they may continue.
"""

from __future__ import annotations

import collections
import contextlib
import math
import threading
import time

import torch

from transformer.errors import InputError

from . import settings
from .language import Count, Number, message
from .limits import MAX_TRACKED_CLIENTS, visiting_client
from .worker import Callback, Worker

# Gradio's workers for costly events: one runs, the others wait for it in their threads (CostlyWork).
CONCURRENCY = {"concurrency_id": "costly", "concurrency_limit": 8}


class Cores:
    """The cores torch computes on, shared between costly work and everything else.

    Costly work (a costly event, a visitor's training job) reserves half of them while it runs; ordinary events
    (a translation, a view) run on the rest meanwhile and on all of them otherwise. Two computations that each
    took every core would slow each other down more than by half: their threads wait for each other.
    """

    def __init__(self, total: int | None = None):
        self.total = total or torch.get_num_threads()  # torch's count as the server started
        self.reserved = 0
        self.lock = threading.Lock()

    def half(self) -> int:
        return max(1, self.total // 2)

    @contextlib.contextmanager
    def reserve(self):
        """Run this thread's torch work on a reserved half of the cores (at least one); yields how many."""
        threads = self.half()
        with self.lock:
            self.reserved += threads
        torch.set_num_threads(threads)
        try:
            yield threads
        finally:
            with self.lock:
                self.reserved -= threads
            torch.set_num_threads(self.total)

    def for_ordinary_event(self) -> int:
        """Set this thread's torch threads to the cores no costly work holds (at least one), and return them.

        torch's count is per thread, taken from the last one set anywhere when a thread first uses torch: without
        this, a thread that started during costly work would keep its count ever after."""
        threads = max(1, self.total - self.reserved)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        return threads


CORES = Cores()
WORKER = Worker(CORES.half())  # started with the server (app.py), else by the first costly computation


def use_threads(threads: int) -> None:
    """The server computes on ``threads`` of torch's threads (``EXPLORER_THREADS``, else the cores nothing else
    keeps busy as it starts: app.py), and its worker on half of them; before either computes."""
    torch.set_num_threads(threads)
    CORES.total = threads
    WORKER.threads = CORES.half()


class CostlyWork:
    """The server's one slot for costly events, and each client's budget of CPU-seconds for them: at most
    ``seconds`` in the last ``window_s`` seconds (``EXPLORER_COSTLY_CPU_SECONDS``, ``EXPLORER_COSTLY_WINDOW_S``).

    Events wait for the slot in their own thread rather than in Gradio's queue, and a client has at most one
    costly event running or waiting: more are refused at once, so a client sending as fast as the rate limit lets
    it cannot fill the queue that everyone's translations go through.
    """

    def __init__(self, seconds: float | None = None, window_s: float | None = None, worker: Worker = WORKER):
        self.worker = worker
        self.seconds = seconds or settings.value("EXPLORER_COSTLY_CPU_SECONDS")
        self.window_s = window_s or settings.value("EXPLORER_COSTLY_WINDOW_S")
        self.spent: dict[str, collections.deque] = {}  # client -> (when, CPU-seconds) of its events in the window
        self.in_flight: set[str] = set()
        self.stopping: set[str] = set()  # pages whose Stop was pressed while their costly event ran
        self.lock = threading.Lock()  # guards spent, in_flight and stopping
        self.slot = threading.Lock()  # held by the costly event that runs
        self.running = threading.local()  # .event: this thread runs a costly event (share), for .page

    def wait_s(self, client: str, now: float | None = None) -> float:
        """Seconds until ``client`` is back within its budget; 0 when it is within it now."""
        now = time.monotonic() if now is None else now
        with self.lock:
            events = self.spent.get(client, collections.deque())
            while events and events[0][0] <= now - self.window_s:
                events.popleft()
            spent = sum(cpu for _, cpu in events)
            for when, cpu in events:  # the budget comes back as the oldest events leave the window
                if spent < self.seconds:
                    break
                spent -= cpu
                if spent < self.seconds:
                    return max(0.0, when + self.window_s - now)
            return 0.0

    def charge(self, client: str, cpu_s: float, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self.lock:
            self.spent.setdefault(client, collections.deque()).append((now, cpu_s))
            if len(self.spent) > MAX_TRACKED_CLIENTS:  # forget clients whose events have all left the window
                cutoff = now - self.window_s
                for quiet in [c for c, events in self.spent.items() if not events or events[-1][0] <= cutoff]:
                    del self.spent[quiet]

    def admit(self, client: str | None) -> None:
        """Take ``client``'s one place in line, or say why not and when to come back."""
        if client is None:
            return
        wait = self.wait_s(client)
        if wait > 0:
            raise InputError(message("runtime.budget_spent", seconds=Number(self.seconds, ".0f"),
                                     minutes=Count(round(self.window_s / 60), "minute"), wait=math.ceil(wait)))
        with self.lock:
            if client in self.in_flight:
                raise InputError(message("runtime.still_running"))
            self.in_flight.add(client)

    @contextlib.contextmanager
    def share(self, request):
        """Run a costly event for whoever sent ``request``: in turn, on half the cores, charged with the CPU
        time it took. This machine's own user (no proxy, loopback) waits in line but is not counted."""
        client, page = visiting_client(request), page_of(request)
        self.admit(client)
        with self.lock:
            self.stopping.discard(page)  # a Stop pressed before belonged to an earlier event
        started, in_worker, threads = time.thread_time(), self.worker.cpu_s(), 1
        try:
            with self.slot, CORES.reserve() as threads:
                self.running.event, self.running.page = True, page
                try:
                    yield
                finally:
                    self.running.event = False
        finally:
            with self.lock:
                self.in_flight.discard(client)
                self.stopping.discard(page)
            # The worker's CPU time for this event, and this thread's (its pool's threads work while it does:
            # an upper bound past one thread).
            cpu_s = self.worker.cpu_s() - in_worker + (time.thread_time() - started) * threads
            if client:
                self.charge(client, cpu_s)

    def stop(self, request) -> None:
        """Stop pressed on a page: its costly event ends at its computation's next progress report (worker.py),
        freeing the slot for the next visitor. Gradio's own cancelling leaves a handler's thread running."""
        page = page_of(request)
        if page is not None:
            with self.lock:
                self.stopping.add(page)

    def run(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)``: in the worker process (worker.py) within a costly event (``share``), until its
        page presses Stop; here otherwise, as when a lesson's Show me computes one sentence's view, which must not
        wait behind others'."""
        if getattr(self.running, "event", False):
            page = self.running.page
            return self.worker.run_stoppable(lambda: page is not None and page in self.stopping, fn, *args,
                                             **kwargs)
        return fn(*map(here, args), **{name: here(value) for name, value in kwargs.items()})


def page_of(request) -> str | None:
    """The page (Gradio's session) a request came from, None for a call without one."""
    return getattr(request, "session_hash", None)


def here(value):
    """An argument as ``fn`` takes it in this process: a ``Callback`` is its callback."""
    return value.callback if isinstance(value, Callback) else value
