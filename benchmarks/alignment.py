"""What scoring attention as an alignment costs, and what it scores: every method at every decoder layer and over
all layers (``transformer.inside.alignment``), read from one teacher-forced pass per batch over the 447 pairs of
the English–French Hansards gold, on the bundled English→French model.

- ``seconds``: reading every method's links for every pair (the pass, the norms, the ALTI+ decompositions);
- ``methods``: each method and layer's AER, precision and recall, best first; ``diagonal``: the same scores for
  links that only follow the diagonal (target word j to source word round(j·(m−1)/(n−1)), of m source and n target
  words counted from 0; source word 0 for a one-word target), a floor a reading of the model should beat.

    python benchmarks/alignment.py --gold-dir ../shared/data/alignment --json
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from common import ROOT, machine, report
from transformer.files.checkpoint import load_checkpoint
from transformer.inside import alignment


def diagonal(pairs: list[tuple[str, str]]) -> list[set[tuple[int, int]]]:
    """Each target word linked to the source word at the same relative place."""
    links = []
    for source, target in pairs:
        sources, targets = len(source.split()), len(target.split())
        links.append({(round(j * (sources - 1) / max(targets - 1, 1)), j) for j in range(targets)})
    return links


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gold-dir", type=Path, required=True, help="the folder of enfr.src-tgt and enfr.gold")
    parser.add_argument("--checkpoint", type=Path, default=ROOT / "checkpoints" / "multi30k-en-fr")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    checkpoint = load_checkpoint(args.checkpoint, device="cpu")
    pairs = alignment.read_pairs(args.gold_dir / "enfr.src-tgt")
    gold = alignment.read_gold(args.gold_dir / "enfr.gold")
    started = time.perf_counter()
    links = alignment.align(checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer, pairs,
                            alignment.every_method(checkpoint.model))
    seconds = time.perf_counter() - started
    scored = [{"method": method, "layer": layer, **alignment.alignment_error(found, gold).to_json()}
              for (method, layer), found in links.items()]
    report({"machine": machine(), "sentences": len(pairs), "seconds": round(seconds, 2),
            "methods": sorted(scored, key=lambda row: row["aer"]),
            "diagonal": alignment.alignment_error(diagonal(pairs), gold).to_json()}, args.json)


if __name__ == "__main__":
    main()
