"""Score a checkpoint by really decoding a test set: sacreBLEU and chrF, with their signatures.

    python -m transformer.evaluate --checkpoint checkpoints/multi30k-en-de --split test_2016_flickr --beam 5
    python -m transformer.evaluate --checkpoint DIR --source test.en --reference test.de --json

The last line of ``--json`` output is {"bleu", "chrf", "signature", "sentences", "seconds", ...}.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from . import arguments
from . import data as datasets
from .errors import InputError
from .files import multilingual
from .files.checkpoint import DEFAULT_CHECKPOINT, Checkpoint, CheckpointError, load_checkpoint
from .train.evaluation import evaluate_checkpoint


def in_data_languages(checkpoint: Checkpoint, source: str, target: str) -> Checkpoint:
    """A multilingual model set to translate the data's languages (ISO 639-1 codes, as Multi30K and --src-lang
    name them); a model of one pair as it is."""
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
    parser = argparse.ArgumentParser(prog="python -m transformer.evaluate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT))
    parser.add_argument("--split", default="test_2016_flickr", choices=datasets.MULTI30K_SPLITS)
    parser.add_argument("--data-dir", help="Multi30K directory (default: $MULTI30K_DIR, else download)")
    parser.add_argument("--src-lang", default=None, help="default: the checkpoint's source language")
    parser.add_argument("--tgt-lang", default=None, help="default: the checkpoint's target language")
    parser.add_argument("--source", help="a text file of source sentences (instead of a Multi30K split)")
    parser.add_argument("--reference", help="the aligned reference translations for --source")
    parser.add_argument("--beam", type=arguments.positive_int, default=5, help="beam size (1 = greedy)")
    parser.add_argument("--length-penalty", type=float,
                        help="beam score = log P / length^this (default: the one the checkpoint was scored with, "
                             "else 1.0)")
    parser.add_argument("--max-tokens", type=int, default=8000, help="source tokens x beam per batch")
    parser.add_argument("--limit", type=arguments.positive_int, help="score only the first N sentences")
    parser.add_argument("--bf16", action="store_true", help="decode under bf16 autocast (faster, may differ slightly)")
    parser.add_argument("--output",
                        help="file for the hypotheses (default runs/hypotheses/<checkpoint>.<split>.beam<N>.txt)")
    parser.add_argument("--device", type=arguments.device, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON on the last line")
    args = parser.parse_args(argv)
    try:
        checkpoint = load_checkpoint(args.checkpoint, device=args.device)
        if args.source or args.reference:
            if not (args.source and args.reference):
                parser.error("--source and --reference go together")
            corpus = datasets.load_parallel_files(args.source, args.reference)
            if corpus.skipped:  # scoring the rest would misalign the hypotheses with the files' lines
                raise datasets.DataError(code="data.empty_lines_in_files", skipped=corpus.skipped,
                                         first=corpus.problems[0])
            split = Path(args.source).stem
        else:
            corpus = datasets.load_multi30k(args.split, args.src_lang or checkpoint.info.get("source_lang", "en"),
                                            args.tgt_lang or checkpoint.info.get("target_lang", "de"),
                                            args.data_dir)
            split = args.split
        checkpoint = in_data_languages(checkpoint, args.src_lang or "en", args.tgt_lang or "de")
    except (CheckpointError, datasets.DataError, InputError) as error:
        logging.error("%s", error)
        return 2
    sources, references = corpus.sources[: args.limit], corpus.targets[: args.limit]
    length_penalty = checkpoint.length_penalty if args.length_penalty is None else args.length_penalty
    result = evaluate_checkpoint(checkpoint, sources, references, args.beam, length_penalty,
                                 args.max_tokens, args.bf16)
    output = Path(args.output or f"runs/hypotheses/{checkpoint.name}.{split}.beam{args.beam}.txt")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("\n".join(result.pop("hypotheses")) + "\n")
    if not args.json:
        print(f"BLEU {result['bleu']:.2f}  chrF {result['chrf']:.2f}  ({result['sentences']} sentences, "
              f"{result['seconds']:.1f} s, beam {args.beam}, length penalty {length_penalty})", file=sys.stderr)
        print(result["signature"], file=sys.stderr)
        print(f"hypotheses written to {output}", file=sys.stderr)
    else:
        print(json.dumps({**result, "bf16": args.bf16}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
