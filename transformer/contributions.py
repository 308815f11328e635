"""The command line of ``transformer.inside.contributions``: how much of each generated token comes from the source
and how much from the translation so far (ALTI+).

    python -m transformer.contributions "A dog runs across the grass." --json

``--json`` prints one object: ``source_tokens``, ``target_tokens`` (the decoder's inputs, its start token first)
and ``steps``, one per generated token: ``{"token", "source_share", "prefix_share", "source": [a share per source
token], "prefix": [a share per decoder input up to this step], "source_share_by_layer"}``.
"""

from __future__ import annotations

import json
import sys

from . import arguments
from .inside import contributions


def main(argv: list[str] | None = None) -> int:
    parser = arguments.CommandLine("contributions", __doc__)
    arguments.add_sentence_arguments(parser, "measure")
    return arguments.run(parser, lambda args: measured(parser, args), argv)


def measured(parser: arguments.CommandLine, args) -> int:
    checkpoint, translation = arguments.translated_sentence(parser, args)
    result = contributions.contributions(checkpoint.model, translation)
    if args.json:
        print(json.dumps(result.to_json(translation), ensure_ascii=False))
        return 0
    print(f"translation: {translation.text}")
    print(f"{'token':>16} {'source':>7}  most from")
    for step, piece in enumerate(translation.predicted_pieces):
        source = result.source[-1, step]
        best = int(source.argmax())
        print(f"{piece[:16]:>16} {float(source.sum()):7.1%}  {translation.source_pieces[best]} "
              f"({float(source[best]):.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
