"""On a CUDA GPU the model computes what it computes on the CPU, trains in bf16, moves between devices through its
checkpoints (the app's API on the GPU: tests/app/test_gpu_app.py). Marked ``gpu``; skipped where PyTorch sees no CUDA device."""

import pytest
import torch

from transformer.files.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint, save_checkpoint
from transformer.paper.decoding import pad_batch
from transformer.paper.sentences import translate_batch
from transformer.paper.tokenizer import PAD_ID, BOS_ID
from transformer.train.settings import TrainConfig
from transformer.train.trainer import Trainer

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU that PyTorch can use")]

SENTENCES = ["A young girl is playing with a red ball in the park.", "Two men are sitting on a bench.",
             "A dog runs across the grass."]


@pytest.fixture(autouse=True)
def exact_float32():
    """float32 products as float32: TF32 would round them to 10 bits of mantissa, far past 1e-4."""
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


@pytest.fixture(scope="module")
def on_both():
    return load_checkpoint(DEFAULT_CHECKPOINT, device="cpu"), load_checkpoint(DEFAULT_CHECKPOINT, device="cuda")


def test_the_model_on_the_gpu_gives_the_cpus_logits_and_attention(on_both):
    cpu, gpu = on_both
    assert gpu.model.device.type == "cuda"
    src = pad_batch([cpu.source_tokenizer.encode(s) for s in SENTENCES], PAD_ID, device="cpu")
    tgt = pad_batch([[BOS_ID] + cpu.target_tokenizer.encode(s)[:-1] for s in translate_batch(
        cpu.model, cpu.source_tokenizer, cpu.target_tokenizer, SENTENCES)], PAD_ID, device="cpu")
    with torch.no_grad():
        expected = cpu.model(src, tgt, need_weights=True)
        got = gpu.model(src.cuda(), tgt.cuda(), need_weights=True)
    torch.testing.assert_close(got.logits.cpu(), expected.logits, atol=1e-4, rtol=0)
    for kind in ("encoder_attentions", "decoder_attentions", "cross_attentions"):
        for layer, (g, e) in enumerate(zip(getattr(got, kind), getattr(expected, kind))):
            torch.testing.assert_close(g.cpu(), e, atol=1e-4, rtol=0, msg=f"{kind}[{layer}]")


def test_greedy_and_beam_translations_on_the_gpu_are_the_cpus(on_both):
    cpu, gpu = on_both
    for beam in (1, 5):
        assert (translate_batch(gpu.model, gpu.source_tokenizer, gpu.target_tokenizer, SENTENCES, beam_size=beam)
                == translate_batch(cpu.model, cpu.source_tokenizer, cpu.target_tokenizer, SENTENCES, beam_size=beam))


def test_training_on_the_gpu_uses_bf16_autocast_and_learns(tmp_path):
    config = TrainConfig(data="copy", preset="tiny", steps=60, eval_every=60, synthetic_size=2000, max_tokens=500,
                         eval_sentences=20, precision="auto", out_dir=str(tmp_path / "run"))
    losses = []
    trainer = Trainer(config, show_progress=False, on_step=lambda metrics: losses.append(metrics["loss"]))
    assert trainer.device.type == "cuda" and trainer.bf16 == torch.cuda.is_bf16_supported()
    trainer.run()
    assert sum(losses[-10:]) / 10 < 0.7 * sum(losses[:10]) / 10


def test_a_checkpoint_saved_from_the_gpu_loads_on_the_cpu_and_back(on_both, tmp_path):
    _, gpu = on_both
    saved = save_checkpoint(tmp_path / "moved", gpu.model, gpu.source_tokenizer, gpu.target_tokenizer, info=gpu.info)
    on_cpu, back = load_checkpoint(saved, device="cpu"), load_checkpoint(saved, device="cuda")
    assert on_cpu.model.device.type == "cpu" and back.model.device.type == "cuda"
    for name, tensor in gpu.model.state_dict().items():
        assert torch.equal(on_cpu.model.state_dict()[name], tensor.cpu()), name
        assert torch.equal(back.model.state_dict()[name], tensor), name
