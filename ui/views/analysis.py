"""The Analysis tab: beam search as a tree, word alignment, and statistics of every head."""

from __future__ import annotations

import plotly.graph_objects as go
import torch

from transformer.files.checkpoint import Checkpoint
from transformer.inside import analysis
from transformer.paper.decoding import beam_search
from transformer.paper.sentences import encode_source
from transformer.paper.translation import Translation, forced_decode

from .. import charts
from ..runtime.language import ENGLISH, Number, said, table
from ..runtime.language import text as words
from .choices import clamp, kind_key
from .text import clean_text
from .translate import MAX_BEAM, map_of, one_map, which_message

# The tables' column headers, by key (ui/locales/): the hypotheses of a beam, and the statistics of every head.
HYPOTHESES_HEADERS = tuple(f"analysis.header.{name}" for name in ("rank", "translation", "log_p", "length", "score"))
STATISTICS_HEADERS = tuple(f"analysis.header.{name}" for name in ("attention", "layer", "head", "entropy", "distance",
                                                                  "special_share", "diagonality"))
KINDS = ("encoder", "decoder", "cross")  # a statistics row's kind of attention, as analysis.head_statistics names it


def beam_view(checkpoint: Checkpoint, text: str, beam_size: int = 5, length_penalty: float = 1.0,
              language: str = ENGLISH):
    """(tree figure, hypotheses table rows, state for ``hypothesis_attention``) for one sentence; the figure's
    words in ``language``."""
    cleaned, _ = clean_text(text)
    model, target_tokenizer = checkpoint.model, checkpoint.target_tokenizer
    beam_size = clamp(beam_size, 2, MAX_BEAM)
    source_ids, _ = encode_source(model, checkpoint.source_tokenizer, cleaned)
    src = torch.tensor([source_ids], device=model.device)
    results, steps = beam_search(model, src, beam_size, float(length_penalty), return_steps=True,
                                 rules=checkpoint.rules, forced=target_tokenizer.prefix_ids)
    nodes = analysis.beam_tree(steps[0])
    pieces = [target_tokenizer.piece(node.token) for node in nodes]
    figure = charts.beam_tree_figure(nodes, pieces, words(language, "analysis.beam_title", beams=beam_size,
                                                           penalty=Number(float(length_penalty), "g")),
                                      language=language)
    rows = [[rank + 1, target_tokenizer.decode(h.tokens), round(h.log_prob, 3), len(h.tokens) + 1, round(h.score, 3)]
            for rank, h in enumerate(results[0])]
    return figure, rows, {"source_ids": source_ids, "hypotheses": [(h.tokens, h.ended) for h in results[0]]}


def hypothesis_attention(checkpoint: Checkpoint, beam_state: dict, rank: int, language: str = ENGLISH) -> go.Figure:
    """Cross-attention of hypothesis ``rank`` (0-based) of the beam that ``beam_view`` drew: the mean of the last
    layer's heads."""
    tokens, ended = beam_state["hypotheses"][rank]
    tr = forced_decode(checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer,
                       beam_state["source_ids"], tokens, ended=ended)
    return head_figure(tr, "cross", tr.cross_attention.shape[0], None, language)


def head_figure(translation: Translation, kind: str, layer: int, head: int | None,
                language: str = ENGLISH) -> go.Figure:
    """One head's map (None: the mean of the layer's heads), as the Translate tab draws it, in ``language``."""
    return map_of(translation, kind, layer, head).figure(language)


def alignment_view(translation: Translation, layer: int | None = None, head: int | None = None,
                   language: str = ENGLISH) -> go.Figure:
    """Word alignment from cross-attention of one layer (default: the last) and head (None: mean of heads)."""
    layer = translation.cross_attention.shape[0] if layer is None else layer
    weights, _ = one_map(translation, "cross", layer, head)
    merged, target_words, source_words = analysis.word_attention(weights, translation.predicted_pieces,
                                                                 translation.source_pieces)
    which = said(which_message(translation, "cross", layer, head), language)
    return charts.alignment_figure(merged, source_words, target_words,
                                    words(language, "analysis.alignment_title", which=which), language=language)


def statistics_rows(stats: list[analysis.HeadStatistics], language: str = ENGLISH) -> list[list]:
    """A row per head; its kind of attention in ``language`` (``statistics_kind`` reads it back)."""
    return [[words(language, f"analysis.kind.{s.kind}"), s.layer, s.head, round(s.entropy, 3), round(s.distance, 2),
             round(s.special_share, 3), round(s.diagonality, 3)] for s in stats]


def statistics_kind(shown: str, language: str = ENGLISH) -> str:
    """The kind of attention of a statistics row, as ``statistics_rows`` wrote it in ``language``: its key."""
    named = {table(language)[f"analysis.kind.{kind}"]: kind for kind in KINDS}
    return named.get(shown) or kind_key(shown)


def sample_statistics(checkpoint: Checkpoint, sentences: list[str]) -> list[analysis.HeadStatistics]:
    per_sentence = [analysis.head_statistics(checkpoint.translate(s)) for s in sentences]
    return analysis.mean_statistics(per_sentence)
