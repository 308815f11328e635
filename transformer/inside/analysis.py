"""Summaries of attention that no single heatmap shows: per-head statistics, word alignments, the beam tree.

All functions take tensors and token lists and return plain numbers, so they
are tested on hand-computed cases.
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass

import torch
from torch import Tensor

from ..paper.decoding import BeamStep
from ..paper.tokenizer import WORD_START
from ..paper.translation import Translation

SPECIAL_TOKENS = ("<s>", "</s>", "<pad>", "<unk>")


# --- per-head statistics --------------------------------------------------------------------------

@dataclass
class HeadStatistics:
    kind: str
    layer: int          # 1-based
    head: int           # 1-based
    entropy: float      # nats, mean over query rows
    distance: float     # mean |query - key| in positions, weighted by attention
    special_share: float  # attention mass on <s> / </s>
    diagonality: float  # mean weight on the (scaled) diagonal key of each row


def diagonal_keys(queries: int, keys: int) -> Tensor:
    """For each query row, the key on the diagonal (stretched when the map is not square)."""
    if queries == 1:
        return torch.zeros(1, dtype=torch.long)
    return torch.round(torch.arange(queries, dtype=torch.float32) * (keys - 1) / (queries - 1)).long()


def map_statistics(weights: Tensor, key_labels: list[str]) -> dict[str, float]:
    """Statistics of one (queries, keys) attention map whose rows sum to 1."""
    weights = weights.float()
    queries, keys = weights.shape
    entropy = -(weights * torch.log(weights.clamp_min(1e-12))).sum(-1).mean()
    offsets = (torch.arange(queries).unsqueeze(1) - torch.arange(keys).unsqueeze(0)).abs().float()
    distance = (weights * offsets).sum(-1).mean()
    special = torch.tensor([label in SPECIAL_TOKENS for label in key_labels])
    special_share = weights[:, special].sum(-1).mean() if special.any() else torch.tensor(0.0)
    diagonality = weights[torch.arange(queries), diagonal_keys(queries, keys)].mean()
    return {"entropy": float(entropy), "distance": float(distance), "special_share": float(special_share),
            "diagonality": float(diagonality)}


def head_statistics(translation: Translation) -> list[HeadStatistics]:
    """Statistics of every head of the three attention types for one translation."""
    maps = {"encoder": (translation.encoder_attention, translation.source_pieces),
            "decoder": (translation.decoder_attention, translation.target_pieces),
            "cross": (translation.cross_attention, translation.source_pieces)}
    rows = []
    for kind, (attention, key_labels) in maps.items():
        for layer in range(attention.shape[0]):
            for head in range(attention.shape[1]):
                rows.append(HeadStatistics(kind, layer + 1, head + 1, **map_statistics(attention[layer, head], key_labels)))
    return rows


def mean_statistics(per_sentence: list[list[HeadStatistics]]) -> list[HeadStatistics]:
    """Average the statistics of the same heads over several sentences."""
    first = per_sentence[0]
    averaged = []
    for i, stat in enumerate(first):
        values = [sentence[i] for sentence in per_sentence]
        averaged.append(HeadStatistics(stat.kind, stat.layer, stat.head,
                                       *(sum(getattr(v, f) for v in values) / len(values)
                                         for f in ("entropy", "distance", "special_share", "diagonality"))))
    return averaged


# --- words from pieces ----------------------------------------------------------------------------

def _is_punctuation(piece: str) -> bool:
    text = piece.replace(WORD_START, "")
    return bool(text) and all(unicodedata.category(ch).startswith("P") for ch in text)


def words_from_pieces(pieces: list[str]) -> tuple[list[str], list[int]]:
    """Merge sentencepiece pieces into words; returns the words and, for each piece, its word index.

    A piece starting with "▁" starts a word; special tokens and punctuation
    stand alone, so attention that sinks into "</s>" or "." stays visible.
    """
    words: list[str] = []
    index: list[int] = []
    for piece in pieces:
        alone = piece in SPECIAL_TOKENS or _is_punctuation(piece)
        if alone or piece.startswith(WORD_START) or not words or words[-1] in SPECIAL_TOKENS \
                or _is_punctuation(words[-1]):
            words.append(piece.replace(WORD_START, "") or WORD_START)
        else:  # a lone "▁" piece starts the word the next pieces write
            words[-1] = ("" if words[-1] == WORD_START else words[-1]) + piece
        index.append(len(words) - 1)
    return words, index


def word_attention(weights: Tensor, query_pieces: list[str], key_pieces: list[str]) -> tuple[Tensor, list[str], list[str]]:
    """A (query words, key words) map: keys summed within a word, query rows averaged within a word."""
    query_words, query_index = words_from_pieces(query_pieces)
    key_words, key_index = words_from_pieces(key_pieces)
    by_key = torch.zeros(weights.shape[0], len(key_words))
    by_key.index_add_(1, torch.tensor(key_index), weights.float())
    merged = torch.zeros(len(query_words), len(key_words))
    merged.index_add_(0, torch.tensor(query_index), by_key)
    counts = torch.bincount(torch.tensor(query_index), minlength=len(query_words)).clamp_min(1).unsqueeze(1)
    return merged / counts, query_words, key_words


# --- beam tree -----------------------------------------------------------------------------------

@dataclass
class BeamNode:
    step: int           # 1-based decoding step
    token: int
    log_prob: float     # cumulative
    parent: int | None  # index of the parent node in the node list (None: child of <s>)
    status: str         # "kept" | "finished" | "pruned"


def beam_tree(steps: list[BeamStep]) -> list[BeamNode]:
    """Every candidate the search considered, linked to the live beam it extended."""
    dead = -1
    nodes: list[BeamNode] = []
    live_nodes: list[int | None] = [None]  # node of each live beam of the previous step; None is <s>
    for number, step in enumerate(steps, start=1):
        new_live: dict[int, int] = {}
        for c, (parent, token, log_prob, finished) in enumerate(zip(step.parents, step.tokens, step.log_probs,
                                                                    step.finished)):
            if not math.isfinite(log_prob) or parent >= len(live_nodes) or live_nodes[parent] == dead:
                continue
            status = "finished" if finished else "kept" if c in step.kept else "pruned"
            nodes.append(BeamNode(number, token, log_prob, live_nodes[parent], status))
            if status == "kept":
                new_live[c] = len(nodes) - 1
        live_nodes = [new_live.get(c, dead) for c in step.kept]
        if all(node == dead for node in live_nodes):
            break
    return nodes
