"""Shared by the benchmark scripts: which model to measure, and a description of the machine."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from transformer.cpu import speed_up  # noqa: E402
from transformer.files.checkpoint import DEFAULT_CHECKPOINT, Checkpoint, load_checkpoint  # noqa: E402
from transformer.paper.config import preset  # noqa: E402
from transformer.paper.model import Transformer  # noqa: E402
from transformer.paper.tokenizer import Tokenizer  # noqa: E402
from transformer.speed_choices import choose_speed  # noqa: E402


def bundled_or_random(device: str = "cpu") -> tuple[Checkpoint | None, Transformer]:
    """The bundled English-German model if present, else a randomly initialised one of the same ("small") size;
    decoding the ways timed fastest for it on this machine, as the app's models do (``speed_choices``)."""
    if DEFAULT_CHECKPOINT.is_dir():
        checkpoint = load_checkpoint(DEFAULT_CHECKPOINT, device=device)
        model = checkpoint.model
    else:
        torch.manual_seed(0)
        checkpoint, model = None, speed_up(Transformer(preset("small", 8000, 8000))).to(device).eval()
    choose_speed(model)
    return checkpoint, model


def repeat_ms(fn, repeats: int) -> tuple[float, float]:
    """Median and 95th percentile, in milliseconds, of ``repeats`` calls of ``fn`` after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(1000 * (time.perf_counter() - started))
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(0.95 * len(times)))]


def machine() -> str:
    name = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{name}, {os.cpu_count()} cores, torch {torch.__version__}, {torch.get_num_threads()} threads"


def report(result: dict, as_json: bool) -> None:
    """A benchmark's result: one line per figure unless ``as_json``, then the JSON line it always ends with."""
    if not as_json:
        width = max(map(len, result)) + 2
        for name, value in result.items():
            print(f"{name:{width}} {value}")
    print(json.dumps(result))


def run_against_server(measure, description: str, seconds: float, seconds_help: str,
                       parts: tuple[str, ...] = ()) -> None:
    """The command line of a benchmark that plays clients against a served app for ``--seconds``: its progress
    said as it goes unless ``--json``, its log under runs/. A benchmark of several ``parts`` measures those
    ``--only`` names (all by default), told as ``measure``'s ``parts``."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--seconds", type=float, default=seconds, help=seconds_help)
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    if parts:
        parser.add_argument("--only", nargs="+", choices=parts, default=list(parts), help="the parts to measure")
    args = parser.parse_args()
    (ROOT / "runs").mkdir(exist_ok=True)
    chosen = {"parts": set(args.only)} if parts else {}
    report(measure(args.seconds, say=(lambda *_: None) if args.json else print, **chosen), args.json)


__all__ = ["ROOT", "Tokenizer", "bundled_or_random", "machine", "repeat_ms", "report", "run_against_server"]
