"""The command line of ``python -m transformer.train``: arguments into a ``TrainConfig``, a resumed run's saved
settings, Ctrl-C as a clean stop, and the final metrics as JSON.

    python -m transformer.train --data reverse --preset tiny --steps 600
    python -m transformer.train --data multi30k --data-dir ../shared/data/multi30k --preset small --steps 5000
    torchrun --nproc_per_node 2 -m transformer.train --data multi30k ...
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import shlex
import signal
import sys
import threading
from pathlib import Path


from .. import arguments
from ..files.checkpoint import read_config
from ..files.weights import resolve
from ..paper.config import PRESETS
from .planning import data_kind, run_settings
from .settings import AUTO_PRESET, PLANNED_FIELDS, TrainConfig
from .trainer import Trainer

log = logging.getLogger(__name__)


def build_parser() -> arguments.CommandLine:
    parser = arguments.CommandLine("train", __doc__, renamed={"--max-tokens": "--batch-tokens"})
    defaults = TrainConfig()
    add = parser.add_argument
    whole, positive, share = arguments.positive_int, arguments.positive_number, arguments.share
    add("--data", default=defaults.data, help="copy, reverse, sort, multi30k, or a source<TAB>target .tsv file")
    add("--data-dir", help="directory with Multi30K's {split}.{lang}.gz (default: $MULTI30K_DIR, else download)")
    add("--source-language", dest="src_lang", default="en", metavar="CODE", help="Multi30K's source side")
    add("--target-language", dest="tgt_lang", default="de", metavar="CODE", help="Multi30K's target side")
    add("--preset", default=defaults.preset, choices=[*sorted(PRESETS), AUTO_PRESET],
        help=f"model size (default: {defaults.preset}); {AUTO_PRESET}: size, vocabulary, batch, learning rate and "
             "warm-up planned for --max-minutes, with a schedule that ends when the time does")
    for name, kind in (("d_model", whole), ("n_heads", whole), ("n_encoder_layers", whole),
                       ("n_decoder_layers", whole), ("d_ff", whole), ("dropout", share),
                       ("attention_dropout", share), ("max_len", whole)):
        add("--" + name.replace("_", "-"), type=kind, help=f"override the preset's {name} (default: the preset's)")
    add("--norm-first", action="store_true", default=None, help="pre-norm instead of the paper's post-norm")
    add("--separate-embeddings", action="store_true", help="do not share source/target/output embeddings")
    add("--separate-vocabularies", action="store_true",
        help="one sentencepiece model per language, each of --vocab-size pieces (implies --separate-embeddings); "
             "the digit tasks have the same symbols on both sides, so theirs come out identical")
    # Left unset, these take TrainConfig's defaults, or what --preset auto plans.
    planned = f"or what --preset {AUTO_PRESET} plans"
    add("--vocab-size", type=whole, help=f"sentencepiece pieces (default: {defaults.vocab_size}, {planned})")
    add("--batch-tokens", dest="max_tokens", type=whole, metavar="TOKENS",
        help=f"a batch holds at most this many tokens, padding counted (default: {defaults.max_tokens}, {planned})")
    add("--steps", type=whole, help=f"optimizer updates (default: {defaults.steps}); on --resume, the new total")
    add("--max-minutes", type=positive,
        help="time limit of updates and evaluations: the run stops there and a decaying schedule ends there when "
             "it comes before --steps; on --resume, the new total (default: none)")
    add("--lr", type=positive, help=f"peak learning rate (default: {defaults.lr}, {planned})")
    add("--warmup-steps", type=arguments.whole_number, help=f"updates of rising learning rate (default: "
        f"{defaults.warmup_steps}, {planned})")
    add("--schedule", choices=["noam", "cosine", "linear", "plateau", "constant"],
        help=f"the learning rate's schedule (default: {defaults.schedule}, {planned})")
    add("--label-smoothing", type=share, default=defaults.label_smoothing, help="section 5.4's ε_ls")
    add("--clip-norm", type=arguments.non_negative_number, default=defaults.clip_norm,
        help="clip the gradient's norm to this (0: no clipping)")
    add("--accumulate", type=whole, default=defaults.accumulate, help="micro-batches per update")
    add("--weight-decay", type=arguments.non_negative_number, default=defaults.weight_decay, help="AdamW's")
    add("--seed", type=arguments.whole_number, default=defaults.seed, help="of the data's order and the weights")
    add("--eval-every", type=whole, help=f"evaluate every this many updates (default: {defaults.eval_every})")
    add("--eval-every-minutes", type=positive, help="also evaluate this often by the clock (default: not by it)")
    add("--eval-sentences", type=whole, help="validation sentences decoded at each evaluation (default: all)")
    add("--out", default=None, help="run directory (default: runs/<data>-<preset>)")
    add("--resume", metavar="RUN_DIR", help="continue the run saved in RUN_DIR/last (default: a new run)")
    add("--precision", default="auto", choices=["auto", "bf16", "fp32"],
        help="auto: bf16 where the machine computes it natively")
    add("--keep-checkpoints", type=whole, default=defaults.keep_checkpoints, help="evaluations' checkpoints kept")
    add("--average-last", type=arguments.whole_number, default=0,
        help="average the weights of the last N checkpoints into RUN/averaged (0: none)")
    add("--probe", action="append", default=[],
        help="sentence whose attention is saved at every evaluation (default: one per data kind)")
    add("--threads", type=whole, help="CPU threads (default: the cores nothing else keeps busy)")
    add("--device", type=arguments.device_name,
        help="where to train (cpu, cuda, cuda:1; default: CUDA when PyTorch sees a GPU)")
    add("--no-progress", action="store_true", help="no progress bar")
    return parser


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    model = {name: getattr(args, name) for name in ("d_model", "n_heads", "n_encoder_layers", "n_decoder_layers",
                                                     "d_ff", "dropout", "attention_dropout", "max_len", "norm_first")
             if getattr(args, name) is not None}
    if args.separate_embeddings:
        model.update(share_embeddings=False, tie_output_projection=True)
    data_name = Path(args.data).stem if args.data.endswith(".tsv") else args.data
    given = {name: getattr(args, name) for name in PLANNED_FIELDS if getattr(args, name) is not None}
    # A preset "auto" is planned when the run starts, around what was given here.
    settings = run_settings(data_kind(args.data), args.preset, args.steps, args.max_minutes, given=given)
    return TrainConfig(
        data=args.data, data_dir=args.data_dir, src_lang=args.src_lang, tgt_lang=args.tgt_lang, model=model,
        joint_vocabulary=not args.separate_vocabularies, label_smoothing=args.label_smoothing,
        clip_norm=args.clip_norm, accumulate=args.accumulate, weight_decay=args.weight_decay, seed=args.seed,
        eval_sentences=args.eval_sentences, out_dir=args.out or f"runs/{data_name}-{args.preset}",
        precision=args.precision, keep_checkpoints=args.keep_checkpoints, average_last=args.average_last,
        probe_sentences=args.probe, threads=args.threads, device=args.device, **settings)


@contextlib.contextmanager
def stop_on_first_interrupt(cancel: threading.Event):
    """While in effect, Ctrl-C asks the run to stop after its current update, evaluate and save ``last/``
    (resumable); a second Ctrl-C stops at once."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread receives signals
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def interrupted(signum, frame):
        signal.signal(signal.SIGINT, previous)
        log.warning("stopping after this update and saving the run; press Ctrl-C again to stop at once")
        cancel.set()

    signal.signal(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    parser = build_parser()
    return arguments.run(parser, lambda args: trained(parser, args, argv), argv)


def trained(parser: arguments.CommandLine, args: argparse.Namespace, argv: list[str] | None) -> int:
    try:
        if args.resume:
            config = resumed_config(parser, args)
        else:
            config = config_from_args(args)
        trainer = Trainer(config, resume=args.resume, show_progress=not args.no_progress)
    except ValueError as error:  # settings that do not go together, found as the run is set up
        return arguments.said(error, arguments.USAGE, 2, args.debug)
    trainer.directory.add_command("python -m transformer.train "
                                  + shlex.join(argv if argv is not None else sys.argv[1:]))
    try:
        with stop_on_first_interrupt(trainer.cancel):
            final = trainer.run()
    except KeyboardInterrupt:
        print("error [interrupted]: stopped at once: what was trained since the last evaluation was not saved",
              file=sys.stderr)
        return arguments.INTERRUPTED
    if trainer.rank == 0:
        print(json.dumps({k: v for k, v in final.items() if k != "probe"}))
    trainer.processes.leave()
    return 0


def resumed_config(parser: arguments.CommandLine, args: argparse.Namespace) -> TrainConfig:
    """The saved run's settings, with a new total of updates or minutes where given."""
    saved = read_config(resolve(Path(args.resume) / "last"))
    config = TrainConfig(**saved["training"])
    config.out_dir = args.resume  # the run continues where it lies now, even if moved
    if args.steps is not None:
        if args.steps != config.steps and config.schedule in ("cosine", "linear"):
            log.warning("the %s schedule decays over all the updates: changing them from %d to %d reshapes "
                        "it, so the learning rate jumps where the run resumes", config.schedule,
                        config.steps, args.steps)
        config.steps = args.steps
    if args.max_minutes is not None:  # the clock goes on from where the run stopped: this is its new total
        if args.max_minutes != config.max_minutes and config.schedule in ("cosine", "linear"):
            log.warning("the %s schedule ends with the run's time limit: changing it to %g minutes "
                        "reshapes it, so the learning rate jumps where the run resumes", config.schedule,
                        args.max_minutes)
        config.max_minutes = args.max_minutes
    flags = {action.dest: action.option_strings[0] for action in parser._actions if action.option_strings}
    ignored = [flags[name] for name, value in vars(args).items()
               if name not in ("resume", "steps", "max_minutes", "no_progress", "debug")
               and value != parser.get_default(name)]
    if ignored:
        log.warning("--resume continues with the run's saved settings; ignored: %s", ", ".join(ignored))
    return config
