"""Sentences in, translations out: the searches of ``decoding.py`` applied to text. A source is cut to the
model's positions by one rule (``fit_to_positions``); many sentences are batched by length (``translate_batch``,
what training's BLEU and the command line use); one is decoded greedily as a generator that yields each step as it
is decided (``decode_steps``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from .decoding import SearchRules, beam_search, greedy_search, length_limits, never_generate, pad_batch
from .model import DecoderCache, Transformer
from .tokenizer import Tokenizer

log = logging.getLogger(__name__)


def report_cut_input(model: Transformer, number: int, pieces: int) -> None:
    """Log that input ``number`` (1-based), ``pieces`` long, was cut to the model's positions."""
    log.warning("input %d has %d pieces; only its first %d are translated (the model's positions)",
                number, pieces, model.config.max_len - 1)


def translate_batch(model: Transformer, source_tokenizer: Tokenizer, target_tokenizer: Tokenizer,
                    sentences: list[str], beam_size: int = 1, length_penalty: float = 1.0,
                    max_tokens: int = 8000, max_length: int | None = None,
                    rules: SearchRules = SearchRules()) -> list[str]:
    """Translate many sentences: sorted by length, batched up to ``max_tokens`` source tokens, in order back.

    A blank sentence translates to an empty string (the model, given only
    ``</s>``, would make one up).
    """
    if not sentences:
        return []
    model.eval()
    encoded = []
    for number, ids in enumerate(source_tokenizer.encode_batch(sentences), start=1):
        fitted, cut = fit_to_positions(model, ids)
        if cut:
            report_cut_input(model, number, len(ids))
        encoded.append(fitted)
    order = sorted((i for i, sentence in enumerate(sentences) if sentence.strip()), key=lambda i: len(encoded[i]))
    outputs: list[str] = [""] * len(sentences)
    forced = target_tokenizer.prefix_ids
    start = 0
    while start < len(order):
        longest, end = 0, start
        while end < len(order):
            longest = max(longest, len(encoded[order[end]]))
            if (end - start + 1) * longest * beam_size > max_tokens and end > start:
                break
            end += 1
        chunk = order[start:end]
        src = pad_batch([encoded[i] for i in chunk], model.config.pad_id, model.device)
        if beam_size <= 1:
            results = greedy_search(model, src, max_length, forced=forced)
        else:
            results = [hyps[0].tokens for hyps in beam_search(model, src, beam_size, length_penalty, max_length,
                                                               rules=rules, forced=forced)]
        for i, ids in zip(chunk, results):
            outputs[i] = target_tokenizer.decode(ids)
        start = end
    return outputs


def fit_to_positions(model: Transformer, ids: list[int]) -> tuple[list[int], bool]:
    """Source ids (ending in eos) cut to the model's positions, still ending in eos; also whether they were cut."""
    if len(ids) > model.config.max_len:
        return ids[: model.config.max_len - 1] + [model.config.eos_id], True
    return ids, False


def encode_source(model: Transformer, tokenizer: Tokenizer, text: str) -> tuple[list[int], bool]:
    """Source ids ending in eos, cut to the model's positions; also whether it had to be cut."""
    return fit_to_positions(model, tokenizer.encode(text))


@dataclass
class DecodingStep:
    """One greedy step as it happens: the chosen token, the alternatives, and where the model looked.

    ``self_attention`` is (layers, heads, step + 1) over the decoder inputs so
    far; ``cross_attention`` is (layers, heads, source length).
    """

    index: int
    token_id: int
    piece: str
    probability: float
    top_ids: list[int]
    top_pieces: list[str]
    top_probs: list[float]
    self_attention: Tensor
    cross_attention: Tensor


@torch.inference_mode()
def decode_steps(model: Transformer, source_tokenizer: Tokenizer, target_tokenizer: Tokenizer, text: str,
                 max_length: int | None = None, top_k: int = 5) -> Iterator[DecodingStep]:
    """Greedy decoding as a generator: yields each token with its alternatives and attention as it is made."""
    model.eval()
    source_ids, _ = encode_source(model, source_tokenizer, text)
    src = torch.tensor([source_ids], device=model.device)
    encoded = model.encode(src)
    cache = DecoderCache()
    last = torch.tensor([[model.config.start_id]], device=model.device)
    (limit,) = length_limits(model, src, max_length)
    forced = target_tokenizer.prefix_ids
    for index in range(limit):
        out = model.decode(last, encoded, cache, need_weights=True)
        logits = out.logits[:, -1].float()
        probs = logits[0].softmax(dim=-1)
        top_probs, top_ids = probs.topk(min(top_k, probs.size(-1)))
        token = forced[index] if index < len(forced) else int(never_generate(model, logits.clone()).argmax(dim=-1))
        yield DecodingStep(
            index=index, token_id=token, piece=target_tokenizer.piece(token), probability=float(probs[token]),
            top_ids=top_ids.tolist(), top_pieces=target_tokenizer.pieces(top_ids.tolist()),
            top_probs=top_probs.tolist(),
            self_attention=torch.stack([a[0, :, -1].float() for a in out.self_attentions]).cpu(),
            cross_attention=torch.stack([a[0, :, -1].float() for a in out.cross_attentions]).cpu())
        if token == model.config.eos_id:
            return
        last = torch.tensor([[token]], device=model.device)
