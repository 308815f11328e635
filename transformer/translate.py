"""Translate from the command line.

    python -m transformer.translate "A dog runs across the grass."
    echo "Two children play football." | python -m transformer.translate --beam 5
    python -m transformer.translate --json "A man rides a bike."

Without TEXT, each line of standard input is translated (one output line per
input line, batched). ``--json`` prints one JSON object per input:
``source``, ``translation``, ``source_tokens``, ``target_tokens`` and
``attention`` = {"encoder", "decoder", "cross"}, each nested as
[layer][head][query][key]. ``source_tokens`` are the encoder positions (ending
with ``</s>``); ``target_tokens`` are the decoder input positions (starting with
the decoder's start token: ``<s>``, or ``<pad>`` for a converted Marian model): decoder attention is target x
target, cross-attention target x source.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import sys

from . import arguments
from .errors import InputError
from .files.checkpoint import DEFAULT_CHECKPOINT, CheckpointError, load_checkpoint
from .paper.sentences import report_cut_input, translate_batch


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    parser = argparse.ArgumentParser(prog="python -m transformer.translate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("text", nargs="*", help="sentences to translate (default: lines of standard input)")
    parser.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT))
    parser.add_argument("--beam", type=arguments.positive_int,
                        help="beam size (1 = greedy; default: the one a converted model was published with, else 5)")
    parser.add_argument("--max-tokens", type=arguments.positive_int,
                        help="generate at most this many tokens before </s> (default: 1.5 x the source + 10)")
    parser.add_argument("--length-penalty", type=float,
                        help="beam score = log P / length^this (default: the one the checkpoint was scored with, "
                             "else 1.0)")
    parser.add_argument("--json", action="store_true", help="one JSON object per input, with all attention")
    parser.add_argument("--device", type=arguments.device, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--source-language", help="a multilingual model's source language, its code as the model "
                        "writes it (en, eng_Latn, en_XX; default: the model's)")
    parser.add_argument("--target-language", help="a multilingual model's target language (de, deu_Latn, de_DE; "
                        "default: the model's)")
    args = parser.parse_args(argv)
    try:
        checkpoint = load_checkpoint(args.checkpoint, device=args.device).in_languages(args.source_language,
                                                                                      args.target_language)
    except (CheckpointError, InputError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    # Bytes that are not UTF-8 become U+FFFD, so one bad line cannot stop the others from being translated.
    if args.text:
        lines = [text.encode("utf-8", "surrogateescape").decode("utf-8", "replace") for text in args.text]
    else:
        stdin = io.TextIOWrapper(sys.stdin.buffer, "utf-8", errors="replace") if hasattr(sys.stdin, "buffer") \
            else sys.stdin
        lines = [line.rstrip("\r\n") for line in stdin]
    model, src_tok, tgt_tok = checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer
    length_penalty = checkpoint.length_penalty if args.length_penalty is None else args.length_penalty
    beam = args.beam or int(checkpoint.search.get("beam_size", 5))
    if args.json:
        for number, line in enumerate(lines, start=1):
            if not line.strip():  # as in the plain output: nothing to translate, nothing made up
                print(json.dumps({"source": line, "translation": "", "source_tokens": [], "target_tokens": [],
                                  "attention": {"encoder": [], "decoder": [], "cross": []}}), flush=True)
                continue
            result = checkpoint.translate(line, beam, args.max_tokens, length_penalty)
            if result.truncated:  # as translate_batch reports it for the plain output
                report_cut_input(model, number, len(src_tok.encode(line)))
            print(json.dumps(result.to_json(), ensure_ascii=False), flush=True)
        return 0
    for translation in translate_batch(model, src_tok, tgt_tok, lines, beam_size=beam, length_penalty=length_penalty,
                                       max_length=args.max_tokens, rules=checkpoint.rules):
        print(translation)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
