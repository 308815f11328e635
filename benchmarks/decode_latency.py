"""Greedy decoding latency with and without the key/value cache, all attention captured at every step.

A 15-token source is decoded for exactly 20 steps (``--steps``). The decoders,
all on the same weights:

- "cached": our model, encoding once and feeding one new token per step
  through its key/value cache;
- "uncached": our decoder stack re-run over the whole prefix at every step,
  only the newest position projected to the vocabulary, as a careful decoder
  without a cache does;
- "uncached_all_logits": the same, projecting every prefix position, as
  calling ``model.decode`` on the prefix does;
- "reference": the usual cache for PyTorch's own ``nn.TransformerDecoderLayer``
  (each layer keeps its inputs so far; only the newest position is a query),
  returning every attention map, and "reference_no_weights", the same
  without them (``nn.MultiheadAttention`` then attends through
  ``scaled_dot_product_attention``; its fused fast path needs query, key
  and value to be one tensor, which a decoder never has);
- "flattened": our cached decoding hand-written as the fewest plain tensor
  calls (no modules, no masks, preallocated keys and values): about the least
  eager PyTorch can spend per step here, and so how much of "cached" is the
  cost of the model's modules; and "flattened_modules", the same loop calling
  the model's modules for its products and norms: the cost of those calls.

They are checked to decode the same tokens and alternate in one process so
machine noise hits them alike. Also times greedy decoding of 1,000 sentences in
one batched run (Multi30K's test set when MULTI30K_DIR is set, else random
sentences of the same lengths). Prints JSON last: {"cached_ms", "uncached_ms",
"speedup", "uncached_all_logits_ms", "speedup_all_logits", "reference_cached_ms",
"cached_vs_reference", "reference_no_weights_ms", "cached_vs_reference_no_weights",
"flattened_ms", "cached_vs_flattened", "flattened_modules_ms", "flattened_modules_vs_flattened",
"batch_1000_greedy_s", ...}.

    python benchmarks/decode_latency.py --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from common import bundled_or_random, machine

from transformer.paper.decoding import greedy_search, pad_batch
from transformer.paper.sentences import translate_batch
from transformer.paper.model import DecoderCache, Transformer, causal_mask
from transformer.paper.reference import to_torch_transformer
from transformer.paper.tokenizer import BOS_ID

# The goals are ratios, which hold across machines where milliseconds do not: the readable modules that run at
# most 0.95 of the time of PyTorch's own decoder layer with a plain cache, and within 1.6x of the hand-flattened
# floor of eager PyTorch.
REFERENCE_GOAL, FLOOR_GOAL = 0.95, 1.6
SOURCE_TOKENS, TARGET_STEPS = 15, 20


@torch.inference_mode()
def decode_cached(model: Transformer, src: torch.Tensor, steps: int = TARGET_STEPS) -> list[int]:
    encoded = model.encode(src, need_weights=True)
    cache, token = DecoderCache(), torch.full((1, 1), BOS_ID, dtype=torch.long)
    tokens = []
    for _ in range(steps):
        out = model.decode(token, encoded, cache, need_weights=True)
        token = out.logits[:, -1:].argmax(-1)
        tokens.append(token.item())
    return tokens


@torch.inference_mode()
def decode_uncached(model: Transformer, src: torch.Tensor, steps: int = TARGET_STEPS) -> list[int]:
    encoded = model.encode(src, need_weights=True)
    prefix = torch.full((1, 1), BOS_ID, dtype=torch.long)
    for _ in range(steps):
        embedded = model.positional_encoding(model.tgt_embed(prefix))
        hidden, _, _ = model.decoder(embedded, encoded.memory, causal_mask(prefix.size(1)), encoded.source_mask,
                                     need_weights=True)
        prefix = torch.cat([prefix, model.project(hidden[:, -1:]).argmax(-1)], dim=1)
    return prefix[0, 1:].tolist()


@torch.inference_mode()
def decode_uncached_all_logits(model: Transformer, src: torch.Tensor, steps: int = TARGET_STEPS) -> list[int]:
    encoded = model.encode(src, need_weights=True)
    prefix = torch.full((1, 1), BOS_ID, dtype=torch.long)
    for _ in range(steps):
        out = model.decode(prefix, encoded, need_weights=True)
        prefix = torch.cat([prefix, out.logits[:, -1:].argmax(-1)], dim=1)
    return prefix[0, 1:].tolist()


@torch.inference_mode()
def decode_reference_cached(reference: nn.Transformer, model: Transformer, src: torch.Tensor,
                            steps: int = TARGET_STEPS, need_weights: bool = True) -> list[int]:
    """nn.TransformerEncoderLayer / nn.TransformerDecoderLayer's own submodules, each layer caching its inputs.

    ``nn.MultiheadAttention`` cannot cache keys and values, so every step
    re-projects the prefix (self-attention) and the source (cross-attention).
    Embeddings and the tied output projection are ``model``'s, used as stock
    ``nn.Embedding`` / ``F.linear`` calls. ``need_weights=False`` returns no
    attention maps and attends through ``scaled_dot_product_attention``: the
    plain cache as people usually write it.
    """
    x = model.positional_encoding(model.src_embed(src))
    for layer in reference.encoder.layers:
        h, _ = layer.self_attn(x, x, x, need_weights=need_weights, average_attn_weights=False)
        x = layer.norm1(x + h)
        x = layer.norm2(x + layer.linear2(F.relu(layer.linear1(x))))
    memory = x
    token = torch.full((1, 1), BOS_ID, dtype=torch.long)
    inputs_so_far: list[torch.Tensor | None] = [None] * len(reference.decoder.layers)
    tokens = []
    for step in range(steps):
        y = model.positional_encoding(model.tgt_embed(token), offset=step)
        for i, layer in enumerate(reference.decoder.layers):
            seen = y if inputs_so_far[i] is None else torch.cat([inputs_so_far[i], y], dim=1)
            inputs_so_far[i] = seen
            h, _ = layer.self_attn(y, seen, seen, need_weights=need_weights, average_attn_weights=False)
            y = layer.norm1(y + h)
            h, _ = layer.multihead_attn(y, memory, memory, need_weights=need_weights, average_attn_weights=False)
            y = layer.norm2(y + h)
            y = layer.norm3(y + layer.linear2(F.relu(layer.linear1(y))))
        token = F.linear(y, model.tgt_embed.weight).argmax(-1)
        tokens.append(token.item())
    return tokens


@dataclass
class FlatLayer:
    """One post-norm decoder layer's weights, each in the layout its one-token product reads fastest."""

    qkv_t: torch.Tensor  # (D, 3D): self-attention W_Q, W_K, W_V, transposed
    qkv_bias: torch.Tensor
    self_out_t: torch.Tensor
    self_out_bias: torch.Tensor
    query_t: torch.Tensor  # cross-attention W_Q alone, transposed and contiguous
    query_bias: torch.Tensor
    key_value: tuple[torch.Tensor, torch.Tensor]  # cross-attention W_K, W_V and bias, used once per sentence
    cross_out_t: torch.Tensor
    cross_out_bias: torch.Tensor
    ffn_in_t: torch.Tensor
    ffn_in_bias: torch.Tensor
    ffn_out: torch.Tensor
    ffn_out_bias: torch.Tensor
    norms: list[tuple[torch.Tensor, torch.Tensor]]


@dataclass
class FlatDecoder:
    layers: list[FlatLayer]
    vocabulary_t: torch.Tensor  # (D, V): the tied output projection, transposed


@torch.inference_mode()
def flatten_decoder(model: Transformer) -> FlatDecoder:
    d = model.config.d_model
    layers = []
    for layer in model.decoder.layers:
        self_attn, cross_attn, ffn = layer.self_attn, layer.cross_attn, layer.feed_forward
        layers.append(FlatLayer(
            self_attn.in_proj.weight.t().contiguous(), self_attn.in_proj.bias,
            self_attn.out_proj.weight.t().contiguous(), self_attn.out_proj.bias,
            cross_attn.in_proj.weight[:d].t().contiguous(), cross_attn.in_proj.bias[:d],
            (cross_attn.in_proj.weight[d:], cross_attn.in_proj.bias[d:]),
            cross_attn.out_proj.weight.t().contiguous(), cross_attn.out_proj.bias,
            ffn.linear1.weight.t().contiguous(), ffn.linear1.bias, ffn.linear2.weight, ffn.linear2.bias,
            [(n.norm.weight, n.norm.bias)
             for n in (layer.self_attn_norm, layer.cross_attn_norm, layer.feed_forward_norm)]))
    return FlatDecoder(layers, model.tgt_embed.weight.t().contiguous())


@torch.inference_mode()
def decode_flattened(model: Transformer, flat: FlatDecoder, src: torch.Tensor,
                     steps: int = TARGET_STEPS) -> list[int]:
    """The same cached decoding written as the fewest plain tensor calls, for one unpadded sentence.

    No modules, no masks (nothing is padded), keys and values written in place
    into preallocated buffers, cross-attention keys stored transposed: about
    the least eager PyTorch can do per step on these weights, with every
    attention map still computed and kept. The gap between this and "cached"
    is what the model's general, paper-shaped modules cost per step.
    """
    d, heads = model.config.d_model, model.config.n_heads
    head_dim, scale = d // heads, (d // heads) ** -0.5
    memory = model.encode(src, need_weights=True).memory[0]  # (S, D)
    layers = flat.layers
    cross_keys_t, cross_values = [], []
    for layer in layers:
        k, v = F.linear(memory, *layer.key_value).view(-1, 2, heads, head_dim).permute(1, 2, 0, 3)
        cross_keys_t.append(k.transpose(1, 2).contiguous())  # (H, head_dim, S)
        cross_values.append(v.contiguous())  # (H, S, head_dim)
    keys_t = [torch.empty(heads, head_dim, steps) for _ in layers]
    values = [torch.empty(heads, steps, head_dim) for _ in layers]
    embedding, table = model.tgt_embed.weight, model.positional_encoding.table
    token, tokens, attentions = BOS_ID, [], []
    for t in range(steps):
        y = (embedding[token] * model.tgt_embed.scale + table[t]).view(1, d)
        for i, layer in enumerate(layers):
            q, k, v = torch.addmm(layer.qkv_bias, y, layer.qkv_t).view(3, heads, 1, head_dim).unbind(0)
            keys_t[i][:, :, t] = k[:, 0]
            values[i][:, t] = v[:, 0]
            self_weights = torch.bmm(q, keys_t[i][:, :, : t + 1]).mul_(scale).softmax(-1)
            h = torch.bmm(self_weights, values[i][:, : t + 1]).view(1, d)
            y = F.layer_norm(y + torch.addmm(layer.self_out_bias, h, layer.self_out_t), (d,), *layer.norms[0])
            q = torch.addmm(layer.query_bias, y, layer.query_t).view(heads, 1, head_dim)
            cross_weights = torch.bmm(q, cross_keys_t[i]).mul_(scale).softmax(-1)
            h = torch.bmm(cross_weights, cross_values[i]).view(1, d)
            y = F.layer_norm(y + torch.addmm(layer.cross_out_bias, h, layer.cross_out_t), (d,), *layer.norms[1])
            hidden = torch.addmm(layer.ffn_in_bias, y, layer.ffn_in_t).relu_()
            y = F.layer_norm(y + F.linear(hidden, layer.ffn_out, layer.ffn_out_bias), (d,), *layer.norms[2])
            attentions.append((self_weights, cross_weights))  # kept, as "cached" keeps them
        token = int(torch.mm(y, flat.vocabulary_t).argmax())
        tokens.append(token)
    return tokens


@torch.inference_mode()
def decode_flattened_modules(model: Transformer, src: torch.Tensor, steps: int = TARGET_STEPS) -> list[int]:
    """``decode_flattened`` calling the model's modules for embedding, positions, projections, norms and feed-forward.

    The same loop, preallocated cache and attention arithmetic. Only the
    cross-attention projections stay plain ``F.linear`` calls on the module's
    weights, as in "flattened"; and the attention and layer modules are not
    called, so the gap to "flattened" is part of what the modules' calls cost
    (a decoder without a cache pays it as well).
    """
    d, heads = model.config.d_model, model.config.n_heads
    head_dim, scale = d // heads, (d // heads) ** -0.5
    memory = model.encode(src, need_weights=True).memory
    layers = model.decoder.layers
    cross_keys_t, cross_values = [], []
    for layer in layers:
        projection = layer.cross_attn.in_proj
        k, v = F.linear(memory, projection.weight[d:], projection.bias[d:]).view(-1, 2, heads, head_dim).permute(
            1, 2, 0, 3)
        cross_keys_t.append(k.transpose(1, 2).contiguous())
        cross_values.append(v.contiguous())
    keys_t = [torch.empty(heads, head_dim, steps) for _ in layers]
    values = [torch.empty(heads, steps, head_dim) for _ in layers]
    token, tokens, attentions = torch.full((1, 1), BOS_ID, dtype=torch.long), [], []
    for t in range(steps):
        y = model.positional_encoding(model.tgt_embed(token), t)  # (1, 1, D)
        for i, layer in enumerate(layers):
            self_attn, cross_attn = layer.self_attn, layer.cross_attn
            q, k, v = self_attn.in_proj(y).view(3, heads, 1, head_dim).unbind(0)
            keys_t[i][:, :, t] = k[:, 0]
            values[i][:, t] = v[:, 0]
            self_weights = torch.bmm(q, keys_t[i][:, :, : t + 1]).mul_(scale).softmax(-1)
            h = torch.bmm(self_weights, values[i][:, : t + 1]).view(1, 1, d)
            y = layer.self_attn_norm.norm(y + self_attn.out_proj(h))
            q = cross_attn.in_proj(y, rows=slice(0, d)).view(heads, 1, head_dim)
            cross_weights = torch.bmm(q, cross_keys_t[i]).mul_(scale).softmax(-1)
            h = torch.bmm(cross_weights, cross_values[i]).view(1, 1, d)
            y = layer.cross_attn_norm.norm(y + cross_attn.out_proj(h))
            y = layer.feed_forward_norm.norm(y + layer.feed_forward(y))
            attentions.append((self_weights, cross_weights))
        token = model.project(y).argmax(-1)
        tokens.append(token.item())
    return tokens


def timed_ms(fn, repeats):
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(1000 * (time.perf_counter() - started))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--steps", type=int, default=TARGET_STEPS, help="tokens to decode (default: %(default)s)")
    parser.add_argument("--threads", type=int, help="intra-op threads (default: PyTorch's choice)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    checkpoint, model = bundled_or_random()
    if model.config.norm_first or not model.config.tie_output_projection:
        parser.error("the reference decoder is written for a post-norm model with a tied output projection")
    if not 1 <= args.steps < model.config.max_len:
        parser.error(f"--steps must be between 1 and {model.config.max_len - 1}, the model's positions")
    reference, flat = to_torch_transformer(model).eval(), flatten_decoder(model)
    vocab = model.config.src_vocab_size
    src = torch.randint(4, vocab, (1, SOURCE_TOKENS), generator=torch.Generator().manual_seed(0))
    src[0, -1] = 3
    steps = args.steps
    runs = {"cached": lambda: decode_cached(model, src, steps), "uncached": lambda: decode_uncached(model, src, steps),
            "uncached_all_logits": lambda: decode_uncached_all_logits(model, src, steps),
            "reference": lambda: decode_reference_cached(reference, model, src, steps),
            "reference_no_weights": lambda: decode_reference_cached(reference, model, src, steps, need_weights=False),
            "flattened": lambda: decode_flattened(model, flat, src, steps),
            "flattened_modules": lambda: decode_flattened_modules(model, src, steps)}
    decoded = {name: run() for name, run in runs.items()}  # also the warm-up
    if len({tuple(tokens) for tokens in decoded.values()}) != 1:
        raise SystemExit(f"the decoders disagree: {decoded}")
    times = {name: [] for name in runs}
    for _ in range(args.repeats):  # interleaved so machine noise hits all of them alike
        for name, run in runs.items():
            times[name].append(timed_ms(run, 1))
    cached_ms, uncached_ms, all_logits_ms, reference_ms, plain_reference_ms, flattened_ms, modules_ms = (
        statistics.median(times[name]) for name in runs)

    data_dir = os.environ.get("MULTI30K_DIR")
    if checkpoint is not None and data_dir:
        from transformer.data import load_multi30k
        sources = load_multi30k("test_2016_flickr", data_dir=data_dir).sources
        started = time.perf_counter()
        translate_batch(model, checkpoint.source_tokenizer, checkpoint.target_tokenizer, sources)
        batch_seconds, batch_data = time.perf_counter() - started, "test_2016_flickr"
    else:
        generator = torch.Generator().manual_seed(0)
        lengths = torch.randint(8, 25, (1000,), generator=generator).tolist()
        sentences = [torch.randint(4, vocab, (n,), generator=generator).tolist() + [3] for n in lengths]
        started = time.perf_counter()
        for i in range(0, 1000, 250):
            greedy_search(model, pad_batch(sentences[i:i + 250], model.config.pad_id))
        batch_seconds, batch_data = time.perf_counter() - started, "random sentences"
    result = {"steps": steps, "cached_ms": round(cached_ms, 1), "uncached_ms": round(uncached_ms, 1),
              "speedup": round(uncached_ms / cached_ms, 2), "uncached_all_logits_ms": round(all_logits_ms, 1),
              "speedup_all_logits": round(all_logits_ms / cached_ms, 2), "reference_cached_ms": round(reference_ms, 1),
              "cached_vs_reference": round(cached_ms / reference_ms, 2),
              "reference_no_weights_ms": round(plain_reference_ms, 1),
              "cached_vs_reference_no_weights": round(cached_ms / plain_reference_ms, 2),
              "flattened_ms": round(flattened_ms, 1), "cached_vs_flattened": round(cached_ms / flattened_ms, 2),
              "flattened_modules_ms": round(modules_ms, 1),
              "flattened_modules_vs_flattened": round(modules_ms / flattened_ms, 2),
              "goals_met": {f"cached_vs_reference <= {REFERENCE_GOAL}": cached_ms / reference_ms <= REFERENCE_GOAL,
                            f"cached_vs_flattened <= {FLOOR_GOAL}": cached_ms / flattened_ms <= FLOOR_GOAL},
              "batch_1000_greedy_s": round(batch_seconds, 2),
              "batch_data": batch_data, "model": "bundled multi30k-en-de" if checkpoint else "random small",
              "machine": machine()}
    if not args.json:
        print(f"cached {cached_ms:.1f} ms, uncached {uncached_ms:.1f} ms ({uncached_ms / cached_ms:.2f}x), "
              f"uncached with every position's logits {all_logits_ms:.1f} ms ({all_logits_ms / cached_ms:.2f}x), "
              f"nn.TransformerDecoderLayer with a plain cache {reference_ms:.1f} ms "
              f"({cached_ms / reference_ms:.2f} of it), {plain_reference_ms:.1f} ms without attention maps "
              f"({cached_ms / plain_reference_ms:.2f} of it); hand-flattened cached decoding {flattened_ms:.1f} ms "
              f"(ours takes {cached_ms / flattened_ms:.2f}x that), {modules_ms:.1f} ms with its products and norms "
              f"called through the model's modules; "
              f"1,000 sentences greedy in {batch_seconds:.2f} s")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
