"""What a corpus run costs (``transformer.inside.corpus_run``): the first ``--sentences`` of a Multi30K split on the
bundled model, decoded as ``transformer.translate`` decodes, into a new folder.

- ``seconds``: the whole run (search, ALTI+, head sums, states, saving); ``again_s``: the same run repeated, every
  chunk reused;
- ``bytes`` and ``bytes_per_sentence`` on disk;
- ``open_mb``: how much more memory this process holds with the run opened (``open_run``) than before;
  ``tab_open_mb``: with the run open as the Corpus tab holds it, every view drawn once (the heads map and table, the
  least-source list, three heads' pictures, a token search), than before the run was opened;
- ``search_ms``: the Corpus tab's token search (a token of a new translation, its nearest tokens at decoder layer
  1 and where a cross-attention head looks from each), median of five, over ``search_tokens`` tokens: the first
  ``--search-sentences`` of ``--search-split``, run the same way.

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
from ui.views import corpus as views

SEARCHED = "A man in a red shirt is riding a bicycle down the street."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT))
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--search-split", default="train")
    parser.add_argument("--search-sentences", type=int, default=1500, help="about 20,000 target tokens")
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
        del opened
        tab_mb = tab_memory_mb(checkpoint, folder)
        search_ms, search_tokens = search_cost(checkpoint, args, Path(scratch) / "search")
        report({"machine": machine(), "checkpoint": Path(args.checkpoint).name, "sentences": len(sources),
                "seconds": round(seconds, 2), "again_s": round(again, 2), "bytes": run.bytes,
                "bytes_per_sentence": round(run.bytes / len(sources)), "open_mb": round(opened_mb, 1),
                "tab_open_mb": round(tab_mb, 1), "search_tokens": search_tokens, "search_ms": round(search_ms, 1)},
               args.json)


def tab_memory_mb(checkpoint, folder: Path) -> float:
    """This process's memory with the run open as the Corpus tab holds it, every view drawn once, less before."""
    before = rss_mb()
    opened = views.OpenCorpora().get(folder)
    views.heads_figure(opened, "model")
    views.heads_rows(opened)
    views.least_rows(opened)
    for kind, layer, head in (("cross", 3, 1), ("encoder", 2, 4), ("decoder", 1, 1)):
        views.space_figure(opened, checkpoint, kind, layer, head, "token")
    views.nearest_rows(opened, checkpoint, checkpoint.translate(SEARCHED), "cross", 1, 1, None)
    return rss_mb() - before


def search_cost(checkpoint, args, folder: Path) -> tuple[float, int]:
    """The tab's token search over a run of ``--search-sentences``: median ms of five, and the tokens searched."""
    sources, _ = corpus_sentences(f"multi30k:{args.search_split}", checkpoint.info.get("source_lang", "en"),
                                  None, os.environ.get("MULTI30K_DIR"))
    run_corpus(checkpoint, sources[:args.search_sentences], None, folder, Decoding.default(checkpoint))
    opened = views.OpenCorpora().get(folder)
    translation = checkpoint.translate(SEARCHED)
    views.nearest_rows(opened, checkpoint, translation, "cross", 1, 1, "target:3")  # the layer's states gathered once
    times = []
    for position in range(1, 6):
        started = time.perf_counter()
        views.nearest_rows(opened, checkpoint, translation, "cross", 1, 1, f"target:{position}")
        times.append(1000 * (time.perf_counter() - started))
    return sorted(times)[2], len(opened.query_states("cross", 1)[1])


if __name__ == "__main__":
    main()
