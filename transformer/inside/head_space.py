"""A head's queries and keys over a corpus, seen together, and the corpus's tokens nearest to one.

**Queries and keys in one picture** (AttentionViz: Yeh et al., 2023, "AttentionViz: A Global View of Transformer
Attention", section 4). A head's weight on key j from query i grows with q_i · k_j (section 3.2.1), so a picture
that puts each query near the keys it matches shows what the head looks for. Two changes that leave every weight
as it was make queries and keys comparable: the queries are scaled by α and the keys by 1/α so that they spread
as far about their means (q · k is unchanged), and the keys are moved so their mean is the queries' mean
(q · (k + c) adds the same q · c to every key of a row, which the softmax ignores). Then both are projected together onto their two principal
components (PCA, the choice measured in docs/corpus.md: exact, repeatable, milliseconds for a corpus).

**The nearest tokens** (exBERT: Hoover et al., 2020, "exBERT: A Visual Analysis Tool to Explore Learned
Representations in Transformer Models"): a token's state entering a layer, compared by cosine similarity with every
token's state entering the same layer on the same side, over the whole corpus.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..paper.model import Transformer
from .corpus_run import CorpusRun
from .one_head import KINDS, block_modules


@dataclass(frozen=True)
class Place:
    """Where a token is in the corpus: its sentence and position (from 0), and its piece."""

    sentence: int
    position: int
    piece: str


@dataclass
class HeadSpace:
    """One head's queries (rows, d_k) and keys (rows, d_k) over a corpus, each row's place, and ``points``: the
    queries' and then the keys' two coordinates in the joint projection (module docstring)."""

    queries: Tensor
    keys: Tensor
    query_places: list[Place]
    key_places: list[Place]
    points: Tensor


def query_and_key_inputs(run: CorpusRun, kind: str, layer: int, sentence: int) -> tuple[Tensor, Tensor]:
    """What the head's queries and keys were projected from in one sentence: (queries, d_model), (keys, d_model)."""
    states = run.states[sentence]
    if kind == "encoder":
        return states["encoder"][layer - 1], states["encoder"][layer - 1]
    if kind == "decoder":
        return states["decoder"][layer - 1], states["decoder"][layer - 1]
    return states["cross"][layer - 1], states["memory"]


@torch.inference_mode()
def head_space(run: CorpusRun, model: Transformer, kind: str, layer: int, head: int) -> HeadSpace:
    """Head ``head`` of ``kind`` in ``layer`` (both from 1) over every sentence of ``run``."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    attention, _ = block_modules(model, kind, layer)
    if not 1 <= head <= attention.n_heads:
        raise ValueError(f"head {head} does not exist: the layer has {attention.n_heads} heads (from 1)")
    d_model, d_head = attention.d_model, attention.d_model // attention.n_heads
    columns = slice((head - 1) * d_head, head * d_head)
    queries, keys, query_places, key_places = [], [], [], []
    for number, sentence in enumerate(run.sentences):
        query_input, key_input = query_and_key_inputs(run, kind, layer, number)
        dtype = attention.in_proj.weight.dtype
        queries.append(attention.project_rows(query_input.to(model.device, dtype), slice(0, d_model))[:, columns])
        keys.append(attention.project_rows(key_input.to(model.device, dtype), slice(d_model, 2 * d_model))[:, columns])
        query_pieces = sentence.source_pieces if kind == "encoder" else sentence.target_pieces
        key_pieces = sentence.target_pieces if kind == "decoder" else sentence.source_pieces
        query_places += [Place(number, position, piece) for position, piece in enumerate(query_pieces)]
        key_places += [Place(number, position, piece) for position, piece in enumerate(key_pieces)]
    queries, keys = torch.cat(queries).float().cpu(), torch.cat(keys).float().cpu()
    return HeadSpace(queries, keys, query_places, key_places, joint_projection(queries, keys))


def comparable(queries: Tensor, keys: Tensor) -> tuple[Tensor, Tensor]:
    """Queries and keys scaled and moved so that distances between them can be read (module docstring): each
    spread as far about its mean, the keys' mean on the queries'; every product q · k of a row changed by the same
    amount."""
    def spread(vectors: Tensor) -> Tensor:
        return (vectors - vectors.mean(0)).norm(dim=-1).mean()

    scale = (spread(keys) / spread(queries).clamp_min(1e-12)).sqrt()
    queries, keys = queries * scale, keys / scale
    return queries, keys - keys.mean(0) + queries.mean(0)


def joint_projection(queries: Tensor, keys: Tensor) -> Tensor:
    """(queries + keys, 2): both, made comparable, on their first two principal components; each component's sign
    chosen so its largest coordinate is positive, so the same vectors give the same picture."""
    queries, keys = comparable(queries, keys)
    points = torch.cat([queries, keys]).double()
    centred = points - points.mean(0)
    _, _, right = torch.linalg.svd(centred, full_matrices=False)
    projected = centred @ right[:2].T
    largest = projected.gather(0, projected.abs().argmax(0, keepdim=True))
    return (projected * largest.sign()).float()


@dataclass
class Neighbour:
    place: Place
    similarity: float


def token_states(run: CorpusRun, side: str, layer: int) -> tuple[Tensor, list[Place]]:
    """Every token's state entering ``layer`` (from 1; one past the last: the encoder's output) of ``side``
    (``source`` or ``target``), over the corpus, with its place."""
    states, places = [], []
    for number, sentence in enumerate(run.sentences):
        saved = run.states[number]
        if side == "source":
            stacked = saved["encoder"]
            states.append(saved["memory"] if layer == len(stacked) + 1 else stacked[layer - 1])
            pieces = sentence.source_pieces
        else:
            states.append(saved["decoder"][layer - 1])
            pieces = sentence.target_pieces
        places += [Place(number, position, piece) for position, piece in enumerate(pieces)]
    return torch.cat(states).float(), places


def nearest_tokens(states: Tensor, places: list[Place], token: Place, count: int = 10) -> list[Neighbour]:
    """The ``count`` tokens whose states point most nearly the way ``token``'s does (cosine similarity), the token
    itself left out, the most similar first."""
    index = places.index(token)
    unit = states / states.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    similarity = unit @ unit[index]
    similarity[index] = -2.0
    best = torch.topk(similarity, min(count, len(places) - 1))
    return [Neighbour(places[i], float(s)) for s, i in zip(best.values.tolist(), best.indices.tolist())]
