"""A run's clock: what its time limit and a schedule planned by the clock read.

It counts the seconds of updates and evaluations, over every segment of a resumed run, plus those spent measuring
this machine's speed for a plan (``planning.planned_config``), which count against the limit; not the rest of the
set-up (data, tokenizers) before the first update. Under torchrun each process has its own clock, and where they
must agree (the learning rate, when time is up) they read the slowest one's.
"""

from __future__ import annotations

import time

from .processes import Processes

THROUGHPUT_WINDOW_S = 10.0  # tokens per second are counted over about this many recent seconds


class RunClock:
    """Seconds of earlier segments of the run (and of measuring for its plan), plus this segment's since
    ``start()``; and when warm-up ended on it, from which a schedule planned by the clock decays."""

    def __init__(self, max_minutes: float | None, processes: Processes, measuring_s: float = 0.0):
        self.max_minutes, self.processes, self.measuring_s = max_minutes, processes, measuring_s
        self.before_s = measuring_s
        self.warmup_end_s: float | None = None
        self._started: float | None = None

    def start(self) -> None:
        self._started = time.monotonic()

    def elapsed_s(self) -> float:
        running = 0.0 if self._started is None else time.monotonic() - self._started
        return self.before_s + running

    def agreed_elapsed_s(self) -> float | None:
        """The clock a schedule reads, the same on every process (the slowest one's), or the processes would
        update with different learning rates and drift apart. None without a time limit: updates plan alone."""
        return None if self.max_minutes is None else self.processes.slowest(self.elapsed_s())

    def out_of_time(self) -> bool:
        """Past the time limit on this process's clock (the loop has the processes agree on it)."""
        return self.max_minutes is not None and self.elapsed_s() > 60 * self.max_minutes

    def after_update(self, step: int, warmup_steps: int) -> None:
        """Notes when warm-up ends: at the update that completes it."""
        if self.warmup_end_s is None and step >= warmup_steps:
            agreed = self.agreed_elapsed_s()
            self.warmup_end_s = self.elapsed_s() if agreed is None else agreed

    def state(self) -> dict:
        """What a save records of the clock, for ``resume``."""
        return {"elapsed_s": self.elapsed_s(), "warmup_end_s": self.warmup_end_s}

    def resume(self, state: dict, warmed_up: bool) -> None:
        """Go on from a saved ``state``. Saved by runs of this version on; an older run's clock starts again at 0,
        as it did then, and one past its warm-up (``warmed_up``) counts it as ended there."""
        self.before_s = state.get("elapsed_s", 0.0) + self.measuring_s
        self.warmup_end_s = state.get("warmup_end_s")
        if self.warmup_end_s is None and warmed_up:
            self.warmup_end_s = self.before_s


class Throughput:
    """Target tokens per second over about the last ``THROUGHPUT_WINDOW_S`` seconds, of all processes."""

    def __init__(self, processes: int = 1):
        self.processes = processes
        self.tokens, self.since = 0, time.monotonic()

    def add(self, tokens: int) -> float:
        """Count an update's ``tokens``; returns the throughput so far in the window."""
        self.tokens += tokens
        seconds = time.monotonic() - self.since
        per_s = self.tokens * self.processes / seconds if seconds > 0 else 0.0
        if seconds > THROUGHPUT_WINDOW_S:
            self.tokens, self.since = 0, time.monotonic()
        return per_s
