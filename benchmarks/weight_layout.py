"""The matrix-vector products of one decoding step, in nn.Linear's weight layout and in DecodingWeight's.

One greedy step of the bundled model (batch 1) multiplies a vector by every
decoder weight and by the vocabulary projection. This times exactly those
products, one step's worth in model order, with each weight as ``nn.Linear``
stores it (output-major W) and as ``DecodingWeight`` hands it out (a view of a
contiguous W^T where W^T is at least as wide as tall), alternating so machine
noise hits both alike. Prints JSON last: {"output_major_ms",
"decoding_weight_ms", "ratio", ...}.

    python benchmarks/weight_layout.py --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

from common import bundled_or_random, machine

from transformer.model import DecodingWeight


def step_weights(model, layout) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """(W, b) of every product in one decoding step, in the order the step runs them, W in the given layout.

    ``layout(W, wide)`` returns W as it is to be multiplied; ``wide`` says
    whether the model's layers hand it out through a ``DecodingWeight``.
    """
    d = model.config.d_model
    weights = []
    for layer in model.decoder.layers:
        self_attn, cross_attn, feed_forward = layer.self_attn, layer.cross_attn, layer.feed_forward
        weights += [(layout(self_attn.in_proj.weight, True), self_attn.in_proj.bias),
                    (layout(self_attn.out_proj.weight, True), self_attn.out_proj.bias),
                    (layout(cross_attn.in_proj.weight, True)[:d], cross_attn.in_proj.bias[:d]),
                    (layout(cross_attn.out_proj.weight, True), cross_attn.out_proj.bias)]
        for linear in (feed_forward.linear1, feed_forward.linear2):
            weights.append((layout(linear.weight, linear.decoding_weight is not None), linear.bias))
    projection = model.tgt_embed.weight if model.output_proj is None else model.output_proj.weight
    return weights + [(layout(projection, True), None)]


def output_major(weight: torch.Tensor, wide: bool) -> torch.Tensor:
    return weight.detach()


def decoding_layout(weight: torch.Tensor, wide: bool) -> torch.Tensor:
    return DecodingWeight()(weight) if wide else weight.detach()


def run_step(weights, inputs) -> None:
    for weight, bias in weights:
        F.linear(inputs[weight.size(1)], weight, bias)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    checkpoint, model = bundled_or_random()
    times = {"output_major": [], "decoding_weight": []}
    with torch.inference_mode():  # as decoding runs; the model itself is loaded outside it, as an app loads it
        layouts = {"output_major": step_weights(model, output_major),
                   "decoding_weight": step_weights(model, decoding_layout)}
        inputs = {width: torch.randn(1, 1, width) for width in {w.size(1) for w, _ in layouts["output_major"]}}
        for _ in range(args.repeats):
            for name, weights in layouts.items():
                started = time.perf_counter()
                run_step(weights, inputs)
                times[name].append(1000 * (time.perf_counter() - started))
    output_major_ms, decoding_ms = (statistics.median(times[name]) for name in times)
    products = layouts["output_major"]
    megabytes = sum(weight.numel() * weight.element_size() for weight, _ in products) / 1e6
    result = {"output_major_ms": round(output_major_ms, 3), "decoding_weight_ms": round(decoding_ms, 3),
              "ratio": round(output_major_ms / decoding_ms, 2), "products": len(products),
              "weights_mb": round(megabytes, 1), "model": "bundled multi30k-en-de" if checkpoint else "random small",
              "machine": machine()}
    if not args.json:
        print(f"one decoding step's {len(products)} products ({megabytes:.1f} MB of weights): "
              f"{output_major_ms:.2f} ms as nn.Linear stores them, {decoding_ms:.2f} ms through DecodingWeight "
              f"({output_major_ms / decoding_ms:.2f}x)")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
