"""The command line of ``transformer.inside.one_head``: one head's arithmetic for a sentence, as text or JSON.

    python -m transformer.inside_head "A dog runs across the grass." --kind cross --layer 2 --head 3 --query 4 --json
"""

from __future__ import annotations

import json
import sys

from . import arguments
from .inside import one_head
from .inside.one_head import KINDS, describe, head_arithmetic


def main(argv: list[str] | None = None) -> int:
    parser = arguments.CommandLine("inside_head", one_head.__doc__)
    arguments.add_sentence_arguments(parser, "look inside")
    parser.add_argument("--kind", choices=KINDS, default="cross", help="which attention")
    parser.add_argument("--layer", type=arguments.positive_int, default=1, help="the layer, from 1")
    parser.add_argument("--head", type=arguments.positive_int, default=1, help="the head, from 1")
    parser.add_argument("--query", type=arguments.positive_int, default=1,
                        help="row of the attention matrix, from 1 (a source position for encoder attention, else "
                             "a decoder input position, <s> first)")
    return arguments.run(parser, lambda args: looked_inside(parser, args), argv)


def looked_inside(parser: arguments.CommandLine, args) -> int:
    checkpoint, translation = arguments.translated_sentence(parser, args)
    model = checkpoint.model
    try:
        arithmetic = head_arithmetic(model, translation, args.kind, args.layer, args.head, args.query)
    except ValueError as error:  # a layer, head or query the model does not have
        return arguments.said(error, arguments.USAGE, 2, args.debug)
    if args.json:
        print(json.dumps(arithmetic.to_json(), ensure_ascii=False))
    else:
        print(describe(arithmetic))
    return 0


if __name__ == "__main__":
    sys.exit(main())
