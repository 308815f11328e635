"""Word alignments read from the model's attention, scored against human gold links (``inside/alignment.py``).

    python -m transformer.align --checkpoint checkpoints/multi30k-en-fr \\
        --text enfr.src-tgt --gold enfr.gold --method shift-att --json
    python -m transformer.align --checkpoint checkpoints/multi30k-en-fr \\
        --text enfr.src-tgt --gold enfr.gold --method all

``--text`` holds one pair a line, ``source words ||| target words``, words split by spaces; ``--gold`` its links,
one line a pair, counted from 1 (``3-5`` sure, ``3p5`` possible), as the word-alignment shared tasks write them.
The model reads each pair teacher-forced: the target is the given one, not its own translation.

Without ``--json`` each pair's links are printed in that format counted from 0, as fast_align writes them, and the
score goes to standard error. ``--json`` prints one object: ``aer``, ``precision`` and ``recall`` (null without
``--gold``) and ``alignments``, for each line its list of ``[source_word, target_word]`` links counted from 0.
``--method all`` scores every method at every decoder layer and over all layers: ``{"gold", "sentences", "methods":
[{"method", "layer", "aer", "precision", "recall"}]}`` (``layer`` null: every layer). Saved in a checkpoint as
``alignment.json``, it is what the app's Analysis tab shows beside the model's alignment.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from . import arguments
from .errors import InputError
from .inside import alignment


def main(argv: list[str] | None = None) -> int:
    parser = arguments.CommandLine("align", __doc__)
    parser.add_argument("--text", required=True, help="the pairs to align, one a line: source ||| target")
    parser.add_argument("--gold", help="gold links of the same lines, to score against (default: no score)")
    parser.add_argument("--gold-name", help="what the gold is, as --method all --json records it (default: the "
                                            "--gold file's name)")
    parser.add_argument("--method", choices=[*alignment.METHODS, "all"], default="attention",
                        help="how to read links from the model (all: score every method and layer)")
    parser.add_argument("--layer", type=arguments.positive_int,
                        help="the decoder layer to read, from 1 (default: every layer)")
    arguments.add_checkpoint(parser)
    arguments.add_languages(parser)
    arguments.add_device(parser)
    arguments.add_json(parser)
    return arguments.run(parser, lambda args: aligned(parser, args), argv)


def aligned(parser: arguments.CommandLine, args) -> int:
    if args.method == "all" and args.layer is not None:
        parser.error("--method all scores every layer; leave out --layer")
    if args.method == "all" and args.gold is None:
        parser.error("--method all compares the methods' scores; give --gold")
    checkpoint = arguments.checkpoint_of(args)
    pairs = alignment.read_pairs(args.text)
    gold = alignment.read_gold(args.gold) if args.gold else None
    if gold is not None and len(gold) != len(pairs):
        raise InputError(code="align.count_mismatch", sentences=len(pairs), gold=len(gold))
    choices = alignment.every_method(checkpoint.model) if args.method == "all" else [(args.method, args.layer)]
    links = alignment.align(checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer, pairs,
                            choices)
    if args.method == "all":
        report_every_method(links, gold, args.json, args.gold_name or Path(args.gold).name)
        return 0
    found = links[(args.method, args.layer)]
    score = alignment.alignment_error(found, gold) if gold is not None else None
    if args.json:
        print(json.dumps({**(score.to_json() if score else {"aer": None, "precision": None, "recall": None}),
                          "alignments": [sorted(map(list, sentence)) for sentence in found]}))
        return 0
    for sentence in found:
        print(" ".join(f"{source}-{target}" for source, target in sorted(sentence)))
    if score is not None:
        print(f"AER {score.aer:.1%}  precision {score.precision:.1%}  recall {score.recall:.1%}", file=sys.stderr)
    return 0


def report_every_method(links: dict, gold: list, as_json: bool, gold_name: str) -> None:
    """Each method and layer's score, best first in the printed table; in JSON, in the methods' order (what the app
    shows beside a model's alignment when saved as its ``alignment.json``)."""
    rows = [{"method": method, "layer": layer, **alignment.alignment_error(found, gold).to_json()}
            for (method, layer), found in links.items()]
    if as_json:
        print(json.dumps({"gold": gold_name, "sentences": len(gold), "methods": rows}, ensure_ascii=False))
        return
    print(f"{'method':<10} {'layer':>5} {'AER':>7} {'precision':>10} {'recall':>7}")
    for row in sorted(rows, key=lambda row: row["aer"]):
        print(f"{row['method']:<10} {row['layer'] or 'all':>5} {row['aer']:7.1%} {row['precision']:10.1%} "
              f"{row['recall']:7.1%}")


if __name__ == "__main__":
    sys.exit(main())
