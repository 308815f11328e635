"""Background training jobs for the app's Train tab: one at a time per server, observable, stoppable by its starter.

A job runs ``transformer.train.trainer.Trainer`` (the same code as the command line)
in a thread, records every update and evaluation for live curves, and when it
ends publishes its model as a new checkpoint directory the app can list. It
never writes into the bundled ``checkpoints/``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from transformer import data as datasets
from transformer.errors import InputError
from transformer.files.checkpoint import save_checkpoint
from transformer.paper.config import ModelConfig, preset
from transformer.paper.model import Transformer
from transformer.train import calibrate, planning
from transformer.train.budget import BudgetPlan
from transformer.train.run_logs import run_history
from transformer.train.settings import AUTO_PRESET, TrainConfig, use_bf16
from transformer.train.trainer import Trainer

from .runtime.costly import CORES
from .runtime.gpu import models_device
from .runtime.language import ENGLISH, WRITTEN_PER_LANGUAGE, Message, Number, message, percent, table, text
from .runtime.limits import MAX_TRACKED_CLIENTS
from .runtime.memory import release_memory
from .views.choices import clamp, finite

log = logging.getLogger(__name__)

DEFAULT_RUNS_DIR = Path(__file__).resolve().parents[1] / "runs"
MAX_UPLOAD_BYTES = 5 * 1024 * 1024
MAX_UPLOAD_TEXT_BYTES = 20 * 10**6  # what an upload may decompress to
MAX_UPLOAD_LINES = 200_000
MAX_UPLOAD_LINE_CHARS = 2_000
# Models trained in the app that stay in everyone's model list (a class of 30 would fill it); the oldest go first.
KEPT_MODELS = int(os.environ.get("EXPLORER_KEPT_MODELS", "10"))
JOBS_PER_CLIENT_HOUR = 3  # one client may not keep the server's one training slot for itself
MAX_STEPS = 3000
MAX_MINUTES = 15.0  # a visitor may hold the server's one training slot this long
SHARED_MINUTES = 5.0  # ... or this long while another visitor waits for it
MAX_WAITING = 10  # visitors in line for the slot
WAITER_GONE_S = 10.0  # a place in line whose page has not asked for this long is given up (the page asks each second)
APP_PRESETS = (AUTO_PRESET, "tiny", "small")
DISABLE_VARIABLE = "EXPLORER_DISABLE_TRAINING"
SYNTHETIC_PROBE = "3 1 4 1 5 9 2 6"
# What the page says, in its language (ui/locales/<language>/train.json), and this module's logs say in English.
MULTI30K_MISSING = message("train.multi30k_missing")


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


class JobError(InputError):
    """Why a job could not start, phrased for the user (what they asked for cannot be done now)."""


class SlotTaken(JobError):
    """The training slot is not free for this visitor now: a job runs, or others wait ahead of them."""


def training_disabled() -> bool:
    return os.environ.get(DISABLE_VARIABLE, "").strip().lower() in ("1", "true", "yes", "on")


DIGIT_PIECES = 16  # the digit tasks' vocabulary: ten digits, a space mark and the special pieces


@dataclass(frozen=True)
class SizeSummary:
    """What a size choice means before a job starts: its parameters, and for "auto" the plan in words (None: it
    cannot be known yet, and ``plan`` says why)."""

    parameters: int | None
    plan: Message | None = None  # what the plan for the time limit is (plan_words), or why there is none yet


class PreviewSpeeds:
    """This machine's speed on Multi30K, measured once per way a job would train (on all cores for this machine's
    own user, on half for a public server's visitor), for the Train tab to show the plan a job would make before it
    starts. The job measures again when it starts, as a machine's speed drifts."""

    def __init__(self):
        self._measuring = threading.Lock()  # one measurement at a time; reading what was measured never waits
        self._measured: dict[tuple, tuple[calibrate.CorpusShape, calibrate.Measurement]] = {}

    def get(self, data_dir: str | None = None, shared: bool = False, measure: bool = True):
        """(shape, measurement) of Multi30K in ``data_dir`` (which must be there: see ``fitted_plan``), measured
        now unless it was before or ``measure`` is False (then None)."""
        key = (data_dir, shared)
        if key not in self._measured and measure:
            with self._measuring, CORES.reserve() if shared else contextlib.nullcontext():
                if key not in self._measured:
                    shape = calibrate.CorpusShape.of(datasets.load_multi30k("train", "en", "de", data_dir))
                    device = models_device()
                    bf16 = use_bf16(TrainConfig(data="multi30k"), device)
                    self._measured[key] = shape, calibrate.measure(shape, 60 * MAX_MINUTES, device, bf16)
        return self._measured.get(key)


PREVIEW_SPEEDS = PreviewSpeeds()


def fitted_plan(data: str, minutes: float, data_dir: str | None = None, shared: bool = False,
                measure: bool = True) -> BudgetPlan | Message:
    """The plan "auto" would make for ``minutes`` of training on ``data`` (``shared``: as a visitor's job, on half
    the cores), or why it cannot be shown yet: Multi30K is not on this server, or not measured (``measure``
    False), or the data is an upload whose size is known only when the job starts."""
    kind = planning.data_kind(data)
    if kind == "synthetic":
        return planning.plan_for(kind, minutes)
    share = percent(calibrate.MEASURING_SHARE)
    if kind == "upload":
        return message("train.planned_at_start", data=message("train.the_files_size"), share=share)
    try:
        datasets.multi30k_dir(data_dir, download=False)
    except datasets.DataError:
        return MULTI30K_MISSING
    measured = PREVIEW_SPEEDS.get(data_dir, shared, measure)
    if measured is None:
        return message("train.planned_at_start", data=message("train.multi30ks_size"), share=share)
    shape, measurement = measured
    return planning.plan_for(kind, minutes, shape, measurement)


def plan_words(plan: BudgetPlan) -> Message:
    """``BudgetPlan.describe`` as a message, said in the page's language: the model and how it is trained, what
    it expects, and why (the measured speed; what the next larger size would make)."""
    sizes = plan.sizes()
    vocabulary = message("train.plan.vocabulary", size=Number(plan.vocab_size, ",")) if plan.vocab_size else ""
    schedule = f"train.plan.schedule.{plan.schedule}"
    model = message("train.plan.model", d_model=sizes["d_model"], encoder_layers=sizes["n_encoder_layers"],
                    decoder_layers=sizes["n_decoder_layers"], d_ff=sizes["d_ff"], heads=sizes["n_heads"],
                    dropout=Number(sizes["dropout"], "g"), vocabulary=vocabulary, tokens=Number(plan.max_tokens, ","),
                    lr=Number(plan.lr, "g"), warmup=plan.warmup_steps,
                    schedule=message(schedule) if schedule in table(ENGLISH) else plan.schedule)
    expects = why = ""
    if plan.expected_updates is not None:
        expects = message("train.plan.expects", updates=Number(plan.expected_updates, ","),
                          epochs=Number(plan.expected_epochs, ".1f"))
        if plan.tokens_per_s is not None:
            larger = ""
            if plan.larger is not None:
                d_model, could, needs = plan.larger
                larger = message("train.plan.larger", d_model=d_model, could=Number(could, ","),
                                 needs=Number(needs, ","))
            why = message("train.plan.why", speed=Number(plan.tokens_per_s, ",.0f"), larger=larger)
        elif plan.why:  # a plan made before its numbers were kept: the library's words
            why = f": {plan.why}"
    return message("train.plan", model=model, expects=expects, why=why)


def size_summary(preset_name: str, data: str, minutes: float, shared: bool = False,
                 measure: bool = True) -> SizeSummary:
    """A preset's size for a data choice (digits, or text with 8,000 pieces), or the plan "auto" makes for
    ``minutes`` (``fitted_plan``)."""
    synthetic = data in datasets.SYNTHETIC_TASKS
    if preset_name == AUTO_PRESET:
        plan = fitted_plan(data, minutes, shared=shared, measure=measure)
        if isinstance(plan, Message):
            return SizeSummary(None, plan)
        sizes, vocab, words = plan.sizes(), plan.vocab_size, plan_words(plan)
    else:
        sizes, vocab, words = dataclasses.asdict(preset(preset_name, 1, 1)), 8000, None
    vocab = DIGIT_PIECES if synthetic else vocab
    sizes.update(src_vocab_size=vocab, tgt_vocab_size=vocab)
    with torch.device("meta"):  # counted, not allocated
        return SizeSummary(Transformer(ModelConfig(**sizes)).num_parameters(), words)


def read_upload(path: str | Path, limit: int = MAX_UPLOAD_BYTES) -> datasets.ParallelCorpus:
    """Check an uploaded parallel TSV: size first (compressed and as text), then rows (errors name the problem).

    A gzip upload may hold at most ``MAX_UPLOAD_TEXT_BYTES`` of text, and no line may be longer than
    ``MAX_UPLOAD_LINE_CHARS``: a sentence pair is a line or two of a caption, not a megabyte.
    """
    path = Path(path)
    size = path.stat().st_size
    if size > limit:
        raise datasets.DataError(message("train.error.upload_too_big", file=path.name, size=Number(size / 1e6, ".1f"),
                                         limit=Number(limit / 1e6, ".0f")))
    lines = datasets.read_lines(path, MAX_UPLOAD_TEXT_BYTES)
    if len(lines) > MAX_UPLOAD_LINES:
        raise datasets.DataError(message("train.error.too_many_lines", file=path.name, lines=Number(len(lines), ","),
                                         limit=Number(MAX_UPLOAD_LINES, ",")))
    longest = max(range(len(lines)), key=lambda i: len(lines[i]), default=None)
    if longest is not None and len(lines[longest]) > MAX_UPLOAD_LINE_CHARS:
        raise datasets.DataError(message("train.error.line_too_long", line=longest + 1, file=path.name,
                                         chars=Number(len(lines[longest]), ","),
                                         limit=Number(MAX_UPLOAD_LINE_CHARS, ",")))
    return datasets.load_training_tsv(path)


@dataclass
class JobRequest:
    data: str = "reverse"            # copy | reverse | sort | multi30k | upload
    preset: str = "tiny"
    steps: int = 400
    minutes: float = 5.0
    upload: str | None = None        # path of an uploaded TSV
    data_dir: str | None = None      # Multi30K directory


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


class JobManager:
    """Runs at most one training job at a time and publishes finished models under ``published_dir``."""

    def __init__(self, runs_dir: str | Path | None = None, trainer: Callable[..., Trainer] = Trainer,
                 max_minutes: float = MAX_MINUTES, shared_minutes: float = SHARED_MINUTES):
        """``trainer``: what runs a job, called as ``Trainer`` is (tests give a quick stand-in); ``max_minutes``:
        the longest time limit a job may have (benchmarks run longer jobs than the tab offers); ``shared_minutes``:
        when a public visitor's job ends while another visitor waits."""
        self.max_minutes, self.shared_minutes = max_minutes, shared_minutes
        self._line: list[Waiter] = []  # visitors waiting for the slot, the next first
        self._ended_by: dict[str, JobState] = {}  # each visitor's last job, once another has taken the slot
        self.trainer = trainer
        self.runs_dir = Path(runs_dir or os.environ.get("EXPLORER_RUNS_DIR", DEFAULT_RUNS_DIR))
        self.published_dir = self.runs_dir / "app"
        self.held_dir = self.runs_dir / "app-stopped"  # stopped jobs' models, out of everyone's model list
        self.work_dir = self.runs_dir / "app-jobs"
        self._lock = threading.Lock()
        self._job: JobState | None = None
        self._cancel: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self._archives: dict[str, str] = {}
        self._trained_by: dict[str, str | None] = {}  # published model -> the visitor whose job made it
        self._starts: dict[str, list[float]] = {}  # client address -> when it started jobs, this last hour

    @property
    def current(self) -> JobState | None:
        return self._job

    def busy(self) -> bool:
        return self._job is not None and self._job.status == "running"

    def check(self, request: JobRequest) -> None:
        """Refuse a request that could never start (before its visitor waits for the slot); bound its numbers."""
        if training_disabled():
            raise JobError(message("train.error.turned_off", variable=DISABLE_VARIABLE))
        if request.preset not in APP_PRESETS:
            raise JobError(message("train.error.choose_size", sizes=", ".join(APP_PRESETS)))
        request.steps = clamp(request.steps, 10, MAX_STEPS, message("train.number_of_updates"))
        request.minutes = max(0.2, min(self.max_minutes, finite(request.minutes, message("train.minutes_name"))))

    def wait_in_line(self, request: JobRequest, owner: str, client: str | None) -> int | None:
        """Hold ``owner``'s place in line for the slot (joining at its end) while a job runs or others are ahead:
        their place (1: next), or None when the slot is theirs to take now with ``start``. A page asks each second;
        a place not asked about for ``WAITER_GONE_S`` is given up. One place per address."""
        with self._lock:
            self._drop_gone()
            now = time.monotonic()
            places = [waiter.owner for waiter in self._line]
            if not self.busy() and (not places or places[0] == owner):
                return None
            if self.busy() and self._job.owner == owner:
                raise JobError(message("train.error.yours_running", name=self._job.name))
            if owner in places:
                self._line[places.index(owner)].seen = now
                return places.index(owner) + 1
            if client is not None and any(waiter.client == client for waiter in self._line):
                raise JobError(message("train.error.address_waiting"))
            if len(self._line) >= MAX_WAITING:
                raise JobError(message("train.error.line_full", count=MAX_WAITING))
            self._line.append(Waiter(owner, client, request.minutes, now))
            return len(self._line)

    def place_of(self, owner: str) -> int | None:
        """``owner``'s place in line (1: next), None when they are not waiting."""
        with self._lock:
            return next((i + 1 for i, waiter in enumerate(self._line) if waiter.owner == owner), None)

    def expected_wait_s(self, place: int) -> float:
        """How long the visitor at ``place`` may wait, at most: the running job's time left (a public visitor's
        ends at ``shared_minutes`` now that someone waits), then the time limit of each visitor ahead."""
        with self._lock:
            job, ahead = self._job, self._line[:max(0, place - 1)]
            wait = 0.0
            if job is not None and job.status == "running":
                limit = min(job.request.minutes, self.shared_minutes) if job.shared else job.request.minutes
                wait = max(0.0, limit * 60 - job.training_seconds())
            for waiter in ahead:
                wait += 60 * (min(waiter.minutes, self.shared_minutes) if waiter.client is not None else waiter.minutes)
            return wait

    def _set_aside(self, ended: JobState | None) -> None:
        """An ended job gives way to a new one: its trainer's page still follows it (``job_of``). A stopped job's
        model nobody kept is removed, unless its job was ended for a waiting visitor and its trainer is here."""
        if ended is not None and ended.owner is not None:
            self._ended_by.pop(ended.owner, None)
            self._ended_by[ended.owner] = ended
            while len(self._ended_by) > MAX_TRACKED_CLIENTS:
                self._ended_by.pop(next(iter(self._ended_by)))
        kept = {job.held for job in self._ended_by.values() if job.cut and job.held}
        for held in self.held_dir.iterdir() if self.held_dir.is_dir() else ():
            if held.name not in kept:
                shutil.rmtree(held, ignore_errors=True)

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

    def _drop_gone(self) -> None:
        now = time.monotonic()
        self._line = [waiter for waiter in self._line if now - waiter.seen < WAITER_GONE_S]

    def start(self, request: JobRequest, owner: str | None = None, client: str | None = None) -> JobState:
        """Start a job for the visitor ``owner`` (None: the server itself); refused while another one runs or
        others wait ahead of them, and for a ``client`` (a public server's visitor, by address) that started
        ``JOBS_PER_CLIENT_HOUR`` jobs in the last hour. A client's job trains on half the cores, leaving the
        others to everyone else, and ends at ``shared_minutes`` while another visitor waits."""
        self.check(request)
        # An upload is read and checked before the lock: reading it must not hold up everyone else's requests.
        corpus = read_upload(request.upload) if request.data == "upload" and request.upload else None
        with self._lock:  # held while the request is checked, so two starts can never both pass
            self._drop_gone()
            if self.busy():
                stoppable = self._job.owner in (None, owner)
                raise SlotTaken(message("train.error.busy_stoppable" if stoppable else "train.error.busy",
                                        name=self._job.name, left=self._time_left()))
            if self._line and self._line[0].owner != owner:
                raise SlotTaken(message("train.error.others_waiting", count=len(self._line)))
            now = time.time()
            recent = [t for t in self._starts.get(client, []) if t > now - 3600]
            if client is not None and len(recent) >= JOBS_PER_CLIENT_HOUR:
                raise JobError(message("train.error.hourly", count=len(recent),
                                       left=time_left_text(recent[0] + 3600 - now)))
            config = self._config(request, corpus)  # a request that cannot run counts against no one
            if client is not None:
                self._starts[client] = recent + [now]
            name = Path(config.out_dir).name
            self._line = [waiter for waiter in self._line if waiter.owner != owner]
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
                raise JobError(message("train.error.not_yours", name=job.name, left=self._time_left()))
            self._cancel.set()
            return text(language, "train.stopping", name=job.name)

    def release(self, owner: str) -> None:
        """The visitor ``owner`` has left: the job they started may now be stopped by anyone, and their place in
        line is given up."""
        with self._lock:
            self._line = [waiter for waiter in self._line if waiter.owner != owner]
            self._ended_by.pop(owner, None)
            if self._job is not None and self._job.owner == owner:
                self._job = JobState(**{**self._job.__dict__, "owner": None})

    def _time_left(self) -> Message:
        """How long the current job has left, for a message; called with the lock held."""
        left = self._job.seconds_left() if self._job else None
        return message("train.ends_at_limit") if left is None else time_left_text(left)

    def wait(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _config(self, request: JobRequest, corpus: datasets.ParallelCorpus | None = None) -> TrainConfig:
        """The run a request asks for, with the settings the library chooses for it (``planning.run_settings``):
        "auto" leaves size, vocabulary, batch and schedule to the plan for its time limit; the fixed sizes train for
        the request's updates, or until the time ends, whichever comes first, with the learning rate ending with
        it."""
        data, label, probe = self._data(request, corpus)
        kind = planning.data_kind(data)
        settings = planning.run_settings(kind, request.preset, request.steps, request.minutes,
                                         pairs=len(corpus) if kind == "upload" else None, short_run=True)
        if kind != "synthetic":
            settings.update(data_dir=request.data_dir)
        name = re.sub(r"[^a-z0-9-]", "", f"{label}-{request.preset}-{time.strftime('%Y%m%d-%H%M%S')}")
        return TrainConfig(data=data, out_dir=str(self.work_dir / name), probe_sentences=probe, keep_checkpoints=1,
                           device=str(models_device()), **settings)

    def _data(self, request: JobRequest, corpus: datasets.ParallelCorpus | None) -> tuple[str, str, list[str]]:
        """(``TrainConfig.data``, the label of the job's name, its probe sentences) for the request's data; an
        upload is written into the work directory for the run to read."""
        if request.data in datasets.SYNTHETIC_TASKS:
            return request.data, request.data, [SYNTHETIC_PROBE]
        if request.data == "multi30k":
            try:
                datasets.multi30k_dir(request.data_dir, download=False)
            except datasets.DataError:
                raise JobError(MULTI30K_MISSING) from None
            return "multi30k", "multi30k", ["A young girl is playing with a red ball in the park."]
        if request.data != "upload":
            raise JobError(message("train.error.unknown_data", choice=repr(request.data)))
        if corpus is None:
            raise JobError(message("train.error.upload_first"))
        self.work_dir.mkdir(parents=True, exist_ok=True)
        handle, kept_name = tempfile.mkstemp(prefix="upload-", suffix=".tsv", dir=self.work_dir)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.writelines(f"{s}\t{t}\n" for s, t in zip(corpus.sources, corpus.targets))
        return kept_name, "upload", [corpus.sources[0]]

    def _update(self, **changes) -> None:
        with self._lock:
            job = self._job
            self._job = JobState(**{**job.__dict__, **changes})

    def _run(self, config: TrainConfig, cancel: threading.Event, shared: bool) -> None:
        """Train (``shared``: on the cores a visitor's job may take), then publish the model or say why not."""
        with CORES.reserve() if shared else contextlib.nullcontext():
            self._train(config, cancel)

    def _train(self, config: TrainConfig, cancel: threading.Event) -> None:
        def on_step(metrics: dict) -> None:
            self._update(steps=self._job.steps + [{k: metrics[k] for k in ("step", "loss", "lr", "tokens",
                                                                           "tokens_per_s", "elapsed_s")}])
            with self._lock:
                self._drop_gone()
                due = self._job.shared and self._line and metrics["elapsed_s"] >= self.shared_minutes * 60
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
            name = Path(config.out_dir).name
            history = run_history(Path(config.out_dir))
            status = "stopped" if final.get("stopped_by") == "cancel" else "finished"
            save_checkpoint((self.held_dir if status == "stopped" else self.published_dir) / name, trainer.model,
                            trainer.source_tokenizer, trainer.target_tokenizer, info=trainer.info(),
                            extra_files=history)
            self._trained_by[name] = self._job.owner
            if status == "finished":
                self.keep_newest(KEPT_MODELS)
            self._update(status=status, ended=time.time(),
                         said=self._outcome(config, trainer, final, status, name),
                         **({"checkpoint": name} if status == "finished" else {"held": name}))
        except datasets.DataError as error:
            self._update(status="failed", ended=time.time(),
                         said=message("train.failed.no_start", problem=in_words(error)))
        except FloatingPointError as error:
            self._update(status="failed", ended=time.time(),
                         said=message("train.failed.diverged", problem=in_words(error)))
        except (RuntimeError, MemoryError) as error:
            out_of_memory = "out of memory" in str(error).lower() or isinstance(error, MemoryError)
            log.exception("training job failed")
            self._update(status="failed", ended=time.time(),
                         said=message("train.failed.memory") if out_of_memory else
                         message("train.failed.error", problem=in_words(error)))
        except Exception as error:  # keep the server serving whatever a job does
            log.exception("training job crashed")
            self._update(status="failed", ended=time.time(),
                         said=message("train.failed.crashed", problem=in_words(error)))
        finally:
            if config.data.endswith(".tsv") and Path(config.data).parent == self.work_dir:
                Path(config.data).unlink(missing_ok=True)
            trainer = None
            release_memory()

    def _outcome(self, config: TrainConfig, trainer: Trainer, final: dict, status: str, name: str) -> Message:
        """How a job that trained ended: when, its score, and where its model is."""
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
        if self._job.cut:
            ending = message("train.ending.cut", ending=ending, minutes=Number(self.shared_minutes, "g"))
        return message(f"train.ended.{status}", ending=ending, summary=summary, where=where)

    def keep(self, owner: str | None, language: str = ENGLISH) -> str:
        """Add a stopped job's model to the model list; only its trainer may (``owner`` None: the server)."""
        with self._lock:
            job = self._job_of(owner)
            if job is None or job.held is None:
                job = self._job  # what the page shows: the job that has the slot
            if job is None or job.held is None or not (self.held_dir / job.held).is_dir():
                raise JobError(message("train.error.nothing_to_keep"))
            if owner is not None and self._trained_by.get(job.held) != owner:
                raise JobError(message("train.error.keep_not_yours", name=job.held))
            self.published_dir.mkdir(parents=True, exist_ok=True)
            (self.held_dir / job.held).rename(self.published_dir / job.held)
            self._replace(job, checkpoint=job.held, held=None,
                          said=kept_where(job.said, message("train.where.kept", name=job.held)))
            name = job.held
        self.keep_newest(KEPT_MODELS)
        return text(language, "train.kept", name=name)

    def published(self) -> list[Path]:
        """The models trained in the app, oldest first."""
        if not self.published_dir.is_dir():
            return []
        return sorted((d for d in self.published_dir.iterdir() if (d / "config.json").is_file()),
                      key=lambda d: (d / "config.json").stat().st_mtime)

    def keep_newest(self, count: int) -> list[str]:
        """Remove all but the ``count`` newest models trained in the app (never a bundled one: those live
        elsewhere), with their run directories; returns the names removed."""
        removed = [d.name for d in self.published()[:max(0, len(self.published()) - count)]]
        for name in removed:
            self._remove(name)
            log.info("removed %s: only the %d newest models trained in the app are kept", name, count)
        return removed

    def delete(self, name: str, owner: str | None, language: str = ENGLISH) -> str:
        """Delete a model trained in the app; only the visitor whose job made it may (``owner`` None: the server).
        Returns what happened, for the user (in ``language``)."""
        if not name or "/" in name or not (self.published_dir / name).is_dir():
            raise JobError(message("train.error.not_app_model", name=repr(name)))
        if owner is not None and self._trained_by.get(name) != owner:
            raise JobError(message("train.error.delete_not_yours", name=name))
        self._remove(name)
        return text(language, "train.deleted", name=name)

    def _remove(self, name: str) -> None:
        with self._lock:
            shutil.rmtree(self.published_dir / name, ignore_errors=True)
            shutil.rmtree(self.work_dir / name, ignore_errors=True)
            archive = self._archives.pop(name, None)
            if archive:
                Path(archive).unlink(missing_ok=True)
            self._trained_by.pop(name, None)

    def archive(self, name: str) -> str:
        """A zip of a published checkpoint, for download."""
        directory = self.published_dir / name
        if not name or "/" in name or not directory.is_dir():
            raise JobError(message("train.error.no_archive"))
        if name not in self._archives or not Path(self._archives[name]).is_file():
            target = Path(tempfile.mkdtemp(prefix="checkpoint-")) / name
            self._archives[name] = shutil.make_archive(str(target), "zip", root_dir=directory)
        return self._archives[name]


def kept_where(said: Message | None, where: Message) -> Message | None:
    """A stopped job's outcome once its model is kept: where the model is now, in place of how to keep it."""
    if said is None:
        return None
    held = message("train.where.held")
    return dataclasses.replace(said, values=tuple((name, where if value == held else value)
                                                  for name, value in said.values))
