"""Score a checkpoint by really decoding a test set: sacreBLEU and chrF, with their signatures.

    python -m transformer.evaluate --checkpoint checkpoints/multi30k-en-de --split test_2016_flickr --beam 5
    python -m transformer.evaluate --checkpoint DIR --source test.en --reference test.de --json

The last line of ``--json`` output is {"bleu", "chrf", "signature", "sentences", "seconds", ...}.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

from . import arguments
from . import data as datasets
from .errors import InputError
from .files import multilingual
from .files.checkpoint import Checkpoint, load_checkpoint
from .train.evaluation import evaluate_checkpoint


def in_data_languages(checkpoint: Checkpoint, source: str, target: str) -> Checkpoint:
    """A multilingual model set to translate the data's languages (ISO 639-1 codes, as Multi30K and
    --source-language name them); a model of one pair as it is."""
    if checkpoint.languages is None:
        return checkpoint
    codes = checkpoint.languages.tokens
    found = {iso: multilingual.code_for(codes, iso) for iso in (source, target)}
    missing = [iso for iso, code in found.items() if code is None]
    if missing:
        raise InputError(code="evaluate.no_language",
                         name=checkpoint.name, languages=", ".join(missing))
    return checkpoint.in_languages(found[source], found[target])


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    parser = arguments.CommandLine("evaluate", __doc__, renamed={"--max-tokens": "--batch-tokens"})
    parser.add_argument("--split", default="test_2016_flickr", choices=datasets.MULTI30K_SPLITS,
                        help="the Multi30K split to score")
    parser.add_argument("--data-dir", help="Multi30K directory (default: $MULTI30K_DIR, else download)")
    parser.add_argument("--source", help="a text file of source sentences (default: a Multi30K split)")
    parser.add_argument("--reference", help="the aligned reference translations for --source (default: none)")
    parser.add_argument("--limit", type=arguments.positive_int, help="score only the first N sentences (default: all)")
    arguments.add_checkpoint(parser)
    arguments.add_languages(parser, "the data's (ISO 639-1, as Multi30K names them) and a multilingual model's")
    arguments.add_decoding(parser, output_length=False)
    parser.add_argument("--batch-tokens", type=arguments.positive_int, default=8000, metavar="TOKENS",
                        help="a batch holds at most this many source tokens × beam")
    parser.add_argument("--bf16", action="store_true", help="decode under bf16 autocast (faster, may differ slightly)")
    parser.add_argument("--output", help="file for the hypotheses (default: "
                        "runs/hypotheses/<checkpoint>.<split>.beam<N>.txt)")
    arguments.add_device(parser)
    arguments.add_json(parser, "print the result as JSON on the last line")
    return arguments.run(parser, lambda args: evaluated(parser, args), argv)


def evaluated(parser: arguments.CommandLine, args) -> int:
    if bool(args.source) != bool(args.reference):
        parser.error("--source and --reference go together")
    checkpoint = load_checkpoint(args.checkpoint, device=args.device)
    source_lang = args.source_language or checkpoint.info.get("source_lang", "en")
    target_lang = args.target_language or checkpoint.info.get("target_lang", "de")
    if args.source:
        corpus = datasets.load_parallel_files(args.source, args.reference)
        if corpus.skipped:  # scoring the rest would misalign the hypotheses with the files' lines
            raise datasets.DataError(code="data.empty_lines_in_files", skipped=corpus.skipped,
                                     first=corpus.problems[0])
        split = Path(args.source).stem
    else:
        corpus = datasets.load_multi30k(args.split, source_lang, target_lang, args.data_dir)
        split = args.split
    checkpoint = in_data_languages(checkpoint, args.source_language or "en", args.target_language or "de")
    sources, references = corpus.sources[: args.limit], corpus.targets[: args.limit]
    beam, length_penalty = arguments.beam_of(checkpoint, args), arguments.length_penalty_of(checkpoint, args)
    result = evaluate_checkpoint(checkpoint, sources, references, beam, length_penalty, args.batch_tokens, args.bf16)
    output = Path(args.output or f"runs/hypotheses/{checkpoint.name}.{split}.beam{beam}.txt")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("\n".join(result.pop("hypotheses")) + "\n")
    if not args.json:
        print(f"BLEU {result['bleu']:.2f}  chrF {result['chrf']:.2f}  ({result['sentences']} sentences, "
              f"{result['seconds']:.1f} s, beam {beam}, length penalty {length_penalty})", file=sys.stderr)
        print(result["signature"], file=sys.stderr)
        print(f"hypotheses written to {output}", file=sys.stderr)
    else:
        print(json.dumps({**result, "bf16": args.bf16}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
