"""Greedy decoding latency with and without the key/value cache, all attention captured at every step.

A 15-token source is decoded for exactly 20 steps (``--steps``). "cached" encodes once and
feeds one new token per step through our key/value cache. "uncached" re-runs
our decoder stack over the whole prefix at every step and projects only the
newest position to the vocabulary, as a careful decoder without a cache does;
"uncached_all_logits" also projects every prefix position, as calling
``model.decode`` on the prefix does. "reference" is the usual cache for
PyTorch's own ``nn.TransformerDecoderLayer`` (each layer keeps its inputs so
far, and only the newest position is run as a query). All four hold the same
weights, are checked to decode the same tokens, and alternate in one process so
machine noise hits them alike. Also times greedy decoding of 1,000 sentences in
one batched run (Multi30K's test set when MULTI30K_DIR is set, else random
sentences of the same lengths). Prints JSON last: {"cached_ms", "uncached_ms",
"speedup", "uncached_all_logits_ms", "speedup_all_logits",
"reference_cached_ms", "cached_vs_reference", "batch_1000_greedy_s", ...}.

    python benchmarks/decode_latency.py --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from common import bundled_or_random, machine

from transformer.decoding import greedy_search, pad_batch, translate_batch
from transformer.model import DecoderCache, Transformer, causal_mask
from transformer.reference import to_torch_transformer
from transformer.tokenizer import BOS_ID

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
                            steps: int = TARGET_STEPS) -> list[int]:
    """nn.TransformerEncoderLayer / nn.TransformerDecoderLayer's own submodules, each layer caching its inputs.

    ``nn.MultiheadAttention`` cannot cache keys and values, so every step
    re-projects the prefix (self-attention) and the source (cross-attention).
    Embeddings and the tied output projection are ``model``'s, used as stock
    ``nn.Embedding`` / ``F.linear`` calls.
    """
    x = model.positional_encoding(model.src_embed(src))
    for layer in reference.encoder.layers:
        h, _ = layer.self_attn(x, x, x, need_weights=True, average_attn_weights=False)
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
            h, _ = layer.self_attn(y, seen, seen, need_weights=True, average_attn_weights=False)
            y = layer.norm1(y + h)
            h, _ = layer.multihead_attn(y, memory, memory, need_weights=True, average_attn_weights=False)
            y = layer.norm2(y + h)
            y = layer.norm3(y + layer.linear2(F.relu(layer.linear1(y))))
        token = F.linear(y, model.tgt_embed.weight).argmax(-1)
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
    reference = to_torch_transformer(model).eval()
    vocab = model.config.src_vocab_size
    src = torch.randint(4, vocab, (1, SOURCE_TOKENS), generator=torch.Generator().manual_seed(0))
    src[0, -1] = 3
    steps = args.steps
    runs = {"cached": lambda: decode_cached(model, src, steps), "uncached": lambda: decode_uncached(model, src, steps),
            "uncached_all_logits": lambda: decode_uncached_all_logits(model, src, steps),
            "reference": lambda: decode_reference_cached(reference, model, src, steps)}
    decoded = {name: run() for name, run in runs.items()}  # also the warm-up
    if len({tuple(tokens) for tokens in decoded.values()}) != 1:
        raise SystemExit(f"the decoders disagree: {decoded}")
    times = {name: [] for name in runs}
    for _ in range(args.repeats):  # interleaved so machine noise hits all of them alike
        for name, run in runs.items():
            times[name].append(timed_ms(run, 1))
    cached_ms, uncached_ms, all_logits_ms, reference_ms = (statistics.median(times[name]) for name in runs)

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
            greedy_search(model, pad_batch(sentences[i:i + 250]))
        batch_seconds, batch_data = time.perf_counter() - started, "random sentences"
    result = {"steps": steps, "cached_ms": round(cached_ms, 1), "uncached_ms": round(uncached_ms, 1),
              "speedup": round(uncached_ms / cached_ms, 2), "uncached_all_logits_ms": round(all_logits_ms, 1),
              "speedup_all_logits": round(all_logits_ms / cached_ms, 2), "reference_cached_ms": round(reference_ms, 1),
              "cached_vs_reference": round(cached_ms / reference_ms, 2), "batch_1000_greedy_s": round(batch_seconds, 2),
              "batch_data": batch_data, "model": "bundled multi30k-en-de" if checkpoint else "random small",
              "machine": machine()}
    if not args.json:
        print(f"cached {cached_ms:.1f} ms, uncached {uncached_ms:.1f} ms ({uncached_ms / cached_ms:.2f}x), "
              f"uncached with every position's logits {all_logits_ms:.1f} ms ({all_logits_ms / cached_ms:.2f}x), "
              f"nn.TransformerDecoderLayer with a plain cache {reference_ms:.1f} ms "
              f"({cached_ms / reference_ms:.2f} of it); "
              f"1,000 sentences greedy in {batch_seconds:.2f} s")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
