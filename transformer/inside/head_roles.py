"""What each head does over many sentences: how often it looks at the previous, the same or the next token, how
much it rests on the sentence's special tokens, how broadly it looks, how confident it is (Voita et al., 2019,
"Analyzing Multi-Head Self-Attention", section 4: the mean of each row's largest weight), how often a
cross-attention head's favourite source token is the one the model's best word alignment picks
(``alignment.py``: ALTI+, which scores best on the Hansards gold, docs/corpus.md), and which head it is most like
(Clark et al., 2019, "What Does BERT Look At?", section 6: the Jensen-Shannon divergence between two heads'
weights on the same rows).

Each sentence adds its **sums** (``SentenceSums``); a corpus's figure is the sum over its sentences divided by its
rows, so it does not depend on how the sentences were batched or saved. Every query row counts, ``<s>`` and ``</s>``
included; the row that predicts ``</s>`` and a multilingual model's forced language steps do not count for
alignment, which is about words. The decoder's first row sees only ``<s>``, so every decoder head counts it as
``same`` and puts all its weight there (``special``, confidence 1, entropy 0); the figures keep it (decoder layer 1
head 3 of the bundled English→German model over the first 200 test sentences: ``same`` 61.5%, 58.6% without the
first rows).

A head's **role** (``role_of``) names what it does on at least half (``MOST``) of its rows, or of its weight for
``special``: ``previous``, ``same`` or ``next`` first, then ``aligned``, ``special``, ``broad`` (``spread`` at least
``BROAD``), else ``mixed``. Half is a lower bar than Voita et al.'s positional heads (section 5), whose largest weight
falls on one relative position on at least 90% of rows: a role names what a head does more often than anything else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ..paper.translation import Translation
from .one_head import KINDS

# Each head's sums, in this order: rows; rows whose largest weight is on the previous, the same and the next
# position; weight on special tokens; entropy (nats); entropy over its most (log of the keys it sees); largest
# weight; rows whose largest word weight is the alignment's word piece, and the rows that could be.
STATISTICS = ("rows", "previous", "same", "next", "special", "entropy", "spread", "confidence", "aligned",
              "alignable")
# What names a head's role: the share of its rows (or of its weight, for special tokens; of its entropy's most,
# for broad) that does one thing. Half: the label says what the head does more often than anything else.
MOST = 0.5
BROAD = 0.75  # a row whose entropy is three quarters of uniform attention's spreads over most of its keys


@dataclass
class SentenceSums:
    """One sentence's sums per kind: ``heads`` (layers, heads, STATISTICS) and ``unlike`` (layers × heads,
    layers × heads), each pair of heads' Jensen-Shannon divergence summed over the kind's rows."""

    heads: dict[str, Tensor]
    unlike: dict[str, Tensor]


def pairwise_divergence(maps: Tensor) -> Tensor:
    """Jensen-Shannon divergence (nats, at most ln 2) of every pair of heads' rows, summed over rows: ``maps``
    (heads, queries, keys) → (heads, heads); one head against all at a time, so that a model of many heads and a
    long sentence holds (heads, queries, keys) at once, not (heads, heads, queries, keys)."""
    def kl(a: Tensor, b: Tensor) -> Tensor:
        return torch.where(a > 0, a * (a.clamp_min(1e-30).log() - b.clamp_min(1e-30).log()), 0.0).sum(-1)

    rows = []
    for head in maps:
        middle = (head + maps) / 2
        rows.append(((kl(head.expand_as(maps), middle) + kl(maps, middle)) / 2).sum(-1))
    return torch.stack(rows)


def map_sums(maps: Tensor, special_keys: Tensor, positional: bool, causal: bool,
             alignable: Tensor | None = None, word_keys: Tensor | None = None,
             alignment: Tensor | None = None) -> Tensor:
    """The sums of every head of one kind over one sentence: ``maps`` (layers, heads, queries, keys) whose rows
    sum to 1; ``special_keys`` (keys,) bool; ``positional``: whether query i and key i are one position (self-
    attention); ``causal``: row i sees keys up to i. For cross-attention, ``alignable`` rows, ``word_keys`` columns
    and ``alignment`` (the column each alignable row's word piece aligns to) → (layers, heads, STATISTICS)."""
    maps = maps.double()
    layers, heads, queries, keys = maps.shape
    best = maps.argmax(-1)
    rows = torch.arange(queries)
    seen = rows + 1 if causal else torch.full((queries,), keys)
    entropy = -torch.where(maps > 0, maps * maps.clamp_min(1e-300).log(), 0.0).sum(-1)
    spread = torch.where(seen > 1, entropy / seen.double().log().clamp_min(1e-300), 0.0)
    sums = torch.zeros(layers, heads, len(STATISTICS), dtype=torch.float64)
    sums[..., STATISTICS.index("rows")] = queries
    if positional:
        for name, offset in (("previous", -1), ("same", 0), ("next", 1)):
            sums[..., STATISTICS.index(name)] = (best == rows + offset).sum(-1).double()
    sums[..., STATISTICS.index("special")] = maps[..., special_keys].sum((-1, -2))
    sums[..., STATISTICS.index("entropy")] = entropy.sum(-1)
    sums[..., STATISTICS.index("spread")] = spread.sum(-1)
    sums[..., STATISTICS.index("confidence")] = maps.max(-1).values.sum(-1)
    if alignable is not None and len(alignable):
        favourite = word_keys[maps[:, :, alignable][..., word_keys].argmax(-1)]
        sums[..., STATISTICS.index("aligned")] = (favourite == alignment).sum(-1).double()
        sums[..., STATISTICS.index("alignable")] = len(alignable)
    return sums


def sentence_sums(translation: Translation, source_specials: int, alignment: Tensor) -> SentenceSums:
    """The sums of every head of one translation. ``source_specials``: how many of the source's first positions
    are a language token (its last, ``</s>``, is special too); ``alignment`` (the alignable rows,): the source
    position each word piece the model wrote aligns to (``alignable_rows``)."""
    sources, targets = len(translation.source_ids), len(translation.target_ids)
    source_special = torch.zeros(sources, dtype=torch.bool)
    source_special[:source_specials] = True
    source_special[-1] = True
    target_special = torch.zeros(targets, dtype=torch.bool)
    target_special[:1 + translation.forced_steps] = True
    rows, word_keys = alignable_rows(translation), torch.arange(source_specials, sources - 1)
    heads = {"encoder": map_sums(translation.encoder_attention, source_special, positional=True, causal=False),
             "decoder": map_sums(translation.decoder_attention, target_special, positional=True, causal=True),
             "cross": map_sums(translation.cross_attention, source_special, positional=False, causal=False,
                               alignable=rows, word_keys=word_keys, alignment=alignment)}
    maps = {"encoder": translation.encoder_attention, "decoder": translation.decoder_attention,
            "cross": translation.cross_attention}
    unlike = {kind: pairwise_divergence(m.double().flatten(0, 1)) for kind, m in maps.items()}
    return SentenceSums(heads, unlike)


def alignable_rows(translation: Translation) -> Tensor:
    """The decoder rows that predict a word piece: past the forced language steps, before the row that predicts
    ``</s>`` (every row of a translation cut at its length limit predicts a piece)."""
    end = translation.num_steps - (1 if translation.ended else 0)
    return torch.arange(translation.forced_steps, end)


@dataclass
class HeadRole:
    """One head's figures over a corpus (``role`` names what it does most, module docstring)."""

    kind: str
    layer: int              # from 1
    head: int               # from 1
    role: str               # previous, same, next, aligned, special, broad or mixed
    confidence: float
    previous: float | None  # share of rows; None for cross-attention, whose queries and keys are not one sequence
                            # (nor ``next`` for the decoder's, which never sees it)
    same: float | None
    next: float | None
    special: float
    entropy: float
    spread: float
    aligned: float | None   # share of alignable rows; None for self-attention
    most_alike: dict        # {"layer", "head", "divergence"}: the head of the same kind closest to this one
    examples: list[int]     # the sentences (from 0) where it does its role most, most first

    def to_json(self) -> dict:
        rounded = {name: (None if value is None else round(value, 6)) for name, value in vars(self).items()
                   if isinstance(value, float) or value is None}
        return {"kind": self.kind, "layer": self.layer, "head": self.head, "role": self.role, **rounded,
                "most_alike": self.most_alike, "examples": [index + 1 for index in self.examples]}


def role_of(figures: dict[str, float | None]) -> str:
    """The role a head's figures name (module docstring): positional first, then aligned, special and broad."""
    positional = {name: figures[name] for name in ("previous", "same", "next") if figures[name] is not None}
    if positional and max(positional.values()) >= MOST:
        return max(positional, key=positional.get)
    if figures["aligned"] is not None and figures["aligned"] >= MOST:
        return "aligned"
    if figures["special"] >= MOST:
        return "special"
    if figures["spread"] >= BROAD:
        return "broad"
    return "mixed"


def role_measure(role: str) -> str:
    """The statistic that says how much a sentence shows a role."""
    return {"aligned": "aligned", "special": "special", "broad": "spread", "mixed": "confidence"}.get(role, role)


def head_roles(sentences: list[dict[str, Tensor]], unlike: dict[str, Tensor], examples: int = 3) -> list[HeadRole]:
    """Every head's figures over the corpus, from each sentence's ``SentenceSums.heads`` and the sum of their
    ``unlike``; ``examples`` sentences per head."""
    roles = []
    for kind in KINDS:
        per_sentence = torch.stack([sums[kind] for sums in sentences]).double()     # (sentences, layers, heads, S)
        total = per_sentence.sum(0)
        divergence = unlike[kind].double() / total[0, 0, 0].clamp_min(1)
        divergence.fill_diagonal_(math.inf)
        layers, heads = total.shape[:2]
        for layer in range(layers):
            for head in range(heads):
                figures = figures_of(total[layer, head], kind)
                role = role_of(figures)
                closest = int(divergence[layer * heads + head].argmin())
                measure = per_sentence[:, layer, head, STATISTICS.index(role_measure(role))]
                by = (per_sentence[:, layer, head, STATISTICS.index("alignable" if role == "aligned" else "rows")]
                      .clamp_min(1))
                shown = torch.sort(measure / by, descending=True, stable=True).indices[:examples].tolist()
                roles.append(HeadRole(kind, layer + 1, head + 1, role, most_alike={
                    "layer": closest // heads + 1, "head": closest % heads + 1,
                    "divergence": round(float(divergence[layer * heads + head, closest]), 6)} if layers * heads > 1
                    else None, examples=shown, **figures))
    return roles


def figures_of(total: Tensor, kind: str) -> dict[str, float | None]:
    """A head's corpus figures from its summed STATISTICS."""
    value = dict(zip(STATISTICS, total.tolist()))
    rows = max(value["rows"], 1)
    positional = kind != "cross"
    return {"confidence": value["confidence"] / rows,
            **{name: value[name] / rows if positional else None for name in ("previous", "same")},
            "next": value["next"] / rows if kind == "encoder" else None,  # a decoder's row never sees the next
            "special": value["special"] / rows, "entropy": value["entropy"] / rows, "spread": value["spread"] / rows,
            "aligned": value["aligned"] / value["alignable"] if kind == "cross" and value["alignable"] else None}
