"""Translations asked for at the same time are decoded together: one search over a batch of sentences.

A class pressing Translate at once would otherwise be served one sentence after another. On a CPU a search step
over many sentences costs little more than over one (its time goes to launching small operations), so one thread
decodes, and the translations asked for while it does wait and are decoded next, together. A lone request starts
at once: nobody waits for others to arrive.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from transformer.checkpoint import Checkpoint
from transformer.decoding import Translation

from .costly import CORES

log = logging.getLogger(__name__)

# Sentences decoded in one search. Measured on two CPU cores (beam 5): alone 46 ms a search, 8 together 33 ms each,
# 18 together 23 ms each; a batch that waits for the one before it is decoding meanwhile.
MOST_TOGETHER = 16
# The translations a server takes at once (Gradio's workers for translate events): two batches, the one being
# decoded and the next one gathering.
CONCURRENCY = {"concurrency_id": "translate", "concurrency_limit": 2 * MOST_TOGETHER}


@dataclass(eq=False)
class Request:
    checkpoint: Checkpoint
    text: str
    settings: tuple  # beam size, maximum length and the plain-valued options: only equal ones share a batch
    done: threading.Event = field(default_factory=threading.Event)
    translation: Translation | None = None
    error: Exception | None = None

    def batches_with(self, other: Request) -> bool:
        return other.checkpoint is self.checkpoint and other.settings == self.settings


class Batches:
    """The waiting translations and the thread that decodes them, a batch at a time: the oldest request with
    those of the same model and settings that wait beside it, up to ``most``."""

    def __init__(self, most: int = MOST_TOGETHER):
        self.most = most
        self.waiting: list[Request] = []
        self.arrived = threading.Condition()
        self.decoder: threading.Thread | None = None

    def translate(self, checkpoint: Checkpoint, text: str, beam_size: int, max_length: int | None,
                  **options) -> Translation:
        """``checkpoint.translate(text, beam_size, max_length, **options)``, decoded with the translations asked
        for meanwhile. ``options`` hold plain values (``top_k``)."""
        request = Request(checkpoint, text, (beam_size, max_length, sorted(options.items())))
        with self.arrived:
            self.waiting.append(request)
            if self.decoder is None:
                self.decoder = threading.Thread(target=self.decode_forever, name="translation-batches", daemon=True)
                self.decoder.start()
            self.arrived.notify()
        request.done.wait()
        if request.error is not None:
            raise request.error
        return request.translation

    def next_batch(self) -> list[Request]:
        with self.arrived:
            while not self.waiting:
                self.arrived.wait()
            oldest = self.waiting[0]
            batch = [request for request in self.waiting if oldest.batches_with(request)][: self.most]
            self.waiting = [request for request in self.waiting if request not in batch]
        return batch

    def decode_forever(self) -> None:
        while True:
            self.decode(self.next_batch())

    def decode(self, batch: list[Request]) -> None:
        """Decode the batch together; should that fail, each request alone, so one sentence's error is its
        own."""
        CORES.for_ordinary_event()  # the cores no costly work holds, as the request's own thread would take
        first = batch[0]
        beam_size, max_length, options = first.settings
        try:
            translations = first.checkpoint.translate_together([request.text for request in batch], beam_size,
                                                               max_length, **dict(options))
        except Exception:  # noqa: BLE001 - retried one by one below, where each error reaches its own request
            log.exception("decoding %d translations together failed; decoding each alone", len(batch))
            translations = [None] * len(batch)
        for request, translation in zip(batch, translations):
            if translation is None:
                try:
                    translation = request.checkpoint.translate(request.text, beam_size, max_length, **dict(options))
                except Exception as error:  # noqa: BLE001 - handed to the request's own thread, which raises it
                    request.error = error
            request.translation = translation
            request.done.set()


BATCHES = Batches()
