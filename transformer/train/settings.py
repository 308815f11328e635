"""What a training run is: its settings (written into every checkpoint it saves, so the run can be repeated), the
plan that fills them in for a time budget, and the learning-rate schedule they define."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..paper.config import PRESETS
from .budget import STEPS_CAP, BudgetPlan


@dataclass
class TrainConfig:
    """Everything a run needs; written into each checkpoint's config.json so the run can be repeated."""

    data: str = "reverse"                 # copy | reverse | sort | multi30k | a .tsv file
    data_dir: str | None = None           # Multi30K directory (else $MULTI30K_DIR, else download)
    src_lang: str = "en"
    tgt_lang: str = "de"
    preset: str = "tiny"                  # a size of config.PRESETS, or "auto": planned for max_minutes (budget.py)
    model: dict = field(default_factory=dict)   # overrides of the preset, e.g. {"d_model": 128}
    plan: str | None = None               # "auto" once sizes and schedule were planned for max_minutes
    vocab_size: int = 8000                # sentencepiece pieces (per language without a joint vocabulary)
    joint_vocabulary: bool = True         # one tokenizer for both languages; else one each, separate embeddings
    max_tokens: int = 2000                # padded tokens per batch (per process)
    steps: int = 500                      # optimizer updates
    max_minutes: float | None = None      # wall-clock budget (updates and evaluations): the run stops there, and a
                                          # decaying schedule ends there when it comes before `steps`
    lr: float = 3e-3                      # peak learning rate
    warmup_steps: int = 100
    schedule: str = "cosine"               # noam | cosine | linear | plateau | constant
    label_smoothing: float = 0.1
    clip_norm: float = 1.0
    accumulate: int = 1                   # micro-batches per update
    weight_decay: float = 0.0
    seed: int = 0
    eval_every: int = 100
    eval_every_minutes: float | None = None   # also evaluate this often by the clock (runs a time limit cuts short)
    eval_sentences: int | None = None     # cap on validation sentences decoded for BLEU
    out_dir: str = "runs/reverse-tiny"
    precision: str = "auto"               # auto | bf16 | fp32
    keep_checkpoints: int = 5             # step-NNNNNN/ directories kept for averaging
    average_last: int = 0                 # at the end, average this many step checkpoints into averaged/
    synthetic_size: int = 20000           # fresh synthetic examples per epoch
    probe_sentences: list[str] = field(default_factory=list)
    threads: int | None = None
    device: str | None = None             # a torch device; None: CUDA when PyTorch sees a GPU, else the CPU

    def validate(self) -> None:
        if self.preset not in (*PRESETS, AUTO_PRESET):
            raise ValueError(f"unknown preset {self.preset!r}; choose one of {', '.join(PRESETS)} or {AUTO_PRESET}")
        if self.preset == AUTO_PRESET and not (self.max_minutes or 0) > 0:
            raise ValueError(f"preset {AUTO_PRESET} plans the run for its time limit: give it a time limit "
                             "(--max-minutes)")
        if self.schedule not in ("noam", "cosine", "linear", "plateau", "constant"):
            raise ValueError(f"unknown schedule {self.schedule!r}")
        if self.precision not in ("auto", "bf16", "fp32"):
            raise ValueError(f"unknown precision {self.precision!r}")
        if self.steps < 1 or self.max_tokens < 8 or self.accumulate < 1 or self.eval_every < 1:
            raise ValueError("steps, accumulate and eval_every must be positive, max_tokens at least 8")
        if self.lr <= 0 or not 0 <= self.label_smoothing < 1:
            raise ValueError("lr must be positive and label_smoothing in [0, 1)")
        if self.eval_sentences is not None and self.eval_sentences < 1:
            raise ValueError("eval_sentences must be at least 1")
        if self.eval_every_minutes is not None and self.eval_every_minutes <= 0:
            raise ValueError("eval_every_minutes must be positive")


AUTO_PRESET = "auto"
# What a plan for a time budget chooses, where the config leaves them at their defaults.
PLANNED_FIELDS = ("vocab_size", "max_tokens", "steps", "lr", "warmup_steps", "schedule", "eval_every",
                  "eval_every_minutes")


def plan_config(config: TrainConfig, plan: BudgetPlan) -> TrainConfig:
    """``config`` (preset "auto") with the model, vocabulary, batch and schedule of ``plan`` (``budget``), where
    ``config`` leaves them at TrainConfig's defaults: what was set by hand stays, as do the model sizes
    ``config.model`` sets. The run then ends by the clock."""
    config.validate()
    if config.preset != AUTO_PRESET:
        return config
    chosen = dict(vocab_size=plan.vocab_size or config.vocab_size, max_tokens=plan.max_tokens, steps=STEPS_CAP,
                  lr=plan.lr, warmup_steps=plan.warmup_steps, schedule=plan.schedule, eval_every=STEPS_CAP,
                  eval_every_minutes=config.max_minutes / plan.evaluations)
    defaults = TrainConfig()
    return dataclasses.replace(config, preset=plan.base, plan=AUTO_PRESET, model={**plan.model, **config.model},
                               **{name: value for name, value in chosen.items()
                                  if getattr(config, name) == getattr(defaults, name)})


# --- schedule ------------------------------------------------------------------------------------

def decay_progress(config: TrainConfig, step: int, elapsed_s: float | None = None,
                   warmup_end_s: float | None = None) -> float:
    """How far a decaying schedule is past its warm-up, 0 to 1, by whichever budget runs out first.

    By updates: of the ``steps - warmup`` that follow warm-up. By the clock, when the run has a time limit: of the
    seconds between the end of warm-up (``warmup_end_s``) and the limit. A schedule planned over updates that the
    clock never allows would otherwise be cut off at a high learning rate; this way it ends when the time does.
    Neither reaches 1 at the last update, which would be wasted at learning rate 0.
    """
    warmup = max(1, config.warmup_steps)
    progress = (step - warmup) / (max(0, config.steps - warmup) + 1)
    if config.max_minutes is not None and elapsed_s is not None:
        start = warmup_end_s if warmup_end_s is not None else elapsed_s
        budget = 60 * config.max_minutes - start
        if budget > 0:
            progress = max(progress, (elapsed_s - start) / budget)
    return min(1.0, max(0.0, progress))


def learning_rate(config: TrainConfig, step: int, elapsed_s: float | None = None,
                  warmup_end_s: float | None = None) -> float:
    """Learning rate for update ``step`` (1-based), ``elapsed_s`` into the run, before any plateau reduction."""
    warmup = max(1, config.warmup_steps)
    if step <= warmup:
        return config.lr * step / warmup
    if config.schedule == "noam":  # section 5.3: decays with the inverse square root of the step
        return config.lr * math.sqrt(warmup / step)
    if config.schedule == "cosine":
        return config.lr * 0.5 * (1 + math.cos(math.pi * decay_progress(config, step, elapsed_s, warmup_end_s)))
    if config.schedule == "linear":
        return config.lr * (1 - decay_progress(config, step, elapsed_s, warmup_end_s))
    return config.lr  # constant, or plateau (reduced at evaluations)


def use_bf16(config: TrainConfig, device: torch.device) -> bool:
    if config.precision != "auto":
        return config.precision == "bf16"
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    try:  # on CPUs with native bf16 arithmetic, autocast roughly doubles throughput
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def set_learning_rate(config: TrainConfig, optimizer: torch.optim.Optimizer, step: int, clock) -> float:
    """The optimizer set to update ``step``'s learning rate (1-based; ``clock``: the run's ``RunClock``), which is
    returned; after warm-up the plateau schedule's own, as it last reduced it."""
    if config.schedule == "plateau" and step > config.warmup_steps + 1:
        return optimizer.param_groups[0]["lr"]
    lr = learning_rate(config, step, clock.agreed_elapsed_s(), clock.warmup_end_s)
    for group in optimizer.param_groups:
        group["lr"] = lr
    return lr

