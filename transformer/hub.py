"""A translator from the Hugging Face Hub opened as a checkpoint of this project: a Marian (opus-mt) model, or a
multilingual M2M100, NLLB-200, SMaLL-100 or mBART-50 (docs/multilingual.md). Its weights are renamed onto this
project's modules (``transformer/files/hub.py``, ``files/multilingual.py``), never re-implemented.

    python -m transformer.hub Helsinki-NLP/opus-mt-en-de --out checkpoints/opus-mt-en-de
    python -m transformer.hub facebook/m2m100_418M --out checkpoints/m2m100_418M
    python -m transformer.hub path/to/opus-mt-en-fr --out DIR     (a directory in the Hugging Face layout)
"""

from __future__ import annotations

import logging
import sys

from . import arguments
from .files.download import open_model


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    parser = arguments.CommandLine("hub", __doc__)
    parser.add_argument("source", help="a Hub model id (Helsinki-NLP/opus-mt-en-de, facebook/m2m100_418M) or a "
                                       "directory in its layout")
    parser.add_argument("--out", required=True, help="the checkpoint directory to write")
    parser.add_argument("--revision", help="a branch, tag or commit of the Hub model (default: main)")
    return arguments.run(parser, opened, argv)


def opened(args) -> int:
    print(open_model(args.source, args.out, args.revision))
    return 0


if __name__ == "__main__":
    sys.exit(main())
