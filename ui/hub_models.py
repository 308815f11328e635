"""Translators opened from the Hugging Face Hub on this server: converted once each into a directory the model list
reads, within a disk cap and a rate per visitor, and the ones the server opens by itself when it starts."""

from __future__ import annotations

import collections
import fnmatch
import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import filelock
from transformer.files import download, hub
from transformer.files.checkpoint import list_checkpoints

from .runtime import settings
from .runtime.language import ENGLISH, WRITTEN_PER_LANGUAGE, Message, Number, message, text
from .runtime.limits import MAX_TRACKED_CLIENTS

log = logging.getLogger(__name__)

MB = 10**6
HOUR_S = 3600.0


def bytes_under(path: Path) -> int:
    """What the files under ``path`` weigh; links (huggingface_hub's snapshots point at its blobs) count once."""
    total = 0
    for folder, _, files in os.walk(path):
        for file in files:
            try:
                stat = os.lstat(os.path.join(folder, file))
            except OSError:  # removed meanwhile
                continue
            total += 0 if os.path.islink(os.path.join(folder, file)) else stat.st_size
    return total


def in_mb(size: int) -> Message:
    return message("model.hub.megabytes", size=Number(size / MB, ",.0f"))


class HubModels:
    """Translators opened from the Hub, each converted once into ``directory``, which the model list reads.

    ``EXPLORER_HUB_CACHE`` is that directory; ``EXPLORER_HUB_MODELS`` the ids a public server opens (shell
    patterns, comma-separated; empty: none at all; by default opus-mt, what the default caps let in), at most
    ``max_bytes`` each (``EXPLORER_HUB_MODEL_MB``, default 600) and ``opens_per_hour`` new ids per visitor's
    address. Downloads go to ``directory/.downloads`` and are removed once converted; all of it stays
    under ``EXPLORER_HUB_CACHE_MB`` (default 3,000 MB): the model used least recently goes first, never one in
    use. One model is opened at a time, by every process that shares the directory (``cache_lock``).
    """

    # What a visitor may open unless the host says otherwise: only what the default caps let in. Every multilingual
    # family's smallest translator (1,331 MB and more) is over EXPLORER_HUB_MODEL_MB's 600, so the host adds them.
    DEFAULT_PATTERNS = "Helsinki-NLP/opus-mt-*"
    OPENS_PER_HOUR = 3

    def __init__(self, directory: str | Path | None = None, patterns: str | None = None, max_bytes: int | None = None,
                 cache_cap_mb: float | None = None, opens_per_hour: int = OPENS_PER_HOUR):
        self.directory = Path(directory or settings.hub_directory())
        if patterns is None:
            patterns = settings.value("EXPLORER_HUB_MODELS")
            patterns = self.DEFAULT_PATTERNS if patterns is None else patterns
        self.patterns = [pattern.strip() for pattern in patterns.split(",") if pattern.strip()]
        self.max_bytes = max_bytes if max_bytes is not None else int(settings.value("EXPLORER_HUB_MODEL_MB") * MB)
        cap_mb = cache_cap_mb if cache_cap_mb is not None else settings.value("EXPLORER_HUB_CACHE_MB")
        self.cache_cap = int(cap_mb * MB)
        self.opens_per_hour = opens_per_hour
        self._opening = threading.Lock()
        self._opened_by: dict[str, collections.deque] = {}  # visitor's address -> when each new id was opened
        self.progress: dict[str, tuple[Path, int]] = {}  # source -> (its download folder, bytes it will weigh)

    @property
    def enabled(self) -> bool:
        return bool(self.patterns)

    @property
    def downloads(self) -> Path:
        return self.directory / ".downloads"

    def name_of(self, source: str, directory: bool = False) -> str:
        """The model list's name for a Hub id ("Helsinki-NLP--opus-mt-en-de") or a directory (its folder's name)."""
        return Path(source).name if directory else source.replace("/", "--")

    def converted(self) -> dict[str, Path]:
        return {path.name: path for path in list_checkpoints(self.directory)}

    def cache_bytes(self) -> int:
        return bytes_under(self.directory)

    def downloaded_bytes(self, source: str) -> tuple[int, int] | None:
        """(bytes downloaded so far, bytes the download will weigh) while ``source`` is being downloaded."""
        if source not in self.progress:
            return None
        folder, total = self.progress[source]
        return min(bytes_under(folder), total), total

    def open(self, source: str, visitor: str | None = None, in_use: Callable[[str], bool] = lambda name: False,
             last_used: Callable[[str], float] = lambda name: 0.0, directories: bool = False) -> str:
        """Convert the Hub model (unless converted before) and return its name in the model list.

        ``visitor`` is the address of a visitor of a public server (None: this machine's own user, or the server
        itself): a visitor opens only ids the patterns allow, of at most ``max_bytes``, and at most
        ``opens_per_hour`` new ones an hour; this machine's user opens any Marian model, and the server's own
        settings (``directories``) a directory in the Hugging Face layout too. Room is made in the cache by
        removing the models least recently used (``last_used``, seconds since the epoch) that are not ``in_use``.
        """
        source = (source or "").strip()
        local = directories and visitor is None and bool(source) and Path(source).is_dir()
        if not local:
            if not self.enabled:
                raise hub.HubError(message("model.hub.off"))
            download.check_repo_id(source)
            if visitor is not None and not any(fnmatch.fnmatchcase(source, pattern) for pattern in self.patterns):
                raise hub.HubError(message("model.hub.only_matching", patterns=", ".join(self.patterns)))
        name = self.name_of(source, local)
        if (self.directory / name / "config.json").is_file():
            return name
        if not self._opening.acquire(blocking=False):
            raise hub.HubError(message("model.hub.busy"))
        cache_lock = self.cache_lock()
        try:
            cache_lock.acquire(timeout=0)
        except filelock.Timeout:
            self._opening.release()
            raise hub.HubError(message("model.hub.busy")) from None
        try:
            if (self.directory / name / "config.json").is_file():  # another process converted it meanwhile
                return name
            if visitor is not None:
                self._count_open(visitor)

            def before_download(total: int) -> None:
                # The download and the converted copy are both on disk until the download is removed.
                self.make_room(2 * total, in_use, last_used, source)
                self.progress[source] = (self.downloads / f"models--{source.replace('/', '--')}", total)

            if local:  # the converted copy weighs what the directory's files do (at most)
                size = sum(file.stat().st_size for file in Path(source).iterdir() if file.is_file())
                self.make_room(size, in_use, last_used, source)
            download.open_model(source, self.directory / name,
                                max_bytes=self.max_bytes if visitor is not None else None,
                                cache_dir=self.downloads, before_download=before_download)
        finally:
            self.progress.pop(source, None)
            shutil.rmtree(self.downloads, ignore_errors=True)  # converted (or failed): the download is not kept
            cache_lock.release()
            self._opening.release()
        return name

    def cache_lock(self) -> filelock.FileLock:
        """The lock on the cache that every process sharing it takes to open a model: one converts and makes room
        at a time, so no process removes what another is converting, nor converts a model twice (the lock
        huggingface_hub itself takes on its cache). Threads of one process are kept apart by ``_opening``."""
        self.directory.mkdir(parents=True, exist_ok=True)
        return filelock.FileLock(self.directory / ".opening.lock")

    def _count_open(self, visitor: str) -> None:
        """A public visitor's new id: refused past ``opens_per_hour`` in the last hour."""
        now = time.monotonic()
        opened = self._opened_by.setdefault(visitor, collections.deque())
        while opened and opened[0] <= now - HOUR_S:
            opened.popleft()
        if len(opened) >= self.opens_per_hour:
            wait_min = max(1, round((opened[0] + HOUR_S - now) / 60))
            raise hub.HubError(message("model.hub.too_many", count=self.opens_per_hour, minutes=wait_min))
        opened.append(now)
        if len(self._opened_by) > MAX_TRACKED_CLIENTS:  # forget addresses whose opens have left the hour
            for quiet in [address for address, times in self._opened_by.items() if times[-1] <= now - HOUR_S]:
                del self._opened_by[quiet]

    def make_room(self, needed: int, in_use: Callable[[str], bool], last_used: Callable[[str], float],
                  source: str) -> None:
        """Remove converted models, least recently used first and never one in use, until ``needed`` more bytes
        fit under the cap; HubError when they cannot."""
        if needed > self.cache_cap:
            raise hub.HubError(message("model.hub.too_big", source=source, needed=in_mb(needed),
                                       cap=in_mb(self.cache_cap)))
        used = self.cache_bytes()
        removable = sorted((path for name, path in self.converted().items() if not in_use(name)),
                           key=lambda path: max(last_used(path.name), path.stat().st_mtime))
        while used + needed > self.cache_cap and removable:
            path = removable.pop(0)
            size = bytes_under(path)
            shutil.rmtree(path, ignore_errors=True)
            log.info("removed %s (%s) from the Hub cache to make room for %s", path.name, in_mb(size), source)
            used -= size
        if used + needed > self.cache_cap:
            raise hub.HubError(message("model.hub.full", cap=in_mb(self.cache_cap), source=source))


@dataclass
class Opening:
    """One model the server opens by itself when it starts, and how far along it is."""

    source: str
    state: str = "waiting"  # "waiting", "opening", "ready" or "failed"
    name: str | None = None  # its name in the model list, once ready
    problem: str | Message = ""  # why it could not be opened, in one sentence


class OpeningAtStart:
    """Hub ids or directories (``EXPLORER_OPEN_AT_START``, comma-separated; on a Space the two opus-mt models by
    default) opened one after another in the background; the first one ready becomes the model a new visitor's
    page opens on (``ready`` is told each name as it is ready)."""

    ON_A_SPACE = "Helsinki-NLP/opus-mt-en-de,Helsinki-NLP/opus-mt-en-fr"

    def __init__(self, hub_models: HubModels, sources: list[str], ready: Callable[[str], None] = lambda name: None,
                 in_use: Callable[[str], bool] = lambda name: False,
                 last_used: Callable[[str], float] = lambda name: 0.0):
        self.hub_models, self.ready = hub_models, ready
        self.in_use, self.last_used = in_use, last_used
        self.openings = [Opening(source) for source in sources]
        self._thread: threading.Thread | None = None

    @classmethod
    def sources_from_environment(cls) -> list[str]:
        default = cls.ON_A_SPACE if os.environ.get("SPACE_ID") else ""
        value = settings.value("EXPLORER_OPEN_AT_START")
        value = default if value is None else value
        return [source.strip() for source in value.split(",") if source.strip()]

    def start(self) -> None:
        if self.openings and self._thread is None:
            self._thread = threading.Thread(target=self.run, name="open-at-start", daemon=True)
            self._thread.start()

    def run(self) -> None:
        # The models protected while others open: those opened at start (they are what every visitor gets).
        def protected(name: str) -> bool:
            return self.in_use(name) or any(opening.name == name for opening in self.openings)

        for opening in self.openings:
            opening.state = "opening"
            log.info("opening %s at start", opening.source)
            try:
                opening.name = self.hub_models.open(opening.source, None, protected, self.last_used,
                                                     directories=True)
            except (hub.HubError, OSError) as error:
                opening.state, opening.problem = "failed", one_sentence(error)
                log.warning("%s could not be opened at start: %s", opening.source, opening.problem)
                continue
            except Exception:  # noqa: BLE001 (a model the converter cannot read must not stop the others)
                log.exception("%s could not be opened at start", opening.source)
                opening.state, opening.problem = "failed", message("model.hub.not_converted")
                continue
            opening.state = "ready"
            log.info("%s is ready as %s", opening.source, opening.name)
            self.ready(opening.name)

    def wait(self, timeout: float | None = None) -> bool:
        """Whether every opening has ended (ready or failed) within ``timeout`` seconds."""
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.underway

    @property
    def underway(self) -> bool:
        return any(opening.state in ("waiting", "opening") for opening in self.openings)

    def status(self, language: str = ENGLISH) -> str:
        """What the page says about them, in ``language``: one line each (empty when there are none)."""
        return "\n".join(f"- {self.line(opening, language)}" for opening in self.openings)

    def line(self, opening: Opening, language: str = ENGLISH) -> str:
        shown = f"`{opening.source}`" if download.REPO_ID.match(opening.source) else f"`{Path(opening.source).name}`"
        if opening.state == "waiting":
            return text(language, "model.hub.next", shown=shown)
        if opening.state == "opening":
            progress = self.hub_models.downloaded_bytes(opening.source)
            if progress is None:
                return text(language, "model.hub.opening", shown=shown)
            done, total = progress
            return text(language, "model.hub.downloading", shown=shown, done=in_mb(done), total=in_mb(total))
        if opening.state == "ready":
            listed = "" if shown == f"`{opening.name}`" else message("model.hub.listed_as", name=opening.name)
            return text(language, "model.hub.ready", shown=shown, listed=listed)
        return text(language, "model.hub.failed", shown=shown, problem=opening.problem)


def one_sentence(error: BaseException) -> str | Message:
    """An error's first line, as a sentence; its message as it is where it has one (written in each reader's
    language)."""
    if len(error.args) == 1 and isinstance(error.args[0], WRITTEN_PER_LANGUAGE):
        return error.args[0]
    if getattr(error, "code", None):  # the library's error, named: said in each reader's language
        return error
    said = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return said if said.endswith(".") else said + "."
