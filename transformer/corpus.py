"""Many sentences at once: what each head does over a corpus, and which translations owe least to their source
(``inside/corpus_run.py``, ``inside/head_roles.py``; what each figure measures: docs/corpus.md).

    python -m transformer.corpus --input multi30k:test_2016_flickr --limit 200 --out runs/corpus-test --json
    python -m transformer.corpus --checkpoint checkpoints/multi30k-en-fr --input sentences.tsv --out runs/fr

``--input`` is ``multi30k:SPLIT`` (read from ``--data-dir`` or ``$MULTI30K_DIR``: the model's source side, its
target side as references), a ``.tsv`` of a sentence and its reference a line, or a text file of one sentence a
line. Every sentence is translated as ``transformer.translate`` translates it, or with ``--force-references`` its
reference is read teacher-forced. The run is saved in ``--out`` chunk by chunk: run it again to resume an
interrupted run, or to reuse a finished one.

``--json`` prints one object: ``sentences``, ``seconds`` (this run's), ``bytes`` (of ``--out``); ``heads``, one per
head, ``{kind, layer, head, role, confidence, previous, same, next, special, entropy, spread, aligned, most_alike,
examples}``; and ``least_source``, every sentence by its source share, lowest first, ``{index, source, translation,
source_share, log_probability}``. Layers, heads and sentences (``index``, ``examples``) count from 1.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from . import arguments
from .data import DataError, corpus_sentences
from .errors import InputError
from .files.checkpoint import DEFAULT_CHECKPOINT, CheckpointError, load_checkpoint
from .inside.corpus_run import Decoding, run_corpus

log = logging.getLogger("transformer.corpus")


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(prog="python -m transformer.corpus", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", required=True, help="multi30k:SPLIT, a .tsv of sentence and reference, or a "
                        "text file of one sentence a line")
    parser.add_argument("--out", required=True, help="the folder the run is saved in, and resumed from")
    parser.add_argument("--limit", type=arguments.positive_int, help="only the first N sentences (default: all)")
    parser.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT),
                        help="the model's directory (default: %(default)s)")
    parser.add_argument("--data-dir", help="the Multi30K folder (default: $MULTI30K_DIR)")
    parser.add_argument("--force-references", action="store_true",
                        help="read each reference teacher-forced instead of translating")
    parser.add_argument("--beam", type=arguments.positive_int,
                        help="beam size (1 = greedy; default: the one the model was published with, else 5)")
    parser.add_argument("--length-penalty", type=float,
                        help="default: the one the checkpoint was scored with, else 1.0")
    parser.add_argument("--source-language", help="a multilingual model's source language (default: the model's)")
    parser.add_argument("--target-language", help="a multilingual model's target language (default: the model's)")
    parser.add_argument("--device", type=arguments.device, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    try:
        checkpoint = load_checkpoint(args.checkpoint, device=args.device).in_languages(args.source_language,
                                                                                      args.target_language)
        source_lang = (checkpoint.pair[0] if checkpoint.pair else None) or checkpoint.info.get("source_lang", "en")
        target_lang = (checkpoint.pair[1] if checkpoint.pair else None) or checkpoint.info.get("target_lang")
        sources, references = corpus_sentences(args.input, source_lang, target_lang, args.data_dir)
        if args.limit:
            sources, references = sources[:args.limit], references and references[:args.limit]
        decoding = Decoding.default(checkpoint, args.beam, args.length_penalty, args.force_references)
        run = run_corpus(checkpoint, sources, references, args.out, decoding,
                         progress=lambda done, total: log.info("%d of %d sentences", done, total))
    except (CheckpointError, InputError, DataError) as error:
        code = getattr(error, "code", None)
        print(f"error{f' [{code}]' if code else ''}: {error}", file=sys.stderr)
        return 2
    summary = run.summary()
    if args.json:
        print(json.dumps(summary, ensure_ascii=False))
        return 0
    print(f"{summary['sentences']} sentences in {summary['seconds']:.1f} s, {summary['bytes'] / 1e6:.1f} MB in "
          f"{args.out}")
    print(f"{'head':<14} {'role':<9} {'confidence':>10}")
    for head in summary["heads"]:
        print(f"{head['kind'] + ' L' + str(head['layer']) + 'H' + str(head['head']):<14} {head['role']:<9} "
              f"{head['confidence']:10.2f}")
    print("least from the source:")
    for sentence in summary["least_source"][:5]:
        print(f"  {sentence['source_share']:.0%}  {sentence['source']} → {sentence['translation']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
