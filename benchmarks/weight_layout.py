"""The matrix products of one decoding step, with each weight as stored, by the rule measured on the EPYC, and as
``speed_choices`` chose for this machine.

One step of greedy decoding (1 row) or of beam search (``--rows 5``: the beams) multiplies its rows by every
decoder weight and by the vocabulary projection. This times exactly those products, one step's worth in model
order (``speed_choices.step_products``), alternating so machine noise hits all alike: with ``F.linear`` on each
weight as ``nn.Linear`` stores it; through a ``DecodingWeight`` taking the rule measured on the project's EPYC
(``DecodingWeight.default_layout``: prepacked from ``LARGE`` elements and ``WIDE`` columns, else transposed where at
least as tall as wide); and through one taking the layouts ``speed_choices.choose_speed`` timed fastest here.
``--model opus-mt`` uses opus-mt-en-de's shapes (random weights). Prints JSON last: {"as_stored_ms",
"decoding_weight_ms", "chosen_ms", "ratio", "chosen_ratio", "chosen", ...}.

    python benchmarks/weight_layout.py --json
    python benchmarks/weight_layout.py --model opus-mt --rows 5 --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

from common import bundled_or_random, machine
from transformer.cpu import DecodingWeight, speed_up
from transformer.paper.model import Transformer
from transformer.speed_choices import step_products, time_choices


def as_stored(products, inputs) -> None:
    for _, weight, bias, rows in products:
        F.linear(inputs[weight.size(1)], weight[rows], None if bias is None else bias[rows])


def through(holders: list[DecodingWeight]):
    def run(products, inputs) -> None:
        for holder, (_, weight, bias, rows) in zip(holders, products):
            holder.linear(inputs[weight.size(1)], weight, bias, rows)
    return run


def opus_mt_shaped() -> Transformer:
    from hub_decode import OPUS_MT_EN_DE
    from transformer.files import hub

    torch.manual_seed(0)
    return speed_up(Transformer(hub.model_config(hub.marian_config({"model_type": "marian", **OPUS_MT_EN_DE})))).eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["bundled", "opus-mt"], default="bundled")
    parser.add_argument("--rows", type=int, default=1, help="rows multiplied at once (1: greedy; k: k beams)")
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    model = opus_mt_shaped() if args.model == "opus-mt" else bundled_or_random()[1]
    products = step_products(model)
    choices = time_choices(model)
    by_rule, chosen = [DecodingWeight() for _ in products], [DecodingWeight() for _ in products]
    for holder in chosen:
        holder.layouts = choices.layouts
    runs = (("as_stored", as_stored), ("decoding_weight", through(by_rule)), ("chosen", through(chosen)))
    times = {name: [] for name, _ in runs}
    with torch.no_grad():  # as decoding runs; the model is loaded outside it, as the app loads it
        inputs = {width: torch.randn(args.rows, width) for width in {weight.size(1) for _, weight, _, _ in products}}
        for _ in range(args.repeats + 1):  # the first round packs the weights
            for name, run in runs:
                started = time.perf_counter()
                run(products, inputs)
                times[name].append(1000 * (time.perf_counter() - started))
    stored_ms, decoding_ms, chosen_ms = (statistics.median(values[1:]) for values in times.values())
    megabytes = sum(weight[rows].numel() * weight.element_size() for _, weight, _, rows in products) / 1e6
    result = {"as_stored_ms": round(stored_ms, 3), "decoding_weight_ms": round(decoding_ms, 3),
              "chosen_ms": round(chosen_ms, 3), "ratio": round(stored_ms / decoding_ms, 2),
              "chosen_ratio": round(stored_ms / chosen_ms, 2), "chosen": choices.describe(),
              "products": len(products), "rows": args.rows,
              "weights_mb": round(megabytes, 1), "model": args.model, "machine": machine()}
    if not args.json:
        print(f"one decoding step's {len(products)} products at {args.rows} row(s) ({megabytes:.1f} MB of weights): "
              f"{stored_ms:.2f} ms as stored, {decoding_ms:.2f} ms by the EPYC's rule, {chosen_ms:.2f} ms as chosen here "
              f"({choices.describe()})")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
