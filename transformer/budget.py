"""A run planned for the minutes there are: model size, vocabulary, batch, learning rate and warm-up for a
wall-clock budget, instead of for a number of updates the clock may never allow.

Within a fixed time, a model too large for it sees too little data and one too small cannot use what it sees, so
the budget picks the size (the lesson of "cramming" a model into a day, Geiping and Goldstein, 2023, and of
training speedruns). The schedule then decays by the clock (``train_config.decay_progress``) and reaches its end when the
time does. The sizes below were measured on the project's 2-core CPU on Multi30K (``benchmarks/time_to_bleu.py``,
figures in the README); a GPU does far more in a minute, so it gets the larger sizes sooner.

    python -m transformer.train --data multi30k --preset auto --max-minutes 5
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch

from .config import PRESETS

STEPS_CAP = 1_000_000  # a planned run ends by the clock; this only bounds it


@dataclass(frozen=True)
class BudgetPlan:
    """What a budget decides: the model (overrides of the "small" preset) and how to train it."""

    up_to_minutes: float               # the largest budget on this device this plan is for
    base: str = "small"                # the preset ``model`` overrides
    model: dict = field(default_factory=dict)
    vocab_size: int | None = 8000      # None: the task's own symbols (the digit tasks)
    max_tokens: int = 4000
    lr: float = 1.5e-3
    warmup_steps: int = 500
    schedule: str = "cosine"
    evaluations: int = 5               # spread over the budget; each costs time the run could train in

    def sizes(self) -> dict:
        """The model's sizes: the base preset's with this plan's overrides."""
        return {**PRESETS[self.base], **self.model}

    def describe(self) -> str:
        """One line for people: "d_model 128, 2+2 layers, ffn 512, 4 heads, vocabulary 4,000, ..."."""
        m = self.sizes()
        vocabulary = f"vocabulary {self.vocab_size:,}, " if self.vocab_size else ""
        return (f"d_model {m['d_model']}, {m['n_encoder_layers']}+{m['n_decoder_layers']} layers, ffn {m['d_ff']}, "
                f"{m['n_heads']} heads, dropout {m['dropout']:g}, {vocabulary}batches of {self.max_tokens:,} tokens, "
                f"peak learning rate {self.lr:g} after {self.warmup_steps} warm-up updates, {self.schedule} decay "
                "to the end of the time")


def _layers(d_model: int, layers: int, dropout: float, attention_dropout: float = 0.0) -> dict:
    """Overrides of a plan's base preset (``BudgetPlan.base``): 4 heads, a feed-forward layer 4 x d_model wide (the
    paper's ratio), as many decoder layers as encoder layers."""
    return dict(d_model=d_model, n_heads=4, n_encoder_layers=layers, n_decoder_layers=layers, d_ff=4 * d_model,
                dropout=dropout, attention_dropout=attention_dropout)


# Measured on Multi30K on the project's 2-core AMD EPYC (float32; README, "Training in a time budget"). For five
# minutes d_model 192 with 2+2 layers beat 128 (too small to use what it saw) and 256 or 3+3 layers (fewer updates);
# vocabularies of 3,000 and 6,000 and batches of 4,000 tokens did worse than 4,000 and 2,500. For fifteen, the same
# model without dropout beat it with dropout 0.1 (32.7 against 32.1 val BLEU) and d_model 256 with dropout (24.4):
# runs this short see the data a few times, and dropout costs them more updates and learning per update than it
# saves them from overfitting. The shortest budgets get the smaller model by the same reasoning (not tuned
# separately); long ones train the bundled models' recipe.
CPU_PLANS = (
    BudgetPlan(2.5, model=_layers(128, 2, dropout=0.0), vocab_size=4000, max_tokens=2500, lr=2e-3, warmup_steps=60),
    BudgetPlan(25.0, model=_layers(192, 2, dropout=0.0), vocab_size=4000, max_tokens=2500, lr=2e-3, warmup_steps=100),
    BudgetPlan(float("inf"), model=_layers(256, 3, dropout=0.3, attention_dropout=0.1), vocab_size=8000,
               max_tokens=4000, lr=1.5e-3, warmup_steps=500, evaluations=10),
)
# Not measured (no GPU has been available to this project): the small preset for short budgets, then the paper's
# base model, whose 65M parameters a GPU trains at hundreds of thousands of tokens a second.
CUDA_PLANS = (
    BudgetPlan(3.0, model=_layers(256, 3, dropout=0.1), vocab_size=8000, max_tokens=8000, lr=1.5e-3,
               warmup_steps=200),
    BudgetPlan(float("inf"), model={**_layers(512, 6, dropout=0.1), "n_heads": 8}, vocab_size=8000,
               max_tokens=16000, lr=1e-3, warmup_steps=400, evaluations=10),
)
# The synthetic digit tasks: the tiny preset learns them in a minute whatever the budget.
SYNTHETIC_PLAN = BudgetPlan(float("inf"), "tiny", dict(dropout=0.0), vocab_size=None, max_tokens=2000, lr=3e-3,
                            warmup_steps=100)


def plan_for_budget(minutes: float, device_type: str = "cpu", synthetic: bool = False,
                    pairs: int | None = None) -> BudgetPlan:
    """The plan for ``minutes`` of training on a ``device_type`` ("cpu" or "cuda") device.

    ``pairs``: the training pairs of a corpus smaller than Multi30K's 29,000, whose vocabulary must shrink with it
    (sentencepiece cannot learn more pieces than the text holds). Synthetic tasks keep the tiny preset.
    """
    if not minutes > 0:  # also NaN
        raise ValueError("a run planned for a time budget needs a positive number of minutes")
    if synthetic:
        return SYNTHETIC_PLAN
    plans = CUDA_PLANS if device_type == "cuda" else CPU_PLANS
    plan = next(p for p in plans if minutes <= p.up_to_minutes)
    if pairs is not None:
        plan = dataclasses.replace(plan, vocab_size=min(plan.vocab_size, max(200, pairs // 2)))
    return plan


def plan_here(minutes: float, synthetic: bool = False, pairs: int | None = None) -> BudgetPlan:
    """The plan for ``minutes`` on the device training uses here: the GPU when PyTorch sees one."""
    return plan_for_budget(minutes, "cuda" if torch.cuda.is_available() else "cpu", synthetic, pairs)
