"""Training throughput of our Transformer against torch.nn.Transformer at the same sizes and precision, and
how much of the machine's matrix-multiply peak our training achieves.

Both models see the same synthetic batches (about 4,000 target tokens of
Multi30K-like lengths), run forward, backward and an Adam step, and alternate
in one process so machine noise hits both alike; so does our model trained
with ``F.cross_entropy`` instead of the loop's one-pass loss, to measure
what that loss gains (``one_pass_loss_speedup``). The training FLOPs are those
of the matrix products of forward and backward, counted by PyTorch's
FlopCounterMode on the same batches; the peak is the best of a few large
square matrix products on the same device, timed in the same run, in the
precision training runs in (bf16 where autocast uses it, else float32), so
``flops_share`` is achieved / peak. The bf16 peak is reported as well. Prints
JSON last: {"ours_tokens_per_s", "reference_tokens_per_s", "ratio", "flops_share", ...}.

    python benchmarks/train_throughput.py --json
    python benchmarks/train_throughput.py --size d192 --json     # a preset, or a size a time budget chooses
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from transformer.cpu import speed_up  # noqa: E402
from transformer.paper.config import PRESETS, ModelConfig  # noqa: E402
from transformer.paper.model import Transformer, causal_mask, sinusoidal_table  # noqa: E402
from transformer.train.budget import LADDER  # noqa: E402
from transformer.train.loss import token_loss  # noqa: E402
from transformer.train.settings import TrainConfig, use_bf16  # noqa: E402


class ReferenceModel(nn.Module):
    """torch.nn.Transformer with the same embedding, positions and tied output as ours."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.src_vocab_size, config.d_model, padding_idx=config.pad_id)
        self.register_buffer("positions", sinusoidal_table(config.max_len, config.d_model), persistent=False)
        self.dropout = nn.Dropout(config.dropout)
        self.transformer = nn.Transformer(config.d_model, config.n_heads, config.n_encoder_layers,
                                          config.n_decoder_layers, config.d_ff, config.dropout, batch_first=True)

    def _embed(self, tokens):
        return self.dropout(self.embed(tokens) * math.sqrt(self.config.d_model) + self.positions[: tokens.size(1)])

    def forward(self, src, tgt):
        src_pad, tgt_pad = src == self.config.pad_id, tgt == self.config.pad_id
        tgt_mask = ~causal_mask(tgt.size(1), tgt.device)
        hidden = self.transformer(self._embed(src), self._embed(tgt), tgt_mask=tgt_mask,
                                  src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
                                  memory_key_padding_mask=src_pad)
        return F.linear(hidden, self.embed.weight)


def make_batches(vocab: int, target_tokens: int, count: int, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Batches of similar-length pairs (lengths 8-30, like Multi30K), padded to about ``target_tokens``."""
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(count):
        length = int(torch.randint(8, 31, (1,), generator=generator))
        rows = max(1, target_tokens // length)
        src_lengths = (length + torch.randint(-3, 4, (rows,), generator=generator)).clamp(4, length + 3)
        tgt_lengths = torch.randint(max(4, length - 3), length + 1, (rows,), generator=generator)
        src = torch.zeros(rows, int(src_lengths.max()), dtype=torch.long)
        tgt = torch.zeros(rows, length, dtype=torch.long)
        for i in range(rows):
            src[i, : src_lengths[i]] = torch.randint(4, vocab, (int(src_lengths[i]),), generator=generator)
            tgt[i, : tgt_lengths[i]] = torch.randint(4, vocab, (int(tgt_lengths[i]),), generator=generator)
        batches.append((src, tgt))
    return batches


def pytorch_loss(logits, labels, label_smoothing: float):
    """PyTorch's own label-smoothed cross-entropy, which the training loop used before its one-pass loss."""
    return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=0,
                           label_smoothing=label_smoothing, reduction="sum")


def train_steps(model, optimizer, batches, bf16: bool, device, loss_fn=token_loss) -> tuple[int, float]:
    tokens, started = 0, time.perf_counter()
    for src, tgt in batches:
        src, tgt = src.to(device), tgt.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            out = model(src[:, :], tgt[:, :-1])
            logits = out.logits if hasattr(out, "logits") else out
        loss = loss_fn(logits, tgt[:, 1:], 0.1) / max(1, int((tgt[:, 1:] != 0).sum()))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        tokens += int((tgt[:, 1:] != 0).sum())
    if device.type == "cuda":
        torch.cuda.synchronize()
    return tokens, time.perf_counter() - started


def training_flops(model, batches, bf16: bool, device) -> int:
    """FLOPs of the matrix products of forward and backward over ``batches`` (no update is made)."""
    counter = FlopCounterMode(display=False)
    with counter:
        for src, tgt in batches:
            src, tgt = src.to(device), tgt.to(device)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                out = model(src, tgt[:, :-1])
                logits = out.logits if hasattr(out, "logits") else out
            token_loss(logits, tgt[:, 1:], 0.1).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def matmul_peak_flops(device, dtype: torch.dtype, largest: int = 8192, repeats: int = 5,
                      enough_s: float = 0.05) -> float:
    """The best FLOP/s of ``repeats`` square matrix products: what this device's matrix units reach with work large
    enough to keep them busy. The size doubles from 256 up to ``largest`` while one product takes under
    ``enough_s``, so a precision the device only emulates (bf16 on a CPU without it: a few GFLOP/s) is measured in
    seconds rather than minutes."""
    size = 256
    while True:
        a = torch.randn(size, size, device=device).to(dtype)
        b = torch.randn(size, size, device=device).to(dtype)
        a @ b  # warm-up: kernels chosen, memory touched
        best = float("inf")
        for _ in range(repeats):
            if device.type == "cuda":
                torch.cuda.synchronize()
            started = time.perf_counter()
            a @ b
            if device.type == "cuda":
                torch.cuda.synchronize()
            best = min(best, time.perf_counter() - started)
        if size >= largest or best >= enough_s:
            return 2 * size**3 / best
        size *= 2


def sizes_of(name: str) -> dict:
    """The Train tab's sizes: a preset (tiny, small, base) or a size a time budget chooses from (d128, d192 ...)."""
    rungs = {size.name: size for size in LADDER}
    if name in rungs:
        values, vocab, tokens = rungs[name].sizes(), rungs[name].vocab_size, rungs[name].max_tokens
        values = {**values, "dropout": 0.0}
    elif name in PRESETS:
        values, vocab, tokens = PRESETS[name], 8000, 4000
    else:
        raise SystemExit(f"unknown size {name!r}: {', '.join([*PRESETS, *rungs])}")
    return dict(d_model=values["d_model"], layers=values["n_encoder_layers"], heads=values["n_heads"],
                d_ff=values["d_ff"], dropout=values["dropout"], vocab=vocab, tokens=tokens)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", help="tiny, small, base, or d128, d192, d256, d512 (the sizes a time budget "
                                       "chooses from); sets the sizes below")
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--d-ff", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--tokens", type=int, default=4000, help="padded target tokens per batch")
    parser.add_argument("--rounds", type=int, default=4, help="alternations of the two models")
    parser.add_argument("--steps", type=int, default=8, help="steps per model per round")
    parser.add_argument("--precision", default="auto", choices=["auto", "bf16", "fp32"])
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    args = parser.parse_args()
    if args.size:
        for name, value in sizes_of(args.size).items():
            setattr(args, name, value)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    bf16 = use_bf16(TrainConfig(precision=args.precision), device)
    config = ModelConfig(args.vocab, args.vocab, d_model=args.d_model, n_heads=args.heads,
                         n_encoder_layers=args.layers, n_decoder_layers=args.layers, d_ff=args.d_ff,
                         dropout=args.dropout)
    torch.manual_seed(0)
    # "ours_pytorch_loss": our model trained with F.cross_entropy, to measure what the one-pass loss gains.
    models = {"ours": speed_up(Transformer(config)).to(device), "reference": ReferenceModel(config).to(device),
              "ours_pytorch_loss": speed_up(Transformer(config)).to(device)}
    losses = {"ours": token_loss, "reference": token_loss, "ours_pytorch_loss": pytorch_loss}
    optimizers = {name: torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.9, 0.98)) for name, m in models.items()}
    for model in models.values():
        model.train()
    batches = make_batches(args.vocab, args.tokens, args.steps)
    for name in models:  # warm-up: allocator, kernels
        train_steps(models[name], optimizers[name], batches[:2], bf16, device, losses[name])
    totals = {name: [0, 0.0] for name in models}
    for _ in range(args.rounds):
        for name in models:
            tokens, seconds = train_steps(models[name], optimizers[name], batches, bf16, device, losses[name])
            totals[name][0] += tokens
            totals[name][1] += seconds
    ours = totals["ours"][0] / totals["ours"][1]
    reference = totals["reference"][0] / totals["reference"][1]
    with_pytorch_loss = totals["ours_pytorch_loss"][0] / totals["ours_pytorch_loss"][1]
    flops_per_token = training_flops(models["ours"], batches, bf16, device) / sum(
        int((tgt[:, 1:] != 0).sum()) for _, tgt in batches)
    peaks = {"fp32": matmul_peak_flops(device, torch.float32), "bf16": matmul_peak_flops(device, torch.bfloat16)}
    precision = "bf16" if bf16 else "fp32"
    achieved = ours * flops_per_token
    result = {"ours_tokens_per_s": round(ours, 1), "reference_tokens_per_s": round(reference, 1),
              "ratio": round(ours / reference, 3), "precision": precision,
              "ours_with_pytorch_loss_tokens_per_s": round(with_pytorch_loss, 1),
              "one_pass_loss_speedup": round(ours / with_pytorch_loss, 3),
              "training_flops_per_s": round(achieved), "peak_flops_per_s": round(peaks[precision]),
              "flops_share": round(achieved / peaks[precision], 3), "bf16_peak_flops_per_s": round(peaks["bf16"]),
              "flops_per_target_token": round(flops_per_token),
              "device": torch.cuda.get_device_name() if device.type == "cuda" else platform.processor() or "cpu",
              "threads": torch.get_num_threads(), "size": args.size, "d_model": args.d_model, "layers": args.layers,
              "vocab": args.vocab, "tokens": args.tokens, "dropout": args.dropout,
              "parameters": models["ours"].num_parameters()}
    if not args.json:
        print(f"ours {ours:.0f} tokens/s, torch.nn.Transformer {reference:.0f} tokens/s, ratio {ours / reference:.2f}; "
              f"{achieved / 1e9:.1f} GFLOP/s of matrix products, {achieved / peaks[precision]:.0%} of this device's "
              f"{precision} peak ({peaks[precision] / 1e9:.0f} GFLOP/s)")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
