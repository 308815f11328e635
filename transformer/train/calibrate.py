"""How fast this machine trains each size a time budget may choose: a few timed updates on batches shaped like the
corpus's, so the plan (``budget.plan_for_work``) is made for the work the minutes buy here, not on another machine.

The batches hold random pieces: an update's time depends on the lengths and the vocabulary, not on which pieces.
Their lengths are the corpus's, in words, times the pieces a word becomes (``PIECES_PER_WORD``), since the
vocabulary that will split them is itself part of the plan.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

import torch

from .. import data as datasets
from ..cpu import speed_up
from ..paper.config import preset
from ..paper.model import Transformer
from ..paper.tokenizer import SPECIAL_PIECES
from .budget import LADDER, BudgetPlan, Size, Speed, affordable, plan_for_work
from .corpus import collate
from .loss import batch_loss

# Multi30K's sentences, with the end-of-sentence piece, become 1.2 (English, 8,000 pieces) to 1.47 (German,
# 4,000 pieces) pieces per word.
PIECES_PER_WORD = 1.4
# Measuring may take this share of a budget at most; the sizes it had no time for are not chosen.
MEASURING_SHARE = 0.04
# Updates timed for each size, after one untimed update that allocates memory: batches drawn at random from the
# corpus's, whose time varies by a fifth from one to the next.
TIMED_UPDATES = 6
SAMPLED_PAIRS = 5000  # enough pairs for the batches timed, and their lengths' spread
# A larger model runs its matrix products at most this much more efficiently than a smaller one (measured here
# between d_model 128 and 256: 41% and 56% of the CPU's peak). A size that is out of reach even then is not timed.
BEST_EFFICIENCY_GAIN = 2.0


@dataclass(frozen=True)
class CorpusShape:
    """The lengths of a corpus's pairs in pieces (end of sentence included), as the plan will see them."""

    lengths: tuple[tuple[int, int], ...]

    @classmethod
    def of(cls, corpus: datasets.ParallelCorpus) -> "CorpusShape":
        def pieces(sentence: str) -> int:
            return round(PIECES_PER_WORD * len(sentence.split())) + 1
        return cls(tuple((pieces(s), pieces(t)) for s, t in zip(corpus.sources, corpus.targets)))

    @property
    def epoch_tokens(self) -> int:
        """The target pieces one pass over the corpus trains on."""
        return sum(target for _, target in self.lengths)

    @property
    def pairs(self) -> int:
        return len(self.lengths)


@dataclass(frozen=True)
class Measurement:
    speeds: dict[str, Speed]
    seconds: float                     # spent measuring

    def plan(self, minutes: float, shape: CorpusShape, pairs: int | None = None, processes: int = 1) -> BudgetPlan:
        """``budget.plan_for_work`` for these speeds, the time measuring took counted against ``minutes``. Each of
        ``processes`` trains on its own batches: an epoch takes 1 / processes of the updates it takes one."""
        return plan_for_work(minutes, self.speeds, shape.epoch_tokens // processes, pairs, self.seconds)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_speed(size: Size, shape: CorpusShape, device: torch.device, bf16: bool = False) -> Speed:
    """``size``'s seconds per update and target tokens per update on ``device``, over ``TIMED_UPDATES`` batches
    after an untimed one. Without dropout: the plan chooses it afterwards."""
    rng = random.Random(0)
    lengths = [(source, target) for source, target in shape.lengths if max(source, target) <= size.sizes()["max_len"]]
    if not lengths:
        raise datasets.DataError(code="data.all_too_long", max_len=size.sizes()["max_len"])
    examples = [([rng.randrange(len(SPECIAL_PIECES), size.vocab_size) for _ in range(source)],
                 [rng.randrange(len(SPECIAL_PIECES), size.vocab_size) for _ in range(target)])
                for source, target in rng.sample(lengths, min(len(lengths), SAMPLED_PAIRS))]
    batches = datasets.token_batches(examples, size.max_tokens, seed=0)
    chosen = [batches[i % len(batches)] for i in range(TIMED_UPDATES + 1)]
    config = preset("small", size.vocab_size, size.vocab_size, **{**size.model, "dropout": 0.0,
                                                                  "attention_dropout": 0.0})
    model = speed_up(Transformer(config)).to(device).train()  # as the trainer's model
    optimizer = torch.optim.AdamW(model.parameters(), lr=size.lr)
    seconds, tokens = 0.0, 0
    for number, batch in enumerate(chosen):
        src, tgt_in, tgt_out = collate([examples[i] for i in batch], device)
        _synchronize(device)
        started = time.perf_counter()
        batch_tokens = int((tgt_out != config.pad_id).sum())
        # Label smoothing and clipping as in training; their values do not change an update's time.
        (batch_loss(model, src, tgt_in, tgt_out, 0.1, bf16) / batch_tokens).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        _synchronize(device)
        if number:  # the first update is the untimed one
            seconds, tokens = seconds + time.perf_counter() - started, tokens + batch_tokens
    timed = len(chosen) - 1
    return Speed(update_s=seconds / timed, tokens_per_update=tokens / timed)


def _cost(size: Size) -> float:
    """An update's work, roughly: parameters of the layers times tokens in the batch."""
    m = size.sizes()
    return m["d_model"] * (m["d_model"] + m["d_ff"]) * (m["n_encoder_layers"] + m["n_decoder_layers"]) * size.max_tokens


def measure(shape: CorpusShape, budget_s: float, device: torch.device, bf16: bool = False,
            share: float = MEASURING_SHARE) -> Measurement:
    """Time the ladder's sizes from the smallest up, while the larger ones could still be chosen and measuring has
    taken less than ``share`` of ``budget_s``; the time it took counts against the budget."""
    started = time.perf_counter()
    speeds: dict[str, Speed] = {}
    for smaller, size in zip((None, *LADDER), LADDER):
        spent = time.perf_counter() - started
        if smaller is not None:
            below = speeds[smaller.name]
            hopeful = Speed(below.update_s * _cost(size) / _cost(smaller) / BEST_EFFICIENCY_GAIN, 1.0)
            if spent >= share * budget_s or not affordable(size, hopeful, budget_s - spent):
                break
        speeds[size.name] = timed_speed(size, shape, device, bf16)
        if not affordable(size, speeds[size.name], budget_s - (time.perf_counter() - started)):
            break
    return Measurement(speeds, time.perf_counter() - started)
