"""What every ``python -m transformer.X`` shares, so that they behave alike (docs/command-line.md is the contract):

- one name for each idea: ``--checkpoint``, ``--source-language`` and ``--target-language``, ``--device``,
  ``--beam``, ``--length-penalty``, ``--max-length`` (tokens a translation may have), ``--batch-tokens`` (tokens a
  batch may hold), ``--json``, ``--debug``; the same decoding defaults everywhere: the model's own published
  settings unless told otherwise;
- help on every flag, with its default; numbers out of range refused as they are parsed;
- a mistake (a flag, a file, a model, a value) is one line on standard error, ``error [CODE]: ...``, and exit
  status 2; a failure at run time is one line and status 1; Ctrl-C is status 130; a traceback only with
  ``--debug``. CODE is the library's name for the problem (``transformer/problems.json``), or ``usage`` for the
  command line itself;
- a flag renamed keeps its old name for one release, with a one-line notice (``RENAMED``).
"""

from __future__ import annotations

import argparse
import math
import sys
import traceback
from collections.abc import Callable

import torch

from . import cpu
from .errors import AT_RUN_TIME, Explained
from .files.checkpoint import DEFAULT_CHECKPOINT, Checkpoint, load_checkpoint
from .paper.translation import Translation
from .speed_choices import choose_speed, default_cache

USAGE = "usage"       # the code of a mistake in the command line itself
FAILED = "failed"     # the code of a failure at run time (a bug, a full disk, a GPU out of memory)
INTERRUPTED = 130     # the status a shell gives a command stopped by Ctrl-C
# Old flag names that still work until the next release: old name -> new name, for every command (a command that
# means something else by an old name lists its own).
RENAMED = {"--src-lang": "--source-language", "--tgt-lang": "--target-language"}


def positive_int(value: str) -> int:
    if not value.strip().isdecimal() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {value!r}")
    return int(value)


def whole_number(value: str) -> int:
    if not value.strip().isdecimal():
        raise argparse.ArgumentTypeError(f"expected a whole number from 0, got {value!r}")
    return int(value)


def _number(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"expected a number, got {value!r}")
    return number


def positive_number(value: str) -> float:
    number = _number(value)
    if number <= 0:
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {value!r}")
    return number


def non_negative_number(value: str) -> float:
    number = _number(value)
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected a number from 0, got {value!r}")
    return number


def share(value: str) -> float:
    """A rate such as dropout or label smoothing: from 0, below 1."""
    number = _number(value)
    if not 0 <= number < 1:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to below 1, got {value!r}")
    return number


def device(name: str) -> torch.device:
    """A device this machine has."""
    try:
        chosen = torch.device(name)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"unknown device {name!r}; use cpu or cuda") from None
    if chosen.type == "cuda" and not torch.cuda.is_available():
        raise argparse.ArgumentTypeError("this machine has no CUDA GPU that PyTorch can use; use --device cpu")
    return chosen


def device_name(name: str) -> str:
    """``device``, kept as its name (a run's saved config writes it as text)."""
    return str(device(name))


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The module's docstring as written; each flag's default after its help, unless the help says it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        meaningful = action.default is not None and action.default is not False and \
            action.default is not argparse.SUPPRESS and action.default != []
        if action.option_strings and meaningful and "default" not in text:
            text += " (default: %(default)s)"
        return text


class CommandLine(argparse.ArgumentParser):
    """The parser of ``python -m transformer.<module>``: a mistake is one line (``error [usage]: ...``, status 2);
    ``renamed`` old flags (besides ``RENAMED``) still work with a notice."""

    def __init__(self, module: str, description: str | None, renamed: dict[str, str] | None = None):
        super().__init__(prog=f"python -m transformer.{module}", description=description,
                         formatter_class=HelpFormatter)
        self.renamed = {**RENAMED, **(renamed or {})}
        self.add_argument("--debug", action="store_true", help="with an error, print its traceback too")

    def error(self, message: str):
        self.exit(2, f"error [{USAGE}]: {message} (see {self.prog} --help)\n")

    def parse_args(self, args=None, namespace=None):
        given = sys.argv[1:] if args is None else list(args)
        return super().parse_args(self.under_new_names(given), namespace)

    def under_new_names(self, given: list[str]) -> list[str]:
        """``given`` with each old flag name replaced by its new one, and a notice for each."""
        known = {option for action in self._actions for option in action.option_strings}
        renamed, options_end = [], False
        for argument in given:
            name, equals, value = argument.partition("=")
            if not options_end and name in self.renamed and name not in known and self.renamed[name] in known:
                new = self.renamed[name]
                print(f"notice: {name} is now {new}; the old name goes in the next release", file=sys.stderr)
                argument = new + equals + value
            options_end = options_end or argument == "--"
            renamed.append(argument)
        return renamed


def run(parser: CommandLine, command: Callable[[argparse.Namespace], int | None], argv: list[str] | None) -> int:
    """Parse ``argv`` and run ``command`` on it, each problem one line and its exit status (module docstring)."""
    args = parser.parse_args(argv)
    try:
        with cpu.threads_for_this_run(getattr(args, "threads", None)):
            return command(args) or 0
    except Explained as error:
        return said(error, error.code or "input", 1 if error.code in AT_RUN_TIME else 2, args.debug)
    except KeyboardInterrupt:
        print("error [interrupted]: stopped", file=sys.stderr)
        return INTERRUPTED
    except Exception as error:  # noqa: BLE001 - a failure at run time is one line too; its traceback on request
        return said(error, FAILED, 1, args.debug, f"{type(error).__name__}: ")


def said(error: BaseException, code: str, status: int, debug: bool, kind: str = "", also: str = "") -> int:
    """``error`` on one line of standard error (a message with line breaks in it is joined), after its traceback
    with ``--debug``; returns ``status``."""
    if debug:
        traceback.print_exception(error)
    print(f"error [{code}]: {kind}{' '.join(str(error).split())}{also}", file=sys.stderr)
    return status


# --- the common flags --------------------------------------------------------------------------------------------

def add_checkpoint(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT), metavar="DIR",
                        help="the model's directory: bundled, trained or converted (default: the bundled "
                             f"{DEFAULT_CHECKPOINT.parent.name}/{DEFAULT_CHECKPOINT.name})")


def add_languages(parser: argparse.ArgumentParser, whose: str = "a multilingual model's") -> None:
    parser.add_argument("--source-language", metavar="CODE",
                        help=f"{whose} source language, its code as the model writes it (en, eng_Latn, en_XX; "
                             "default: the model's)")
    parser.add_argument("--target-language", metavar="CODE",
                        help=f"{whose} target language (de, deu_Latn, de_DE; default: the model's)")


def add_device(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", type=device, help="cpu, cuda or cuda:N (default: cuda when available)")


def add_decoding(parser: argparse.ArgumentParser, output_length: bool = True) -> None:
    """How a translation is searched, as ``transformer.translate`` searches it."""
    parser.add_argument("--beam", type=positive_int,
                        help="beam size, 1 for greedy (default: the one the model was published with, else 5)")
    parser.add_argument("--length-penalty", type=non_negative_number,
                        help="beam score = log P / length^this (default: the one the checkpoint was scored with, "
                             "else 1.0)")
    if output_length:
        parser.add_argument("--max-length", type=positive_int, metavar="TOKENS",
                            help="at most this many tokens before </s> (default: 1.5 × the source + 10)")


def add_json(parser: argparse.ArgumentParser, what: str = "print one JSON object") -> None:
    parser.add_argument("--json", action="store_true", help=what)


def add_model(parser: argparse.ArgumentParser, output_length: bool = True) -> None:
    """The model and how it decodes, as ``transformer.translate`` has them (``output_length``: with
    ``--max-length``)."""
    add_checkpoint(parser)
    add_languages(parser)
    add_decoding(parser, output_length)
    add_device(parser)


def checkpoint_of(args: argparse.Namespace) -> Checkpoint:
    """The checkpoint ``args`` name, on its device, in its languages, decoding the ways timed fastest for it on
    this machine (``speed_choices``: read from the tools' cache after the first time)."""
    checkpoint = load_checkpoint(args.checkpoint, device=args.device)
    choose_speed(checkpoint.model, default_cache())
    return checkpoint.in_languages(args.source_language, args.target_language)


def beam_of(checkpoint: Checkpoint, args: argparse.Namespace) -> int:
    return args.beam or int(checkpoint.search.get("beam_size", 5))


def length_penalty_of(checkpoint: Checkpoint, args: argparse.Namespace) -> float:
    return checkpoint.length_penalty if args.length_penalty is None else args.length_penalty


def add_sentence_arguments(parser: argparse.ArgumentParser, purpose: str) -> None:
    """The arguments of a tool that looks into one translation: the sentence, and the model and decoding that
    make it as ``transformer.translate`` does, so both describe the same translation; ``--json``."""
    parser.add_argument("text", help=f"the sentence to translate and {purpose}")
    add_model(parser)
    add_json(parser)


def translated_sentence(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[Checkpoint, Translation]:
    """The checkpoint and its translation of ``args.text``, decoded as ``transformer.translate`` decodes."""
    if not args.text.strip():
        parser.error("the sentence is empty")
    checkpoint = checkpoint_of(args)
    return checkpoint, checkpoint.translate(args.text, beam_of(checkpoint, args), args.max_length,
                                            length_penalty_of(checkpoint, args))
