"""Server memory across training jobs: the app's resident size after each of several Train-tab jobs, with the
memory a finished job freed handed back to the system (``jobs.release_memory``) and without, side by side.

Each side runs in a fresh process; jobs are the Train tab's reverse task on the tiny preset.
Prints JSON last (with --json): {"with_release_mb": [...], "without_release_mb": [...], "start_mb": {...}}.

    python benchmarks/job_memory.py --jobs 3 --steps 150 --json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def resident_mb() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 2**20


def measure(jobs_count: int, steps: int, release: bool) -> dict:
    """In this process: resident size at the start and after each job."""
    sys.path.insert(0, str(ROOT))
    from ui.training import jobs

    if not release:
        jobs.release_memory = lambda: False
    manager = jobs.JobManager(tempfile.mkdtemp())
    sizes = {"start": resident_mb(), "after_jobs": []}
    for _ in range(jobs_count):
        manager.start(jobs.JobRequest(data="reverse", preset="tiny", steps=steps, minutes=5))
        manager.wait(600)
        time.sleep(1)
        sizes["after_jobs"].append(resident_mb())
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--side", choices=["with", "without"], help=argparse.SUPPRESS)  # one side, in a child
    args = parser.parse_args()
    if args.side:
        print(json.dumps(measure(args.jobs, args.steps, args.side == "with")))
        return
    results = {}
    for side in ("without", "with"):
        done = subprocess.run([sys.executable, __file__, "--side", side, "--jobs", str(args.jobs), "--steps",
                               str(args.steps)], capture_output=True, text=True, check=True,
                              env={**os.environ, "GRADIO_ANALYTICS_ENABLED": "False"})
        results[side] = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{side} release: start {results[side]['start']} MB, after each job {results[side]['after_jobs']} MB",
              file=sys.stderr)
    summary = {"with_release_mb": results["with"]["after_jobs"], "without_release_mb": results["without"]["after_jobs"],
               "start_mb": {side: results[side]["start"] for side in results}}
    if args.json:
        print(json.dumps(summary))


if __name__ == "__main__":
    main()
