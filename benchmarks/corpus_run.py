"""What a corpus run costs (``transformer.inside.corpus_run``): the first ``--sentences`` of a Multi30K split on the
bundled model, decoded as ``transformer.translate`` decodes, into a new folder.

- ``seconds``: the whole run (search, ALTI+, head sums, states, saving); ``again_s``: the same run repeated, every
  chunk reused;
- ``bytes`` and ``bytes_per_sentence`` on disk;
- ``open_mb``: how much more memory this process holds with the run opened (``open_run``) than before.

    MULTI30K_DIR=../shared/data/multi30k python benchmarks/corpus_run.py --json
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from common import machine, report
from load_test import rss_mb
from transformer.data import corpus_sentences
from transformer.files.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
from transformer.inside.corpus_run import Decoding, open_run, run_corpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT))
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    checkpoint = load_checkpoint(args.checkpoint, device="cpu")
    sources, references = corpus_sentences(f"multi30k:{args.split}", checkpoint.info.get("source_lang", "en"),
                                           checkpoint.info.get("target_lang"), os.environ.get("MULTI30K_DIR"))
    sources, references = sources[:args.sentences], references and references[:args.sentences]
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "run"
        started = time.perf_counter()
        run = run_corpus(checkpoint, sources, references, folder, Decoding.default(checkpoint))
        seconds = time.perf_counter() - started
        started = time.perf_counter()
        run_corpus(checkpoint, sources, references, folder, Decoding.default(checkpoint))
        again = time.perf_counter() - started
        before = rss_mb()
        opened = open_run(folder)
        opened_mb = rss_mb() - before
        report({"machine": machine(), "checkpoint": Path(args.checkpoint).name, "sentences": len(opened.sentences),
                "seconds": round(seconds, 2), "again_s": round(again, 2), "bytes": run.bytes,
                "bytes_per_sentence": round(run.bytes / len(sources)), "open_mb": round(opened_mb, 1)}, args.json)


if __name__ == "__main__":
    main()
