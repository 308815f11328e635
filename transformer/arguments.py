"""Arguments the command-line tools share: a mistake becomes argparse's one-line usage error (exit code 2)."""

from __future__ import annotations

import argparse

import torch

from .files.checkpoint import DEFAULT_CHECKPOINT, Checkpoint, CheckpointError, load_checkpoint
from .paper.translation import Translation


def positive_int(value: str) -> int:
    if not value.isdecimal() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {value!r}")
    return int(value)


def device(name: str) -> torch.device:
    """A device this machine has."""
    try:
        chosen = torch.device(name)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"unknown device {name!r}; use cpu or cuda") from None
    if chosen.type == "cuda" and not torch.cuda.is_available():
        raise argparse.ArgumentTypeError("this machine has no CUDA GPU that PyTorch can use; use --device cpu")
    return chosen


def add_sentence_arguments(parser: argparse.ArgumentParser, purpose: str) -> None:
    """The arguments of a tool that looks into one translation: the sentence, and the decoding that makes it as
    ``transformer.translate`` does, so both describe the same translation."""
    parser.add_argument("text", help=f"the sentence to translate and {purpose}")
    add_decoding_arguments(parser)


def add_decoding_arguments(parser: argparse.ArgumentParser) -> None:
    """The checkpoint and how it decodes, as ``transformer.translate`` does; ``--json`` and ``--device``."""
    parser.add_argument("--beam", type=positive_int, default=5, help="beam size (1 = greedy), as in "
                        "transformer.translate")
    parser.add_argument("--length-penalty", type=float, help="default: the one the checkpoint was scored with")
    parser.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT))
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--device", type=device, help="cpu or cuda (default: cuda when available)")


def translated_sentence(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[Checkpoint, Translation]:
    """The checkpoint and its translation of ``args.text``; an empty sentence or a bad checkpoint is one line."""
    if not args.text.strip():
        parser.error("the sentence is empty")
    try:
        checkpoint = load_checkpoint(args.checkpoint, device=args.device)
    except CheckpointError as error:
        parser.exit(2, f"error: {error}\n")
    return checkpoint, checkpoint.translate(args.text, args.beam, length_penalty=args.length_penalty)
