"""The Analysis tab: beam search as a tree, word alignment, and statistics of every head."""

from __future__ import annotations

import json

import plotly.graph_objects as go
import torch

from transformer.files.checkpoint import Checkpoint
from transformer.inside import alignment, analysis
from transformer.paper.decoding import beam_search
from transformer.paper.sentences import encode_source
from transformer.paper.translation import Translation, forced_decode

from ..drawing import charts
from ..runtime.language import ENGLISH, Message, Number, message, said, table
from ..runtime.language import text as words
from .choices import kind_key
from ..runtime.numbers import clamp
from .text import clean_text
from .translate import MAX_BEAM, map_of, one_map, which_message

# The tables' column headers, by key (ui/locales/): the hypotheses of a beam, and the statistics of every head.
HYPOTHESES_HEADERS = tuple(f"analysis.header.{name}" for name in ("rank", "translation", "log_p", "length", "score"))
STATISTICS_HEADERS = tuple(f"analysis.header.{name}" for name in ("attention", "layer", "head", "entropy", "distance",
                                                                  "special_share", "diagonality"))
KINDS = ("encoder", "decoder", "cross")  # a statistics row's kind of attention, as analysis.head_statistics names it
ALIGNMENT_SCORES = "alignment.json"  # a checkpoint's readings scored against gold links (docs/corpus.md)


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
                   language: str = ENGLISH, method: str = "attention", checkpoint: Checkpoint | None = None
                   ) -> go.Figure:
    """Word alignment of one layer (default: the last) by ``method`` (``alignment_weights``), as lines from each
    target word to the source words."""
    rows, pieces, which = alignment_weights(translation, layer, head, method, checkpoint)
    merged, target_words, source_words = analysis.word_attention(rows, pieces, translation.source_pieces)
    return charts.alignment_figure(merged, source_words, target_words,
                                    words(language, f"analysis.alignment_title.{method}", which=said(which, language)),
                                    language=language)


def alignment_weights(translation: Translation, layer: int | None, head: int | None, method: str,
                      checkpoint: Checkpoint | None = None) -> tuple[torch.Tensor, list[str], Message]:
    """The rows of one layer's alignment by ``method`` (``transformer.inside.alignment``), each row a target piece
    over the source pieces, the pieces the rows are, and what the map is: the cross-attention of one head or the
    mean of the heads (None) at the step that writes each piece (``attention``) or reads it (``shift-att``, so the
    last piece written has no row); or what each source token brings through the layer (``norm``) or through the
    decoder up to it (``alti``, ALTI+), computed on ``checkpoint``'s model, as each piece's shares."""
    layers = translation.cross_attention.shape[0]
    layer = layers if layer is None else clamp(layer, 1, layers)
    if method in ("attention", "shift-att"):
        weights, _ = one_map(translation, "cross", layer, head)
        which = which_message(translation, "cross", layer, head)
        if method == "shift-att":
            return weights[1:], translation.predicted_pieces[:-1], which
        return weights, translation.predicted_pieces, which
    if method not in ("norm", "alti"):
        raise ValueError(f"unknown alignment method {method!r}")
    if checkpoint is None:
        raise ValueError(f"the {method} alignment is computed on the model: give its checkpoint")
    scores = alignment.piece_scores_together(checkpoint.model, [translation.source_ids], [translation.target_ids],
                                             alti=method == "alti")[0]
    brought = (scores.norm if method == "norm" else scores.alti)[layer - 1].double()
    return (brought / brought.sum(-1, keepdim=True).clamp_min(1e-12), translation.predicted_pieces,
            message("analysis.alignment_layer", layer=layer))


def alignment_scores_text(checkpoint: Checkpoint, language: str = ENGLISH) -> str:
    """What each reading of the model scored against gold links: a table of alignment error rates, a method a row
    and a layer a column (its ``alignment.json``, written by ``python -m transformer.align --method all --json``),
    or how to score it."""
    scored = read_alignment_scores(checkpoint)
    if not scored:
        return words(language, "analysis.alignment_not_measured")
    layers = sorted({row["layer"] for row in scored["methods"]}, key=lambda layer: (layer is None, layer or 0))
    aer = {(row["method"], row["layer"]): row["aer"] for row in scored["methods"]}
    headers = [words(language, "analysis.header.method"),
               *(words(language, "analysis.alignment_layer", layer=layer) if layer else
                 words(language, "analysis.alignment_all_layers") for layer in layers)]
    lines = [words(language, "analysis.alignment_scored", sentences=scored.get("sentences", "?"),
                   gold=scored.get("gold", "?")), "", "| " + " | ".join(headers) + " |", "|---" * len(headers) + "|"]
    for method in dict.fromkeys(row["method"] for row in scored["methods"]):
        cells = [said(Number(aer[(method, layer)], ".1%"), language) if (method, layer) in aer else ""
                 for layer in layers]
        lines.append(f"| {words(language, 'analysis.method.' + method)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def read_alignment_scores(checkpoint: Checkpoint) -> dict:
    """The checkpoint's ``alignment.json``; nothing where it has none, or one that cannot be read."""
    path = checkpoint.path / ALIGNMENT_SCORES if checkpoint.path else None
    try:
        scored = json.loads(path.read_text(encoding="utf-8")) if path and path.is_file() else {}
    except (OSError, ValueError):
        return {}
    rows = scored.get("methods") if isinstance(scored, dict) else None
    if not isinstance(rows, list) or not rows or not all(
            isinstance(row, dict) and row.get("method") in alignment.METHODS
            and (row.get("layer") is None or isinstance(row.get("layer"), int))
            and all(isinstance(row.get(name), (int, float)) for name in ("aer", "precision", "recall"))
            for row in rows):
        return {}
    return scored


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
