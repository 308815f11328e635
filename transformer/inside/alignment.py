"""Is attention an alignment? Word alignments read from a translator, and their error against human gold links.

    python -m transformer.align --text enfr.src-tgt --gold enfr.gold --method shift-att --json

Each method scores every (target piece, source piece) pair from one teacher-forced pass over the given pair, then
links each target piece to its best-scored source piece; a target word and a source word are linked when any of
their pieces are (Chen et al., 2020, section 4.1, the rule that turns subword links into word links). The methods:

- ``attention``: the cross-attention, heads averaged, of the step that *predicts* the target piece: the usual
  reading of an attention map, which Chen et al. found aligns worst.
- ``shift-att``: the cross-attention of the step where the target piece is the decoder's *input*, one step later
  (Chen et al., 2020, "Accurate Word Alignment Induction from Neural Machine Translation", section 3): the decoder
  attends to a source word when it has just read its translation, more than when it is about to write it.
- ``norm``: what each source token actually brings through the whole layer, ‖Σ_h α^h_ij v^h_j W_O^h‖ (Kobayashi
  et al., 2020, "Attention is not only a weight", who align with it), at the predicting step.
- ``alti``: ALTI+ source contributions (``contributions.py``) of the predicting step, rolled out through the
  decoder up to the layer.

A layer (1-based) reads that decoder layer; none reads every layer: the mean of the layers' maps, or, for ``alti``,
whose rollout already composes the layers, the last layer's, the whole model.

Gold links come in two kinds (Och & Ney, 2003, "A Systematic Comparison of Various Statistical Alignment Models"):
sure S, and possible P ⊇ S. For predicted links A over a corpus (every set a union over its sentences):

    precision = |A ∩ P| / |A|,   recall = |A ∩ S| / |S|,   AER = 1 − (|A ∩ S| + |A ∩ P|) / (|A| + |S|)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from ..errors import InputError
from ..paper.model import Transformer
from ..paper.tokenizer import WORD_START, Tokenizer
from .contributions import attention_blocks, blocks_of, compose, record_blocks, through_output

METHODS = ("attention", "shift-att", "norm", "alti")
SEPARATOR = " ||| "  # between a pair's source and target words, as fast_align and awesome-align read them
GOLD_LINK = re.compile(r"(\d+)([-p])(\d+)")
# Pieces scored in one padded pass: about 1,200 target × source pairs per sentence at the Hansards' lengths, so a
# batch's decompositions stay near 100 MB at d_model 512; larger batches gain little on a CPU.
SENTENCES_AT_ONCE = 16

Link = tuple[int, int]  # (source word, target word), counted from 0


@dataclass(frozen=True)
class GoldLinks:
    """One sentence's human links: ``sure`` and ``possible`` (which holds every sure link too)."""

    sure: frozenset[Link]
    possible: frozenset[Link]


@dataclass(frozen=True)
class AlignmentScore:
    aer: float
    precision: float
    recall: float

    def to_json(self) -> dict:
        return {"aer": round(self.aer, 6), "precision": round(self.precision, 6), "recall": round(self.recall, 6)}


def read_pairs(path: str | Path) -> list[tuple[str, str]]:
    """Sentence pairs, one a line, ``source words ||| target words`` (words split by spaces)."""
    pairs = []
    for number, line in enumerate(readable_lines(path), start=1):
        if line.count(SEPARATOR.strip()) != 1:
            raise InputError(code="align.bad_pair", path=str(path), line=number, separator=SEPARATOR.strip())
        source, target = line.split(SEPARATOR.strip())
        if not source.split() or not target.split():
            raise InputError(code="align.empty_side", path=str(path), line=number)
        pairs.append((" ".join(source.split()), " ".join(target.split())))
    return pairs


def read_gold(path: str | Path) -> list[GoldLinks]:
    """Gold links, one sentence a line, in Pharaoh format counted from 1: ``i-j`` a sure link of source word i and
    target word j, ``ipj`` a possible one."""
    gold = []
    for number, line in enumerate(readable_lines(path), start=1):
        sure, possible = set(), set()
        for written in line.split():
            link = GOLD_LINK.fullmatch(written)
            if link is None or int(link[1]) < 1 or int(link[3]) < 1:
                raise InputError(code="align.bad_link", path=str(path), line=number, link=written)
            pair = (int(link[1]) - 1, int(link[3]) - 1)
            possible.add(pair)
            if link[2] == "-":
                sure.add(pair)
        gold.append(GoldLinks(frozenset(sure), frozenset(possible)))
    return gold


def readable_lines(path: str | Path) -> list[str]:
    try:
        return Path(path).read_text(encoding="utf-8-sig").splitlines()
    except FileNotFoundError:
        raise InputError(code="data.missing", path=str(path)) from None
    except (IsADirectoryError, UnicodeDecodeError):
        raise InputError(code="align.unreadable", path=str(path)) from None


def alignment_error(predicted: list[set[Link]], gold: list[GoldLinks]) -> AlignmentScore:
    """AER, precision and recall of a corpus's links (module docstring), each set a union over its sentences."""
    if len(predicted) != len(gold):
        raise InputError(code="align.count_mismatch", sentences=len(predicted), gold=len(gold))
    found = sum(len(links) for links in predicted)
    sure = sum(len(g.sure) for g in gold)
    found_sure = sum(len(links & g.sure) for links, g in zip(predicted, gold))
    found_possible = sum(len(links & g.possible) for links, g in zip(predicted, gold))
    return AlignmentScore(aer=1 - (found_sure + found_possible) / max(found + sure, 1),
                          precision=found_possible / found if found else 0.0,
                          recall=found_sure / sure if sure else 0.0)


def piece_words(pieces: list[str]) -> list[int]:
    """For each piece of a sentence written with spaces between its words, the word it belongs to: a piece that
    starts with "▁" starts a word, and a lone "▁" starts the word its next piece writes."""
    words, word, opened = [], -1, False
    for piece in pieces:
        if piece == WORD_START:
            word, opened = word + 1, True
        else:
            if piece.startswith(WORD_START) and not opened or word < 0:
                word += 1
            opened = False
        words.append(word)
    return words


def hard_links(scores: Tensor, target_words: list[int], source_words: list[int]) -> set[Link]:
    """Each target piece's row of ``scores`` (target pieces, source pieces) links it to its best source piece; the
    words holding the two are linked."""
    best = scores.argmax(dim=1).tolist()
    return {(source_words[column], target_words[row]) for row, column in enumerate(best)}


@dataclass
class PairPieces:
    """A pair as the model reads it: its ids (the source ending with eos, the target body without bos or eos,
    each with a multilingual model's language first) and where the pieces of its words lie among them."""

    source_ids: list[int]
    target_body: list[int]
    source_words: list[int]     # the word of each of the source's word pieces, which start at source_start
    target_words: list[int]     # the word of each of the target body's word pieces, which start at target_start
    source_start: int
    target_start: int


def pair_pieces(model: Transformer, source_tokenizer: Tokenizer, target_tokenizer: Tokenizer, source: str,
                target: str, line: int) -> PairPieces:
    """Encode a pair; a pair longer than the model reads, or whose pieces do not split back into its words (a
    tokenizer that drops or merges characters), is refused by its line."""
    source_ids, target_body = source_tokenizer.encode(source), target_tokenizer.encode(target, add_eos=False)
    if len(source_ids) > model.config.max_len or len(target_body) + 1 > model.config.max_len:
        raise InputError(code="align.too_long", line=line, max_len=model.config.max_len)
    source_start, target_start = len(source_tokenizer.prefix_ids), len(target_tokenizer.prefix_ids)
    source_words = piece_words(source_tokenizer.pieces(source_ids[source_start:-1]))
    target_words = piece_words(target_tokenizer.pieces(target_body[target_start:]))
    if len(set(source_words)) != len(source.split()):
        raise InputError(code="align.source_pieces_not_words", line=line, words=len(source.split()),
                         pieces=len(set(source_words)))
    if len(set(target_words)) != len(target.split()):
        raise InputError(code="align.target_pieces_not_words", line=line, words=len(target.split()),
                         pieces=len(set(target_words)))
    return PairPieces(source_ids, target_body, source_words, target_words, source_start, target_start)


@dataclass
class PieceScores:
    """Every method's scores of one pair, (decoder layers, decoder positions, source positions): row t is the step
    whose input is ``target_ids[t]`` (bos first) and which predicts the next."""

    attention: Tensor
    norm: Tensor
    alti: Tensor | None  # None where it was not asked for: decomposing every block costs more than the rest


@torch.inference_mode()
def piece_scores_together(model: Transformer, sources: list[list[int]], targets: list[list[int]],
                          alti: bool = True) -> list[PieceScores]:
    """Every method's scores of several pairs from one teacher-forced pass over them, padded into a batch:
    ``sources`` ending with eos, ``targets`` the decoder's inputs (its start token first); ALTI+'s only if
    ``alti``."""
    records = record_blocks(model, sources, targets)
    source_rollout = compose(*[blocks_of(model, records, kind) for kind in ("encoder", "decoder", "cross")])[0] \
        if alti else None
    scores = []
    for row, (source_ids, target_ids) in enumerate(zip(sources, targets)):
        keys, queries = len(source_ids), len(target_ids)
        attention, norm = [], []
        for (module, _), record in zip(attention_blocks(model)["cross"], records["cross"]):
            weights = record.weights[row, :, :queries, :keys].float()
            attention.append(weights.mean(0))
            brought = through_output(module, record.memory[row:row + 1, :keys])[0]     # (H, keys, d_model)
            norm.append(torch.einsum("hqk,hkd->qkd", weights, brought).norm(dim=-1))
        scores.append(PieceScores(torch.stack(attention).cpu(), torch.stack(norm).cpu(),
                                  source_rollout[row, :, :queries, :keys].cpu() if alti else None))
    return scores


def method_map(scores: PieceScores, method: str, layer: int | None) -> Tensor:
    """One method's (decoder positions, source positions) map at ``layer`` (None: every layer, module docstring)."""
    maps = scores.alti if method == "alti" else scores.norm if method == "norm" else scores.attention
    if layer is not None:
        return maps[layer - 1]
    return maps[-1] if method == "alti" else maps.mean(0)


def word_links(scores: PieceScores, pair: PairPieces, method: str, layer: int | None) -> set[Link]:
    """The word links one method reads from one pair's scores."""
    rows = torch.arange(len(pair.target_words)) + pair.target_start + (method == "shift-att")
    columns = torch.arange(len(pair.source_words)) + pair.source_start
    return hard_links(method_map(scores, method, layer)[rows][:, columns], pair.target_words, pair.source_words)


def check_method(model: Transformer, method: str, layer: int | None) -> None:
    if method not in METHODS:
        raise InputError(code="align.unknown_method", method=method, methods=", ".join(METHODS))
    if layer is not None and not 1 <= layer <= model.config.n_decoder_layers:
        raise InputError(code="align.no_layer", layer=layer, layers=model.config.n_decoder_layers)


def align(model: Transformer, source_tokenizer: Tokenizer, target_tokenizer: Tokenizer, pairs: list[tuple[str, str]],
          methods: list[tuple[str, int | None]], progress=None) -> dict[tuple[str, int | None], list[set[Link]]]:
    """Each (method, layer)'s word links for every pair, from one pass per batch of pairs (the longest together,
    so padding stays small). ``progress(done, total)`` hears after each batch."""
    model.eval()
    for method, layer in methods:
        check_method(model, method, layer)
    encoded = [pair_pieces(model, source_tokenizer, target_tokenizer, source, target, line)
               for line, (source, target) in enumerate(pairs, start=1)]
    order = sorted(range(len(encoded)), key=lambda i: -len(encoded[i].source_ids) - len(encoded[i].target_body))
    links: dict[tuple[str, int | None], list[set[Link]]] = {choice: [set()] * len(pairs) for choice in methods}
    for start in range(0, len(order), SENTENCES_AT_ONCE):
        batch = order[start:start + SENTENCES_AT_ONCE]
        scored = piece_scores_together(model, [encoded[i].source_ids for i in batch],
                                       [[model.config.start_id] + encoded[i].target_body for i in batch],
                                       alti=any(method == "alti" for method, _ in methods))
        for index, scores in zip(batch, scored):
            for method, layer in methods:
                links[(method, layer)][index] = word_links(scores, encoded[index], method, layer)
        if progress is not None:
            progress(min(start + SENTENCES_AT_ONCE, len(order)), len(order))
    return links


def every_method(model: Transformer) -> list[tuple[str, int | None]]:
    """Each method at each decoder layer, then over every layer."""
    layers = [*range(1, model.config.n_decoder_layers + 1), None]
    return [(method, layer) for method in METHODS for layer in layers]
