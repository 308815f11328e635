"""On a ZeroGPU Space a translation is decoded in a worker process that ZeroGPU forks and hands a GPU, its
arguments and result pickled both ways; the app's own process keeps its models on the CPU. Here, without ZeroGPU,
the same worker function runs in a forked process on the CPU: what comes back is the translation made in place."""

import logging
import multiprocessing
from concurrent.futures import ThreadPoolExecutor

import gradio as gr
import pytest
import torch

from transformer.files.checkpoint import DEFAULT_CHECKPOINT, default_device, load_checkpoint
from ui.runtime import gpu

SENTENCE = "A young girl is playing with a red ball in the park."


@pytest.fixture(scope="module")
def checkpoint():
    return load_checkpoint(DEFAULT_CHECKPOINT, device="cpu")


def as_zero_gpu_runs_it(*args):
    """In the forked worker, as ZeroGPU's does: the call in a thread of its own (the thread that forked may not
    start PyTorch's OpenMP threads again)."""
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(gpu.translate_in_worker, *args).result()


def test_a_translation_made_in_a_forked_worker_comes_back_whole(checkpoint):
    here = checkpoint.translate(SENTENCE, 5, 60, top_k=5)
    with multiprocessing.get_context("fork").Pool(1) as worker:
        there = worker.apply(as_zero_gpu_runs_it, (str(checkpoint.path), SENTENCE, 5, 60, {"top_k": 5}, "cpu"))
    assert there.text == here.text and there.top_pieces == here.top_pieces
    for kind in ("encoder_attention", "decoder_attention", "cross_attention"):
        assert torch.equal(getattr(there, kind), getattr(here, kind)), kind


def test_a_multilingual_model_on_a_lent_gpu_translates_into_the_language_the_page_chose(tmp_path):
    from multilingual_models import build_multilingual
    from transformer.files import hub

    directory = hub.convert(build_multilingual(tmp_path / "m2m100", "m2m100"), tmp_path / "ours")
    chosen = load_checkpoint(directory, device="cpu").in_languages(target="ru")
    there = gpu.translate_in_worker(str(directory), SENTENCE, 1, 4, {}, "cpu", chosen.pair)
    assert there.target_pieces[1] == "__ru__" and there.forced_steps == 1


def test_with_no_gpu_lent_the_translation_is_made_on_the_cpu_and_the_reason_logged(checkpoint, monkeypatch,
                                                                                  caplog):
    def refused(*args):
        raise gr.Error("You have exceeded your GPU quota")
    monkeypatch.setattr(gpu, "ON_ZERO_GPU", True)
    monkeypatch.setattr(gpu, "translate_on_gpu", refused)
    with caplog.at_level(logging.WARNING, logger="ui.runtime.gpu"):
        made = gpu.translate(checkpoint, SENTENCE, 5, 60).translation
    assert made.text == checkpoint.translate(SENTENCE, 5, 60).text
    assert "exceeded your GPU quota" in caplog.text


def test_the_app_chooses_its_models_device_and_keeps_them_on_the_cpu_on_zero_gpu(monkeypatch):
    monkeypatch.delenv("EXPLORER_DEVICE", raising=False)
    assert gpu.models_device() == default_device() == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    monkeypatch.setattr(gpu, "ON_ZERO_GPU", True)  # PyTorch reports a GPU there that the app's process cannot use
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert gpu.models_device() == torch.device("cpu") and default_device() == torch.device("cuda")
    monkeypatch.setenv("EXPLORER_DEVICE", "cuda:1")  # told
    assert gpu.models_device() == torch.device("cuda:1")


def test_the_app_s_registry_and_training_jobs_use_the_device_it_chose(monkeypatch, tmp_path):
    from ui.training import jobs, training_plans
    from ui import services
    monkeypatch.setenv("EXPLORER_DEVICE", "meta")  # a device no model of this machine is on otherwise
    assert services.Services.default(jobs=jobs.JobManager(tmp_path)).registry.device == torch.device("meta")
    request = training_plans.JobRequest(data="reverse", preset="tiny", steps=10, minutes=1.0)
    config = training_plans.run_config(request, None, tmp_path)
    assert config.device == "meta"
