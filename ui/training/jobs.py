"""Background training jobs for the app's Train tab: one at a time per server, observable, stoppable by its starter.

A job runs ``transformer.train.trainer.Trainer`` (the same code as the command line)
in a thread, records every update and evaluation for live curves, and when it
ends publishes its model as a new checkpoint directory the app can list. It
never writes into the bundled ``checkpoints/``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


from transformer import data as datasets
from transformer.train.settings import AUTO_PRESET, TrainConfig
from transformer.train.trainer import Trainer

from ..runtime import settings
from ..runtime.costly import CORES
from ..runtime.language import ENGLISH, WRITTEN_PER_LANGUAGE, Message, Number, message, percent, text
from ..runtime.limits import MAX_TRACKED_CLIENTS
from ..runtime.memory import release_memory
from .training_plans import MAX_MINUTES, JobError, JobRequest, plan_words, run_config
from .published_models import PublishedModels, kept_where
from .uploads import read_upload
from ..runtime.numbers import clamp, finite

log = logging.getLogger(__name__)

DEFAULT_RUNS_DIR = Path(__file__).resolve().parents[1] / "runs"
JOBS_PER_CLIENT_HOUR = 3  # one client may not keep the server's one training slot for itself
MAX_STEPS = 3000
SHARED_MINUTES = 5.0  # ... or this long while another visitor waits for it
MAX_WAITING = 10  # visitors in line for the slot
WAITER_GONE_S = 10.0  # a place in line whose page has not asked for this long is given up (the page asks each second)
APP_PRESETS = (AUTO_PRESET, "tiny", "small")
DISABLE_VARIABLE = "EXPLORER_DISABLE_TRAINING"


def time_left_text(seconds: float) -> Message:
    """"about 40 seconds left", or in minutes from a minute and a half on."""
    if seconds < 90:
        return message("train.seconds_left", seconds=Number(seconds, ".0f"))
    return message("train.minutes_left", minutes=Number(seconds / 60, ".0f"))


def in_words(error: BaseException) -> Message | BaseException | str:
    """A problem's own words: its message, or the library's error it names (each written in each reader's
    language), or its text."""
    if len(error.args) == 1 and isinstance(error.args[0], WRITTEN_PER_LANGUAGE):
        return error.args[0]
    return error if getattr(error, "code", None) else str(error)


class SlotTaken(JobError):
    """The training slot is not free for this visitor now: a job runs, or others wait ahead of them."""


def training_disabled() -> bool:
    return settings.value(DISABLE_VARIABLE)


@dataclass
class JobState:
    """What observers see; replaced as a whole under the manager's lock, never mutated by readers."""

    name: str
    status: str                      # running | finished | stopped | failed
    request: JobRequest
    started: float
    total_steps: int | None          # None: planned for its time limit, which ends it
    steps: list[dict] = field(default_factory=list)
    evals: list[dict] = field(default_factory=list)
    probes: list[dict] = field(default_factory=list)
    said: Message | None = None      # how it ended, or why it could not start, in each reader's language
    checkpoint: str | None = None    # name of the published checkpoint
    held: str | None = None          # name of a stopped job's model, kept out of the list until its trainer keeps it
    ended: float | None = None
    owner: str | None = None         # the visitor (session) who started it, while they are still here
    plan: Message | None = None      # what a job fitted to its time limit planned, from the speed it measured
    shared: bool = False             # a public visitor's job: it ends at SHARED_MINUTES while another visitor waits
    cut: bool = False                # it was ended so that a waiting visitor could train

    @property
    def message(self) -> str:
        """How it ended, in English (for logs and scripts)."""
        return str(self.said) if self.said is not None else ""

    @property
    def step(self) -> int:
        return self.steps[-1]["step"] if self.steps else 0

    def progress(self) -> float:
        """Share of the run done, 0 to 1: a run ends at its update count or its time limit, whichever comes first."""
        if self.status == "finished":
            return 1.0
        by_time = self.training_seconds() / max(1.0, self.request.minutes * 60)
        if not self.total_steps:  # planned for its time limit: the clock is its measure
            return min(1.0, by_time)
        done = self.step / max(1, self.total_steps)
        if self.status == "running":
            done = max(done, by_time)
        return min(1.0, done)

    def training_seconds(self) -> float:
        """Seconds of training so far on the trainer's clock, which the time limit reads: data and tokenizer
        preparation before the first update do not count; measuring the machine's speed for a plan does."""
        return self.steps[-1].get("elapsed_s", 0.0) if self.steps else 0.0

    def time_left(self) -> Message:
        """How long it has left, in words for a message."""
        left = self.seconds_left()
        return message("train.ends_at_limit") if left is None else time_left_text(left)

    def seconds_left(self) -> float | None:
        if self.status != "running" or not self.steps:
            return None
        elapsed = self.training_seconds()
        by_time = self.request.minutes * 60 - elapsed
        if not self.total_steps:
            return max(0.0, by_time)
        by_steps = elapsed / max(1, self.step) * (self.total_steps - self.step)
        return max(0.0, min(by_steps, by_time))


@dataclass
class Waiter:
    """A visitor waiting for the training slot: their session, their address (None: this machine's user), the time
    limit they asked for, and when their page last asked."""

    owner: str
    client: str | None
    minutes: float
    seen: float


class TrainingLine:
    """Visitors waiting for the training slot, the next first: one place per address, at most ``MAX_WAITING``, and
    a place whose page has not asked for ``WAITER_GONE_S`` given up. Guarded by its ``JobManager``'s lock."""

    def __init__(self):
        self.waiters: list[Waiter] = []

    def __len__(self) -> int:
        """How many wait, the places of those gone given up first (each update asks, whoever's job runs)."""
        self.drop_gone()
        return len(self.waiters)

    def drop_gone(self) -> None:
        now = time.monotonic()
        self.waiters = [waiter for waiter in self.waiters if now - waiter.seen < WAITER_GONE_S]

    def place_of(self, owner: str) -> int | None:
        """``owner``'s place (1: next), None when they are not waiting."""
        self.drop_gone()
        return next((i + 1 for i, waiter in enumerate(self.waiters) if waiter.owner == owner), None)

    def next_is(self, owner: str) -> bool:
        """Whether nobody waits ahead of ``owner``."""
        return len(self) == 0 or self.waiters[0].owner == owner

    def join(self, request: JobRequest, owner: str, client: str | None) -> int:
        """``owner``'s place, kept (their page asked again) or taken at the end of the line."""
        place = self.place_of(owner)  # the places of those gone given up first
        if place is not None:
            self.waiters[place - 1].seen = time.monotonic()
            return place
        if client is not None and any(waiter.client == client for waiter in self.waiters):
            raise JobError(message("train.error.address_waiting"))
        if len(self.waiters) >= MAX_WAITING:
            raise JobError(message("train.error.line_full", count=MAX_WAITING))
        self.waiters.append(Waiter(owner, client, request.minutes, time.monotonic()))
        return len(self.waiters)

    def leave(self, owner: str) -> None:
        self.waiters = [waiter for waiter in self.waiters if waiter.owner != owner]

    def expected_wait_s(self, place: int, job: JobState | None, shared_minutes: float) -> float:
        """How long the visitor at ``place`` may wait, at most: the running ``job``'s time left (a public
        visitor's ends at ``shared_minutes`` now that someone waits), then the time limit of each visitor ahead."""
        self.drop_gone()
        wait = 0.0
        if job is not None and job.status == "running":
            limit = min(job.request.minutes, shared_minutes) if job.shared else job.request.minutes
            wait = max(0.0, limit * 60 - job.training_seconds())
        for waiter in self.waiters[:max(0, place - 1)]:
            wait += 60 * (min(waiter.minutes, shared_minutes) if waiter.client is not None else waiter.minutes)
        return wait


def outcome(config: TrainConfig, trainer: Trainer, final: dict, status: str, name: str,
            cut_at: float | None) -> Message:
    """How a job that trained ended: when, its score, where its model is, and (``cut_at``: its minutes) that it
    was ended for a waiting visitor."""
    summary = (message("train.summary.exact_match", share=percent(final["exact_match"]))
               if config.data in datasets.SYNTHETIC_TASKS
               else message("train.summary.bleu", bleu=Number(final["bleu"], ".1f")))
    if final.get("stopped_by") == "time":
        limit = Number(config.max_minutes, "g")
        ending = (message("train.ending.time_limit", minutes=limit, step=trainer.step) if trainer.config.plan
                  else message("train.ending.time_limit_of", minutes=limit, step=trainer.step, total=config.steps))
    else:
        ending = message("train.ending.updates", step=trainer.step)
    where = message("train.where.listed", name=name) if status == "finished" else message("train.where.held")
    if cut_at is not None:
        ending = message("train.ending.cut", ending=ending, minutes=Number(cut_at, "g"))
    return message(f"train.ended.{status}", ending=ending, summary=summary, where=where)


def failure(error: BaseException) -> Message:
    """Why a job failed, in words: its data could not be read, its training diverged, memory ran out, or another
    error (logged with its traceback); called while it is handled."""
    if isinstance(error, datasets.DataError):
        return message("train.failed.no_start", problem=in_words(error))
    if isinstance(error, FloatingPointError):
        return message("train.failed.diverged", problem=in_words(error))
    if isinstance(error, (RuntimeError, MemoryError)):
        log.exception("training job failed")
        if "out of memory" in str(error).lower() or isinstance(error, MemoryError):
            return message("train.failed.memory")
        return message("train.failed.error", problem=in_words(error))
    log.exception("training job crashed")
    return message("train.failed.crashed", problem=in_words(error))


def check_request(request: JobRequest, max_minutes: float) -> None:
    """Refuse a request that could never start (before its visitor waits for the slot); bound its numbers (its
    time limit to ``max_minutes``)."""
    if training_disabled():
        raise JobError(message("train.error.turned_off", variable=DISABLE_VARIABLE))
    if request.preset not in APP_PRESETS:
        raise JobError(message("train.error.choose_size", sizes=", ".join(APP_PRESETS)))
    request.steps = clamp(request.steps, 10, MAX_STEPS, message("train.number_of_updates"))
    request.minutes = max(0.2, min(max_minutes, finite(request.minutes, message("train.minutes_name"))))


class JobManager:
    """Runs at most one training job at a time and publishes finished models under ``published_dir``."""

    def __init__(self, runs_dir: str | Path | None = None, trainer: Callable[..., Trainer] = Trainer,
                 max_minutes: float = MAX_MINUTES, shared_minutes: float = SHARED_MINUTES):
        """``trainer``: what runs a job, called as ``Trainer`` is (tests give a quick stand-in); ``max_minutes``:
        the longest time limit a job may have (benchmarks run longer jobs than the tab offers); ``shared_minutes``:
        when a public visitor's job ends while another visitor waits."""
        self.max_minutes, self.shared_minutes = max_minutes, shared_minutes
        self.line = TrainingLine()
        self._ended_by: dict[str, JobState] = {}  # each visitor's last job, once another has taken the slot
        self.trainer = trainer
        self.runs_dir = Path(runs_dir or settings.value("EXPLORER_RUNS_DIR") or DEFAULT_RUNS_DIR)
        self.shelf = PublishedModels(self.runs_dir)
        self.published_dir, self.held_dir = self.shelf.published_dir, self.shelf.held_dir
        self._lock = threading.Lock()
        self._job: JobState | None = None
        self._cancel: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self._starts: dict[str, list[float]] = {}  # client address -> when it started jobs, this last hour

    @property
    def current(self) -> JobState | None:
        return self._job

    def busy(self) -> bool:
        return self._job is not None and self._job.status == "running"

    def check(self, request: JobRequest) -> None:
        check_request(request, self.max_minutes)

    def wait_in_line(self, request: JobRequest, owner: str, client: str | None) -> int | None:
        """Hold ``owner``'s place in line for the slot (joining at its end) while a job runs or others are ahead:
        their place (1: next), or None when the slot is theirs to take now with ``start``. A page asks each second;
        a place not asked about for ``WAITER_GONE_S`` is given up. One place per address."""
        with self._lock:
            if not self.busy() and self.line.next_is(owner):
                return None
            if self.busy() and self._job.owner == owner:
                raise JobError(message("train.error.yours_running", name=self._job.name))
            return self.line.join(request, owner, client)

    def place_of(self, owner: str) -> int | None:
        """``owner``'s place in line (1: next), None when they are not waiting."""
        with self._lock:
            return self.line.place_of(owner)

    def expected_wait_s(self, place: int) -> float:
        with self._lock:
            return self.line.expected_wait_s(place, self._job, self.shared_minutes)

    def _set_aside(self, ended: JobState | None) -> None:
        """An ended job gives way to a new one: its trainer's page still follows it (``job_of``). A stopped job's
        model nobody kept is removed, unless its job was ended for a waiting visitor and its trainer is here."""
        if ended is not None and ended.owner is not None:
            self._ended_by.pop(ended.owner, None)
            self._ended_by[ended.owner] = ended
            while len(self._ended_by) > MAX_TRACKED_CLIENTS:
                self._ended_by.pop(next(iter(self._ended_by)))
        self.shelf.drop_held(keeping={job.held for job in self._ended_by.values() if job.cut and job.held})

    def job_of(self, owner: str | None) -> JobState | None:
        """The last job ``owner`` started: running, or ended (even once another visitor's job took the slot)."""
        with self._lock:
            return self._job_of(owner)

    def _job_of(self, owner: str | None) -> JobState | None:
        if owner is None or (self._job is not None and self._job.owner == owner):
            return self._job
        return self._ended_by.get(owner)

    def _replace(self, job: JobState, **changes) -> None:
        """A job's state changed, wherever it is kept; called with the lock held."""
        changed = JobState(**{**job.__dict__, **changes})
        if job is self._job:
            self._job = changed
        else:
            self._ended_by[job.owner] = changed

    def start(self, request: JobRequest, owner: str | None = None, client: str | None = None) -> JobState:
        """Start a job for the visitor ``owner`` (None: the server itself); refused while another one runs or
        others wait ahead of them, and for a ``client`` (a public server's visitor, by address) that started
        ``JOBS_PER_CLIENT_HOUR`` jobs in the last hour. A client's job trains on half the cores, leaving the
        others to everyone else, and ends at ``shared_minutes`` while another visitor waits."""
        self.check(request)
        # An upload is read and checked before the lock: reading it must not hold up everyone else's requests.
        corpus = read_upload(request.upload) if request.data == "upload" and request.upload else None
        with self._lock:  # held while the request is checked, so two starts can never both pass
            if self.busy():
                stoppable = self._job.owner in (None, owner)
                raise SlotTaken(message("train.error.busy_stoppable" if stoppable else "train.error.busy",
                                        name=self._job.name, left=self._job.time_left()))
            if not self.line.next_is(owner):
                raise SlotTaken(message("train.error.others_waiting", count=len(self.line)))
            now = time.time()
            recent = [t for t in self._starts.get(client, []) if t > now - 3600]
            if client is not None and len(recent) >= JOBS_PER_CLIENT_HOUR:
                raise JobError(message("train.error.hourly", count=len(recent),
                                       left=time_left_text(recent[0] + 3600 - now)))
            config = run_config(request, corpus, self.shelf.work_dir)  # a request that cannot run counts against no one
            if client is not None:
                self._starts[client] = recent + [now]
            name = Path(config.out_dir).name
            self.line.leave(owner)
            self._set_aside(self._job)
            self._cancel = threading.Event()
            total = None if request.preset == AUTO_PRESET else request.steps
            self._job = JobState(name, "running", request, time.time(), total, owner=owner, shared=client is not None)
            self._thread = threading.Thread(target=self._run, args=(config, self._cancel, client is not None),
                                            daemon=True, name=f"train-{name}")
            self._thread.start()
            return self._job

    def stop(self, owner: str | None = None, language: str = ENGLISH) -> str:
        """Ask the running job to stop after its current update; it still publishes its model.

        A visitor may stop only a job they started, so a classroom cannot stop
        the teacher's run; once its starter has left (``release``), anyone may.
        ``owner=None`` is the server itself. Returns what happened, for the user (in ``language``).
        """
        with self._lock:
            job = self._job
            if job is None or job.status != "running" or self._cancel is None:
                return text(language, "train.no_job_running")
            if owner is not None and job.owner not in (None, owner):
                raise JobError(message("train.error.not_yours", name=job.name, left=job.time_left()))
            self._cancel.set()
            return text(language, "train.stopping", name=job.name)

    def release(self, owner: str) -> None:
        """The visitor ``owner`` has left: the job they started may now be stopped by anyone, and their place in
        line is given up."""
        with self._lock:
            self.line.leave(owner)
            self._ended_by.pop(owner, None)
            if self._job is not None and self._job.owner == owner:
                self._job = JobState(**{**self._job.__dict__, "owner": None})

    def wait(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _update(self, **changes) -> None:
        with self._lock:
            self._replace(self._job, **changes)

    def _run(self, config: TrainConfig, cancel: threading.Event, shared: bool) -> None:
        """Train (``shared``: on the cores a visitor's job may take), then publish the model or say why not."""
        with CORES.reserve() if shared else contextlib.nullcontext():
            self._train(config, cancel)

    def _train(self, config: TrainConfig, cancel: threading.Event) -> None:
        def on_step(metrics: dict) -> None:
            self._update(steps=self._job.steps + [{k: metrics[k] for k in ("step", "loss", "lr", "tokens",
                                                                           "tokens_per_s", "elapsed_s")}])
            with self._lock:
                due = len(self.line) > 0 and self._job.shared and metrics["elapsed_s"] >= self.shared_minutes * 60
            if due and not cancel.is_set():
                self._update(cut=True)
                cancel.set()

        def on_eval(metrics: dict) -> None:
            record = {k: v for k, v in metrics.items() if k not in ("probe", "sample")}
            self._update(evals=self._job.evals + [record], probes=self._job.probes + [metrics["probe"]])

        try:
            trainer = self.trainer(config, on_step=on_step, on_eval=on_eval, cancel=cancel, show_progress=False)
            if trainer.budget_plan is not None and trainer.budget_plan.expected_updates is not None:
                self._update(plan=plan_words(trainer.budget_plan))
            final = trainer.run()
            status = "stopped" if final.get("stopped_by") == "cancel" else "finished"
            name = self.shelf.publish(trainer, Path(config.out_dir), status == "finished", self._job.owner)
            self._update(status=status, ended=time.time(),
                         said=outcome(config, trainer, final, status, name,
                                      self.shared_minutes if self._job.cut else None),
                         **({"checkpoint": name} if status == "finished" else {"held": name}))
        except Exception as error:  # keep the server serving whatever a job does
            self._update(status="failed", ended=time.time(), said=failure(error))
        finally:
            if config.data.endswith(".tsv") and Path(config.data).parent == self.shelf.work_dir:
                Path(config.data).unlink(missing_ok=True)
            trainer = None
            release_memory()

    def keep(self, owner: str | None, language: str = ENGLISH) -> str:
        """Add a stopped job's model to the model list; only its trainer may (``owner`` None: the server)."""
        with self._lock:
            job = self._job_of(owner)
            if job is None or job.held is None:
                job = self._job  # what the page shows: the job that has the slot
            if job is None or job.held is None or not (self.held_dir / job.held).is_dir():
                raise JobError(message("train.error.nothing_to_keep"))
            if owner is not None and self.shelf.trained_by.get(job.held) != owner:
                raise JobError(message("train.error.keep_not_yours", name=job.held))
            self.shelf.take_in(job.held)
            self._replace(job, checkpoint=job.held, held=None,
                          said=kept_where(job.said, message("train.where.kept", name=job.held)))
            name = job.held
        self.shelf.keep_newest()
        return text(language, "train.kept", name=name)
