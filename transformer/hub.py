"""The command line of ``transformer.files.hub``: a Marian (opus-mt) translator opened as a checkpoint.

    python -m transformer.hub Helsinki-NLP/opus-mt-en-de --out checkpoints/opus-mt-en-de
    python -m transformer.hub path/to/opus-mt-en-fr --out DIR     (a directory in the Hugging Face layout)
"""

from __future__ import annotations

import argparse
import logging
import sys

from .files import hub
from .files.download import open_model
from .files.hub import HubError


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    parser = argparse.ArgumentParser(prog="python -m transformer.hub", description=hub.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", help="a Hub model id (Helsinki-NLP/opus-mt-en-de) or a directory in its layout")
    parser.add_argument("--out", required=True, help="the checkpoint directory to write")
    parser.add_argument("--revision", help="a branch, tag or commit of the Hub model (default: main)")
    args = parser.parse_args(argv)
    try:
        written = open_model(args.source, args.out, args.revision)
    except HubError as error:
        print(f"error: {args.source}: {error}", file=sys.stderr)
        return 2
    print(written)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
