"""Is it translating here, or continuing its own sentence? How much of each generated token comes from each source
token and how much from each token of the translation so far: ALTI+ (Ferrando et al., 2022, "Towards Opening the
Black Box of Neural Machine Translation: Source and Target Contributions to the Model's Predictions"), built on
ALTI (Ferrando et al., 2022, "Measuring the Mixing of Contextual Information in the Transformer").

    python -m transformer.contributions "A dog runs across the grass." --json

**One attention block.** Query i's output is the residual stream plus what every head brings from every key j
(section 3.2.2, with the residual connection of section 3.1):

    z_i = Σ_j T_i(x_j) + b_O,   T_i(x_j) = Σ_h α^h_ij (W_V^h x_j + b_V^h) W_O^h  +  [j = i] x_i

(cross-attention: the keys are the encoder's outputs and the residual x_i is one more part, not a key). After a
post-norm block's LayerNorm, y_i = (z_i − μ(z_i)) / σ(z_i) ⊙ γ + β; with σ(z_i) fixed by the whole sum, that is
linear in each part, so each part becomes T_i(x_j) ← (T_i(x_j) − μ(T_i(x_j))) / σ(z_i) ⊙ γ, and y_i is their sum
plus the bias terms. (A pre-norm block adds to its raw residual stream: y_i = z_i, its LayerNorm inside T.)
Each part's contribution is how much closer it lies to y_i than the zero vector does, in the L1 norm:

    c_ij = max(0, ‖y_i‖₁ − ‖y_i − T_i(x_j)‖₁) / Σ_k max(0, ‖y_i‖₁ − ‖y_i − T_i(x_k)‖₁)

**Through the model.** The encoder's layers compose by matrix product: R_enc = C_L ⋯ C_1 (source × source).
Each decoder layer l mixes the target positions by self-attention (C^sa_l) and then adds the source by
cross-attention (C^ca_l: a share per encoder output, and r_t, the residual's share). So position t's state after
layer l draws on source token s and target token u as

    R^src_l = (r ⊙ C^sa_l) R^src_{l−1} + C^ca_l R_enc,     R^tgt_l = (r ⊙ C^sa_l) R^tgt_{l−1}

starting from R^src_0 = 0, R^tgt_0 = I; each row sums to 1. Row t of the last layer is the step that produced
``predicted_ids[t]``: its source share, and its prefix share over the decoder's inputs up to t (``<s>`` first).

**What it does not measure.** The feed-forward networks and the final LayerNorms are left out (ALTI counts a
position's feed-forward as its own; it mixes no positions), and a contribution is a distance, not a causal
effect: activation patching (``patching.py``) asks what changing the source actually does.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..paper.translation import Translation
from ..paper.decoding import pad_batch
from ..paper.model import AddAndNorm, MultiHeadAttention, Transformer
from .hooks import in_this_thread
from .one_head import KINDS, block_modules, output_projection_by_head


@dataclass
class BlockParts:
    """One attention block decomposed, for a batch of sentences: ``parts`` (batch, queries, keys [+ 1 for
    cross-attention's residual], d_model), the vectors each key brings to each query, and ``whole`` (batch,
    queries, d_model), the block's actual output."""

    parts: Tensor
    whole: Tensor

    def contributions(self) -> Tensor:
        """ALTI's c_ij (batch, queries, parts): non-negative, each row summing to 1. A part that is zero (a padded
        key, which the softmax gave no weight) lies no closer than zero does: it contributes nothing."""
        closeness = (self.whole.abs().sum(-1, keepdim=True)
                     - (self.whole.unsqueeze(-2) - self.parts).abs().sum(-1)).clamp_min(0)
        return closeness / closeness.sum(-1, keepdim=True).clamp_min(torch.finfo(closeness.dtype).tiny)


# Floats of a block's parts decomposed at once, (batch, queries, keys, d_model): 64 MB, as 64 queries of one
# sentence at 512 keys and d_model 512; a larger batch or sentence is decomposed a few queries at a time (what the
# keys bring, (batch, heads, keys, d_model), computed once for them all).
FLOATS_AT_ONCE = 2 ** 24


def through_output(attention: MultiHeadAttention, keys_from: Tensor) -> Tensor:
    """v_j W_O^h, (batch, H, keys, d_model): what key j brings through head h at weight 1, its value projected as
    the model projects it (in its own dtype), then in float32."""
    d = attention.d_model
    values = attention.project_rows(keys_from.to(attention.in_proj.weight.dtype), slice(2 * d, 3 * d)).float()
    values = values.view(*keys_from.shape[:2], attention.n_heads, -1)
    return torch.einsum("bkhe,hde->bhkd", values, output_projection_by_head(attention).float())


@torch.inference_mode()
def block_parts(attention: MultiHeadAttention, add_and_norm: AddAndNorm, block_input: Tensor, residual: Tensor,
                weights: Tensor, memory: Tensor | None = None, queries: slice = slice(None),
                brought: Tensor | None = None) -> BlockParts:
    """Decompose one block over a batch, in float32, for its ``queries``: ``block_input`` (batch, queries,
    d_model) is what the attention read its queries from, ``residual`` the stream it is added to, ``weights``
    (batch, H, queries, keys) its softmax, ``memory`` (batch, keys, d_model) the encoder's output for
    cross-attention (None: self-attention); ``brought``, the keys' ``through_output`` where already computed."""
    if brought is None:
        brought = through_output(attention, block_input if memory is None else memory)
    residual, rows = residual.float(), torch.arange(residual.size(1))[queries]
    parts = torch.einsum("bhqk,bhkd->bqkd", weights[:, :, queries].float(), brought)
    if memory is None:
        parts[:, torch.arange(len(rows)), rows] += residual[:, rows]  # [j = i] x_i
    else:
        parts = torch.cat([parts, residual[:, rows].unsqueeze(2)], dim=2)
    bias = attention.out_proj.bias.float()
    summed = parts.sum(2) + bias
    if add_and_norm.norm_first:
        return BlockParts(parts, summed)
    norm = add_and_norm.norm
    sigma = (summed.var(-1, unbiased=False, keepdim=True) + norm.eps).sqrt()
    gamma = norm.weight.float()
    parts = (parts - parts.mean(-1, keepdim=True)) / sigma.unsqueeze(2) * gamma
    whole = parts.sum(2) + (bias - bias.mean()) / sigma * gamma + norm.bias.float()
    return BlockParts(parts, whole)


@dataclass
class BlockInputs:
    """What one attention block read in a pass over a batch: its queries' input, the residual stream, the
    encoder's output (cross-attention) and its softmax; and ``output``, the block's output after Add & Norm, as
    the model made it."""

    block_input: Tensor
    residual: Tensor
    memory: Tensor | None
    weights: Tensor
    output: Tensor


def block_contributions(attention: MultiHeadAttention, add_and_norm: AddAndNorm, block: BlockInputs) -> Tensor:
    """ALTI's c_ij of one block, (batch, queries, parts), as many queries at a time as ``FLOATS_AT_ONCE`` allows."""
    batch, queries, d_model = block.block_input.shape
    keys = block.weights.size(-1) + (block.memory is not None)
    at_once = max(1, FLOATS_AT_ONCE // (batch * keys * d_model))
    brought = through_output(attention, block.block_input if block.memory is None else block.memory)
    return torch.cat([block_parts(attention, add_and_norm, block.block_input, block.residual, block.weights,
                                  block.memory, slice(start, start + at_once), brought).contributions()
                      for start in range(0, queries, at_once)], dim=1)


def attention_blocks(model: Transformer) -> dict[str, list[tuple[MultiHeadAttention, AddAndNorm]]]:
    """Each attention kind's (attention, Add & Norm) per layer."""
    return {kind: [block_modules(model, kind, layer) for layer in range(1, model.config.layers(kind) + 1)]
            for kind in KINDS}


@torch.inference_mode()
def record_blocks(model: Transformer, sources: list[list[int]], targets: list[list[int]]
                  ) -> dict[str, list[BlockInputs]]:
    """One teacher-forced pass over sentences padded into a batch that keeps what every attention block read
    (hooks only watch: the pass is the model's own; they watch this thread's pass alone,
    ``hooks.in_this_thread``)."""
    model.eval()
    seen: dict[int, dict] = {}

    @in_this_thread
    def on_attention(module, args, kwargs, output):
        memory = args[1] if len(args) > 1 else kwargs.get("memory")
        seen.setdefault(id(module), {}).update(block_input=args[0], memory=memory, weights=output[1],
                                               projected=output[0])

    def on_norm_input(owner):
        @in_this_thread
        def hook(module, args):
            seen.setdefault(id(owner), {}).setdefault("norm_input", args[0])
        return hook

    hooks = []
    for blocks in attention_blocks(model).values():
        for attention, add_and_norm in blocks:
            hooks.append(attention.register_forward_hook(on_attention, with_kwargs=True))
            hooks.append(add_and_norm.norm.register_forward_pre_hook(on_norm_input(attention)))
    try:
        encoded = model.encode(pad_batch(sources, model.config.pad_id, model.device), need_weights=True)
        model.decode(pad_batch(targets, model.config.pad_id, model.device), encoded, need_weights=True)
    finally:
        for hook in hooks:
            hook.remove()
    records = {}
    for kind, blocks in attention_blocks(model).items():
        records[kind] = []
        for attention, add_and_norm in blocks:
            block = seen[id(attention)]
            residual = block["norm_input"] if add_and_norm.norm_first else block["block_input"]
            records[kind].append(BlockInputs(block["block_input"], residual, block["memory"], block["weights"],
                                             add_and_norm.output(residual, block["projected"]).float()))
    return records


@dataclass
class Contributions:
    """ALTI+ of one translation. ``source`` (decoder layers, steps, source tokens) and ``prefix`` (decoder layers,
    steps, decoder inputs): what each step's state draws on after each decoder layer; the last layer's is the
    total. ``encoder`` (source, source): the encoder's own rollout. ``blocks``: each block's C, per kind."""

    source: Tensor
    prefix: Tensor
    encoder: Tensor
    blocks: dict[str, list[Tensor]]

    @property
    def source_share(self) -> Tensor:
        """(steps,): how much of each generated token comes from the source, the rest from its prefix."""
        return self.source[-1].sum(-1)

    @property
    def source_share_by_layer(self) -> Tensor:
        """(decoder layers, steps)."""
        return self.source.sum(-1)

    def to_json(self, translation: Translation) -> dict:
        """The ``--json`` contract of ``python -m transformer.contributions``."""
        def rounded(values: Tensor) -> list:
            return [round(x, 6) for x in values.tolist()]
        steps = []
        for t, token in enumerate(translation.predicted_pieces):
            share = float(self.source[-1, t].sum())
            steps.append({"token": token, "source_share": round(share, 6), "prefix_share": round(1 - share, 6),
                          "source": rounded(self.source[-1, t]), "prefix": rounded(self.prefix[-1, t, :t + 1]),
                          "source_share_by_layer": rounded(self.source_share_by_layer[:, t])})
        return {"method": "alti_plus", "source": translation.source_text, "translation": translation.text,
                "source_tokens": translation.source_pieces, "target_tokens": translation.target_pieces,
                "predicted_tokens": translation.predicted_pieces, "steps": steps}


def compose(encoder: list[Tensor], decoder: list[Tensor], cross: list[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    """ALTI+'s rollout of the blocks' contributions (module docstring) over a batch: per decoder layer, (batch,
    steps, source) and (batch, steps, steps); and the encoder's (batch, source, source). A padded position draws
    on others but nothing draws on it (its contributions are zero), so each sentence's rows are its own."""
    batch, sources = cross[0].size(0), cross[0].size(-1) - 1
    from_source = torch.eye(sources).expand(batch, sources, sources)
    for layer in encoder:
        from_source = layer @ from_source
    steps = decoder[0].size(1)
    to_source, to_prefix = torch.zeros(batch, steps, sources), torch.eye(steps).expand(batch, steps, steps)
    per_layer_source, per_layer_prefix = [], []
    for self_attention, cross_attention in zip(decoder, cross):
        through_residual = cross_attention[..., -1:] * self_attention  # rows summing to r: source and prefix sum to 1
        to_source = through_residual @ to_source + cross_attention[..., :-1] @ from_source
        to_prefix = through_residual @ to_prefix
        per_layer_source.append(to_source)
        per_layer_prefix.append(to_prefix)
    return torch.stack(per_layer_source, dim=1), torch.stack(per_layer_prefix, dim=1), from_source


def decomposed_blocks(model: Transformer, translations: list[Translation], kinds: tuple[str, ...] = KINDS
                      ) -> dict[str, list[Tensor]]:
    """Each block's C of ``kinds`` (batch, queries, parts), over the translations padded into one batch."""
    records = record_blocks(model, [t.source_ids for t in translations], [t.target_ids for t in translations])
    return {kind: blocks_of(model, records, kind) for kind in kinds}


def blocks_of(model: Transformer, records: dict[str, list[BlockInputs]], kind: str) -> list[Tensor]:
    """Each ``kind`` block's C (batch, queries, parts) from what ``record_blocks`` kept."""
    return [block_contributions(attention, add_and_norm, record).cpu()
            for (attention, add_and_norm), record in zip(attention_blocks(model)[kind], records[kind])]


@torch.inference_mode()
def contributions_together(model: Transformer, translations: list[Translation]) -> list[Contributions]:
    """ALTI+ source and prefix contributions of every step of each translation, on the model as it is, in one
    padded pass and one decomposition per block for them all (a server measures a batch's translations at once,
    ``ui/runtime/batching.py``). Each translation's numbers are those it gets alone, up to float rounding."""
    if not translations:
        return []
    blocks = decomposed_blocks(model, translations)
    source, prefix, encoder = compose(blocks["encoder"], blocks["decoder"], blocks["cross"])
    results = []
    for row, translation in enumerate(translations):
        sources, steps = len(translation.source_ids), len(translation.target_ids)
        own_blocks = {kind: [own_block(layer[row], kind, sources, steps) for layer in layers]
                      for kind, layers in blocks.items()}
        results.append(Contributions(source[row, :, :steps, :sources], prefix[row, :, :steps, :steps],
                                     encoder[row, :sources, :sources], own_blocks))
    return results


@torch.inference_mode()
def source_shares_together(model: Transformer, translations: list[Translation]) -> list[Tensor]:
    """Each translation's ``Contributions.source_share`` (steps,), without decomposing the encoder's blocks: every
    row of the encoder's rollout sums to 1, so what a step draws from the encoder's outputs is what it draws from
    the source, however the encoder mixed it. Rolled out to the encoder's outputs, the rows sum to the same."""
    if not translations:
        return []
    blocks = decomposed_blocks(model, translations, ("decoder", "cross"))
    shares = compose([], blocks["decoder"], blocks["cross"])[0][:, -1].sum(-1)
    return [shares[row, :len(translation.target_ids)] for row, translation in enumerate(translations)]


def own_block(block: Tensor, kind: str, sources: int, steps: int) -> Tensor:
    """One sentence's rows and parts of a block's padded C: cross-attention's residual is its last part."""
    if kind == "encoder":
        return block[:sources, :sources]
    if kind == "decoder":
        return block[:steps, :steps]
    return torch.cat([block[:steps, :sources], block[:steps, -1:]], dim=1)


def contributions(model: Transformer, translation: Translation) -> Contributions:
    """ALTI+ source and prefix contributions of every step of ``translation``, on the model as it is."""
    return contributions_together(model, [translation])[0]
