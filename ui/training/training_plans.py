"""What a training job would be before it starts: the run a request asks for (``run_config``), and, said in the
page's language, a size's parameters and the plan "auto" fits to a time limit (``transformer.train.planning``)
from this machine's measured speed."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from transformer import data as datasets
from transformer.errors import InputError
from transformer.paper.config import ModelConfig, preset
from transformer.paper.model import Transformer
from transformer.train import calibrate, planning
from transformer.train.budget import BudgetPlan
from transformer.train.settings import AUTO_PRESET, TrainConfig, use_bf16

from ..runtime.costly import CORES
from ..runtime.gpu import models_device
from ..runtime.language import Message, message, percent

SYNTHETIC_PROBE = "3 1 4 1 5 9 2 6"  # what a job on a digit task translates at each evaluation, for the probe

MAX_MINUTES = 15.0  # a visitor may hold the server's one training slot this long
# Said where Multi30K is not on this server, in the page's language (ui/locales/<language>/train.json).
MULTI30K_MISSING = message("train.multi30k_missing")


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
    return plan.said(lambda key, **values: message(f"train.{key}", **values))


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


class JobError(InputError):
    """Why a training request cannot be done now (a job started, kept, deleted), phrased for the user."""


@dataclass
class JobRequest:
    data: str = "reverse"            # copy | reverse | sort | multi30k | upload
    preset: str = "tiny"
    steps: int = 400
    minutes: float = 5.0
    upload: str | None = None        # path of an uploaded TSV
    data_dir: str | None = None      # Multi30K directory


def run_config(request: JobRequest, corpus: datasets.ParallelCorpus | None, work_dir: Path) -> TrainConfig:
    """The run a request asks for, with the settings the library chooses for it (``planning.run_settings``):
    "auto" leaves size, vocabulary, batch and schedule to the plan for its time limit; the fixed sizes train for
    the request's updates, or until the time ends, whichever comes first, with the learning rate ending with
    it."""
    data, label, probe = run_data(request, corpus, work_dir)
    kind = planning.data_kind(data)
    settings = planning.run_settings(kind, request.preset, request.steps, request.minutes,
                                     pairs=len(corpus) if kind == "upload" else None, short_run=True)
    if kind != "synthetic":
        settings.update(data_dir=request.data_dir)
    name = re.sub(r"[^a-z0-9-]", "", f"{label}-{request.preset}-{time.strftime('%Y%m%d-%H%M%S')}")
    return TrainConfig(data=data, out_dir=str(work_dir / name), probe_sentences=probe, keep_checkpoints=1,
                       device=str(models_device()), **settings)


def run_data(request: JobRequest, corpus: datasets.ParallelCorpus | None, work_dir: Path) -> tuple[str, str, list[str]]:
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
    work_dir.mkdir(parents=True, exist_ok=True)
    handle, kept_name = tempfile.mkstemp(prefix="upload-", suffix=".tsv", dir=work_dir)
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.writelines(f"{s}\t{t}\n" for s, t in zip(corpus.sources, corpus.targets))
    return kept_name, "upload", [corpus.sources[0]]
