"""Choosing a run's settings, one way for the command line and the app's Train tab: from the kind of data, the size
(a preset, or "auto": planned for the time limit when the run starts), the updates or minutes, and the corpus's size.

    run_settings("synthetic", "tiny", steps=400, minutes=5, short_run=True)   # the app's tiny run on digits
    run_settings("multi30k", "auto", minutes=5)                                  # sized for 5 minutes at the start

A planned run ("auto", ``budget.py``) chooses the model for a time budget when it starts, from this machine's speed
measured then (``planned_config``). A short run of a chosen size (the app's, minutes long) takes settings tuned for
its number of updates on its kind of data: the digit tasks learn from short sequences with a high learning rate and
no dropout; Multi30K and an uploaded corpus take the paper's warm-up, scaled down to the run, and an upload's
vocabulary is bounded by its size. Other runs of a chosen size take ``TrainConfig``'s defaults, and all of them what
was set by hand.
"""

from __future__ import annotations

import dataclasses
import logging

from .. import data as datasets
from . import calibrate
from .budget import SYNTHETIC_PLAN, BudgetPlan
from .processes import Processes
from .settings import AUTO_PRESET, TrainConfig, plan_config

log = logging.getLogger(__name__)

KINDS = ("synthetic", "multi30k", "upload")
QUICK_EVAL_SENTENCES = 200  # an evaluation during a short run decodes this many validation sentences
CLOCK_EVALUATIONS = 10  # a short run with a time limit also evaluates this often over it, so one cut short still
                        # draws its curves


def data_kind(data: str) -> str:
    """The kind of a ``TrainConfig.data``: "synthetic" (a digit task), "multi30k", or "upload" (a .tsv file)."""
    if data in datasets.SYNTHETIC_TASKS:
        return "synthetic"
    return "multi30k" if data == "multi30k" else "upload"


def tuned_for_updates(kind: str, steps: int, pairs: int | None = None) -> dict:
    """``TrainConfig`` settings for ``steps`` updates on data of ``kind``; ``pairs``: an upload's sentence pairs."""
    if kind == "synthetic":
        return dict(lr=3e-3, warmup_steps=min(100, steps // 5), max_tokens=2000, eval_every=max(10, steps // 10),
                    model={"dropout": 0.0})
    if kind == "multi30k":
        return dict(lr=1e-3, warmup_steps=min(400, steps // 5), max_tokens=4000, eval_every=max(50, steps // 8),
                    eval_sentences=QUICK_EVAL_SENTENCES)
    if kind == "upload":
        return dict(lr=1e-3, warmup_steps=min(200, steps // 5), max_tokens=3000, eval_every=max(20, steps // 8),
                    eval_sentences=QUICK_EVAL_SENTENCES, vocab_size=min(8000, max(200, (pairs or 0) // 2)))
    raise ValueError(f"no settings for data of kind {kind!r}; the kinds are {', '.join(KINDS)}")


def run_settings(kind: str, preset: str, steps: int | None = None, minutes: float | None = None,
                 pairs: int | None = None, short_run: bool = False, given: dict | None = None) -> dict:
    """``TrainConfig`` settings for a run of ``preset`` (or "auto") on data of ``kind``, for ``steps`` updates or
    ``minutes`` of training, whichever ends first; ``pairs``: the corpus's size, where known. ``short_run``: the
    app's runs of minutes, tuned for their updates and evaluated on a sample; ``given``: settings chosen by hand,
    which stay. "auto" leaves the rest to the plan made when the run starts (``planned_config``)."""
    settings = dict(preset=preset, max_minutes=minutes)
    if preset == AUTO_PRESET:
        if short_run and kind != "synthetic":
            settings.update(eval_sentences=QUICK_EVAL_SENTENCES)
    elif short_run:
        settings.update(steps=steps, schedule="cosine", **tuned_for_updates(kind, steps, pairs))
        if minutes is not None:
            settings.update(eval_every_minutes=minutes / CLOCK_EVALUATIONS)
    elif steps is not None:
        settings.update(steps=steps)
    return {**settings, **(given or {})}


def plan_for(kind: str, minutes: float, shape: calibrate.CorpusShape | None = None,
             measurement: calibrate.Measurement | None = None, world_size: int = 1) -> BudgetPlan:
    """The plan "auto" makes for ``minutes`` on data of ``kind``: the digit tasks' own, else what this machine's
    ``measurement`` buys for a corpus of ``shape`` (an upload's size also bounds its vocabulary)."""
    if kind == "synthetic":
        return SYNTHETIC_PLAN
    return measurement.plan(minutes, shape, shape.pairs if kind == "upload" else None, world_size)


def planned_config(config: TrainConfig, train: datasets.ParallelCorpus | None, processes: Processes,
                   bf16: bool) -> tuple[TrainConfig, BudgetPlan | None, float]:
    """``config`` planned for its time limit if its preset is "auto" (else as it is), the plan, and the seconds
    measuring took, which count against the limit on the run's clock. A text corpus (``train``; None for the
    digit tasks, which need no plan) is planned for from this machine's speed measured now on batches shaped like
    its own, by the first process, which every other then follows; an upload's size bounds the vocabulary."""
    if config.preset != AUTO_PRESET:
        return config, None, 0.0
    if train is None:
        plan = plan_for("synthetic", config.max_minutes)
        return plan_config(config, plan), plan, 0.0
    shape = calibrate.CorpusShape.of(train)
    measurement = (calibrate.measure(shape, 60 * config.max_minutes, processes.device, bf16)
                   if processes.rank == 0 else None)
    measurement = processes.from_first([measurement])[0]
    plan = plan_for(data_kind(config.data), config.max_minutes, shape, measurement, processes.world_size)
    log.info("planned for %g minutes after %.1f s measuring: %s", config.max_minutes, measurement.seconds,
             plan.describe())
    return plan_config(config, plan), plan, measurement.seconds


def run_info(config: TrainConfig, data: str, data_files: dict[str, str], step: int, budget_plan: dict | None) -> dict:
    """What a run's config.json records besides the model config: its settings, data (described, with its files'
    checksums), step, plan, and the languages it translates between (a synthetic task's are digits)."""
    languages = ((config.src_lang, config.tgt_lang) if data_kind(config.data) != "synthetic"
                 else ("digits", "digits"))
    return {"training": dataclasses.asdict(config), "data": data, "data_files_sha256": data_files, "step": step,
            "budget_plan": budget_plan, "source_lang": languages[0], "target_lang": languages[1]}

