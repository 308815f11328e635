"""A training run's logs: JSON lines written as the run goes (each update, each evaluation, the probe sentence's
attention), read back by the app, the export and a resumed run; a checkpoint keeps its run's logs beside it under
the names ``run_history`` gives them."""

from __future__ import annotations

import json
from pathlib import Path


def read_log_text(path: Path) -> str:
    """A run log's text; "" when there is none. Tolerant of a byte-order mark and of bytes that are not UTF-8."""
    return path.read_text(encoding="utf-8-sig", errors="replace") if path.is_file() else ""


def parse_records(text: str) -> list[dict]:
    """The records of a run log (one JSON object per line), skipping lines that are none, such as one cut off
    mid-write by a crash."""
    records = []
    for line in text.split("\n"):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def read_records(path: Path) -> list[dict]:
    return parse_records(read_log_text(path))


def read_training_log(path: Path) -> tuple[list[dict], list[dict]]:
    """(update records, evaluation records) of a run's log."""
    records = read_records(path)
    return [r for r in records if r.get("event") == "step"], [r for r in records if r.get("event") != "step"]


def run_history(run_dir: Path) -> dict[str, bytes]:
    """A training run's log and probe attention, named as a checkpoint keeps them (the Model tab replays them)."""
    files = {"training_log.jsonl": run_dir / "log.jsonl", "probes.jsonl": run_dir / "probes.jsonl"}
    return {name: path.read_bytes() for name, path in files.items() if path.is_file()}
