"""A run's directory: what a training run leaves behind, and what resuming it reads back.

    last/          the latest save, with the run's resumable state (``checkpoint.encode_state``)
    best/          the best validation score so far
    step-NNNNNN/   the last few evaluations' weights, for averaging (Vaswani et al., section 6.1)
    averaged/      those averaged at the end, if asked
    log.jsonl      a record of every evaluation and of every ``LOG_EVERY``-th update
    probes.jsonl   the attention of a fixed probe sentence at every evaluation
    command.txt    the command lines that trained it (the command line's runs)

Under torchrun only the first process writes; on the others each method that writes does nothing, so the loop
calls them all alike.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import torch

from ..files.checkpoint import (STATE_JSON, Checkpoint, average_checkpoints, decode_state, drop_records_after,
                                encode_state, load_checkpoint, resolve, save_checkpoint)
from ..paper.model import Transformer
from ..paper.tokenizer import Tokenizer

log = logging.getLogger(__name__)

LOG = "log.jsonl"
PROBES = "probes.jsonl"
COMMANDS = "command.txt"
LOG_EVERY = 50  # updates; the first is logged too


def step_name(step: int) -> str:
    return f"step-{step:06d}"


class RunDirectory:
    """The directory ``path`` of one run; ``writes``: whether this process writes it; ``keep``: step checkpoints
    kept, the last ones."""

    def __init__(self, path: str | Path, writes: bool = True, keep: int = 5):
        self.path, self.writes, self.keep = Path(path), writes, keep
        self.continues_logs = False  # resumed in its own directory: its logs describe this run up to the saved step

    # -- resuming --
    def resumable(self, run: str | Path) -> tuple[Checkpoint, dict]:
        """The checkpoint saved in ``run``/last and its resumable state; ``run`` may be this directory or
        another one, whose run this one then continues."""
        last = resolve(Path(run) / "last")
        self.continues_logs = last.parent.resolve() == self.path.resolve()
        if not self.continues_logs and (self.path / LOG).is_file():
            log.warning("%s already holds a run's log; the run resumed from %s adds its records to it",
                        self.path, last.parent)
        if not (last / STATE_JSON).is_file():
            raise ValueError(f"{last} is not a resumable checkpoint (no {STATE_JSON})")
        return load_checkpoint(last, device="cpu"), decode_state(last)

    def open(self, step: int) -> None:
        """Make the directory; a run that continues its own logs has them cut back to the resumed ``step``."""
        if not self.writes:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        if self.continues_logs:
            for name in (LOG, PROBES):
                if dropped := drop_records_after(self.path / name, step):
                    log.info("%s: dropped %d lines, records from after step %d (the last save, whose updates "
                             "are done again) or cut off", name, dropped, step)

    # -- logs --
    def log(self, record: dict) -> None:
        self._append(LOG, json.dumps(record))

    def log_update(self, metrics: dict) -> None:
        """An update's record, for the first update and every ``LOG_EVERY``-th."""
        if metrics["step"] % LOG_EVERY == 0 or metrics["step"] == 1:
            self.log({"event": "step", **metrics})

    def add_probe(self, probe: dict) -> None:
        self._append(PROBES, json.dumps(probe))

    def add_command(self, command: str) -> None:
        """A command line that trained the run (each segment of a resumed one adds its own)."""
        self._append(COMMANDS, command)

    def _append(self, name: str, line: str) -> None:
        if self.writes:
            self.path.mkdir(parents=True, exist_ok=True)
            with open(self.path / name, "a") as handle:
                handle.write(line + "\n")

    # -- saves --
    def save(self, name: str, model: Transformer, source_tokenizer: Tokenizer, target_tokenizer: Tokenizer,
             info: dict, state: dict | None = None) -> Path | None:
        """A checkpoint ``name``/ (with the resumable ``state``, if given); None on a process that does not write."""
        if not self.writes:
            return None
        extra = encode_state(state) if state is not None else None
        return save_checkpoint(self.path / name, model, source_tokenizer, target_tokenizer, info=info,
                               extra_files=extra)

    def step_checkpoints(self) -> list[Path]:
        return sorted(self.path.glob("step-*[0-9]"))

    def prune_step_checkpoints(self) -> None:
        """All but the last ``keep`` step checkpoints go."""
        if not self.writes:
            return
        steps = self.step_checkpoints()
        for old in steps[: max(0, len(steps) - self.keep)]:
            shutil.rmtree(old, ignore_errors=True)

    def average_last(self, count: int) -> Path | None:
        """The last ``count`` step checkpoints' weights averaged into averaged/, if there are two at least."""
        if not self.writes or count < 2:
            return None
        paths = self.step_checkpoints()[-count:]
        return average_checkpoints(paths, self.path / "averaged") if len(paths) > 1 else None


def random_state(device: torch.device) -> dict:
    """The random generators' state, which a resumed run restores to draw what the uninterrupted one would."""
    state = {"torch_rng": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda_rng"] = torch.cuda.get_rng_state()
    return state


def restore_random_state(state: dict, device: torch.device) -> None:
    torch.set_rng_state(state["torch_rng"])
    if "cuda_rng" in state and device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda_rng"])
