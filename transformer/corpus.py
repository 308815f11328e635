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

import json
import logging
import sys

from . import arguments
from .data import corpus_sentences
from .inside.corpus_run import Decoding, run_corpus

log = logging.getLogger("transformer.corpus")


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = arguments.CommandLine("corpus", __doc__)
    parser.add_argument("--input", required=True, help="multi30k:SPLIT, a .tsv of sentence and reference, or a "
                        "text file of one sentence a line")
    parser.add_argument("--out", required=True, help="the folder the run is saved in, and resumed from")
    parser.add_argument("--limit", type=arguments.positive_int, help="only the first N sentences (default: all)")
    parser.add_argument("--data-dir", help="the Multi30K folder (default: $MULTI30K_DIR, else download)")
    parser.add_argument("--force-references", action="store_true",
                        help="read each reference teacher-forced instead of translating")
    arguments.add_model(parser, output_length=False)
    arguments.add_json(parser)
    return arguments.run(parser, measured, argv)


def measured(args) -> int:
    checkpoint = arguments.checkpoint_of(args)
    sources, references = corpus_sentences(args.input, *checkpoint.direction, args.data_dir)
    if args.limit:
        sources, references = sources[:args.limit], references and references[:args.limit]
    decoding = Decoding.default(checkpoint, args.beam, args.length_penalty, args.force_references)
    run = run_corpus(checkpoint, sources, references, args.out, decoding,
                     progress=lambda done, total: log.info("%d of %d sentences", done, total))
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
