"""A run's directory: what a training run leaves behind, and what resuming it reads back.

    last/          the latest save, with the run's resumable state (``encode_state``)
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
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import load as safetensors_tensors
from safetensors.torch import save as safetensors_bytes

from ..files.checkpoint import Checkpoint, load_checkpoint, read_config, save_checkpoint
from ..files.weights import load_weights, resolve, unique_state_dict
from ..paper.model import Transformer
from .run_logs import parse_records, read_log_text
from ..paper.tokenizer import Tokenizer

log = logging.getLogger(__name__)

LOG = "log.jsonl"
PROBES = "probes.jsonl"
COMMANDS = "command.txt"
STATE_TENSORS = "trainer_state.safetensors"
STATE_JSON = "trainer_state.json"
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

    def save_evaluated(self, step: int, best: bool, save: Callable[..., Path | None]) -> None:
        """The saves after an evaluation at ``step``: best/ if it is the ``best`` so far, a step checkpoint, and
        last/ with the state to resume from (``save(name, with_state=False)``)."""
        if best:
            save("best")
        save(step_name(step))
        self.prune_step_checkpoints()
        save("last", with_state=True)

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


# --- the log cut back to a save; a run's resumable state (tensors in safetensors, the rest JSON: no pickle) ---


def drop_records_after(path: Path, step: int) -> int:
    """Rewrite a run log without its records of updates after ``step``; returns how many lines went.

    A run resumes from its last save, so the updates a crash or kill cut off
    after it are done again, and their records would appear twice. Lines that
    are no record, such as one cut off mid-write, go too, and the log ends with
    a newline again: the next record would otherwise be appended to such a line.
    """
    text = read_log_text(path)
    lines = [line for line in text.split("\n") if line.strip()]
    kept = [record for record in parse_records(text)
            if not (isinstance(record.get("step"), (int, float)) and record["step"] > step)]
    if len(kept) < len(lines) or (text and not text.endswith("\n")):
        rewritten = path.with_name(path.name + ".tmp")
        with open(rewritten, "w") as handle:
            handle.writelines(json.dumps(record) + "\n" for record in kept)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(rewritten, path)  # all or nothing: a crash now leaves the old log whole
    return len(lines) - len(kept)


def _flatten(value, prefix: str, tensors: dict):
    if isinstance(value, torch.Tensor):
        tensors[prefix] = value.detach().cpu().contiguous()
        return {"__tensor__": prefix}
    if isinstance(value, dict):
        return {"__dict__": [[_flatten(k, f"{prefix}.k{i}", tensors), _flatten(v, f"{prefix}.{i}", tensors)]
                             for i, (k, v) in enumerate(value.items())]}
    if isinstance(value, (list, tuple)):
        return {"__list__": [_flatten(v, f"{prefix}.{i}", tensors) for i, v in enumerate(value)]}
    return value


def _unflatten(value, tensors: dict):
    if isinstance(value, dict):
        if "__tensor__" in value:
            return tensors[value["__tensor__"]]
        if "__dict__" in value:
            return {_unflatten(k, tensors): _unflatten(v, tensors) for k, v in value["__dict__"]}
        if "__list__" in value:
            return [_unflatten(v, tensors) for v in value["__list__"]]
    return value


def encode_state(state: dict) -> dict[str, bytes]:
    tensors: dict = {}
    structure = _flatten(state, "s", tensors)
    return {STATE_JSON: json.dumps(structure).encode(), STATE_TENSORS: safetensors_bytes(tensors)}


def decode_state(directory: Path) -> dict:
    tensors = safetensors_tensors((directory / STATE_TENSORS).read_bytes())
    return _unflatten(json.loads((directory / STATE_JSON).read_text()), tensors)


def average_checkpoints(paths: list[Path], output: Path) -> Path:
    """Average the weights of several checkpoints of one run (Vaswani et al., section 6.1)."""
    first = load_checkpoint(paths[0], device="cpu")
    total = {k: v.detach().clone().double() for k, v in unique_state_dict(first.model).items()}
    for path in paths[1:]:
        other = load_checkpoint(path, device="cpu")
        for name, tensor in unique_state_dict(other.model).items():
            total[name] += tensor.double()
    load_weights(first.model, {k: (v / len(paths)).float() for k, v in total.items()}, output)
    info = {k: v for k, v in read_config(paths[-1]).items()  # the run as of its last averaged step
            if k not in ("model", "source_tokenizer", "target_tokenizer")}
    info["averaged_from"] = [p.name for p in paths]
    return save_checkpoint(output, first.model, first.source_tokenizer, first.target_tokenizer, info=info)
