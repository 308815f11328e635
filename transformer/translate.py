"""Translate from the command line.

    python -m transformer.translate "A dog runs across the grass."
    echo "Two children play football." | python -m transformer.translate --beam 5
    python -m transformer.translate --json "A man rides a bike."
    python -m transformer.translate --checkpoint checkpoints/m2m100_418M --target-language fr "Good morning."

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

import io
import json
import logging
import sys

from . import arguments
from .paper.sentences import report_cut_input, translate_batch


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    parser = arguments.CommandLine("translate", __doc__, renamed={"--max-tokens": "--max-length"})
    parser.add_argument("text", nargs="*", help="sentences to translate (default: lines of standard input)")
    arguments.add_model(parser)
    arguments.add_json(parser, "one JSON object per input, with all attention")
    return arguments.run(parser, translate, argv)


def translate(args) -> int:
    checkpoint = arguments.checkpoint_of(args)
    # Bytes that are not UTF-8 become U+FFFD, so one bad line cannot stop the others from being translated.
    if args.text:
        lines = [text.encode("utf-8", "surrogateescape").decode("utf-8", "replace") for text in args.text]
    else:
        stdin = io.TextIOWrapper(sys.stdin.buffer, "utf-8", errors="replace") if hasattr(sys.stdin, "buffer") \
            else sys.stdin
        lines = [line.rstrip("\r\n") for line in stdin]
    model, src_tok, tgt_tok = checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer
    length_penalty, beam = arguments.length_penalty_of(checkpoint, args), arguments.beam_of(checkpoint, args)
    if args.json:
        for number, line in enumerate(lines, start=1):
            if not line.strip():  # as in the plain output: nothing to translate, nothing made up
                print(json.dumps({"source": line, "translation": "", "source_tokens": [], "target_tokens": [],
                                  "attention": {"encoder": [], "decoder": [], "cross": []}}), flush=True)
                continue
            result = checkpoint.translate(line, beam, args.max_length, length_penalty)
            if result.truncated:  # as translate_batch reports it for the plain output
                report_cut_input(model, number, len(src_tok.encode(line)))
            print(json.dumps(result.to_json(), ensure_ascii=False), flush=True)
        return 0
    for translation in translate_batch(model, src_tok, tgt_tok, lines, beam_size=beam, length_penalty=length_penalty,
                                       max_length=args.max_length, rules=checkpoint.rules):
        print(translation)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
