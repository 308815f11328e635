"""Threads under contention: torch's default (one per core, in every process) against the rule in
``transformer/cpu.py`` (the cores nothing else keeps busy as a process starts) and the app's share of its cores.

- ``click_beside_training``: the app's Translate click (``app_latency.one_click``: beam 5, 15 words, its views built)
  on the bundled model, alone and while a Train-tab job trains in the same process (the Multi30K small preset, or
  the reversal task where Multi30K is not given), as a job runs today on a machine of one's own (every core for
  the job and every core for the click) and as a public visitor's job runs (``CORES.reserve``: half for the job,
  the rest for the click). Medians of ``--clicks`` clicks, and the job's training tokens per second meanwhile.
- ``commands``: ``transformer.align`` (the 447 Hansards pairs, every reading) and ``transformer.corpus`` (100
  Multi30K test sentences), each alone and beside one busy core (a process spinning), with torch's default
  (``OMP_NUM_THREADS`` set to every core) and with the rule (unset). Wall seconds; ``--rounds`` rounds, the ways
  taken in turn.

The 40-visitor load test is ``load_test.py`` run with ``OMP_NUM_THREADS`` set to each count (docs/benchmarks.md).

    python benchmarks/threads.py --json
    python benchmarks/threads.py --only clicks --json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from app_latency import one_click
from common import ROOT, machine
from transformer import cpu
from transformer.files.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
from ui.runtime.costly import CORES
from ui.training import jobs

ALIGNMENT = Path(os.environ.get("ALIGNMENT_DIR", ROOT.parent / "shared" / "data" / "alignment"))
SPIN = "while True: pass"


def click_ms(checkpoint, clicks: int) -> float:
    """Median milliseconds of ``clicks`` Translate clicks, each on the threads an ordinary event gets now."""
    times = []
    for _ in range(clicks):
        CORES.for_ordinary_event()
        started = time.perf_counter()
        one_click(checkpoint)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def tokens_per_s(manager: jobs.JobManager, since: int) -> float | None:
    steps = manager.current.steps[since:]
    return statistics.median(step["tokens_per_s"] for step in steps) if steps else None


def clicks_beside_training(clicks: int) -> dict:
    checkpoint = load_checkpoint(DEFAULT_CHECKPOINT, device="cpu")
    one_click(checkpoint)
    found = {"alone_ms": click_ms(checkpoint, clicks)}
    data = "multi30k" if os.environ.get("MULTI30K_DIR") else "reverse"
    with tempfile.TemporaryDirectory() as runs:
        for way, client in (("every_core_each", None), ("job_on_half", "10.0.0.1")):
            manager = jobs.JobManager(runs, max_minutes=30)
            manager.start(jobs.JobRequest(data=data, preset="small", steps=100_000, minutes=20), client=client)
            while manager.current.step < 5 and manager.current.status == "running":
                time.sleep(0.1)  # the job past its first updates (and its data read)
            since = len(manager.current.steps)
            found[f"{way}_ms"] = click_ms(checkpoint, clicks)
            found[f"{way}_training_tokens_per_s"] = tokens_per_s(manager, since)
            manager.stop()
            manager.wait(120)
    found["training_data"] = data
    return found


@contextlib.contextmanager
def busy_core(busy: bool):
    spinning = subprocess.Popen([sys.executable, "-c", SPIN]) if busy else None
    try:
        time.sleep(1.0 if busy else 0)  # the spinning process started and on its core
        yield
    finally:
        if spinning is not None:
            spinning.kill()
            spinning.wait()


def command_s(arguments: list[str], default_threads: bool, out: Path) -> float:
    environment = {key: value for key, value in os.environ.items() if key not in cpu.THREADS_VARIABLES}
    if default_threads:
        environment[cpu.THREADS_VARIABLES[0]] = str(cpu.cores_available())
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", *[str(a).replace("OUT", str(out)) for a in arguments]], cwd=ROOT,
                   env=environment, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return round(time.perf_counter() - started, 2)


def commands(rounds: int) -> dict:
    named = {"align": ["transformer.align", "--checkpoint", "checkpoints/multi30k-en-fr", "--text",
                       ALIGNMENT / "enfr.src-tgt", "--gold", ALIGNMENT / "enfr.gold", "--method", "all", "--json"],
             "corpus": ["transformer.corpus", "--input", "multi30k:test_2016_flickr", "--limit", "100", "--out",
                        "OUT", "--json"]}
    found: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as out:
        for _ in range(rounds):
            for name, arguments in named.items():
                for busy in (False, True):
                    with busy_core(busy):
                        for way, default_threads in (("default", True), ("rule", False)):
                            key = f"{name}_{'busy_core' if busy else 'alone'}_{way}_s"
                            found.setdefault(key, []).append(
                                command_s(arguments, default_threads, Path(out) / f"{key}{len(found[key])}"))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clicks", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", choices=["clicks", "commands"])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = {"machine": machine(), "cores": cpu.cores_available()}
    if args.only in (None, "clicks"):
        result["click_beside_training"] = clicks_beside_training(args.clicks)
    if args.only in (None, "commands"):
        result["commands"] = commands(args.rounds)
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
