"""Validation BLEU that the Train tab's Multi30K job reaches in a time budget.

Runs exactly what the Train tab runs for Multi30K (``ui.training.jobs.JobManager`` with the tab's default size, "fitted to
the time limit", unless --preset says otherwise), then decodes all of val greedily and scores it with sacreBLEU
(cased, 13a). Multi30K comes from --data-dir or $MULTI30K_DIR. Prints JSON last:
{"minutes", "updates", "val_bleu", "tokens_per_s", "model_parameters", ...}, where tokens_per_s is the target
tokens trained on per second of the job's clock, its evaluations included: what the budget bought.

    python benchmarks/time_to_bleu.py --minutes 5 --json
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from pathlib import Path

from common import machine

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from transformer import data as datasets  # noqa: E402
from transformer.files.checkpoint import load_checkpoint  # noqa: E402
from transformer.train.evaluation import evaluate_checkpoint  # noqa: E402
from ui.training import jobs


def time_to_bleu(minutes: float, preset: str = jobs.AUTO_PRESET, steps: int = 400, data_dir: str | None = None,
                 runs_dir: str | Path | None = None) -> dict:
    """Train as the Train tab does for ``minutes``, then score greedy decoding of all of Multi30K's val."""
    with tempfile.TemporaryDirectory(prefix="time-to-bleu-") as scratch:
        manager = jobs.JobManager(runs_dir or scratch, max_minutes=max(minutes, jobs.MAX_MINUTES))
        manager.start(jobs.JobRequest(data="multi30k", preset=preset, steps=steps, minutes=minutes,
                                      data_dir=data_dir))
        manager.wait()
        job = manager.current
        if job.status not in ("finished", "stopped"):
            raise SystemExit(f"the job {job.status}: {job.message}")
        checkpoint = load_checkpoint(manager.published_dir / job.checkpoint)
        val = datasets.load_multi30k("val", "en", checkpoint.info.get("target_lang", "de"), data_dir)
        scores = evaluate_checkpoint(checkpoint, val.sources, val.targets, beam_size=1)
        seconds = job.training_seconds()
        tokens = sum(record["tokens"] for record in job.steps)
        training = checkpoint.info["training"]
        return {"minutes": minutes, "updates": job.step, "val_bleu": scores["bleu"],
                "tokens_per_s": round(tokens / seconds, 1) if seconds else 0.0,
                "model_parameters": checkpoint.model.num_parameters(), "val_chrf": scores["chrf"],
                "signature": scores["signature"], "training_seconds": round(seconds, 1),
                "epochs": job.evals[-1]["epoch"] + 1 if job.evals else None, "preset": preset,
                "plan": {name: training[name] for name in ("model", "vocab_size", "max_tokens", "lr", "warmup_steps",
                                                           "schedule")},
                "expected": checkpoint.info.get("budget_plan"),
                "machine": machine()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=5.0, help="the job's time limit, as in the Train tab")
    parser.add_argument("--preset", default=jobs.AUTO_PRESET, choices=jobs.APP_PRESETS,
                        help="the Train tab's model size (default: fitted to the time limit)")
    parser.add_argument("--steps", type=int, default=400, help="updates, for the fixed sizes (the tab's default)")
    parser.add_argument("--data-dir", help="Multi30K directory (default: $MULTI30K_DIR)")
    parser.add_argument("--runs-dir", help="keep the job's run here (default: a temporary directory)")
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING if args.json else logging.INFO)
    try:
        datasets.multi30k_dir(args.data_dir, download=False)
    except datasets.DataError as error:
        raise SystemExit(str(error)) from None
    result = time_to_bleu(args.minutes, args.preset, args.steps, args.data_dir, args.runs_dir)
    if not args.json:
        print(f"{result['minutes']:g} minutes: {result['updates']} updates, val BLEU {result['val_bleu']:.2f} "
              f"(greedy), {result['tokens_per_s']:.0f} target tokens/s, {result['model_parameters']:,} parameters")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
