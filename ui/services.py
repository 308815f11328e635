"""What every tab of the app shares: the models a visitor may choose, the training jobs, and the server's limits."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import torch

from transformer.cpu import computes_bf16_natively, decoding_copy_bytes
from transformer.data import DataError, multi30k_dir
from transformer.files.checkpoint import (REPOSITORY_CHECKPOINTS, Checkpoint, CheckpointError, default_device,
                                   list_checkpoints, load_checkpoint, no_checkpoint_named, read_config)
from transformer.speed_choices import CACHE_FILE, choose_speed

from .classes.classroom import Classrooms
from .hub_models import MB, HubModels, OpeningAtStart
from .training.jobs import JobManager, training_disabled
from .runtime import settings
from .runtime.costly import CostlyWork
from .runtime.live import Stops
from .runtime.gpu import models_device
from .runtime.language import Number, message
from .runtime.model_names import checkpoint_name, set_for
from .runtime.worker import ModelsOnDisk
from .views.corpus import OpenCorpora
from .views.layers import KeptLenses
from .views.lessons import LESSONS, Lesson, lesson_models, listed_as, multilingual_pair
from .views.questions import Question, predict_question

log = logging.getLogger(__name__)


class ModelRegistry:
    """The checkpoints a user may choose, by name only, loaded once each and shared read-only by all sessions.

    Loaded models stay within ``max_mb`` of memory (``EXPLORER_MODELS_MB``, default 2,000): the one used least
    recently is let go first. A model that does not fit in float32 is kept in bfloat16 where the CPU computes in it
    natively (half the memory, and no decoding copies: ``transformer.cpu``). A model used in the last ``IN_USE_S``
    seconds, or one the server opened at start, is in use: the Hub cache never removes it. A model decodes the
    ways timed fastest for it on this machine, kept in ``speed_cache`` (default: beside the Hub cache's models) so
    that a restart reads them (``transformer.speed_choices``).
    """

    IN_USE_S = 30 * 60  # a page or a class that has not touched its model for this long has moved on

    def __init__(self, roots: list[Path] | None = None, device: str | torch.device | None = None,
                 max_mb: float | None = None, speed_cache: Path | None = None):
        self.roots = [Path(r) for r in (roots or [REPOSITORY_CHECKPOINTS])]
        self.device = device
        self.speed_cache = speed_cache or settings.hub_directory() / CACHE_FILE
        self.max_bytes = int((max_mb if max_mb is not None else settings.value("EXPLORER_MODELS_MB")) * MB)
        self.preferred: list[str] = []  # opened at start, in the order they became ready: the first is the default
        self._loaded: OrderedDict[str, Checkpoint] = OrderedDict()
        self._last_used: dict[str, float] = {}  # name -> time.time() of its last use
        self._lock = threading.Lock()

    def available(self) -> dict[str, Path]:
        """Name -> directory of every listed checkpoint; the first root wins on a name clash."""
        found: dict[str, Path] = {}
        for path in list_checkpoints(*self.roots):
            found.setdefault(path.name, path)
        return found

    def names(self) -> list[str]:
        return list(self.available())

    def multilingual(self) -> dict[str, list[str]]:
        """Every listed multilingual model and its language codes, read from its config.json (without loading it)."""
        found = {}
        for name, path in self.available().items():
            try:
                languages = read_config(path).get("languages")
            except (CheckpointError, OSError, ValueError):  # unreadable: the model list says why when it is chosen
                continue
            if isinstance(languages, dict) and isinstance(languages.get("tokens"), dict):
                found[name] = list(languages["tokens"])
        return found

    def default_name(self) -> str | None:
        """The model a new visitor's page opens on: the first one opened at start that is ready, else the bundled
        English→German model."""
        names = self.names()
        for preferred in (*self.preferred, "multi30k-en-de", "reverse-tiny"):
            if preferred in names:
                return preferred
        return names[0] if names else None

    def opened_at_start(self) -> str | None:
        """The first model opened at start that is listed (None before one is ready)."""
        names = self.names()
        return next((name for name in self.preferred if name in names), None)

    def prefer(self, name: str) -> None:
        if name not in self.preferred:
            self.preferred.append(name)

    def last_used(self, name: str) -> float:
        return self._last_used.get(name, 0.0)

    def in_use(self, name: str) -> bool:
        return name in self.preferred or time.time() - self.last_used(name) < self.IN_USE_S

    def loaded(self) -> list[str]:
        """The names of the models in memory, the least recently used first."""
        with self._lock:
            return list(self._loaded)

    def loaded_bytes(self) -> int:
        with self._lock:
            return sum(model_bytes(checkpoint) for checkpoint in self._loaded.values())

    def on_disk(self) -> ModelsOnDisk:
        """Every listed checkpoint by name, as a computation in the worker process loads them (worker.py)."""
        with self._lock:
            kept_in = {name: checkpoint.model.dtype for name, checkpoint in self._loaded.items()}
        return ModelsOnDisk(self.available(), str(self.device or default_device()), kept_in)

    def loads(self, name: str) -> bool:
        """Whether the model called ``name`` is loaded, or loads now within the memory kept for models."""
        try:
            self.get(name)
            return True
        except CheckpointError:
            return False

    def forget(self, name: str) -> None:
        """Drop a loaded checkpoint whose directory is gone, so its name is refused from now on."""
        with self._lock:
            self._loaded.pop(name, None)

    def get(self, name: str) -> Checkpoint:
        """The loaded checkpoint called ``name`` (set for the language it asks for: ``model_names``);
        CheckpointError when it is not listed or cannot be loaded."""
        return set_for(self._get(checkpoint_name(name)), name)

    def _get(self, name: str) -> Checkpoint:
        """The loaded checkpoint called ``name``.

        Loading happens outside the lock, so one slow load never holds up
        translations with models that are already loaded. A loaded model whose directory has since been removed
        (deleted by its trainer, the oldest of those trained in the app, or one the Hub cache made room by
        removing) is dropped.
        """
        with self._lock:
            if name in self._loaded:
                if self._loaded[name].path is None or self._loaded[name].path.is_dir():
                    self._loaded.move_to_end(name)
                    self._last_used[name] = time.time()
                    return self._loaded[name]
                del self._loaded[name]
        available = self.available()
        if name not in available:
            raise no_checkpoint_named(name, available)
        try:
            checkpoint = load_checkpoint(available[name], self.device)
        except CheckpointError as error:  # name the checkpoint, not the server's directories
            raise error.without(str(available[name].parent) + "/") from None
        size = model_bytes(checkpoint)
        chosen = None
        if size <= self.max_bytes or not halves(checkpoint):  # one halved has no choices: not timed for nothing
            chosen = choose_speed(checkpoint.model, self.speed_cache)
            size = model_bytes(checkpoint)  # the layouts chosen decide decoding's copies
        if size > self.max_bytes and halves(checkpoint):
            checkpoint.model.to(torch.bfloat16)
            size, chosen = model_bytes(checkpoint), None
        if chosen is not None:
            log.info("%s decodes %s", name, chosen.describe())
        if size > self.max_bytes:
            raise CheckpointError(message("runtime.model_too_big", name=name, needed=Number(size / MB, ",.0f"),
                                          kept=Number(self.max_bytes / MB, ",.0f")))
        with self._lock:
            checkpoint = self._loaded.setdefault(name, checkpoint)
            self._loaded.move_to_end(name)
            self._last_used[name] = time.time()
            while sum(map(model_bytes, self._loaded.values())) > self.max_bytes:
                self._loaded.popitem(last=False)  # the least recently used; the one just loaded fits alone
            return checkpoint


def model_bytes(checkpoint: Checkpoint) -> int:
    """The memory a loaded model takes: its weights (a tensor shared by two modules, as tied embeddings are, once)
    and the copies of them that decoding on a CPU reads."""
    model = checkpoint.model
    tensors = {tensor.data_ptr(): tensor for tensor in (*model.parameters(), *model.buffers())}
    return sum(tensor.numel() * tensor.element_size() for tensor in tensors.values()) + decoding_copy_bytes(model)


def halves(checkpoint: Checkpoint) -> bool:
    """Whether a model is float32 on a CPU that computes in bfloat16 natively (``computes_bf16_natively``): one
    that halves in bfloat16 there."""
    return (checkpoint.model.device.type == "cpu" and checkpoint.model.dtype == torch.float32
            and computes_bf16_natively())


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
    corpora: OpenCorpora = field(default_factory=OpenCorpora)  # the Corpus tab's runs, the last used held open
    stops: Stops = field(default_factory=Stops)  # each page's Stop of a translation decoding as it is watched
    lenses: KeptLenses | None = None  # each model's tuned lens: shipped beside it, else trained here and kept
    classes: Classrooms | None = None  # the classes open on this server; by default asking the registry's models
    opening: OpeningAtStart | None = None  # the models the server opens by itself when it starts

    def __post_init__(self):
        if self.lenses is None:
            self.lenses = KeptLenses(self.hub.directory / ".lenses")  # for models whose own folder is read-only
        if self.classes is None:
            self.classes = Classrooms(self.ask)
        if self.opening is None:
            self.opening = self.opening_of([])

    def ask(self, lesson: Lesson) -> Question:
        """A lesson's question, computed in the costly slot from the models as the registry keeps them: a
        multilingual model the lesson compares only where the registry loads it (within ``EXPLORER_MODELS_MB``, in
        bfloat16 where it must), as the lesson's pair shows it."""
        multilingual = self.registry.multilingual() if lesson.languages_pair else {}
        compared = multilingual_pair(lesson, multilingual)  # the one model the lesson's pair shows, if it loads
        if compared and not self.registry.loads(compared[0].model):
            multilingual = {}
        return self.costly.run(predict_question, lesson, self.registry.on_disk(), multilingual)

    def in_use(self, name: str) -> bool:
        """Whether a page or a class uses the model: used lately, opened at start, or one an open class's lesson
        sets (which the class may ask about again at any time)."""
        if self.registry.in_use(name):
            return True
        return any(listed_as(model, [name]) for number in self.classes.lessons_open()
                   for model in lesson_models(LESSONS[number - 1]))

    def open_from_hub(self, source: str, visitor: str | None) -> str:
        """A Hub model opened for a visitor (None: this machine's user), in the cache without removing a model in
        use; its name in the model list."""
        return self.hub.open(source, visitor, self.in_use, self.registry.last_used)

    def open_at_start(self, sources: list[str]) -> None:
        """Open ``sources`` in the background; the first ready becomes the default model of new pages."""
        self.opening = self.opening_of(sources)
        self.opening.start()

    def opening_of(self, sources: list[str]) -> OpeningAtStart:
        return OpeningAtStart(self.hub, sources, ready=self.ready_at_start, in_use=self.in_use,
                              last_used=lambda name: self.registry.last_used(name))

    def ready_at_start(self, name: str) -> None:
        """A model opened at start becomes the default of new pages, and is loaded now, off any visitor's request
        (its speed choices are timed when it is loaded: ``ModelRegistry``)."""
        self.registry.prefer(name)
        try:
            self.registry.get(name)
        except CheckpointError as error:
            log.warning("%s was opened at start but could not be loaded: %s", name, error)
        except Exception:  # noqa: BLE001 (the models still to open at start must not wait on this one)
            log.exception("%s was opened at start but could not be loaded", name)

    @classmethod
    def default(cls, roots: list[Path] | None = None, jobs: JobManager | None = None,
                hub_models: HubModels | None = None) -> "Services":
        """The bundled checkpoints (after ``roots``), the models trained in the app and those opened from the Hub."""
        jobs, hub_models = jobs or JobManager(), hub_models or HubModels()
        roots = [*(roots or []), REPOSITORY_CHECKPOINTS, jobs.published_dir, hub_models.directory]
        registry = ModelRegistry(roots, device=models_device(), speed_cache=hub_models.directory / CACHE_FILE)
        return cls(registry, jobs, hub=hub_models)
