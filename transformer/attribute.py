"""The command line of ``transformer.inside.attribution``: which source tokens drove each output token.

    python -m transformer.attribute "A dog runs across the grass." --method integrated_gradients --steps 64 --json
"""

from __future__ import annotations

import json
import sys

from . import arguments
from .inside import attribution
from .inside.attribution import METHODS, attribute


def main(argv: list[str] | None = None) -> int:
    parser = arguments.CommandLine("attribute", attribution.__doc__)
    arguments.add_sentence_arguments(parser, "attribute")
    parser.add_argument("--method", choices=METHODS, default="integrated_gradients",
                        help="how to attribute each token to the source")
    parser.add_argument("--steps", type=arguments.positive_int, default=64,
                        help="integrated gradients' points between the baseline and the input")
    return arguments.run(parser, lambda args: attributed(parser, args), argv)


def attributed(parser: arguments.CommandLine, args) -> int:
    checkpoint, translation = arguments.translated_sentence(parser, args)
    result = attribute(checkpoint.model, translation, args.method, args.steps)
    if args.json:
        print(json.dumps(result.to_json(translation), ensure_ascii=False))
        return 0
    print(f"translation: {translation.text}")
    for piece, row in zip(translation.predicted_pieces, result.scores):
        best = int(row.argmax())
        print(f"{piece:>16} ← {translation.source_pieces[best]} ({float(row[best]):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
