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


from .. import data as datasets
from ..files.checkpoint import CheckpointError, read_config
from ..files.weights import resolve
from ..paper.config import PRESETS
from .planning import data_kind, run_settings
from .settings import AUTO_PRESET, PLANNED_FIELDS, TrainConfig
from .trainer import Trainer

log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m transformer.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = TrainConfig()
    add = parser.add_argument
    add("--data", default=defaults.data, help="copy, reverse, sort, multi30k, or a source<TAB>target .tsv file")
    add("--data-dir", help="directory with Multi30K's {split}.{lang}.gz (default: $MULTI30K_DIR, else download)")
    add("--src-lang", default="en")
    add("--tgt-lang", default="de")
    add("--preset", default=defaults.preset, choices=[*sorted(PRESETS), AUTO_PRESET],
        help=f"model size (default {defaults.preset}); {AUTO_PRESET}: size, vocabulary, batch, learning rate and "
             "warm-up planned for --max-minutes, with a schedule that ends when the time does")
    for name, kind in (("d_model", int), ("n_heads", int), ("n_encoder_layers", int), ("n_decoder_layers", int),
                       ("d_ff", int), ("dropout", float), ("attention_dropout", float), ("max_len", int)):
        add("--" + name.replace("_", "-"), type=kind, help=f"override the preset's {name}")
    add("--norm-first", action="store_true", default=None, help="pre-norm instead of the paper's post-norm")
    add("--separate-embeddings", action="store_true", help="do not share source/target/output embeddings")
    add("--separate-vocabularies", action="store_true",
        help="one sentencepiece model per language, each of --vocab-size pieces (implies --separate-embeddings); "
             "the digit tasks have the same symbols on both sides, so theirs come out identical")
    # Left unset, these take TrainConfig's defaults, or what --preset auto plans.
    add("--vocab-size", type=int, help=f"sentencepiece pieces (default {defaults.vocab_size})")
    add("--max-tokens", type=int, help=f"padded tokens per batch (default {defaults.max_tokens})")
    add("--steps", type=int, help=f"optimizer updates (default {defaults.steps}); on --resume, the new total")
    add("--max-minutes", type=float,
        help="time limit of updates and evaluations: the run stops there and a decaying schedule ends there when "
             "it comes before --steps; on --resume, the new total")
    add("--lr", type=float, help=f"peak learning rate (default {defaults.lr})")
    add("--warmup-steps", type=int, help=f"default {defaults.warmup_steps}")
    add("--schedule", choices=["noam", "cosine", "linear", "plateau", "constant"],
        help=f"default {defaults.schedule}")
    add("--label-smoothing", type=float, default=defaults.label_smoothing)
    add("--clip-norm", type=float, default=defaults.clip_norm)
    add("--accumulate", type=int, default=defaults.accumulate)
    add("--weight-decay", type=float, default=defaults.weight_decay)
    add("--seed", type=int, default=defaults.seed)
    add("--eval-every", type=int, help=f"evaluate every this many updates (default {defaults.eval_every})")
    add("--eval-every-minutes", type=float, help="also evaluate this often by the clock")
    add("--eval-sentences", type=int)
    add("--out", default=None, help="run directory (default runs/<data>-<preset>)")
    add("--resume", metavar="RUN_DIR", help="continue the run saved in RUN_DIR/last")
    add("--precision", default="auto", choices=["auto", "bf16", "fp32"])
    add("--keep-checkpoints", type=int, default=defaults.keep_checkpoints)
    add("--average-last", type=int, default=0)
    add("--probe", action="append", default=[], help="sentence whose attention is saved at every evaluation")
    add("--threads", type=int)
    add("--device", help="where to train (cpu, cuda, cuda:1; default CUDA when PyTorch sees a GPU)")
    add("--no-progress", action="store_true")
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
    args = parser.parse_args(argv)
    try:
        if args.resume:
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
            ignored = [f"--{name.replace('_', '-')}" for name, value in vars(args).items()
                       if name not in ("resume", "steps", "max_minutes", "no_progress")
                       and value != parser.get_default(name)]
            if ignored:
                log.warning("--resume continues with the run's saved settings; ignored: %s", ", ".join(ignored))
        else:
            config = config_from_args(args)
        trainer = Trainer(config, resume=args.resume, show_progress=not args.no_progress)
        trainer.directory.add_command("python -m transformer.train "
                                      + shlex.join(argv if argv is not None else sys.argv[1:]))
        with stop_on_first_interrupt(trainer.cancel):
            final = trainer.run()
    except (datasets.DataError, CheckpointError, ValueError, FloatingPointError) as error:
        logging.error("%s", error)
        return 2
    except KeyboardInterrupt:
        logging.error("stopped at once: what was trained since the last evaluation was not saved")
        return 130
    if trainer.rank == 0:
        print(json.dumps({k: v for k, v in final.items() if k != "probe"}))
    trainer.processes.leave()
    return 0
