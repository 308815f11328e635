"""What the causal views cost: ALTI+ contributions on the bundled model, and the full activation-patching grid at
opus-mt-en-de's shapes.

- ``contributions_s``: ``inside.contributions.contributions`` of a 20-token translation on the bundled
  multi30k-en-de (its one teacher-forced pass with hooks, and the decomposition of every attention block);
- ``contrastive_ig_s``: integrated gradients (64 points) of one step's contrast on the same translation;
- ``patching_grid_s``: ``inside.patching.activation_patching`` of a 20-piece source and a 20-token translation at
  its last step, on a model of opus-mt-en-de's shapes with random weights (``benchmarks/opus_shaped.py``, written
  to a temporary folder unless ``--checkpoint`` names one): every encoder layer at every position, every head of
  the three kinds, every decoder layer, and the two checks.

Medians of ``--repeats`` runs after one warm-up, on this machine's threads. Prints JSON last.

    python benchmarks/causes.py --json
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from common import ROOT, machine, report
from opus_shaped import write_marian
from transformer.files import hub
from transformer.files.checkpoint import DEFAULT_CHECKPOINT, Checkpoint, load_checkpoint
from transformer.inside.contrastive import contrastive_evidence
from transformer.inside.contributions import contributions
from transformer.inside.patching import activation_patching
from transformer.paper.decoding import greedy_search
from transformer.paper.translation import forced_decode

TOKENS = 20
SENTENCES = [line.strip() for line in (ROOT / "assets" / "sample_sentences.en.txt").read_text().splitlines()
             if line.strip()]


def median_s(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def twenty_tokens(checkpoint: Checkpoint):
    """A source of ``TOKENS`` pieces (sample sentences run together, cut) and the model's greedy translation of
    exactly ``TOKENS`` tokens, inspected as the app inspects it."""
    model, eos = checkpoint.model, checkpoint.model.config.eos_id
    ids = [i for sentence in SENTENCES for i in checkpoint.source_tokenizer.encode(sentence, add_eos=False)]
    source = ids[:TOKENS - 1] + [eos]
    prefix = greedy_search(model, torch.tensor([source]), max_length=TOKENS)[0]
    while len(prefix) < TOKENS:  # a trained model may end early: keep its words, then go on from them
        prefix = prefix + [i for i in ids if i != eos][:TOKENS - len(prefix)]
    return forced_decode(model, checkpoint.source_tokenizer, checkpoint.target_tokenizer, source, prefix[:TOKENS],
                         ended=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, help="a converted model of opus-mt-en-de's shapes "
                        "(default: written by opus_shaped.py to a temporary folder)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    bundled = load_checkpoint(DEFAULT_CHECKPOINT, device="cpu")
    translation = twenty_tokens(bundled)
    result = {"machine": machine(), "tokens": translation.num_steps,
              "contributions_s": round(median_s(lambda: contributions(bundled.model, translation), args.repeats), 4),
              "contrastive_ig_s": round(median_s(lambda: contrastive_evidence(
                  bundled.model, translation, bundled.target_tokenizer, TOKENS // 2), args.repeats), 4)}
    with tempfile.TemporaryDirectory() as scratch:
        directory = args.checkpoint
        if directory is None:
            marian = Path(scratch) / "marian"
            marian.mkdir()
            directory = hub.convert(write_marian(marian), Path(scratch) / "opus-mt-en-de-shaped")
        shaped = load_checkpoint(directory, device="cpu")
        long = twenty_tokens(shaped)
        grid = lambda: activation_patching(shaped.model, long, shaped.target_tokenizer, None,  # noqa: E731
                                           long.num_steps, noise_positions=[2])
        result.update(patching_tokens=long.num_steps, patching_source_pieces=len(long.source_ids),
                      patching_grid_s=round(median_s(grid, args.repeats), 3))
    report(result, args.json)


if __name__ == "__main__":
    main()
