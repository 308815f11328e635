"""What every tab of the app shares: the models a visitor may choose, the training jobs, and the server's limits."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import torch

from transformer.checkpoint import REPOSITORY_CHECKPOINTS, Checkpoint, CheckpointError, list_checkpoints, load_checkpoint
from transformer.data import DataError, multi30k_dir

from .jobs import JobManager, training_disabled


class ModelRegistry:
    """The checkpoints a user may choose, by name only, loaded once each and shared read-only by all sessions."""

    def __init__(self, roots: list[Path] | None = None, device: str | torch.device | None = None, max_loaded: int = 4):
        self.roots = [Path(r) for r in (roots or [REPOSITORY_CHECKPOINTS])]
        self.device = device
        self.max_loaded = max_loaded
        self._loaded: OrderedDict[str, Checkpoint] = OrderedDict()
        self._lock = threading.Lock()

    def available(self) -> dict[str, Path]:
        """Name -> directory of every listed checkpoint; the first root wins on a name clash."""
        found: dict[str, Path] = {}
        for path in list_checkpoints(*self.roots):
            found.setdefault(path.name, path)
        return found

    def names(self) -> list[str]:
        return list(self.available())

    def default_name(self) -> str | None:
        names = self.names()
        for preferred in ("multi30k-en-de", "reverse-tiny"):
            if preferred in names:
                return preferred
        return names[0] if names else None

    def forget(self, name: str) -> None:
        """Drop a loaded checkpoint whose directory is gone, so its name is refused from now on."""
        with self._lock:
            self._loaded.pop(name, None)

    def get(self, name: str) -> Checkpoint:
        """The loaded checkpoint called ``name``; CheckpointError when it is not listed or cannot be loaded.

        Loading happens outside the lock, so one slow load never holds up
        translations with models that are already loaded. A loaded model whose directory has since been removed
        (deleted by its trainer, or the oldest of those trained in the app) is dropped.
        """
        with self._lock:
            if name in self._loaded:
                if self._loaded[name].path is None or self._loaded[name].path.is_dir():
                    self._loaded.move_to_end(name)
                    return self._loaded[name]
                del self._loaded[name]
        available = self.available()
        if name not in available:
            raise CheckpointError(f"no checkpoint named {name!r}; choose one of {', '.join(available) or 'none'}")
        try:
            checkpoint = load_checkpoint(available[name], self.device)
        except CheckpointError as error:  # name the checkpoint, not the server's directories
            raise CheckpointError(str(error).replace(str(available[name].parent) + "/", "")) from None
        with self._lock:
            checkpoint = self._loaded.setdefault(name, checkpoint)
            self._loaded.move_to_end(name)
            while len(self._loaded) > self.max_loaded:
                self._loaded.popitem(last=False)
            return checkpoint


def multi30k_available() -> bool:
    try:
        multi30k_dir(download=False)
        return True
    except DataError:
        return False


@dataclass
class Services:
    """The one object handed to every tab and handler: models by name, the training job manager."""

    registry: ModelRegistry
    jobs: JobManager = field(default_factory=JobManager)
    training: bool = field(default_factory=lambda: not training_disabled())  # the Train tab is on

    @classmethod
    def default(cls, roots: list[Path] | None = None, jobs: JobManager | None = None) -> "Services":
        """The bundled checkpoints (after ``roots``) and the models trained in the app."""
        jobs = jobs or JobManager()
        return cls(ModelRegistry([*(roots or []), REPOSITORY_CHECKPOINTS, jobs.published_dir]), jobs)
