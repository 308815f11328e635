"""Greedy decoding latency with and without the key/value cache, all attention captured at every step.

A 15-token source is decoded for exactly 20 steps. "cached" encodes once and
feeds one new token per step through the cache; "uncached" re-runs the decoder
over the whole prefix at every step, as the tutorials do. Also times greedy
decoding of 1,000 sentences in one batched run (Multi30K's test set when
MULTI30K_DIR is set, else random sentences of the same lengths). Prints JSON last:
{"cached_ms", "uncached_ms", "speedup", "batch_1000_greedy_s", ...}.

    python benchmarks/decode_latency.py --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch

from common import bundled_or_random, machine

from transformer.decoding import greedy_search, pad_batch, translate_batch
from transformer.model import DecoderCache
from transformer.tokenizer import BOS_ID

SOURCE_TOKENS, TARGET_STEPS = 15, 20


@torch.no_grad()
def decode_cached(model, src):
    encoded = model.encode(src, need_weights=True)
    cache, token = DecoderCache(), torch.full((1, 1), BOS_ID, dtype=torch.long)
    for _ in range(TARGET_STEPS):
        out = model.decode(token, encoded, cache, need_weights=True)
        token = out.logits[:, -1:].argmax(-1)


@torch.no_grad()
def decode_uncached(model, src):
    encoded = model.encode(src, need_weights=True)
    prefix = torch.full((1, 1), BOS_ID, dtype=torch.long)
    for _ in range(TARGET_STEPS):
        out = model.decode(prefix, encoded, need_weights=True)
        prefix = torch.cat([prefix, out.logits[:, -1:].argmax(-1)], dim=1)


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
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    checkpoint, model = bundled_or_random()
    vocab = model.config.src_vocab_size
    src = torch.randint(4, vocab, (1, SOURCE_TOKENS))
    src[0, -1] = 3
    for fn in (decode_cached, decode_uncached):
        fn(model, src)  # warm-up
    cached, uncached = [], []
    for _ in range(args.repeats):  # alternate so noise hits both alike
        cached.append(timed_ms(lambda: decode_cached(model, src), 1))
        uncached.append(timed_ms(lambda: decode_uncached(model, src), 1))
    cached_ms, uncached_ms = statistics.median(cached), statistics.median(uncached)

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
    result = {"cached_ms": round(cached_ms, 1), "uncached_ms": round(uncached_ms, 1),
              "speedup": round(uncached_ms / cached_ms, 2), "batch_1000_greedy_s": round(batch_seconds, 2),
              "batch_data": batch_data, "model": "bundled multi30k-en-de" if checkpoint else "random small",
              "machine": machine()}
    if not args.json:
        print(f"cached {cached_ms:.1f} ms, uncached {uncached_ms:.1f} ms ({uncached_ms / cached_ms:.2f}x); "
              f"1,000 sentences greedy in {batch_seconds:.2f} s")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
