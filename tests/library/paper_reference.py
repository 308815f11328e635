"""The library's measures written again from the papers' formulas, plainly and in float64, sharing no code with
``transformer/``: the model is read as a dictionary of weights and run by the loops below. test_references.py
holds the library to these on a tiny model whose every bias and LayerNorm parameter is non-trivial.

- ``Reference.run``: "Attention Is All You Need" (Vaswani et al., 2017), post-norm (§3.1) or pre-norm, every
  intermediate kept: each block's input, residual, per-head values, weights and heads' outputs, each layer's
  output; a head's output (before W_O) or a layer's output can be replaced (activation patching).
- ``alti_block`` and ``alti_plus``: ALTI (Ferrando et al., 2022a, eq. 6-9) and its encoder-decoder rollout, ALTI+
  (Ferrando et al., 2022b, §3).
- ``gradient_x_input`` and ``integrated_gradients``: Shrikumar et al. (2016); Sundararajan et al. (2017), by the
  midpoint rule.
- ``rollout``: Abnar & Zuidema (2020), the residual counted as half of each block.
- ``norm_based``: ‖α v W_O‖ (Kobayashi et al., 2020).
- ``head_statistics``: entropy, distance, share on special tokens, diagonality, one loop per definition.
- ``Reference.run(read_encoder_layer=k)``: DecoderLens (Langedijk et al., 2024), the decoder cross-attending to
  encoder layer k's output (through the encoder's final norm, pre-norm).
- ``tuned_lens``: each decoder layer's state mapped by h + W h + b (Belrose et al., 2023), read as the logit lens
  reads it, and KL(p_final ‖ p_layer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

Tensor = torch.Tensor


def sinusoids(length: int, d_model: int, layout: str = "interleaved") -> Tensor:
    """Every entry from its formula, in float64: the paper's PE(pos, 2i) = sin(pos / 10000^(2i/d)) and
    PE(pos, 2i+1) = cos(...) interleaved (section 3.5); Marian's the same in halves; tensor2tensor's (fairseq's
    M2M100 and NLLB) halves with frequencies 10000^(-i/(d/2 - 1)), and a zero column for an odd width."""
    half, sines = d_model // 2, (d_model + 1) // 2
    table = torch.zeros(length, d_model, dtype=torch.float64)
    for pos in range(length):
        if layout == "fairseq":
            for i in range(half):
                angle = pos / 10000 ** (i / (half - 1))
                table[pos, i], table[pos, half + i] = math.sin(angle), math.cos(angle)
            continue
        for i in range(sines):
            angle = pos / 10000 ** (2 * i / d_model)
            table[pos, 2 * i if layout == "interleaved" else i] = math.sin(angle)
            if i < half:
                table[pos, 2 * i + 1 if layout == "interleaved" else sines + i] = math.cos(angle)
    return table


def layer_norm(x: Tensor, gamma: Tensor, beta: Tensor, eps: float) -> Tensor:
    mean = x.mean(-1, keepdim=True)
    variance = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(variance + eps) * gamma + beta


@dataclass
class Block:
    """One attention block as it ran: ``x`` its queries' input (after a pre-norm), ``memory`` the keys' input
    (cross-attention; else ``x``), ``residual`` the stream it is added to, ``values`` (H, keys, d_k) with their
    bias, ``weights`` (H, queries, keys), ``heads`` (H, queries, d_k), ``output`` after Add & Norm."""

    x: Tensor
    memory: Tensor
    residual: Tensor
    values: Tensor
    weights: Tensor
    heads: Tensor
    output: Tensor


@dataclass
class Run:
    logits: Tensor  # (steps, vocabulary)
    blocks: dict[str, list[Block]] = field(default_factory=dict)
    encoder_layers: list[Tensor] = field(default_factory=list)  # each encoder layer's output
    decoder_layers: list[Tensor] = field(default_factory=list)  # each decoder layer's output


class Reference:
    """The model of ``model.state_dict()`` and ``model.config``, run in float64 by the paper's formulas. It
    supports the configuration the tests build: sinusoidal positions, scaled shared embeddings, the tied output
    projection, ReLU."""

    def __init__(self, model):
        self.w = {name: value.detach().double().clone() for name, value in model.state_dict().items()}
        config = model.config
        self.d, self.h, self.eps = config.d_model, config.n_heads, config.layer_norm_eps
        self.norm_first = config.norm_first
        self.encoder_layers, self.decoder_layers = config.n_encoder_layers, config.n_decoder_layers
        self.positions = sinusoids(config.max_len, config.d_model)

    def embed(self, ids: list[int]) -> Tensor:
        """Token embeddings × √d_model (§3.4), before the positions are added."""
        return self.w["src_embed.weight"][ids] * math.sqrt(self.d)

    def attend(self, prefix: str, x: Tensor, memory: Tensor | None, causal: bool,
               replace_heads: dict[int, Tensor] | None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Multi-head attention (§3.2.2): the projected output, values (H, keys, d_k), weights, heads' outputs."""
        d, h = self.d, self.h
        w_in, b_in = self.w[f"{prefix}.in_proj.weight"], self.w[f"{prefix}.in_proj.bias"]
        keys_from = x if memory is None else memory
        q = x @ w_in[:d].T + b_in[:d]
        k = keys_from @ w_in[d:2 * d].T + b_in[d:2 * d]
        v = keys_from @ w_in[2 * d:].T + b_in[2 * d:]
        d_k = d // h
        split = lambda m: m.view(m.size(0), h, d_k).transpose(0, 1)  # noqa: E731 - (H, rows, d_k)
        q, k, v = split(q), split(k), split(v)
        scores = q @ k.transpose(1, 2) / math.sqrt(d_k)
        if causal:
            allowed = torch.ones(scores.shape[1:], dtype=torch.bool).tril()
            scores = scores.masked_fill(~allowed, float("-inf"))
        weights = scores.softmax(-1)
        heads = weights @ v
        for head, value in (replace_heads or {}).items():
            heads = heads.clone()
            heads[head] = value
        merged = heads.transpose(0, 1).reshape(x.size(0), d)
        return merged @ self.w[f"{prefix}.out_proj.weight"].T + self.w[f"{prefix}.out_proj.bias"], v, weights, heads

    def block(self, prefix: str, norm: str, stream: Tensor, memory: Tensor | None, causal: bool,
              replace_heads) -> Block:
        """Add & Norm around attention: LayerNorm(x + Sublayer(x)) (§3.1), or x + Sublayer(LayerNorm(x))."""
        gamma, beta = self.w[f"{norm}.norm.weight"], self.w[f"{norm}.norm.bias"]
        x = layer_norm(stream, gamma, beta, self.eps) if self.norm_first else stream
        projected, values, weights, heads = self.attend(prefix, x, memory, causal, replace_heads)
        summed = stream + projected
        output = summed if self.norm_first else layer_norm(summed, gamma, beta, self.eps)
        return Block(x, x if memory is None else memory, stream, values, weights, heads, output)

    def feed_forward(self, prefix: str, stream: Tensor) -> Tensor:
        """FFN(x) = max(0, x W1 + b1) W2 + b2 (eq. 2), in its own Add & Norm."""
        gamma, beta = self.w[f"{prefix}.feed_forward_norm.norm.weight"], self.w[f"{prefix}.feed_forward_norm.norm.bias"]
        x = layer_norm(stream, gamma, beta, self.eps) if self.norm_first else stream
        hidden = torch.relu(x @ self.w[f"{prefix}.feed_forward.linear1.weight"].T
                            + self.w[f"{prefix}.feed_forward.linear1.bias"])
        out = hidden @ self.w[f"{prefix}.feed_forward.linear2.weight"].T + self.w[f"{prefix}.feed_forward.linear2.bias"]
        return stream + out if self.norm_first else layer_norm(stream + out, gamma, beta, self.eps)

    def final(self, stack: str, x: Tensor) -> Tensor:
        if not self.norm_first:
            return x
        return layer_norm(x, self.w[f"{stack}.final_norm.weight"], self.w[f"{stack}.final_norm.bias"], self.eps)

    def project(self, hidden: Tensor) -> Tensor:
        """The tied output projection: the target embeddings' transpose (§3.4)."""
        return hidden @ self.w["src_embed.weight"].T

    def run(self, source_ids: list[int], target_ids: list[int], source_embeddings: Tensor | None = None,
            target_embeddings: Tensor | None = None, heads: dict[tuple[str, int, int], Tensor] | None = None,
            encoder_layers: dict[int, tuple[list[int], Tensor]] | None = None,
            decoder_layers: dict[int, Tensor] | None = None, read_encoder_layer: int | None = None) -> Run:
        """A teacher-forced pass. ``source_embeddings``/``target_embeddings`` replace ``embed``'s (before the
        positions); ``heads`` {(kind, layer, head): output before W_O} replace heads' outputs (layers and heads
        from 0); ``encoder_layers`` {layer: (positions, outputs)} and ``decoder_layers`` {layer: output} replace
        layers' outputs; ``read_encoder_layer`` (from 1) is the encoder layer whose output the decoder reads."""
        heads, encoder_layers, decoder_layers = heads or {}, encoder_layers or {}, decoder_layers or {}
        replaced = lambda kind, layer: {h: v for (k, l, h), v in heads.items() if k == kind and l == layer}  # noqa: E731
        src = self.embed(source_ids) if source_embeddings is None else source_embeddings
        x = src + self.positions[:len(source_ids)]
        result = Run(logits=torch.empty(0), blocks={"encoder": [], "decoder": [], "cross": []})
        for layer in range(self.encoder_layers):
            prefix = f"encoder.layers.{layer}"
            block = self.block(f"{prefix}.self_attn", f"{prefix}.self_attn_norm", x, None, False,
                               replaced("encoder", layer))
            result.blocks["encoder"].append(block)
            x = self.feed_forward(prefix, block.output)
            if layer in encoder_layers:
                positions, values = encoder_layers[layer]
                x = x.clone()
                x[positions] = values
            result.encoder_layers.append(x)
        read = x if read_encoder_layer is None else result.encoder_layers[read_encoder_layer - 1]
        memory = self.final("encoder", read)
        tgt = self.embed(target_ids) if target_embeddings is None else target_embeddings
        y = tgt + self.positions[:len(target_ids)]
        for layer in range(self.decoder_layers):
            prefix = f"decoder.layers.{layer}"
            own = self.block(f"{prefix}.self_attn", f"{prefix}.self_attn_norm", y, None, True,
                             replaced("decoder", layer))
            cross = self.block(f"{prefix}.cross_attn", f"{prefix}.cross_attn_norm", own.output, memory, False,
                               replaced("cross", layer))
            result.blocks["decoder"].append(own)
            result.blocks["cross"].append(cross)
            y = self.feed_forward(prefix, cross.output)
            if layer in decoder_layers:
                y = decoder_layers[layer]
            result.decoder_layers.append(y)
        result.logits = self.project(self.final("decoder", y))
        return result

    def out_projection(self, prefix: str, head: int) -> Tensor:
        """W_O^h: the (d_k, d_model) rows of W_O that head h's output meets."""
        d_k = self.d // self.h
        return self.w[f"{prefix}.out_proj.weight"].T[head * d_k:(head + 1) * d_k]

    def prefix(self, kind: str, layer: int) -> str:
        return f"{'encoder' if kind == 'encoder' else 'decoder'}.layers.{layer}." + \
            ("cross_attn" if kind == "cross" else "self_attn")


# --- ALTI and ALTI+ ------------------------------------------------------------------------------------------

def alti_block(reference: Reference, kind: str, layer: int, block: Block, unbiased_sigma: bool = False) -> Tensor:
    """ALTI's contributions c_ij of one block (queries, parts): the vector each part brings to query i's output,
    T_i(x_j) = Σ_h α^h_ij (x_j W_V^h + b_V^h) W_O^h (+ x_i itself for the residual: j = i in self-attention, one
    more part in cross-attention), the output bias and a post-norm's β beside them; a post-norm's LayerNorm taken
    linearly with σ of the whole sum; then c_ij = max(0, ‖y_i‖₁ − ‖y_i − T_i(x_j)‖₁), normalised over j.
    ``unbiased_sigma``: σ as stopes' reference code takes it (torch.std, n − 1)."""
    prefix = reference.prefix(kind, layer)
    norm = prefix.replace("cross_attn", "cross_attn_norm").replace("self_attn", "self_attn_norm")
    queries, keys = block.weights.shape[1:]
    cross = kind == "cross"
    contributions = torch.zeros(queries, keys + cross, dtype=torch.float64)
    bias = reference.w[f"{prefix}.out_proj.bias"]
    for i in range(queries):
        parts = []
        for j in range(keys):
            part = sum(block.weights[h, i, j] * block.values[h, j] @ reference.out_projection(prefix, h)
                       for h in range(reference.h))
            if not cross and j == i:
                part = part + block.residual[i]
            parts.append(part)
        if cross:
            parts.append(block.residual[i])
        parts = torch.stack(parts)
        whole = parts.sum(0) + bias
        if not reference.norm_first:
            gamma, beta = reference.w[f"{norm}.norm.weight"], reference.w[f"{norm}.norm.bias"]
            n = whole.numel()
            variance = ((whole - whole.mean()) ** 2).sum() / (n - 1 if unbiased_sigma else n)
            sigma = torch.sqrt(variance + reference.eps)
            parts = (parts - parts.mean(-1, keepdim=True)) / sigma * gamma
            whole = parts.sum(0) + (bias - bias.mean()) / sigma * gamma + beta
        closeness = torch.tensor([max(0.0, float(whole.abs().sum() - (whole - part).abs().sum())) for part in parts],
                                 dtype=torch.float64)
        contributions[i] = closeness / closeness.sum()
    return contributions


def alti_plus(reference: Reference, run: Run, unbiased_sigma: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """ALTI+'s rollout: the encoder's R_enc = C_L ⋯ C_1; then per decoder layer, through self-attention
    (scaled by cross-attention's residual share r) and cross-attention,
    R^src_l = (r ⊙ C^sa_l) R^src_{l−1} + C^ca_l R_enc and R^tgt_l = (r ⊙ C^sa_l) R^tgt_{l−1}, from R^src_0 = 0 and
    R^tgt_0 = I. Returns the last layer's (steps, source), (steps, steps) and R_enc."""
    blocks = {kind: [alti_block(reference, kind, layer, block, unbiased_sigma)
                     for layer, block in enumerate(run.blocks[kind])] for kind in ("encoder", "decoder", "cross")}
    sources = blocks["encoder"][0].size(0)
    encoded = torch.eye(sources, dtype=torch.float64)
    for layer_contributions in blocks["encoder"]:
        encoded = layer_contributions @ encoded
    steps = blocks["decoder"][0].size(0)
    to_source, to_prefix = torch.zeros(steps, sources, dtype=torch.float64), torch.eye(steps, dtype=torch.float64)
    for own, cross in zip(blocks["decoder"], blocks["cross"]):
        residual_share = cross[:, -1:]
        to_source = (residual_share * own) @ to_source + cross[:, :-1] @ encoded
        to_prefix = (residual_share * own) @ to_prefix
    return to_source, to_prefix, encoded


# --- gradients -------------------------------------------------------------------------------------------------

def contrast(reference: Reference, source_ids, target_ids, step: int, chosen: int, alternative: int):
    """f(e_src, e_tgt) = logit(chosen) − logit(alternative) at ``step`` (1-based), of the embeddings."""
    def f(source_embeddings: Tensor, target_embeddings: Tensor) -> Tensor:
        logits = reference.run(source_ids, target_ids[:step], source_embeddings, target_embeddings).logits[step - 1]
        return logits[chosen] - logits[alternative]
    return f


def gradient_x_input(f, *inputs: Tensor) -> list[Tensor]:
    """Σ_d ∂f/∂e_d · e_d for each token of each input."""
    leaves = [value.clone().requires_grad_(True) for value in inputs]
    grads = torch.autograd.grad(f(*leaves), leaves)
    return [(grad * value).sum(-1) for grad, value in zip(grads, inputs)]


def integrated_gradients(f, *inputs: Tensor, steps: int) -> list[Tensor]:
    """(e − 0) · (1/m) Σ_k ∂f(α_k e)/∂e, α_k = (k + ½)/m: the midpoint rule from a zero baseline, every input
    scaled together."""
    totals = [torch.zeros_like(value) for value in inputs]
    for k in range(steps):
        alpha = (k + 0.5) / steps
        leaves = [(alpha * value).requires_grad_(True) for value in inputs]
        for total, grad in zip(totals, torch.autograd.grad(f(*leaves), leaves)):
            total += grad
    return [(total / steps * value).sum(-1) for total, value in zip(totals, inputs)]


# --- attention read as evidence ------------------------------------------------------------------------------

def rollout(run: Run) -> Tensor:
    """Abnar & Zuidema's rollout to the source, (steps, source): each block's mean attention over heads with the
    residual as the other half, Ã = ½A + ½I with rows renormalised, multiplied through the encoder; through each
    decoder layer, self-attention's Ã mixes the steps and then half of the state is what cross-attention's mean
    brings from the rolled-out encoder, the other half the residual; rows normalised to 1 at the end."""
    def with_residual(attention: Tensor) -> Tensor:
        mixed = 0.5 * attention + 0.5 * torch.eye(attention.size(-1), dtype=torch.float64)
        return mixed / mixed.sum(-1, keepdim=True)

    encoder = run.blocks["encoder"]
    sources = encoder[0].weights.size(-1)
    encoded = torch.eye(sources, dtype=torch.float64)
    for block in encoder:
        encoded = with_residual(block.weights.mean(0)) @ encoded
    steps = run.blocks["decoder"][0].weights.size(-1)
    reached = torch.zeros(steps, sources, dtype=torch.float64)
    for own, cross in zip(run.blocks["decoder"], run.blocks["cross"]):
        reached = with_residual(own.weights.mean(0)) @ reached
        reached = 0.5 * reached + 0.5 * cross.weights.mean(0) @ encoded
    return reached / reached.sum(-1, keepdim=True)


def norm_based(reference: Reference, kind: str, layer: int, block: Block) -> tuple[Tensor, Tensor]:
    """‖α^h_ij v^h_j W_O^h‖ per head (H, queries, keys) and ‖Σ_h α^h_ij v^h_j W_O^h‖ per layer (queries, keys)."""
    prefix = reference.prefix(kind, layer)
    heads, queries, keys = block.weights.shape
    per_head = torch.zeros(heads, queries, keys, dtype=torch.float64)
    per_layer = torch.zeros(queries, keys, dtype=torch.float64)
    for i in range(queries):
        for j in range(keys):
            vectors = [block.weights[h, i, j] * block.values[h, j] @ reference.out_projection(prefix, h)
                       for h in range(heads)]
            for h, vector in enumerate(vectors):
                per_head[h, i, j] = vector.norm()
            per_layer[i, j] = sum(vectors).norm()
    return per_head, per_layer


def logit_lens(reference: Reference, run: Run, chosen: list[int]) -> Tensor:
    """(decoder layers, steps): the probability of each step's chosen token read from each layer's output through
    the final norm (pre-norm) and the output projection."""
    rows = []
    for hidden in run.decoder_layers:
        probabilities = reference.project(reference.final("decoder", hidden)).softmax(-1)
        rows.append(torch.stack([probabilities[t, token] for t, token in enumerate(chosen)]))
    return torch.stack(rows)


def head_statistics(weights: Tensor, key_labels: list[str], special: tuple[str, ...]) -> dict[str, float]:
    """One (queries, keys) map: mean entropy (nats), mean |i − j| weighted by attention, mean share on special
    keys, mean weight on each row's diagonal key (key round(i (K − 1) / (Q − 1)) of row i; key 0 for one row)."""
    queries, keys = weights.shape
    entropy = distance = share = diagonal = 0.0
    for i in range(queries):
        row = [float(w) for w in weights[i]]
        entropy += -sum(w * math.log(w) for w in row if w > 0)
        distance += sum(w * abs(i - j) for j, w in enumerate(row))
        share += sum(w for j, w in enumerate(row) if key_labels[j] in special)
        diagonal += row[0 if queries == 1 else round(i * (keys - 1) / (queries - 1))]
    return {"entropy": entropy / queries, "distance": distance / queries, "special_share": share / queries,
            "diagonality": diagonal / queries}


def tuned_lens(reference: Reference, run: Run, maps: list[tuple[Tensor, Tensor]]) -> tuple[Tensor, Tensor]:
    """(decoder layers, steps) each: KL(p_final ‖ p_layer) in nats of the logit lens and of the tuned lens whose
    layer ℓ maps h to h + h Wℓᵀ + bℓ (``maps`` (W, b) for every layer but the last)."""
    final = reference.project(reference.final("decoder", run.decoder_layers[-1])).log_softmax(-1)

    def kl(hidden: Tensor) -> Tensor:
        log_p = reference.project(reference.final("decoder", hidden)).log_softmax(-1)
        return torch.stack([sum(final[t, v].exp() * (final[t, v] - log_p[t, v]) for v in range(final.size(1)))
                            for t in range(final.size(0))])

    logit, tuned = [], []
    for layer, hidden in enumerate(run.decoder_layers):
        logit.append(kl(hidden))
        if layer < len(maps):
            weight, bias = (m.double() for m in maps[layer])
            hidden = hidden + hidden @ weight.T + bias
        tuned.append(kl(hidden))
    return torch.stack(logit), torch.stack(tuned)
