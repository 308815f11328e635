"""Turning a trained model into translations: greedy, sampled and beam search, step by step (applied to text in
``sentences.py``).

Search runs incrementally: the source is encoded once and each step feeds only the newest token through the
decoder's key/value cache. What a search chose is then inspected in ``translation.py``: one teacher-forced pass
that records every number the app shows (its tests hold them equal to the incremental steps').

The searches run under ``torch.inference_mode`` (less bookkeeping per operation than ``no_grad``), so the tensors
they return are inference tensors: read them freely, and ``clone()`` one before changing it in place or using it
with autograd.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ..errors import InputError
from .model import DecoderCache, EncoderOutput, HeadMask, Transformer
from .watching import Watch, WatchedBeams, progress_of, source_lengths

log = logging.getLogger(__name__)


def pad_batch(sequences: list[list[int]], pad_id: int, device: torch.device | None = None) -> Tensor:
    """Right-pad token lists into a (B, longest) LongTensor."""
    longest = max(len(s) for s in sequences)
    batch = torch.full((len(sequences), longest), pad_id, dtype=torch.long)
    for i, seq in enumerate(sequences):
        batch[i, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
    return batch.to(device) if device is not None else batch


def default_max_length(model: Transformer, source_length: int) -> int:
    """Generated tokens allowed for a source of this length: 1.5x + 10, within the model's positions."""
    return max(1, min(model.config.max_len - 1, int(1.5 * source_length) + 10))


def _repeat_encoded(encoded: EncoderOutput, times: int) -> EncoderOutput:
    return EncoderOutput(encoded.memory.repeat_interleave(times, dim=0),
                         encoded.source_mask.repeat_interleave(times, dim=0))


def _strip(tokens: list[int], eos_id: int) -> list[int]:
    """Generated ids up to (excluding) the first eos."""
    return tokens[: tokens.index(eos_id)] if eos_id in tokens else tokens


def never_generate(model: Transformer, logits: Tensor) -> Tensor:
    """``logits`` (..., vocabulary) in place without padding and the decoder's start token: they are inputs, never
    outputs of a step (unless the start token is eos, as fairseq's models start the decoder)."""
    config = model.config
    logits[..., [config.pad_id] if config.start_id == config.eos_id else [config.pad_id, config.start_id]] = \
        float("-inf")
    return logits


def forced_rows(forced: Sequence[int], rows: int, device: torch.device) -> Tensor | None:
    """``forced`` tokens (a multilingual model's target language) as a prefix for each of ``rows`` sentences."""
    return torch.tensor([list(forced)] * rows, dtype=torch.long, device=device) if forced else None


def length_limits(model: Transformer, src: Tensor, max_length: int | None) -> list[int]:
    """Tokens each sentence of a padded batch may generate: ``max_length``, or by default its own length's.

    Counting each sentence's own tokens, not the batch's padded width, makes
    its translation independent of the sentences it happens to be batched with.
    """
    if max_length:  # None or 0: the default, as in sentences.decode_steps
        return [_within_positions(model, max_length)] * src.size(0)
    return [default_max_length(model, n) for n in (src != model.config.pad_id).sum(dim=1).tolist()]


def _within_positions(model: Transformer, max_length: int) -> int:
    """A length limit the decoder has positions for: bos plus ``max_length`` tokens fit in ``max_len``."""
    return max(1, min(int(max_length), model.config.max_len - 1))


def _keep_rows(encoded: EncoderOutput, head_mask: HeadMask | None, cache: DecoderCache,
               index: Tensor) -> tuple[EncoderOutput, HeadMask | None]:
    """Shrink a search's batch to rows ``index``: its cache in place, its encoder output and per-row head masks."""
    cache.reorder(index)
    encoded = EncoderOutput(encoded.memory.index_select(0, index), encoded.source_mask.index_select(0, index))
    if head_mask is not None:
        masks = {name: mask.index_select(0, index) if mask is not None and mask.dim() == 3 else mask
                 for name, mask in vars(head_mask).items()}
        head_mask = HeadMask(**masks)
    return encoded, head_mask


@dataclass
class Sampling:
    """Draw each next token instead of taking the most probable one.

    The distribution is softmax(logits / ``temperature``) (T < 1 sharpens it, T > 1 flattens it), cut to the
    ``top_k`` most probable tokens (0: no cut; tokens tied with the k-th are kept too) and to the smallest set whose probability reaches ``top_p``
    (nucleus sampling, Holtzman et al., 2020), then renormalised. ``seed`` makes a draw repeatable.
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self):
        if not (self.temperature > 0 and math.isfinite(self.temperature)):
            raise InputError(code="decoding.temperature", value=self.temperature)
        if not 0 < self.top_p <= 1:
            raise InputError(code="decoding.top_p", value=self.top_p)
        if self.top_k < 0:
            raise InputError(code="decoding.top_k", value=self.top_k)

    def distribution(self, logits: Tensor) -> Tensor:
        """The probabilities a draw is made from, (..., vocab): 0 outside the kept set."""
        probabilities = (logits.float() / self.temperature).softmax(dim=-1)
        if 0 < self.top_k < probabilities.size(-1):
            threshold = probabilities.topk(self.top_k, dim=-1).values[..., -1:]
            probabilities = torch.where(probabilities >= threshold, probabilities, 0.0)
        if self.top_p < 1:
            ordered, order = probabilities.sort(dim=-1, descending=True)
            before = ordered.cumsum(dim=-1) - ordered  # mass of the more probable tokens
            ordered = torch.where(before < self.top_p * ordered.sum(-1, keepdim=True), ordered, 0.0)
            probabilities = torch.zeros_like(probabilities).scatter(-1, order, ordered)
        return probabilities / probabilities.sum(dim=-1, keepdim=True)

    def choose(self, logits: Tensor, generator: torch.Generator) -> Tensor:
        return torch.multinomial(self.distribution(logits), 1, generator=generator).squeeze(-1)


@torch.inference_mode()
def greedy_search(model: Transformer, src: Tensor, max_length: int | None = None,
                  head_mask: HeadMask | None = None, positions: bool = True,
                  prefix: Tensor | None = None, return_ended: bool = False, sampling: Sampling | None = None,
                  forced: Sequence[int] = (), watch: Watch | None = None):
    """Batched greedy decoding of padded sources (B, S); returns generated ids without bos/eos.

    With ``sampling``, each step draws its token from the (tempered, cut) distribution instead of taking the
    most probable one: the same search, one candidate per sentence.

    A sentence leaves the batch once it has ended, so a long sentence does not
    make the search keep decoding the short ones beside it. ``max_length``
    defaults to each sentence's own ``default_max_length``.
    ``prefix`` (B, P) forces the first P target tokens (for "what if the model
    had chosen this word?"); they are included in the result; without one, ``forced`` tokens start every
    sentence (a multilingual model's target language: ``Tokenizer.prefix_ids``). With
    ``return_ended``, also returns for each sentence whether the model ended it
    (eos) rather than running out of length. ``watch`` sees each step as it is decided (``SearchProgress``).
    """
    limits = length_limits(model, src, max_length)
    encoded = model.encode(src, head_mask=head_mask, positions=positions)
    cache = DecoderCache()
    eos_id = model.config.eos_id
    inputs = torch.full((src.size(0), 1), model.config.start_id, dtype=torch.long, device=src.device)
    outputs: list[list[int]] = [[] for _ in limits]  # per sentence, the prefix included
    prefix = forced_rows(forced, src.size(0), src.device) if prefix is None else prefix
    if prefix is not None and prefix.size(1):
        inputs = torch.cat([inputs, prefix.to(src.device)], dim=1)
        outputs = prefix.tolist()
    ended = [eos_id in output for output in outputs]
    in_batch = list(range(len(outputs)))  # which sentence each row of the batch holds
    generator = torch.Generator(device=src.device).manual_seed(sampling.seed) if sampling else None
    lengths = source_lengths(model, src)
    while True:
        going_on = [row for row, i in enumerate(in_batch) if not ended[i] and len(outputs[i]) < limits[i]]
        if not going_on:
            break
        if len(going_on) < len(in_batch):
            keep = torch.tensor(going_on, device=src.device)
            encoded, head_mask = _keep_rows(encoded, head_mask, cache, keep)
            inputs, in_batch = inputs.index_select(0, keep), [in_batch[row] for row in going_on]
        decoded = model.decode(inputs, encoded, cache, head_mask=head_mask, positions=positions,
                               need_weights=watch is not None)
        logits = decoded.logits[:, -1].float()
        logits = never_generate(model, logits.clone() if watch else logits)  # a watch reads the step's own
        next_tokens = sampling.choose(logits, generator) if sampling else logits.argmax(dim=-1)
        for i, token in zip(in_batch, next_tokens.tolist()):
            outputs[i].append(token)
            ended[i] = token == eos_id
        inputs = next_tokens.unsqueeze(1)
        if watch is not None and not watch([
                progress_of(i, list(outputs[i]), decoded.logits[:, -1], decoded.cross_attentions, row, lengths[i])
                for row, i in enumerate(in_batch)]):
            break
    stripped = [_strip(output, eos_id) for output in outputs]
    return (stripped, ended) if return_ended else stripped


def length_scored(log_prob: float, tokens: int, length_penalty: float) -> float:
    """A hypothesis's score: its log-probability over its length to the ``length_penalty``, the length counting the
    eos that ends it (so that beam search does not favour short translations)."""
    return log_prob / (tokens + 1) ** length_penalty


@dataclass
class BeamHypothesis:
    """A finished hypothesis: ids without bos/eos, summed log-probability, length-normalised score.

    ``ended`` is False when the search ran out of length and closed it with a forced eos.
    """

    tokens: list[int]
    log_prob: float
    score: float
    ended: bool = True


@dataclass
class BeamStep:
    """One step of beam search for one sentence, for drawing the beam as a tree."""

    parents: list[int]        # which live beam of the previous step each candidate extends
    tokens: list[int]
    log_probs: list[float]    # cumulative
    finished: list[bool]      # this candidate ended a hypothesis (eos) and was kept as finished
    kept: list[int]           # candidate indices that became the live beams 0..k-1 (none once it is done)


@dataclass(frozen=True)
class SearchRules:
    """Where beam search implementations differ; the defaults are fairseq's, and a converted model keeps those it
    was published with (transformers' generation config).

    ``early_stopping`` True: a sentence is done once k hypotheses have ended (fairseq; transformers'
    ``early_stopping=True``). False (transformers' default): the k best ended hypotheses are kept, and a sentence is
    done only when its best live beam, scored at its current length, no longer beats the worst of them.
    ``renormalize``: the tokens a step may not produce (padding, the start token; at the length limit all but eos)
    are removed before the log-softmax, so each step's probabilities sum to one (transformers'
    ``renormalize_logits``); otherwise they are removed after it.
    """

    early_stopping: bool = True
    renormalize: bool = False

    @classmethod
    def from_dict(cls, values: dict) -> "SearchRules":
        return cls(bool(values.get("early_stopping", True)), bool(values.get("renormalize", False)))


def _keep_best(finished: list[BeamHypothesis], hypothesis: BeamHypothesis, k: int, early_stopping: bool) -> bool:
    """Add an ended hypothesis to a sentence's k; whether it was kept."""
    if len(finished) < k:
        finished.append(hypothesis)
        return True
    if early_stopping:
        return False
    worst = min(range(k), key=lambda i: finished[i].score)
    if hypothesis.score <= finished[worst].score:
        return False
    finished[worst] = hypothesis
    return True


@torch.inference_mode()
def beam_search(model: Transformer, src: Tensor, beam_size: int = 5, length_penalty: float = 1.0,
                max_length: int | None = None, return_steps: bool = False,
                head_mask: HeadMask | None = None, positions: bool = True, rules: SearchRules = SearchRules(),
                forced: Sequence[int] = (),
                watch: Watch | None = None) -> list[list[BeamHypothesis]] | tuple[list, list]:
    """Batched beam search in the manner of fairseq.

    Each step ranks the 2k best continuations of the k live beams. Those that end in eos (within the top k) become
    finished hypotheses, scored as log P / length^``length_penalty`` (length counts the eos); the best k of the
    others live on. A sentence is done when it has k finished hypotheses (or, by ``rules``, when no live beam can
    beat them), and then leaves the batch. ``max_length`` defaults to each sentence's own ``default_max_length``.
    ``forced`` tokens (a multilingual model's target language) are the first steps of every beam, adding 0 to its
    log-probability (as transformers' ``forced_bos_token_id``) and counting towards its length. ``watch`` sees
    each step's best hypothesis as it is decided (``SearchProgress``); should it end the search, the best live beam
    of each sentence not yet done joins its hypotheses, not ended. (A watched search computes its attention weights
    explicitly, not in the fused kernel: the same up to float rounding.) Returns, per sentence, its hypotheses
    sorted best first (and, with ``return_steps``, the per-step beams of each sentence for visualisation).
    """
    batch, k, eos_id = src.size(0), beam_size, model.config.eos_id
    limits = length_limits(model, src, max_length)
    encoded = _repeat_encoded(model.encode(src, head_mask=head_mask, positions=positions), k)
    cache = DecoderCache()
    device = src.device
    scores = torch.full((batch, k), float("-inf"), device=device)
    scores[:, 0] = 0.0  # all beams start identical: keep one alive
    tokens = torch.full((batch * k, 1), model.config.start_id, dtype=torch.long, device=device)
    finished: list[list[BeamHypothesis]] = [[] for _ in range(batch)]
    steps: list[list[BeamStep]] = [[] for _ in range(batch)]
    in_batch = list(range(batch))  # which sentence each group of k rows holds
    watched = WatchedBeams(watch, k, functools.partial(length_scored, length_penalty=length_penalty), eos_id,
                           source_lengths(model, src)) if watch else None

    for step in range(max(limits) + 1):  # up to a sentence's limit in tokens, then an eos
        decoded = model.decode(tokens[:, -1:], encoded, cache, head_mask=head_mask, positions=positions,
                               need_weights=watch is not None)
        logits = decoded.logits[:, -1].float()
        logits = logits.clone() if watch else logits  # a watch reads the step's own, which the rules change
        at_limit = [row for row, b in enumerate(in_batch) if step == limits[b]]
        log_probs = _step_log_probs(model, logits.view(len(in_batch), k, -1), at_limit, rules,
                                    forced[step] if step < len(forced) else None)
        vocab = log_probs.size(-1)
        candidates = (scores.unsqueeze(-1) + log_probs).view(len(in_batch), -1)
        top_scores, top_index = candidates.topk(min(2 * k, candidates.size(1)), dim=1)
        top_beams, top_tokens = top_index // vocab, top_index % vocab
        is_eos = top_tokens == eos_id

        added = set()
        for row, col, hypothesis in _ending(tokens, top_scores, top_beams, is_eos, in_batch, length_penalty):
            b = in_batch[row]
            hypothesis.ended = step < limits[b]
            if _keep_best(finished[b], hypothesis, k, rules.early_stopping):
                added.add((row, col))
                if watched:
                    watched.ended(b, hypothesis.tokens, hypothesis.score, decoded, row * k + int(top_beams[row, col]))
        live_scores = top_scores.masked_fill(is_eos, float("-inf"))
        scores, keep = live_scores.topk(k, dim=1)
        going_on = [row for row, b in enumerate(in_batch)
                    if step < limits[b] and _can_improve(finished[b], scores[row, 0].item(), step + 1, k,
                                                         length_penalty, rules.early_stopping)]
        if return_steps:
            _record(steps, in_batch, going_on, added, keep, top_beams, top_tokens, top_scores)
        stopped = watched.step(in_batch, tokens, top_beams.gather(1, keep), top_tokens.gather(1, keep), scores,
                               decoded) if watched else None
        _keep_unfinished(finished, stopped or [], {in_batch[row] for row in going_on}, length_penalty)
        if stopped is not None or not going_on:
            break

        # The live beams' rows, in order; sentences that are done leave the batch.
        rows = torch.tensor(going_on, device=device)
        chosen_beams, chosen_tokens = top_beams.gather(1, keep)[rows], top_tokens.gather(1, keep)[rows]
        reorder = (rows.unsqueeze(1) * k + chosen_beams).view(-1)
        cache.reorder(reorder)
        if len(going_on) < len(in_batch):  # head masks stay: beams take one mask for all rows (per-row is greedy's)
            encoded = EncoderOutput(encoded.memory.index_select(0, reorder),
                                    encoded.source_mask.index_select(0, reorder))
            scores, in_batch = scores[rows], [in_batch[row] for row in going_on]
        tokens = torch.cat([tokens.index_select(0, reorder), chosen_tokens.view(-1, 1)], dim=1)

    results = [sorted(hyps, key=lambda h: h.score, reverse=True) for hyps in finished]
    return (results, steps) if return_steps else results


def _keep_unfinished(finished: list[list[BeamHypothesis]], stopped: list[tuple[int, list[int], float]],
                     unfinished: set[int], length_penalty: float) -> None:
    """A search ended early: the best live beam of each sentence not done (sentence, ids, log-probability) joins its
    hypotheses, not ended; a sentence done at this step keeps its ended ones."""
    for b, live, log_prob in stopped:
        if b in unfinished:
            score = length_scored(log_prob, len(live), length_penalty)
            finished[b].append(BeamHypothesis(live, log_prob, score, ended=False))


def _record(steps: list[list[BeamStep]], in_batch: list[int], going_on: list[int], added: set, keep: Tensor,
            top_beams: Tensor, top_tokens: Tensor, top_scores: Tensor) -> None:
    """Each sentence's step, for drawing its beam (a sentence that is done extends none of its live beams)."""
    for row, b in enumerate(in_batch):
        finals = [(row, c) in added for c in range(top_scores.size(1))]
        kept = keep[row].tolist() if row in going_on else []
        steps[b].append(BeamStep(top_beams[row].tolist(), top_tokens[row].tolist(), top_scores[row].tolist(),
                                 finals, kept))


def _ending(tokens: Tensor, top_scores: Tensor, top_beams: Tensor, is_eos: Tensor, in_batch: list[int],
            length_penalty: float) -> list[tuple[int, int, BeamHypothesis]]:
    """The step's candidates among each sentence's top k that end in eos, as hypotheses: (row, candidate,
    hypothesis), in order."""
    k = tokens.size(0) // len(in_batch)
    rows, cols = (is_eos[:, :k] & torch.isfinite(top_scores[:, :k])).nonzero(as_tuple=True)
    if not len(rows):
        return []
    prefixes = tokens.view(len(in_batch), k, -1)[rows, top_beams[rows, cols], 1:].tolist()
    ending = []
    for row, col, prefix in zip(rows.tolist(), cols.tolist(), prefixes):
        log_prob = top_scores[row, col].item()
        score = length_scored(log_prob, len(prefix), length_penalty)
        ending.append((row, col, BeamHypothesis(prefix, log_prob, score)))
    return ending


def _step_log_probs(model: Transformer, logits: Tensor, at_limit: list[int], rules: SearchRules,
                    forced: int | None = None) -> Tensor:
    """Log-probabilities of one step's continuations, (sentences, k, vocabulary): without the tokens a step never
    produces, and only eos for the sentences (rows) ``at_limit`` of their length; renormalised after that removal
    or not, by ``rules``. A ``forced`` token gets log-probability 0 and every other -inf."""
    if forced is not None:
        return torch.full_like(logits, float("-inf")).index_fill_(-1, torch.tensor([forced], device=logits.device),
                                                                  0.0)
    eos_id = model.config.eos_id
    log_probs = never_generate(model, logits if rules.renormalize else torch.log_softmax(logits, dim=-1))
    if at_limit:  # out of room: every live beam of these sentences must end here
        rows = torch.tensor(at_limit, device=logits.device)
        log_probs[rows, :, :eos_id] = float("-inf")
        log_probs[rows, :, eos_id + 1:] = float("-inf")
    return torch.log_softmax(log_probs, dim=-1) if rules.renormalize else log_probs


def _can_improve(finished: list[BeamHypothesis], best_live: float, length: int, k: int, length_penalty: float,
                 early_stopping: bool) -> bool:
    """Whether a sentence goes on: fewer than k ended hypotheses, or (without early stopping) a best live beam
    whose score at its current ``length`` beats the worst of them."""
    if len(finished) < k:
        return True
    return not early_stopping and best_live / length ** length_penalty > min(h.score for h in finished)
