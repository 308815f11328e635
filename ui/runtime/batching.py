"""Translations asked for at the same time are decoded together: one search over a batch of sentences.

A class pressing Translate at once would otherwise be served one sentence after another. On a CPU a search step
over many sentences costs little more than over one (its time goes to launching small operations), so while one
batch is decoded, the translations asked for meanwhile wait, and are decoded next, together. A lone request starts
at once: nobody waits for others to arrive.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from transformer.files.checkpoint import Checkpoint
from transformer.inside.contributions import source_shares_together
from transformer.paper.watching import SearchProgress, Watch
from transformer.paper.translation import Translation

log = logging.getLogger(__name__)

# Sentences decoded in one search. Measured on two CPU cores (beam 5): alone 46 ms a search, 8 together 33 ms each,
# 18 together 23 ms each; a batch that waits for the one before it is decoding meanwhile. A class of 40 pressing
# Translate at once is then one batch rather than three in a row (benchmarks/load_test.py, docs/benchmarks.md).
MOST_TOGETHER = 40
# The translations a server takes at once (Gradio's workers for translate events): two batches, the one being
# decoded and the next one gathering.
CONCURRENCY = {"concurrency_id": "translate", "concurrency_limit": 2 * MOST_TOGETHER}


@dataclass
class Decoded:
    """A translation and, where asked for, how much of each of its steps comes from the source."""

    translation: Translation
    source_share: list[float] | None = None


@dataclass(eq=False)
class Request:
    checkpoint: Checkpoint
    text: str
    settings: tuple  # beam size, maximum length and the plain-valued options: only equal ones share a batch
    on_step: Callable[[SearchProgress], None] | None = None  # sees each step of its sentence as it is decided
    stop: threading.Event | None = None  # set: its search may end where it is (Stop), with what it has
    source_shares: bool = False  # each step's source share wanted (ALTI+, the step view's captions)
    done: threading.Event = field(default_factory=threading.Event)
    translation: Translation | None = None
    source_share: list[float] | None = None
    error: Exception | None = None

    def stopped(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    def batches_with(self, other: Request) -> bool:
        """The same model, set for the same languages (each request's checkpoint may be its own copy, sharing the
        model: Checkpoint.in_languages), and the same settings."""
        return other.checkpoint.model is self.checkpoint.model and other.checkpoint.pair == self.checkpoint.pair \
            and other.settings == self.settings


class Batches:
    """The translations waiting to be decoded. The thread of a request that finds no batch being decoded decodes
    one: the oldest request with those of the same model and settings that wait beside it, up to ``most``. The
    others' threads wait for it; when it is done, one of them decodes the next batch, until each thread's own
    request is done. A lone request is decoded in its own thread at once, as without batching."""

    def __init__(self, most: int = MOST_TOGETHER):
        self.most = most
        self.waiting: list[Request] = []
        self.changed = threading.Condition()
        self.decoding = False

    def translate(self, checkpoint: Checkpoint, text: str, beam_size: int, max_length: int | None,
                  on_step: Callable[[SearchProgress], None] | None = None, stop: threading.Event | None = None,
                  source_shares: bool = False, **options) -> Decoded:
        """``checkpoint.translate(text, beam_size, max_length, **options)``, decoded with the translations asked
        for meanwhile, and (``source_shares``) each step's source share, measured with theirs. ``options`` hold
        plain values (``top_k``). ``on_step`` sees each step of this sentence as it is decided; once ``stop`` is
        set, the search ends at its next step with what it has, unless another sentence of its batch goes on (then
        this one is decoded to its end)."""
        request = Request(checkpoint, text, (beam_size, max_length, sorted(options.items())), on_step, stop,
                          source_shares)
        with self.changed:
            self.waiting.append(request)
        while not request.done.is_set():
            with self.changed:
                if self.decoding:
                    self.changed.wait()
                    continue
                if request.done.is_set():
                    break
                self.decoding = True
                batch = self.next_batch()
            try:
                self.decode(batch)
            finally:
                for stranded in (other for other in batch if not other.done.is_set()):  # this thread was stopped
                    stranded.error = RuntimeError("the server stopped decoding this translation; try again")
                    stranded.done.set()
                with self.changed:
                    self.decoding = False
                    self.changed.notify_all()
        if request.error is not None:
            raise request.error
        return Decoded(request.translation, request.source_share)

    def next_batch(self) -> list[Request]:
        """Taken from the waiting (with ``changed`` held): the oldest request and those that decode alike."""
        oldest = self.waiting[0]
        batch = [request for request in self.waiting if oldest.batches_with(request)][: self.most]
        self.waiting = [request for request in self.waiting if request not in batch]
        return batch

    def decode(self, batch: list[Request]) -> None:
        """Decode the batch together; should that fail, each request alone, so one sentence's error is its
        own. Those that asked for source shares are then measured together, the others answered meanwhile."""
        first = batch[0]
        beam_size, max_length, options = first.settings
        try:
            translations = first.checkpoint.translate_together([request.text for request in batch], beam_size,
                                                               max_length, watch=watching(batch), **dict(options))
        except Exception:  # noqa: BLE001 - retried one by one below, where each error reaches its own request
            log.exception("decoding %d translations together failed; decoding each alone", len(batch))
            translations = [None] * len(batch)
        for request, translation in zip(batch, translations):
            if translation is None:
                try:
                    translation = request.checkpoint.translate(request.text, beam_size, max_length,
                                                               watch=watching([request]), **dict(options))
                except Exception as error:  # noqa: BLE001 - handed to the request's own thread, which raises it
                    request.error = error
            request.translation = translation
            if not (request.source_shares and translation is not None):
                request.done.set()
        with self.changed:  # those answered go now, beside the measuring of the others' shares
            self.changed.notify_all()
        measure_shares([request for request in batch if not request.done.is_set()])


def measure_shares(requests: list[Request]) -> None:
    """Each step's source share of each request's translation, in one pass for them all: over a batch, the pass
    and the blocks' decompositions cost the CPU far less than one by one. Should that fail, each alone."""
    if not requests:
        return
    try:
        together = source_shares_together(requests[0].checkpoint.model, [request.translation for request in requests])
    except Exception:  # noqa: BLE001 - retried one by one below, where each error reaches its own request
        log.exception("measuring %d translations' source shares together failed; measuring each alone", len(requests))
        together = [None] * len(requests)
    for request, shares in zip(requests, together):
        try:
            if shares is None:
                shares = source_shares_together(request.checkpoint.model, [request.translation])[0]
            request.source_share = shares.tolist()
        except Exception as error:  # noqa: BLE001 - handed to the request's own thread, which raises it
            request.error = error
        request.done.set()


def watching(batch: list[Request]) -> Watch | None:
    """What watches a batch's search: each sentence's steps to its request, and the search ended once every
    request in it is stopped. None where nobody watches or may stop (a search watched computes its attention)."""
    if not any(request.on_step or request.stop for request in batch):
        return None

    def watch(progress: list[SearchProgress]) -> bool:
        for report in progress:
            if on_step := batch[report.sentence].on_step:
                on_step(report)
        return not all(request.stopped() for request in batch)
    return watch


BATCHES = Batches()
