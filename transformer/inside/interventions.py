"""Experiments on a trained model: switch heads off, force a different word, take word order away.

Each intervention is a call argument (a ``HeadMask``, a forced prefix,
``positions=False``), never a hook or a modified copy of the model, so the
unmodified model is untouched afterwards and concurrent users never see each
other's experiments.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch

from ..errors import InputError
from ..files.checkpoint import Checkpoint
from ..metrics import corpus_scores
from ..paper.decoding import greedy_search, pad_batch
from ..paper.sentences import encode_source
from ..paper.translation import Translation, forced_decode
from ..paper.model import HeadMask

KINDS = ("encoder", "decoder", "cross")


def head_count(checkpoint: Checkpoint) -> dict[str, tuple[int, int]]:
    """(layers, heads) of each attention type."""
    config = checkpoint.model.config
    return {"encoder": (config.n_encoder_layers, config.n_heads), "decoder": (config.n_decoder_layers, config.n_heads),
            "cross": (config.n_decoder_layers, config.n_heads)}


def head_label(layer: int, head: int) -> str:
    """How one head is named in the UI: 1-based layer and head."""
    return f"L{layer + 1}H{head + 1}"


def parse_head_label(label: str) -> tuple[int, int]:
    try:
        layer, head = str(label).upper().lstrip("L").split("H")
        return int(layer) - 1, int(head) - 1
    except ValueError:
        raise InputError(code="inside.not_a_head_name", label=repr(label)) from None


def make_head_mask(checkpoint: Checkpoint, switched_off: dict[str, list[str]]) -> HeadMask | None:
    """A HeadMask with 0 for each listed head ({"cross": ["L1H2", ...]}), or None if nothing is switched off."""
    if not any(switched_off.get(kind) for kind in KINDS):
        return None
    device = checkpoint.model.device
    masks = {}
    for kind, (layers, heads) in head_count(checkpoint).items():
        mask = torch.ones(layers, heads, device=device)
        for label in switched_off.get(kind, []):
            layer, head = parse_head_label(label)
            if not (0 <= layer < layers and 0 <= head < heads):
                raise InputError(code="inside.no_such_head", label=label, layers=layers, heads=heads)
            mask[layer, head] = 0.0
        masks[kind] = mask
    return HeadMask(**masks)


@dataclass
class Comparison:
    """The same sentence with and without an intervention.

    ``rescored`` is the original translation read by the intervened model
    (forced decoding), so per-token probabilities can be compared position by
    position even when the new translation differs. What was done is named, not
    said: ``intervention`` ("switched_off", "forced", "no_positions",
    "shuffled") and ``details``, the values a sentence about it takes (the
    app's words for it are ``experiments.did.<intervention>`` in ui/locales/).
    """

    before: Translation
    after: Translation
    intervention: str
    rescored: Translation | None = None
    head_mask: HeadMask | None = None  # how ``after`` ran, so its contributions can be measured as it ran
    positions: bool = True
    details: dict = field(default_factory=dict)

    def probability_changes(self) -> list[tuple[str, float, float]]:
        """(token of the original translation, P before, P under the intervention)."""
        if self.rescored is None:
            return []
        return list(zip(self.before.predicted_pieces, self.before.token_probs, self.rescored.token_probs))


def ablate_heads(checkpoint: Checkpoint, text: str, switched_off: dict[str, list[str]], beam_size: int = 1,
                 max_length: int | None = None) -> Comparison:
    model, src_tok, tgt_tok = checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer
    mask = make_head_mask(checkpoint, switched_off)
    before = checkpoint.translate(text, beam_size, max_length)
    after = checkpoint.translate(text, beam_size, max_length, head_mask=mask)
    rescored = forced_decode(model, src_tok, tgt_tok, before.source_ids, before.predicted_ids[:-1], head_mask=mask)
    count = sum(len(switched_off.get(kind, [])) for kind in KINDS)
    return Comparison(before, after, "switched_off", rescored, head_mask=mask, details={"count": count})


@torch.inference_mode()
def head_importance(checkpoint: Checkpoint, translation: Translation) -> dict[str, torch.Tensor]:
    """For every head: how much the log-probability of ``translation`` drops when that head alone is off.

    One batched forward pass: row 0 is the unmodified model, each further row
    switches one head of one attention type off. Returns, per attention type,
    a (layers, heads) tensor of drops in nats (positive: the head helped), made
    under ``torch.inference_mode`` (clone one to change it in place).
    """
    model = checkpoint.model
    counts = head_count(checkpoint)
    rows = [(None, None, None)] + [(kind, layer, head) for kind, (layers, heads) in counts.items()
                                   for layer in range(layers) for head in range(heads)]
    device = model.device
    masks = {kind: torch.ones(len(rows), layers, heads, device=device) for kind, (layers, heads) in counts.items()}
    for row, (kind, layer, head) in enumerate(rows):
        if kind is not None:
            masks[kind][row, layer, head] = 0.0
    src = torch.tensor([translation.source_ids], device=device).expand(len(rows), -1)
    tgt = torch.tensor([translation.target_ids], device=device).expand(len(rows), -1)
    logits = model(src, tgt, head_mask=HeadMask(**masks)).logits.float()
    labels = torch.tensor(translation.predicted_ids, device=device)
    log_probs = logits.log_softmax(-1).gather(2, labels.view(1, -1, 1).expand(len(rows), -1, 1)).squeeze(2).sum(1)
    drops = (log_probs[0] - log_probs[1:]).cpu()
    result, start = {}, 0
    for kind, (layers, heads) in counts.items():
        result[kind] = drops[start:start + layers * heads].view(layers, heads)
        start += layers * heads
    return result


def mean_head_importance(checkpoint: Checkpoint, sentences: list[str]) -> dict[str, torch.Tensor]:
    """Head importance averaged over sentences, each scored against the model's own greedy translation."""
    totals: dict[str, torch.Tensor] = {}
    for sentence in sentences:
        tr = checkpoint.translate(sentence)
        for kind, drops in head_importance(checkpoint, tr).items():
            totals[kind] = totals.get(kind, 0) + drops
    return {kind: total / max(1, len(sentences)) for kind, total in totals.items()}


def ranked_heads(importance: dict[str, torch.Tensor]) -> list[tuple[str, str, float]]:
    """(attention type, head label, drop) from most to least important."""
    ranked = [(kind, head_label(layer, head), float(drops[layer, head]))
              for kind, drops in importance.items()
              for layer in range(drops.shape[0]) for head in range(drops.shape[1])]
    return sorted(ranked, key=lambda item: item[2], reverse=True)


def override_token(checkpoint: Checkpoint, translation: Translation, step: int, token: str | int,
                   max_length: int | None = None) -> Comparison:
    """Force ``token`` at decoding ``step`` (1-based) and let the model continue greedily from there.

    The unmodified run keeps the translation's own token at that step and
    continues greedily too, so the two differ only by the forced token, even
    when the translation came from beam search (whose later steps greedy
    decoding need not repeat): forcing the token the model chose changes nothing.
    """
    model, src_tok, tgt_tok = checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer
    step = max(1, min(translation.num_steps, int(step)))
    token_id = token if isinstance(token, int) else tgt_tok.typed_id(token)
    if token_id is None:
        raise InputError(code="inside.unknown_piece", piece=token)
    if token_id in (model.config.start_id, model.config.pad_id):
        raise InputError(code="inside.special_piece", start=tgt_tok.piece(model.config.start_id),
                         pad=tgt_tok.piece(model.config.pad_id))
    src = torch.tensor([translation.source_ids], device=model.device)

    def continued_from(forced: list[int]) -> Translation:
        rows, ended = greedy_search(model, src, max_length, prefix=torch.tensor([forced], device=model.device),
                                    return_ended=True)
        result = forced_decode(model, src_tok, tgt_tok, translation.source_ids, rows[0], ended=ended[0])
        result.source_text = translation.source_text
        return result

    kept = translation.predicted_ids[:step]
    before = continued_from(kept)
    after = before if token_id == kept[-1] else continued_from(kept[:-1] + [token_id])
    piece = tgt_tok.piece(token_id)
    return Comparison(before, after, "forced", details={"step": step, "piece": piece})


def without_positions(checkpoint: Checkpoint, text: str, beam_size: int = 1,
                      max_length: int | None = None) -> Comparison:
    """Translate with the positional encoding left out of encoder and decoder: word order becomes invisible."""
    model, src_tok, tgt_tok = checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer
    before = checkpoint.translate(text, beam_size, max_length)
    after = checkpoint.translate(text, beam_size, max_length, positions=False)
    rescored = forced_decode(model, src_tok, tgt_tok, before.source_ids, before.predicted_ids[:-1], positions=False)
    return Comparison(before, after, "no_positions", rescored, positions=False)


def shuffle_words(text: str, seed: int = 0) -> str:
    words = text.split()
    rng = random.Random(seed)
    for _ in range(10):  # a shuffle that changes something, when anything can change
        rng.shuffle(words)
        if words != text.split() or len(set(text.split())) < 2:
            break
    return " ".join(words)


def shuffled_source(checkpoint: Checkpoint, text: str, seed: int = 0, beam_size: int = 1,
                    max_length: int | None = None) -> Comparison:
    model, src_tok, tgt_tok = checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer
    before = checkpoint.translate(text, beam_size, max_length)
    shuffled = shuffle_words(text, seed)
    after = checkpoint.translate(shuffled, beam_size, max_length)
    rescored = forced_decode(model, src_tok, tgt_tok, shuffled, before.predicted_ids[:-1])
    return Comparison(before, after, "shuffled", rescored, details={"sentence": shuffled})


@dataclass
class PruningCurve:
    """Quality as heads of one attention type are switched off one by one, in ``order`` (head labels).

    ``chrf[k]`` scores the translations with the first k heads off against the unpruned model's own translations
    (agreement, so it needs no references); ``bleu[k]`` against references when they were given.
    """

    kind: str
    order: list[str]
    chrf: list[float]
    bleu: list[float] | None = None


def translate_with_mask(checkpoint: Checkpoint, sentences: list[str], mask: HeadMask | None) -> list[str]:
    """Greedy translations of ``sentences`` in one batch, with ``mask`` on every row."""
    model, src_tok, tgt_tok = checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer
    sources = [encode_source(model, src_tok, sentence)[0] for sentence in sentences]
    rows = greedy_search(model, pad_batch(sources, model.config.pad_id, model.device), head_mask=mask,
                         forced=tgt_tok.prefix_ids)
    return [tgt_tok.decode(row) for row in rows]


def pruning_order(checkpoint: Checkpoint, kind: str, importance: dict[str, torch.Tensor] | None = None,
                  seed: int | None = None) -> list[str]:
    """The heads of ``kind``, least important first (as Michel et al. prune), or shuffled with ``seed``."""
    layers, heads = head_count(checkpoint)[kind]
    labels = [head_label(layer, head) for layer in range(layers) for head in range(heads)]
    if importance is None:
        random.Random(seed).shuffle(labels)
        return labels
    return sorted(labels, key=lambda label: float(importance[kind][parse_head_label(label)]))


def pruning_curve(checkpoint: Checkpoint, sentences: list[str], kind: str, order: list[str],
                  references: list[str] | None = None, on_step=None) -> PruningCurve:
    """Switch the heads of ``order`` off one more at a time and score each set of translations.

    ``on_step(done, total)`` is called after each point; raising from it stops the curve there.
    """
    unpruned = translate_with_mask(checkpoint, sentences, None)
    chrf, bleu = [], [] if references is not None else None
    for removed in range(len(order) + 1):
        mask = make_head_mask(checkpoint, {kind: order[:removed]})
        outputs = unpruned if mask is None else translate_with_mask(checkpoint, sentences, mask)
        chrf.append(corpus_scores(outputs, unpruned)["chrf"])
        if references is not None:
            bleu.append(corpus_scores(outputs, references)["bleu"])
        if on_step is not None:
            on_step(removed + 1, len(order) + 1)
    return PruningCurve(kind, list(order), chrf, bleu)
