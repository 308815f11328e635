"""What every tab of the app shares: the models a visitor may choose, the training jobs, and the server's limits."""

from __future__ import annotations

import fnmatch
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import torch

from transformer import hub
from transformer.checkpoint import REPOSITORY_CHECKPOINTS, Checkpoint, CheckpointError, list_checkpoints, load_checkpoint
from transformer.data import DataError, multi30k_dir

from .classroom import Classrooms
from .costly import CostlyWork
from .jobs import JobManager, training_disabled
from .views.questions import predict_question


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


class HubModels:
    """Translators opened from the Hugging Face Hub: each converted once into a directory the registry lists.

    ``EXPLORER_HUB_CACHE`` is that directory; ``EXPLORER_HUB_MODELS`` the ids a public server opens (shell
    patterns, comma-separated; empty: none at all), at most ``max_bytes`` each. One is opened at a time.
    """

    DEFAULT_PATTERNS = "Helsinki-NLP/opus-mt-*"
    MAX_BYTES = 600 * 10**6  # opus-mt models weigh about 300 MB

    def __init__(self, directory: str | Path | None = None, patterns: str | None = None, max_bytes: int = MAX_BYTES):
        default = Path.home() / ".cache" / "transformer-explorer" / "hub"
        self.directory = Path(directory or os.environ.get("EXPLORER_HUB_CACHE") or default)
        patterns = os.environ.get("EXPLORER_HUB_MODELS", self.DEFAULT_PATTERNS) if patterns is None else patterns
        self.patterns = [pattern.strip() for pattern in patterns.split(",") if pattern.strip()]
        self.max_bytes = max_bytes
        self._opening = threading.Lock()

    @property
    def enabled(self) -> bool:
        return bool(self.patterns)

    def name_of(self, repo_id: str) -> str:
        """The model list's name for a Hub id: Helsinki-NLP/opus-mt-en-de is "Helsinki-NLP--opus-mt-en-de"."""
        return repo_id.replace("/", "--")

    def open(self, repo_id: str, public: bool) -> str:
        """Convert the Hub model (unless converted before) and return its name in the model list.

        A public server (a visitor who is not on this machine) opens only ids its patterns allow, of at most
        ``max_bytes``; this machine's own user opens any Marian model.
        """
        repo_id = (repo_id or "").strip()
        if not self.enabled:
            raise hub.HubError("Opening models from the Hub is turned off on this server (EXPLORER_HUB_MODELS).")
        hub.check_repo_id(repo_id)
        if public and not any(fnmatch.fnmatchcase(repo_id, pattern) for pattern in self.patterns):
            raise hub.HubError(f"This server opens only models matching {', '.join(self.patterns)}.")
        name = self.name_of(repo_id)
        if (self.directory / name / "config.json").is_file():
            return name
        if not self._opening.acquire(blocking=False):
            raise hub.HubError("Another model is being opened on this server; try again when it is done.")
        try:
            hub.open_model(repo_id, self.directory / name, max_bytes=self.max_bytes if public else None)
        finally:
            self._opening.release()
        return name


def multi30k_available() -> bool:
    try:
        multi30k_dir(download=False)
        return True
    except DataError:
        return False


@dataclass
class Services:
    """The one object handed to every tab and handler: models by name, the training job manager, the budgets."""

    registry: ModelRegistry
    jobs: JobManager = field(default_factory=JobManager)
    training: bool = field(default_factory=lambda: not training_disabled())  # the Train tab is on
    hub: HubModels = field(default_factory=HubModels)
    costly: CostlyWork = field(default_factory=CostlyWork)  # the costly events: one at a time, budgeted
    classes: Classrooms | None = None  # the classes open on this server; by default asking the registry's models

    def __post_init__(self):
        if self.classes is None:
            self.classes = Classrooms(lambda lesson: predict_question(lesson, self.registry.get))

    @classmethod
    def default(cls, roots: list[Path] | None = None, jobs: JobManager | None = None,
                hub_models: HubModels | None = None) -> "Services":
        """The bundled checkpoints (after ``roots``), the models trained in the app and those opened from the Hub."""
        jobs, hub_models = jobs or JobManager(), hub_models or HubModels()
        roots = [*(roots or []), REPOSITORY_CHECKPOINTS, jobs.published_dir, hub_models.directory]
        return cls(ModelRegistry(roots), jobs, hub=hub_models)
