"""On a CUDA GPU the app loads its model there and translates through its API as it does on the CPU. Marked
``gpu``; skipped where PyTorch sees no CUDA device."""

import pytest
import torch
from gradio_client import Client

from transformer.files.checkpoint import DEFAULT_CHECKPOINT, REPOSITORY_CHECKPOINTS, load_checkpoint
from ui import services
from ui.build import build_app, close_app

from helpers import serve_on_loopback

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU that PyTorch can use")]

SENTENCE = "A young girl is playing with a red ball in the park."


def test_the_app_loads_its_model_onto_the_gpu_and_translates_through_its_api():
    cpu = load_checkpoint(DEFAULT_CHECKPOINT, device="cpu")
    registry = services.ModelRegistry([REPOSITORY_CHECKPOINTS])  # no device named: the app's own choice
    assert registry.get("multi30k-en-de").model.device.type == "cuda"
    demo = build_app(services.Services(registry), "multi30k-en-de")
    serve_on_loopback(demo)
    try:
        answer = Client(demo.local_url, verbose=False).predict("multi30k-en-de", SENTENCE, "beam", 5, 60,
                                                               api_name="/translate")
    finally:
        close_app(demo)
    assert answer[0] == cpu.translate(SENTENCE, beam_size=5, max_length=60).text
