"""Time to rank every head of the bundled model for one sentence (one batched forward pass).

Every head of every attention type is switched off in its own batch row, plus
one unmodified row; the drop in the translation's log-probability ranks them.
Prints JSON last: {"heads", "median_ms", "p95_ms"}.

    python benchmarks/head_importance.py --json
"""

from __future__ import annotations

import argparse
import json

from common import machine, repeat_ms

from transformer.inside import interventions
from ui import services
from ui.views import translate as translate_views

SENTENCE = "A young man in a green jacket is carrying a heavy box up the old stairs."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    registry = services.ModelRegistry(device="cpu")
    checkpoint = registry.get(registry.default_name())
    translation = translate_views.run_translation(checkpoint, SENTENCE, "beam", 5).translation
    median, p95 = repeat_ms(lambda: interventions.head_importance(checkpoint, translation), args.repeats)
    heads = sum(v.numel() for v in interventions.head_importance(checkpoint, translation).values())
    result = {"heads": heads, "median_ms": round(median, 1), "p95_ms": round(p95, 1),
              "model": checkpoint.name, "machine": machine()}
    if not args.json:
        print(f"ranked {heads} heads in {result['median_ms']} ms (median)")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
