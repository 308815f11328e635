"""Where the app's models live (``models_device``) and where a translation is decoded: in this process (on CUDA
when this machine has a GPU), or, on a ZeroGPU Space, in a GPU that ZeroGPU lends for the length of one
``@spaces.GPU`` call.

ZeroGPU runs such a call in a worker process forked from this one and hands it the arguments and the result
pickled, so the call takes a checkpoint's directory, not the model, and returns the translation's plain numbers.
The worker keeps what it loaded between calls. Everything else the app computes runs on the Space's CPU (its
models are small: a beam-5 translation takes 0.1 s on two CPU cores), as does training.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

import torch

from transformer.files.checkpoint import Checkpoint, default_device, load_checkpoint
from transformer.inside.contributions import source_shares_together
from transformer.paper.watching import SearchProgress
from transformer.paper.translation import Translation

from .. import ON_ZERO_GPU
from . import settings
from .batching import BATCHES, Decoded

log = logging.getLogger(__name__)

# The GPU time asked for one translation. Decoding a sentence takes well under a second on a GPU, and loading a
# model into a fresh worker a few seconds; ZeroGPU serves shorter requests first.
DECODE_S = 15
_on_gpu: dict[str, Checkpoint] = {}  # the worker's own models, by directory


def models_device() -> torch.device:
    """Where the app keeps its models and trains: ``EXPLORER_DEVICE`` when set; the CPU on a ZeroGPU Space (PyTorch
    reports a GPU there that only ``@spaces.GPU`` calls may use); else CUDA when PyTorch sees a GPU."""
    if chosen := settings.value("EXPLORER_DEVICE"):
        return chosen
    return torch.device("cpu") if ON_ZERO_GPU else default_device()


def translate(checkpoint: Checkpoint, text: str, beam_size: int, max_length: int | None,
              on_step: Callable[[SearchProgress], None] | None = None, stop: threading.Event | None = None,
              source_shares: bool = False, **options) -> Decoded:
    """``checkpoint.translate``, and (``source_shares``) each step's source share, on a lent GPU on a ZeroGPU
    Space; should no GPU be lent (the visitor's daily quota is spent, the queue is full), here on the CPU, with the
    reason logged. Here, with the translations asked for meanwhile (batching.py), each step seen by ``on_step`` as
    it is decided and ended early by ``stop``; a lent GPU decodes in a process of its own, and its translation
    comes whole (a GPU decodes in a blink), its shares measured here."""
    if not ON_ZERO_GPU or checkpoint.path is None:
        return BATCHES.translate(checkpoint, text, beam_size, max_length, on_step, stop, source_shares, **options)
    import gradio as gr  # what spaces raises when it lends no GPU (the views import no gradio elsewhere)

    try:
        translation = translate_on_gpu(str(checkpoint.path), text, beam_size, max_length, options, "cuda",
                                       checkpoint.pair)
    except gr.Error as refused:
        log.warning("no GPU lent for a translation (%s); decoding it on the CPU", refused.message)
        return BATCHES.translate(checkpoint, text, beam_size, max_length, on_step, stop, source_shares, **options)
    shares = source_shares_together(checkpoint.model, [translation])[0].tolist() if source_shares else None
    return Decoded(translation, shares)


def translate_in_worker(directory: str, text: str, beam_size: int, max_length: int | None, options: dict,
                        device: str = "cuda", pair: tuple[str, str] | None = None) -> Translation:
    """The work of one lent GPU: the checkpoint at ``directory`` on ``device`` (loaded once per worker; set for a
    multilingual model's ``pair`` of languages), one translation, its tensors on the CPU (as ``Translation`` keeps
    them) to be sent back."""
    checkpoint = _on_gpu.get(directory)
    if checkpoint is None or checkpoint.model.device.type != device:
        checkpoint = _on_gpu[directory] = load_checkpoint(Path(directory), device)
    return (checkpoint.in_languages(*pair) if pair else checkpoint).translate(text, beam_size, max_length, **options)


if ON_ZERO_GPU:
    import spaces

    translate_on_gpu = spaces.GPU(duration=DECODE_S)(translate_in_worker)
else:
    translate_on_gpu = translate_in_worker
