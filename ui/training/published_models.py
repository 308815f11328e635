"""The models training jobs made in the app: listed for everyone (the newest ``EXPLORER_KEPT_MODELS`` only, the
oldest removed with their runs), a stopped job's held apart until whoever trained it keeps it, each deleted only
by whoever trained it, and zipped for download."""

from __future__ import annotations

import dataclasses
import logging
import shutil
import tempfile
import threading
from pathlib import Path

from transformer.files.checkpoint import save_checkpoint
from transformer.train.run_logs import run_history

from ..runtime import settings
from ..runtime.language import ENGLISH, Message, message, text
from .training_plans import JobError

log = logging.getLogger(__name__)

class PublishedModels:
    """Under ``runs_dir``: ``app/`` the models in everyone's list, ``app-stopped/`` stopped jobs' models out of it,
    ``app-jobs/<name>`` each model's run."""

    def __init__(self, runs_dir: Path, kept: int | None = None):
        """``kept``: the models trained in the app that stay in everyone's list (``EXPLORER_KEPT_MODELS``; a class
        of 30 would fill it); the oldest go first."""
        self.published_dir = runs_dir / "app"
        self.held_dir = runs_dir / "app-stopped"
        self.work_dir = runs_dir / "app-jobs"  # each job's run, and the upload it trains on
        self.kept = settings.value("EXPLORER_KEPT_MODELS") if kept is None else kept
        self.trained_by: dict[str, str | None] = {}  # model -> the visitor whose job made it (None: the server)
        self._archives: dict[str, str] = {}
        self._lock = threading.Lock()

    def publish(self, trainer, run_dir: Path, finished: bool, owner: str | None) -> str:
        """A job's model saved with its run's history: into everyone's list when it ``finished`` (the oldest beyond
        ``kept`` removed), else held for ``owner``, its trainer, to keep. Returns its name."""
        name = run_dir.name
        save_checkpoint((self.published_dir if finished else self.held_dir) / name, trainer.model,
                        trainer.source_tokenizer, trainer.target_tokenizer, info=trainer.info(),
                        extra_files=run_history(run_dir))
        self.trained_by[name] = owner
        if finished:
            self.keep_newest()
        return name

    def drop_held(self, keeping: set[str]) -> None:
        """Remove the held models but those ``keeping`` names (their trainers may still keep them)."""
        for held in self.held_dir.iterdir() if self.held_dir.is_dir() else ():
            if held.name not in keeping:
                shutil.rmtree(held, ignore_errors=True)

    def take_in(self, name: str) -> None:
        """A held model moved into everyone's list."""
        self.published_dir.mkdir(parents=True, exist_ok=True)
        (self.held_dir / name).rename(self.published_dir / name)

    def published(self) -> list[Path]:
        """The models trained in the app, oldest first."""
        if not self.published_dir.is_dir():
            return []
        return sorted((d for d in self.published_dir.iterdir() if (d / "config.json").is_file()),
                      key=lambda d: (d / "config.json").stat().st_mtime)

    def keep_newest(self, count: int | None = None) -> list[str]:
        """Remove all but the ``count`` (default ``kept``) newest models trained in the app (never a bundled one:
        those live elsewhere), with their run directories; returns the names removed."""
        count = self.kept if count is None else count
        removed = [d.name for d in self.published()[:max(0, len(self.published()) - count)]]
        for name in removed:
            self._remove(name)
            log.info("removed %s: only the %d newest models trained in the app are kept", name, count)
        return removed

    def delete(self, name: str, owner: str | None, language: str = ENGLISH) -> str:
        """Delete a model trained in the app; only the visitor whose job made it may (``owner`` None: the server).
        Returns what happened, for the user (in ``language``)."""
        if not name or "/" in name or not (self.published_dir / name).is_dir():
            raise JobError(message("train.error.not_app_model", name=repr(name)))
        if owner is not None and self.trained_by.get(name) != owner:
            raise JobError(message("train.error.delete_not_yours", name=name))
        self._remove(name)
        return text(language, "train.deleted", name=name)

    def _remove(self, name: str) -> None:
        with self._lock:
            shutil.rmtree(self.published_dir / name, ignore_errors=True)
            shutil.rmtree(self.work_dir / name, ignore_errors=True)
            archive = self._archives.pop(name, None)
            if archive:
                Path(archive).unlink(missing_ok=True)
            self.trained_by.pop(name, None)

    def archive(self, name: str) -> str:
        """A zip of a published checkpoint, for download."""
        directory = self.published_dir / name
        if not name or "/" in name or not directory.is_dir():
            raise JobError(message("train.error.no_archive"))
        if name not in self._archives or not Path(self._archives[name]).is_file():
            target = Path(tempfile.mkdtemp(prefix="checkpoint-")) / name
            self._archives[name] = shutil.make_archive(str(target), "zip", root_dir=directory)
        return self._archives[name]


def kept_where(said: Message | None, where: Message) -> Message | None:
    """A stopped job's outcome once its model is kept: where the model is now, in place of how to keep it."""
    if said is None:
        return None
    held = message("train.where.held")
    return dataclasses.replace(said, values=tuple((name, where if value == held else value)
                                                  for name, value in said.values))
