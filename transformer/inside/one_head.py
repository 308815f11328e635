"""Inside one attention head: how a query and the keys become weights, and the weights an output, in the model's
own numbers (equation 1 and section 3.2.2 of the paper).

    python -m transformer.inside_head "A dog runs across the grass." --kind cross --layer 2 --head 3 --query 4 --json

The numbers are not recomputed by a second implementation of attention: a teacher-forced pass over the
translation (the pass ``translate`` itself makes to record attention) runs the model's own modules, and hooks
keep what flowed into and out of them: the block's input, the per-head q, k and v, the mask, the softmax and the
heads' outputs. Only the steps in between that a student writes on the board (q·k, ÷ √d_k) are spelt out here,
and the tests hold them to the softmax the model computed.

Layers, heads and queries count from 1, as in the app; a query is a row of the ``translate --json`` matrices of
its kind: a source position for encoder attention, a decoder input position (``<s>`` first) otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ..paper.translation import Translation
from ..paper.model import AddAndNorm, HeadMask, MultiHeadAttention, ScaledDotProductAttention, Transformer
from .hooks import in_this_thread

KINDS = ("encoder", "decoder", "cross")


@dataclass
class BlockRecord:
    """What one attention block of one layer saw and made in a teacher-forced pass (batch of one).

    ``x`` (queries, d_model) is the block's input after the pre-norm (if any), ``residual`` the residual stream
    it is added to; ``q`` (H, queries, d_k), ``k`` and ``v`` (H, keys, d_k) the per-head projections; ``mask``
    (queries, keys), True where attention is allowed; ``weights`` (H, queries, keys) the softmax;
    ``heads`` (H, queries, d_k) each head's weighted sum of values; ``projected`` (queries, d_model) the heads
    concatenated and projected by W_O; ``block_output`` the residual stream after Add & Norm.
    """

    x: Tensor
    residual: Tensor
    q: Tensor
    k: Tensor
    v: Tensor
    mask: Tensor
    weights: Tensor
    heads: Tensor
    projected: Tensor
    block_output: Tensor


def block_modules(model: Transformer, kind: str, layer: int) -> tuple[MultiHeadAttention, AddAndNorm]:
    """The attention module of ``kind`` in ``layer`` (1-based) and the Add & Norm around it."""
    if kind == "encoder":
        owner = model.encoder.layers[layer - 1]
        return owner.self_attn, owner.self_attn_norm
    owner = model.decoder.layers[layer - 1]
    return (owner.self_attn, owner.self_attn_norm) if kind == "decoder" else (owner.cross_attn, owner.cross_attn_norm)


@torch.inference_mode()
def record_block(model: Transformer, source_ids: list[int], target_ids: list[int], kind: str, layer: int,
                 head_mask: HeadMask | None = None, positions: bool = True) -> BlockRecord:
    """Run the model over a source and a target prefix and keep what the chosen attention block computed
    (with ``head_mask`` and ``positions`` as the translation was made)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    model.eval()
    attention, add_and_norm = block_modules(model, kind, layer)
    seen: dict[str, object] = {}

    def on_block(module, args, output):
        seen["x"], seen["projected"] = args[0], output[0]

    def on_attention(module, args, kwargs, output):
        q, k, v, mask = (list(args) + [kwargs.get(name) for name in ("q", "k", "v", "mask")][len(args):])[:4]
        seen.update(q=q, k=k, v=v, mask=mask, heads=output[0], weights=output[1])

    def on_norm(module, args):
        seen.setdefault("norm_input", args[0])

    hooks = [attention.register_forward_hook(on_block),
             attention.attention.register_forward_hook(on_attention, with_kwargs=True),
             add_and_norm.norm.register_forward_pre_hook(on_norm)]
    try:
        src = torch.tensor([source_ids], device=model.device)
        encoded = model.encode(src, need_weights=True, head_mask=head_mask, positions=positions)
        if kind != "encoder":
            model.decode(torch.tensor([target_ids], device=model.device), encoded, need_weights=True,
                         head_mask=head_mask, positions=positions)
    finally:
        for hook in hooks:
            hook.remove()
    x, projected = seen["x"][0], seen["projected"][0]
    residual = seen["norm_input"][0] if add_and_norm.norm_first else x
    queries, keys = seen["weights"].shape[-2:]
    mask = seen["mask"]
    mask = (torch.ones(queries, keys, dtype=torch.bool, device=x.device) if mask is None
            else mask[0, 0].expand(queries, keys))
    return BlockRecord(x=x, residual=residual, q=seen["q"][0], k=seen["k"][0], v=seen["v"][0], mask=mask,
                       weights=seen["weights"][0], heads=seen["heads"][0], projected=projected,
                       block_output=add_and_norm.output(residual, projected))


def output_projection_by_head(attention: MultiHeadAttention) -> Tensor:
    """W_O split by head, (H, d_model, d_k): W_O^h is the slice of the output projection that head h's output
    meets when the heads are concatenated (section 3.2.2)."""
    return attention.out_proj.weight.view(attention.d_model, attention.n_heads, -1).transpose(0, 1)


@torch.inference_mode()
def value_norms_through_output(attention: MultiHeadAttention, v: Tensor) -> Tensor:
    """‖v_j W_O^h‖ for every head h and key j: the size of what key j would add through head h at weight 1.

    W_O^h is the slice of the output projection that head h's output meets when the heads are concatenated.
    ``v`` is (..., H, keys, d_k); returns (..., H, keys).
    """
    return torch.einsum("hmd,...hkd->...hkm", output_projection_by_head(attention).to(v.dtype), v).norm(dim=-1)


def contribution_norms(attention: MultiHeadAttention, weights: Tensor, v: Tensor,
                       head_mask: Tensor | None = None) -> Tensor:
    """‖α_ij v_j W_O^h‖ (Kobayashi et al., 2020, "Attention is not only a weight"): how much each key actually
    adds to each query's output through each head, (..., H, queries, keys).

    A large weight on a value that W_O maps to almost nothing contributes almost nothing; a head switched off
    (``head_mask`` 0) contributes exactly 0, whatever its weights.
    """
    norms = weights * value_norms_through_output(attention, v).unsqueeze(-2)
    if head_mask is not None:
        norms = norms * head_mask.to(norms.dtype).view(-1, 1, 1)
    return norms


@torch.inference_mode()
def layer_contribution_norms(attention: MultiHeadAttention, weights: Tensor, v: Tensor,
                             head_mask: Tensor | None = None) -> Tensor:
    """‖Σ_h α^h_ij v^h_j W_O^h‖: what key j adds to query i through all heads of the layer together,
    (..., queries, keys). Heads can cancel each other, so this is at most the sum of the per-head norms."""
    through_w_o = torch.einsum("hmd,...hkd->...hkm", output_projection_by_head(attention).to(v.dtype),
                               v)  # (..., H, keys, d_model)
    if head_mask is not None:
        weights = weights * head_mask.to(weights.dtype).view(-1, 1, 1)
    return torch.einsum("...hqk,...hkm->...qkm", weights, through_w_o).norm(dim=-1)


@dataclass
class ContributionMaps:
    """For every layer of one attention kind: per-head ‖α v W_O‖ (layers, H, queries, keys) and the layer's
    heads together (layers, queries, keys)."""

    heads: Tensor
    layers: Tensor


@torch.inference_mode()
def contribution_maps(model: Transformer, translation: Translation, kind: str, head_mask: HeadMask | None = None,
                      positions: bool = True) -> ContributionMaps:
    """Contributions of every head and layer of ``kind`` over ``translation``, with ``head_mask`` and
    ``positions`` as it ran."""
    layers = model.config.layers(kind)
    per_head, per_layer = [], []
    for layer in range(1, layers + 1):
        block = record_block(model, translation.source_ids, translation.target_ids, kind, layer, head_mask, positions)
        attention, _ = block_modules(model, kind, layer)
        mask = None
        if head_mask is not None and getattr(head_mask, kind) is not None:
            mask = getattr(head_mask, kind)[layer - 1]
        per_head.append(contribution_norms(attention, block.weights.float(), block.v.float(), mask))
        per_layer.append(layer_contribution_norms(attention, block.weights.float(), block.v.float(), mask))
    return ContributionMaps(torch.stack(per_head).cpu(), torch.stack(per_layer).cpu())


@dataclass
class LogitLens:
    """Each decoder layer's output read as if it were the last (nostalgebraist, 2020): through the final norm (if
    any) and the output projection; with a tuned lens, through its layer's affine map first (``tuned_lens.py``).
    ``probabilities`` (layers, steps) of the token each step finally chose, ``top_ids`` and ``top_probs``
    (layers, steps, k) the layer's own favourites; ``final_log_probs`` (steps, vocab) the last layer's whole
    distribution, for sampling at another temperature; ``kl`` (layers,) KL(p_final ‖ p_layer) in nats, averaged
    over the steps."""

    probabilities: Tensor
    top_ids: Tensor
    top_probs: Tensor
    final_log_probs: Tensor
    kl: Tensor


def decoder_states(model: Transformer, src: Tensor, tgt: Tensor) -> Tensor:
    """The residual stream after every decoder layer, (layers, B, T, d_model), in a teacher-forced pass of padded
    sources ``src`` and decoder inputs ``tgt``: the model's own modules, watched (in this thread alone)."""
    hidden: list[Tensor] = []
    hooks = [layer.register_forward_hook(in_this_thread(lambda module, args, output: hidden.append(output[0])))
             for layer in model.decoder.layers]
    try:
        model.decode(tgt, model.encode(src))
    finally:
        for hook in hooks:
            hook.remove()
    return torch.stack(hidden)


def read_states(model: Transformer, states: Tensor) -> Tensor:
    """Decoder states (..., d_model) read as the last layer's are: the final norm (pre-norm), then the output
    projection; log-probabilities in float32."""
    states = states.to(model.dtype)  # a lens's float32 maps, read by a model kept in bfloat16
    if model.decoder.final_norm is not None:
        states = model.decoder.final_norm(states)
    return model.project(states).float().log_softmax(-1)


def kl_from_final(final_log_probs: Tensor, log_probs: Tensor) -> Tensor:
    """KL(p_final ‖ p) = Σ p_final (log p_final − log p), in nats, for each row of (..., vocabulary)."""
    return (final_log_probs.exp() * (final_log_probs - log_probs)).sum(-1)


@torch.inference_mode()
def logit_lens(model: Transformer, translation: Translation, top_k: int = 3, lens=None) -> LogitLens:
    """At which layer does each chosen token win? The decoder's residual stream after every layer, projected to
    the vocabulary with the model's own final norm and output projection; ``lens`` (a ``TunedLens``) first maps
    each layer's state by its own affine map (Belrose et al., 2023)."""
    model.eval()
    states = decoder_states(model, torch.tensor([translation.source_ids], device=model.device),
                            torch.tensor([translation.target_ids], device=model.device))[:, 0]
    if lens is not None:
        states = lens.translated(states)
    log_probs = read_states(model, states).cpu()
    probabilities = log_probs.exp()
    chosen = torch.tensor(translation.predicted_ids)
    top = probabilities.topk(top_k, dim=-1)
    return LogitLens(probabilities.gather(-1, chosen.view(1, -1, 1).expand(len(states), -1, 1)).squeeze(-1),
                     top.indices, top.values, log_probs[-1], kl_from_final(log_probs[-1], log_probs).mean(-1))


@dataclass
class HeadArithmetic:
    """One query of one head, step by step: q·k, ÷ √d_k, the mask, the softmax, the weighted sum of values; then
    every head's output concatenated, projected by W_O, added to the residual stream and normalised."""

    kind: str
    layer: int
    head: int
    query: int
    translation: str
    query_token: str
    predicts: str | None  # decoder and cross-attention: the token this row's step produced
    key_tokens: list[str]
    x: Tensor
    q: Tensor
    k: Tensor
    v: Tensor
    scores: Tensor
    scaled: Tensor
    mask: Tensor
    weights: Tensor
    output: Tensor
    contribution_norms: Tensor
    head_outputs: Tensor
    projected: Tensor
    residual: Tensor
    block_output: Tensor

    @property
    def d_k(self) -> int:
        return self.q.numel()

    def to_json(self) -> dict:
        """The ``--json`` contract of ``python -m transformer.inside_head``; masked scores are -inf in the tensors and
        null in JSON (which has no infinity)."""
        def numbers(t: Tensor) -> list:
            return [None if math.isinf(x) else round(x, 6) for x in t.flatten().tolist()] if t.dim() <= 1 else \
                [numbers(row) for row in t]
        return {"kind": self.kind, "layer": self.layer, "head": self.head, "query": self.query,
                "translation": self.translation, "query_token": self.query_token,
                "predicts": self.predicts, "key_tokens": self.key_tokens,
                "d_k": self.d_k, "x": numbers(self.x), "q": numbers(self.q), "k": numbers(self.k),
                "v": numbers(self.v), "scores": numbers(self.scores), "scaled": numbers(self.scaled),
                "mask": self.mask.tolist(), "weights": numbers(self.weights), "output": numbers(self.output),
                "contribution_norms": numbers(self.contribution_norms), "head_outputs": numbers(self.head_outputs),
                "projected": numbers(self.projected), "residual": numbers(self.residual),
                "block_output": numbers(self.block_output)}


def query_and_key_tokens(translation: Translation, kind: str) -> tuple[list[str], list[str]]:
    queries = translation.source_pieces if kind == "encoder" else translation.target_pieces
    keys = translation.target_pieces if kind == "decoder" else translation.source_pieces
    return queries, keys


def check_position(name: str, value: int, count: int, what: str) -> None:
    if not 1 <= value <= count:
        raise ValueError(f"{name} {value} is out of range: {what} has {count} (counting from 1)")


@torch.inference_mode()
def head_arithmetic(model: Transformer, translation: Translation, kind: str, layer: int, head: int,
                    query: int) -> HeadArithmetic:
    """The arithmetic of head ``head`` in ``layer`` of ``kind`` attention at row ``query`` of ``translation``."""
    config = model.config
    layers = config.layers(kind)
    check_position("layer", layer, layers, f"the {kind} stack")
    check_position("head", head, config.n_heads, "each layer")
    query_tokens, key_tokens = query_and_key_tokens(translation, kind)
    check_position("query", query, len(query_tokens), f"{kind} attention's list of queries")
    block = record_block(model, translation.source_ids, translation.target_ids, kind, layer)
    attention, _ = block_modules(model, kind, layer)
    h, i = head - 1, query - 1
    q, k, v = block.q[h, i].float(), block.k[h].float(), block.v[h].float()
    scores = k @ q
    scaled = scores / math.sqrt(q.numel())
    mask = block.mask[i]
    weights = block.weights[h, i].float()
    return HeadArithmetic(
        kind=kind, layer=layer, head=head, query=query, translation=translation.text,
        query_token=query_tokens[i], predicts=None if kind == "encoder" else translation.predicted_pieces[i],
        key_tokens=list(key_tokens), x=block.x[i].float(), q=q, k=k, v=v,
        scores=scores, scaled=scaled, mask=mask, weights=weights, output=block.heads[h, i].float(),
        contribution_norms=contribution_norms(attention, block.weights, block.v)[h, i].float(),
        head_outputs=block.heads[:, i].float(), projected=block.projected[i].float(),
        residual=block.residual[i].float(), block_output=block.block_output[i].float())


def masked_scaled(arithmetic: HeadArithmetic) -> Tensor:
    """The scaled scores the softmax reads: −∞ where the mask forbids attention."""
    return torch.where(arithmetic.mask, arithmetic.scaled, float("-inf"))


def describe(a: HeadArithmetic) -> str:
    """The arithmetic as a few lines a person reads in a terminal."""
    producing = f", the step that produced {a.predicts!r}" if a.predicts is not None else ""
    lines = [f"translation: {a.translation}",
             f"{a.kind} attention, layer {a.layer}, head {a.head}, query {a.query} ({a.query_token!r}{producing}), "
             f"d_k = {a.d_k}",
             f"{'key':>16} {'q·k':>9} {'÷√d_k':>9} {'weight':>8} {'‖αvW_O‖':>9}"]
    for token, score, scaled, allowed, weight, norm in zip(a.key_tokens, a.scores.tolist(), a.scaled.tolist(),
                                                           a.mask.tolist(), a.weights.tolist(),
                                                           a.contribution_norms.tolist()):
        shown = f"{scaled:9.3f}" if allowed else f"{'−∞':>9}"
        lines.append(f"{token[:16]:>16} {score:9.3f} {shown} {weight:8.4f} {norm:9.4f}")
    return "\n".join(lines)


@dataclass
class SmallAttention:
    """Attention on numbers small enough for a blackboard: every intermediate of equation 1 for each query."""

    scores: Tensor
    scaled: Tensor
    mask: Tensor
    weights: Tensor
    output: Tensor


def small_attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = False) -> SmallAttention:
    """Equation 1 for hand-made queries (n, d_k), keys (m, d_k) and values (m, d_v), through the model's own
    ``ScaledDotProductAttention``; ``causal`` masks the keys after each query, as the decoder does."""
    queries, keys = q.size(0), k.size(0)
    mask = torch.ones(queries, keys, dtype=torch.bool).tril(keys - queries) if causal else \
        torch.ones(queries, keys, dtype=torch.bool)
    output, weights = ScaledDotProductAttention()(q[None, None], k[None, None], v[None, None], mask,
                                                  need_weights=True)
    scores = q @ k.T
    return SmallAttention(scores, scores / math.sqrt(q.size(-1)), mask, weights[0, 0], output[0, 0])
