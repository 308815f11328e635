"""A search seen as it goes: after each step, where it stands for each sentence (``SearchProgress``), for a page
that draws the decoding as it happens, and a way to end it early (a Stop button). ``decoding.py``'s searches take
a ``watch`` and call it; a search nobody watches computes nothing of this.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from .model import Transformer


@dataclass
class SearchProgress:
    """Where a search stands for one sentence after a step, as a page draws it while the search goes on: the
    leading hypothesis (greedy's one; beam search's best live beam) as ids, the forced first ones included, and
    the step that chose its last token: that token's probability under the model, the step's most probable
    candidates, and the cross-attention of every layer and head while choosing it, (layers, heads, source)."""

    sentence: int  # its index in the batch
    tokens: list[int]
    probability: float
    top_ids: list[int]
    top_probs: list[float]
    cross_attention: Tensor


# Called by a search after each step with the progress of every sentence it still decodes; answering False ends
# the search there, each sentence with the hypothesis it has, not ended (a Stop button).
Watch = Callable[[list[SearchProgress]], bool]
TOP_CANDIDATES = 5  # the candidates a progress report names


def progress_of(sentence: int, tokens: list[int], logits: Tensor, cross_attentions: list[Tensor], row: int,
                source_length: int) -> SearchProgress:
    """The progress of the hypothesis decoded in ``row`` of a step's ``logits``, ``tokens`` ending in its choice."""
    probs = logits[row].float().softmax(dim=-1)
    top_probs, top_ids = probs.topk(min(TOP_CANDIDATES, probs.size(-1)))
    attention = torch.stack([weights[row, :, -1, :source_length].float() for weights in cross_attentions])
    return SearchProgress(sentence, tokens, float(probs[tokens[-1]]), top_ids.tolist(), top_probs.tolist(),
                          attention.cpu())


def source_lengths(model: Transformer, src: Tensor) -> list[int]:
    return (src != model.config.pad_id).sum(dim=1).tolist()


class WatchedBeams:
    """A watched beam search's reports: each sentence's best hypothesis so far, an ended one or the best live beam
    (whichever scores better, the live one scored at its length), as the step that chose its last token saw it."""

    def __init__(self, watch: Watch, k: int, score: Callable[[float, int], float], eos_id: int,
                 source_lengths: list[int]):
        self.watch, self.k, self.score, self.eos_id = watch, k, score, eos_id  # score(log P, tokens): the search's
        self.source_lengths = source_lengths
        self.best_ended: dict[int, tuple[float, SearchProgress]] = {}  # by sentence: score, report

    def ended(self, sentence: int, tokens: list[int], score: float, decoded, decoder_row: int) -> None:
        """A hypothesis (``tokens`` without the eos, scored ``score``) has ended and is kept, chosen by the beam
        decoded in ``decoder_row``."""
        if sentence not in self.best_ended or score > self.best_ended[sentence][0]:
            self.best_ended[sentence] = (score, self.report(sentence, [*tokens, self.eos_id], decoded, decoder_row))

    def report(self, sentence: int, tokens: list[int], decoded, decoder_row: int) -> SearchProgress:
        return progress_of(sentence, tokens, decoded.logits[:, -1], decoded.cross_attentions, decoder_row,
                           self.source_lengths[sentence])

    def step(self, in_batch: list[int], tokens: Tensor, parents: Tensor, chosen: Tensor, scores: Tensor,
             decoded) -> list[tuple[int, list[int], float]] | None:
        """Report the step: None where the search goes on, else where each sentence's best live beam stands
        (sentence, ids, log-probability)."""
        reports, leading = [], []
        for row, b in enumerate(in_batch):
            log_prob = scores[row, 0].item()
            live = None
            if math.isfinite(log_prob):  # at its length limit only ended hypotheses remain
                parent = int(parents[row, 0])
                live = [*tokens[row * self.k + parent, 1:].tolist(), int(chosen[row, 0])]
                leading.append((b, live, log_prob))
            ended = self.best_ended.get(b)
            if live is not None and (ended is None or self.score(log_prob, len(live)) > ended[0]):
                reports.append(self.report(b, live, decoded, row * self.k + parent))
            elif ended is not None:
                reports.append(ended[1])
        return None if self.watch(reports) else leading
