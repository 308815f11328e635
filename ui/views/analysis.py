"""The Analysis tab: beam search as a tree, word alignment, and statistics of every head."""

from __future__ import annotations

import plotly.graph_objects as go
import torch

from transformer.files.checkpoint import Checkpoint
from transformer.inside import analysis
from transformer.paper.decoding import Translation, beam_search, encode_source, forced_decode

from .. import figures
from .choices import VIEWS, clamp
from .text import clean_text
from .translate import MAX_BEAM, attention_figure, one_map

STATISTICS_HEADERS = ["attention", "layer", "head", "entropy (nats)", "mean distance", "share on <s>/</s>",
                      "diagonality"]


def beam_view(checkpoint: Checkpoint, text: str, beam_size: int = 5, length_penalty: float = 1.0):
    """(tree figure, hypotheses table rows, state for ``hypothesis_attention``) for one sentence."""
    cleaned, _ = clean_text(text)
    model, target_tokenizer = checkpoint.model, checkpoint.target_tokenizer
    beam_size = clamp(beam_size, 2, MAX_BEAM)
    source_ids, _ = encode_source(model, checkpoint.source_tokenizer, cleaned)
    src = torch.tensor([source_ids], device=model.device)
    results, steps = beam_search(model, src, beam_size, float(length_penalty), return_steps=True,
                                 rules=checkpoint.rules)
    nodes = analysis.beam_tree(steps[0])
    pieces = [target_tokenizer.piece(node.token) for node in nodes]
    figure = figures.beam_tree_figure(nodes, pieces, f"Beam search with {beam_size} beams, length penalty "
                                                     f"{float(length_penalty):g}")
    rows = [[rank + 1, target_tokenizer.decode(h.tokens), round(h.log_prob, 3), len(h.tokens) + 1, round(h.score, 3)]
            for rank, h in enumerate(results[0])]
    return figure, rows, {"source_ids": source_ids, "hypotheses": [(h.tokens, h.ended) for h in results[0]]}


def hypothesis_attention(checkpoint: Checkpoint, beam_state: dict, rank: int) -> go.Figure:
    """Cross-attention of hypothesis ``rank`` (0-based) of the beam that ``beam_view`` drew."""
    tokens, ended = beam_state["hypotheses"][rank]
    tr = forced_decode(checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer,
                       beam_state["source_ids"], tokens, ended=ended)
    return attention_figure(tr, "cross", VIEWS[0], tr.cross_attention.shape[0], 1, average_heads=True)


def alignment_view(translation: Translation, layer: int | None = None, head: int | None = None) -> go.Figure:
    """Word alignment from cross-attention of one layer (default: the last) and head (None: mean of heads)."""
    layer = translation.cross_attention.shape[0] if layer is None else layer
    weights, which = one_map(translation, "cross", layer, head)
    merged, target_words, source_words = analysis.word_attention(weights, translation.predicted_pieces,
                                                                 translation.source_pieces)
    return figures.alignment_figure(merged, source_words, target_words, f"Alignment from cross-attention ({which})")


def statistics_rows(stats: list[analysis.HeadStatistics]) -> list[list]:
    return [[s.kind, s.layer, s.head, round(s.entropy, 3), round(s.distance, 2), round(s.special_share, 3),
             round(s.diagonality, 3)] for s in stats]


def sample_statistics(checkpoint: Checkpoint, sentences: list[str]) -> list[analysis.HeadStatistics]:
    per_sentence = [analysis.head_statistics(checkpoint.translate(s)) for s in sentences]
    return analysis.mean_statistics(per_sentence)
