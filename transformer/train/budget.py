"""A run planned for the work a time budget buys: model size, dropout, vocabulary, batch, learning rate and warm-up
chosen by the updates and epochs this machine can make in the minutes given, not by the minutes themselves.

Within a fixed time, a model too large for it sees too little data and one too small cannot use what it sees, so
the budget picks the size (the lesson of "cramming" a model into a day, Geiping and Goldstein, 2023, and of
training speedruns). How much a minute buys differs threefold between two CPUs and a hundredfold on a GPU, so the
plan starts from measured speed (``calibrate.measure``: a few timed updates of each size) and chooses by work:
the largest size whose expected updates reach what it needs to beat the next smaller one, then dropout by the
expected number of passes over the data (a model that sees the data many times overfits without it; one that sees
it a few times loses more updates to dropout than it gains). The schedule decays by the clock
(``settings.decay_progress``) and reaches its end when the time does. ``plan_for_work`` is a pure function
of the budget, the measured speeds and the corpus's size, and is monotone (tested): more work never gives a
smaller model, more epochs never less dropout.

    python -m transformer.train --data multi30k --preset auto --max-minutes 5
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, TypeVar

from ..paper.config import PRESETS

# What a plan says, in English, by key: ``{placeholders}`` with the format spec each number is written in (the
# app's pages say the same in other languages: ui/locales/*/train.json, train.<key>).
PLAN_WORDS: dict[str, str] = json.loads(Path(__file__).with_name("plan.json").read_text(encoding="utf-8"))
T = TypeVar("T")

STEPS_CAP = 1_000_000  # a planned run ends by the clock; this only bounds it
# An evaluation (validation loss, and greedy BLEU on a sample) takes about as long as this many updates: 3 to 14 s
# (the first, of a model that writes long nonsense, the longest) against 0.54 s per update, d_model 192 in a
# 15-minute Multi30K job on the 2-core AMD EPYC. Both scale with the machine's speed.
EVALUATION_UPDATES = 10

@dataclass(frozen=True)
class Size:
    """One rung of the ladder of sizes a budget chooses from, with the batch and peak learning rate it trains with.

    ``needs_updates``: about the updates it takes to beat the rung below in the same time; below that, the smaller
    model's extra updates win (see ``LADDER`` for what was measured and what was not)."""

    name: str
    model: dict                        # overrides of the "small" preset
    max_tokens: int
    lr: float
    vocab_size: int
    needs_updates: int
    evaluations: int = 5               # spread over the budget; each costs time the run could train in

    def sizes(self) -> dict:
        return {**PRESETS["small"], **self.model}


def _layers(d_model: int, layers: int, heads: int = 4) -> dict:
    """A feed-forward layer 4 x d_model wide (the paper's ratio), as many decoder layers as encoder layers."""
    return dict(d_model=d_model, n_heads=heads, n_encoder_layers=layers, n_decoder_layers=layers, d_ff=4 * d_model)


# Smallest first. Measured on Multi30K on the 2-core AMD EPYC: in five minutes, d_model 192 (646 updates) beat 128
# (852 updates; 28.3 against 27.1 val BLEU) and 256 with 2+2 layers (374 updates, 23.2); vocabularies of 3,000 or
# 6,000 and batches of 4,000 tokens did worse than 4,000 pieces and 2,500 tokens; d_model 192 with 539 updates
# still reached 26.1. So d_model 192 needs about 400. The bundled models' recipe (d_model 256, 3+3 layers, dropout
# 0.3) reached 38 with 3,600 updates; where it overtakes d_model 192 is not measured: 3,000 is a judgement, as is
# the threshold of the paper's base model, a GPU's size (no GPU has been lent to this project).
LADDER = (
    Size("d128", _layers(128, 2), max_tokens=2500, lr=2e-3, vocab_size=4000, needs_updates=0),
    Size("d192", _layers(192, 2), max_tokens=2500, lr=2e-3, vocab_size=4000, needs_updates=400),
    Size("d256", _layers(256, 3), max_tokens=4000, lr=1.5e-3, vocab_size=8000, needs_updates=3000, evaluations=10),
    Size("d512", _layers(512, 6, heads=8), max_tokens=16000, lr=1e-3, vocab_size=8000, needs_updates=6000,
         evaluations=10),
)


@dataclass(frozen=True)
class Speed:
    """One size's measured speed on this machine: seconds per update, and the target tokens an update trains on."""

    update_s: float
    tokens_per_update: float

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_update / self.update_s


def expected_updates(size: Size, speed: Speed, seconds: float) -> int:
    """The updates ``seconds`` of a run of ``size`` buy at ``speed``, the time of its evaluations taken out."""
    return max(0, int(seconds / speed.update_s) - size.evaluations * EVALUATION_UPDATES)


def affordable(size: Size, speed: Speed, seconds: float) -> bool:
    return expected_updates(size, speed, seconds) >= size.needs_updates


def dropout_for_epochs(epochs: float) -> tuple[float, float]:
    """(dropout, attention dropout) for a run that passes over its data ``epochs`` times: none below 10 (in 15
    minutes on the AMD EPYC, 8 epochs did better without), the bundled recipe's 0.3 and 0.1 from 24 (26 epochs);
    a 2-core Intel Xeon's 15 epochs without dropout did no better than its 5 without."""
    steps = ((24, 0.3, 0.1), (16, 0.2, 0.0), (10, 0.1, 0.0))
    return next(((dropout, attention) for least, dropout, attention in steps if epochs >= least), (0.0, 0.0))


def warmup_for_updates(updates: int) -> int:
    """Warm-up: a sixteenth of the run, at least 100 updates (the measured 5- and 15-minute plans), at most the
    500 of the bundled recipe."""
    return min(500, max(100, updates // 16))


@dataclass(frozen=True)
class BudgetPlan:
    """What a budget decides: the model (overrides of ``base``), how to train it, and what it expects."""

    base: str = "small"                # the preset ``model`` overrides
    model: dict = field(default_factory=dict)
    vocab_size: int | None = 8000      # None: the task's own symbols (the digit tasks)
    max_tokens: int = 4000
    lr: float = 1.5e-3
    warmup_steps: int = 500
    schedule: str = "cosine"
    evaluations: int = 5
    expected_updates: int | None = None
    expected_epochs: float | None = None
    measured: dict = field(default_factory=dict)   # Speed fields by size, as measured for this plan
    # Why this size: the measured speed of the chosen size, and the next larger size's d_model, the updates it
    # would make and the updates it needs.
    tokens_per_s: float | None = None
    larger: tuple[int, int, int] | None = None

    def sizes(self) -> dict:
        """The model's sizes: the base preset's with this plan's overrides."""
        return {**PRESETS[self.base], **self.model}

    def said(self, say: Callable[..., T]) -> T:
        """The plan for people: "d_model 192, 2+2 layers, ... ; expects about 1,600 updates (8 epochs): why", as
        ``say(key, **values)`` says each part of it (``PLAN_WORDS``' keys; the values raw numbers, which a
        sentence writes by its own format spec, or what ``say`` made of the smaller parts)."""
        m = self.sizes()
        schedule = f"plan.schedule.{self.schedule}"
        model = say("plan.model", d_model=m["d_model"], encoder_layers=m["n_encoder_layers"],
                    decoder_layers=m["n_decoder_layers"], d_ff=m["d_ff"], heads=m["n_heads"], dropout=m["dropout"],
                    vocabulary=say("plan.vocabulary", size=self.vocab_size) if self.vocab_size else "",
                    tokens=self.max_tokens, lr=self.lr, warmup=self.warmup_steps,
                    schedule=say(schedule) if schedule in PLAN_WORDS else self.schedule)
        expects = why = ""
        if self.expected_updates is not None:
            expects = say("plan.expects", updates=self.expected_updates, epochs=self.expected_epochs)
            if self.tokens_per_s is not None:
                larger = ""
                if self.larger is not None:
                    d_model, could, needs = self.larger
                    larger = say("plan.larger", d_model=d_model, could=could, needs=needs)
                why = say("plan.why", speed=self.tokens_per_s, larger=larger)
        return say("plan", model=model, expects=expects, why=why)

    def describe(self) -> str:
        """The plan in English, as the command line and the run's log say it."""
        return self.said(lambda key, **values: PLAN_WORDS[key].format(**values))


# The synthetic digit tasks: the tiny preset learns them in a minute whatever the budget.
SYNTHETIC_PLAN = BudgetPlan("tiny", dict(dropout=0.0), vocab_size=None, max_tokens=2000, lr=3e-3, warmup_steps=100)


def plan_for_work(minutes: float, speeds: Mapping[str, Speed], epoch_tokens: int, pairs: int | None = None,
                  spent_s: float = 0.0) -> BudgetPlan:
    """The plan for ``minutes`` of training, of which ``spent_s`` went on measuring ``speeds`` (by ``Size.name``;
    a size not measured is not chosen), over a corpus of ``epoch_tokens`` target tokens and ``pairs`` pairs (a
    corpus smaller than Multi30K's 29,000 shrinks the vocabulary: sentencepiece cannot learn more pieces than the
    text holds)."""
    if not minutes > 0:  # also NaN
        raise ValueError("a run planned for a time budget needs a positive number of minutes")
    if LADDER[0].name not in speeds:
        raise ValueError(f"the smallest size, {LADDER[0].name}, must be measured")
    seconds = 60 * minutes - spent_s
    measured = [size for size in LADDER if size.name in speeds]
    size = [size for size in measured if affordable(size, speeds[size.name], seconds)][-1]
    speed = speeds[size.name]
    updates = expected_updates(size, speed, seconds)
    epochs = round(updates * speed.tokens_per_update / max(1, epoch_tokens), 1)  # as shown, and as chosen by
    dropout, attention_dropout = dropout_for_epochs(epochs)
    larger = LADDER[LADDER.index(size) + 1] if size is not LADDER[-1] else None
    instead = None
    if larger is not None and larger.name in speeds:
        instead = (larger.sizes()["d_model"], expected_updates(larger, speeds[larger.name], seconds),
                   larger.needs_updates)
    vocab_size = size.vocab_size if pairs is None else min(size.vocab_size, max(200, pairs // 2))
    return BudgetPlan(model={**size.model, "dropout": dropout, "attention_dropout": attention_dropout},
                      vocab_size=vocab_size, max_tokens=size.max_tokens, lr=size.lr,
                      warmup_steps=warmup_for_updates(updates), evaluations=size.evaluations,
                      expected_updates=updates, expected_epochs=epochs,
                      measured={name: dataclasses.asdict(speed) for name, speed in speeds.items()},
                      tokens_per_s=speed.tokens_per_s, larger=instead)

