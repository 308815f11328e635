"""What each decoder layer would predict, read fairly: the tuned lens (Belrose et al., 2023, "Eliciting Latent
Predictions from Transformers with the Tuned Lens").

The logit lens (``one_head.logit_lens``) reads a layer's state as if it were the last one's. Early layers keep
their information in another basis, so it misleads there. The tuned lens learns, for each decoder layer ℓ but the
last, one affine map, h ↦ h + A_ℓ h + b_ℓ, applied before the final norm and the output projection. A_ℓ and
b_ℓ start at 0, so the untrained lens is the logit lens exactly, and are trained to minimise KL(p_final ‖ p_ℓ)
in nats over the decoder positions of the model's own translations, teacher-forced as the logit lens reads them
(the paper's objective: the final layer's distribution is the target).

A lens belongs to one model: it is saved beside a model (``tuned_lens.safetensors``) or in a cache, keyed to the
model's fingerprint (``corpus_run.model_fingerprint``), with what it was trained on. Layers count from 1.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save as safetensors_bytes
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import InputError
from ..files.checkpoint import Checkpoint
from ..paper.decoding import beam_search, greedy_search, pad_batch
from ..paper.sentences import encode_source
from .corpus_run import model_fingerprint
from .one_head import decoder_states, kl_from_final, read_states

log = logging.getLogger(__name__)

LENS_FILE = "tuned_lens.safetensors"


@dataclass
class LensTraining:
    """How a lens is trained. The defaults train a bundled model's lens in about a minute on two cores: the
    positions of ``sentences`` translations, ``steps`` of Adam over ``batch_positions`` of them at a time."""

    sentences: int = 2000
    steps: int = 400
    batch_positions: int = 512
    learning_rate: float = 1e-3
    seed: int = 0
    translate_batch: int = 64


class TunedLens(nn.Module):
    """One affine map for each decoder layer but the last, h ↦ h + W h + b, W and b from 0 (the identity).

    ``trained_on`` says what it learnt from (``{"input": SPEC, "sentences": n, "positions": n, ...}``; empty
    while untrained) and ``model`` the fingerprint of the model it belongs to."""

    def __init__(self, d_model: int, layers: int, model: str = "", trained_on: dict | None = None):
        super().__init__()
        self.maps = nn.ModuleList(nn.Linear(d_model, d_model) for _ in range(layers - 1))
        for linear in self.maps:
            nn.init.zeros_(linear.weight)
            nn.init.zeros_(linear.bias)
        self.model = model
        self.trained_on = dict(trained_on or {})

    @classmethod
    def identity(cls, checkpoint: Checkpoint) -> "TunedLens":
        config = checkpoint.model.config
        return cls(config.d_model, config.n_decoder_layers, model_fingerprint(checkpoint))

    @property
    def layers(self) -> int:
        return len(self.maps) + 1

    def translated(self, states: Tensor) -> Tensor:
        """States (layers, ..., d_model), each decoder layer's mapped by its own map (the last one's as it is)."""
        if states.size(0) != self.layers:
            raise ValueError(f"the lens has {self.layers} layers, the states {states.size(0)}")
        floats = states.float()
        mapped = [layer + F.linear(layer, linear.weight.to(layer.device), linear.bias.to(layer.device))
                  for layer, linear in zip(floats, self.maps)]  # a lens read from disk, a model on a GPU
        return torch.stack(mapped + [floats[-1]]).to(states.dtype)

    def save(self, path: str | Path) -> Path:
        """The lens as safetensors, what it belongs to and was trained on in its metadata; written whole."""
        path = Path(path)
        tensors = {name: tensor.detach().cpu().contiguous() for name, tensor in self.state_dict().items()}
        metadata = {"format": "tuned-lens", "model": self.model, "trained_on": json.dumps(self.trained_on),
                    "layers": str(self.layers), "d_model": str(self.maps[0].in_features if self.maps else 0)}
        partial = path.with_name(path.name + ".partial")
        partial.write_bytes(safetensors_bytes(tensors, metadata=metadata))
        partial.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> "TunedLens":
        """A lens saved by ``save``; a file that is not one is an ``InputError`` naming it."""
        path = Path(path)
        try:
            with safe_open(str(path), framework="pt") as handle:
                metadata = handle.metadata() or {}
                tensors = {name: handle.get_tensor(name) for name in handle.keys()}
            if metadata.get("format") != "tuned-lens":
                raise ValueError("not a tuned lens")
            lens = cls(int(metadata["d_model"]), int(metadata["layers"]), metadata.get("model", ""),
                       json.loads(metadata.get("trained_on", "{}")))
            lens.load_state_dict(tensors)
        except (OSError, SafetensorError, ValueError, KeyError, RuntimeError) as error:
            raise InputError(code="lens.unreadable", path=str(path), error=str(error)) from None
        return lens

    def belongs_to(self, checkpoint: Checkpoint) -> bool:
        config = checkpoint.model.config
        return (self.model == model_fingerprint(checkpoint) and self.layers == config.n_decoder_layers
                and (not self.maps or self.maps[0].in_features == config.d_model))


def shipped_lens(checkpoint: Checkpoint, folder: str | Path | None = None) -> TunedLens | None:
    """The lens kept for this model in ``folder`` (by default the model's own directory), if one was trained for
    these very weights; a lens of other weights is passed over with a warning."""
    folder = Path(folder) if folder is not None else checkpoint.path
    path = folder / LENS_FILE if folder is not None else None
    if path is None or not path.is_file():
        return None
    lens = TunedLens.load(path)
    if not lens.belongs_to(checkpoint):
        log.warning("%s was trained for other weights than %s's; not used", path, checkpoint.name)
        return None
    return lens


@dataclass
class Positions:
    """Decoder positions of the model's own translations: each decoder layer's state there (layers, P, d_model),
    as the model keeps them (bfloat16 for a model kept so)."""

    states: Tensor
    sentences: int = 0

    @property
    def count(self) -> int:
        return self.states.size(1)


@torch.inference_mode()
def collect_positions(checkpoint: Checkpoint, sentences: list[str], batch: int = 64, beam_size: int = 1,
                      length_penalty: float | None = None, progress: Callable[[int, int], None] | None = None,
                      should_stop: Callable[[], bool] | None = None) -> Positions:
    """Translate ``sentences`` (the model's own translations: greedy, or a beam with the model's own rules) and
    read every decoder layer's state at each of their decoder positions, teacher-forced: ``<s>``, a multilingual
    model's forced language and each generated token as input."""
    model = checkpoint.model.eval()
    config = model.config
    kept: list[Tensor] = []
    texts = [text for text in sentences if text.strip()]
    for start in range(0, len(texts), batch):
        if should_stop is not None and should_stop():
            break
        sources = [encode_source(model, checkpoint.source_tokenizer, text)[0] for text in texts[start:start + batch]]
        src = pad_batch(sources, config.pad_id, model.device)
        forced = checkpoint.target_tokenizer.prefix_ids
        generated = greedy_search(model, src, forced=forced) if beam_size <= 1 else [
            hypotheses[0].tokens for hypotheses in beam_search(
                model, src, beam_size, checkpoint.length_penalty if length_penalty is None else length_penalty,
                rules=checkpoint.rules, forced=forced)]
        inputs = [[config.start_id] + body[:config.max_len - 1] for body in generated]
        states = decoder_states(model, src, pad_batch(inputs, config.pad_id, model.device))
        for row, ids in enumerate(inputs):
            kept.append(states[:, row, :len(ids)].cpu())
        if progress is not None:
            progress(min(start + batch, len(texts)), len(texts))
    if not kept and texts:
        raise InputError(code="lens.stopped")
    if not kept:
        raise InputError(code="lens.no_sentences")
    return Positions(torch.cat(kept, dim=1), len(kept))


def train_lens(checkpoint: Checkpoint, sentences: list[str], trained_on: str,
               training: LensTraining = LensTraining(), progress: Callable[[str, int, int], None] | None = None,
               should_stop: Callable[[], bool] | None = None) -> TunedLens:
    """A tuned lens for ``checkpoint`` trained on the first ``training.sentences`` of ``sentences`` (named by
    ``trained_on``: a SPEC, or what the caller calls them). ``progress(stage, done, total)`` hears each batch
    translated ("translating") and every tenth step ("training"); ``should_stop()`` ends either early with what
    is learnt so far."""
    started = time.perf_counter()
    chosen = sentences[:training.sentences]
    heard = None if progress is None else lambda done, total: progress("translating", done, total)
    positions = collect_positions(checkpoint, chosen, training.translate_batch, progress=heard,
                                  should_stop=should_stop)
    lens = TunedLens.identity(checkpoint)
    steps = fit(checkpoint, lens, positions, training, progress, should_stop)
    lens.trained_on = {"input": trained_on, "sentences": positions.sentences, "positions": positions.count,
                       "steps": steps, "seconds": round(time.perf_counter() - started, 1),
                       **({"languages": list(checkpoint.pair)} if checkpoint.pair else {})}
    return lens.eval()


def fit(checkpoint: Checkpoint, lens: TunedLens, positions: Positions, training: LensTraining,
        progress: Callable[[str, int, int], None] | None = None,
        should_stop: Callable[[], bool] | None = None) -> int:
    """Adam on the summed KL(p_final ‖ p_ℓ) of every layer ℓ with a map, over random batches of positions; the
    model's weights are read, never changed (gradients are taken for the lens's parameters alone). Returns the
    steps taken."""
    model = checkpoint.model
    if not lens.maps:
        return 0
    generator = torch.Generator().manual_seed(training.seed)
    parameters = list(lens.to(model.device).parameters())
    optimizer = torch.optim.Adam(parameters, lr=training.learning_rate)
    lens.train()
    step = 0
    for step in range(1, training.steps + 1):
        if should_stop is not None and should_stop():
            step -= 1
            break
        rows = torch.randint(positions.count, (min(training.batch_positions, positions.count),), generator=generator)
        states = positions.states[:, rows].to(model.device)
        with torch.enable_grad():
            with torch.no_grad():
                final = read_states(model, states[-1])
            mapped = lens.translated(states.float())[:-1]
            loss = kl_from_final(final, read_states(model, mapped)).mean(-1).sum()
            gradients = torch.autograd.grad(loss, parameters)
        for parameter, gradient in zip(parameters, gradients):
            parameter.grad = gradient
        optimizer.step()
        if progress is not None and (step % 10 == 0 or step == training.steps):
            progress("training", step, training.steps)
    lens.eval()
    return step


@dataclass
class LensComparison:
    """Each decoder layer read by the logit lens and by the tuned lens over the same positions: KL(p_final ‖
    p_layer) in nats averaged over positions, and top-1 agreement (the share of positions whose top token is the
    final layer's)."""

    kl_logit: list[float] = field(default_factory=list)
    kl_tuned: list[float] = field(default_factory=list)
    top1_logit: list[float] = field(default_factory=list)
    top1_tuned: list[float] = field(default_factory=list)
    positions: int = 0

    def rows(self) -> list[dict]:
        """The ``lens`` rows of ``python -m transformer.lens --json``, decoder layers from 1."""
        return [{"decoder_layer": layer, "kl_logit": round(self.kl_logit[layer - 1], 6),
                 "kl_tuned": round(self.kl_tuned[layer - 1], 6), "top1_logit": round(self.top1_logit[layer - 1], 6),
                 "top1_tuned": round(self.top1_tuned[layer - 1], 6)} for layer in range(1, len(self.kl_logit) + 1)]


@torch.inference_mode()
def compare_lenses(checkpoint: Checkpoint, lens: TunedLens, states: Tensor, chunk: int = 512) -> LensComparison:
    """The logit lens and ``lens`` over decoder states (layers, P, d_model) of held-out positions."""
    model = checkpoint.model
    layers, count = states.size(0), states.size(1)
    sums = torch.zeros(4, layers, dtype=torch.float64)
    for start in range(0, count, chunk):
        part = states[:, start:start + chunk].to(model.device)
        final = read_states(model, part[-1])
        best = final.argmax(-1)
        for row, read in enumerate((part, lens.translated(part))):
            log_probs = read_states(model, read)
            sums[row] += kl_from_final(final, log_probs).double().sum(-1).cpu()
            sums[2 + row] += (log_probs.argmax(-1) == best).double().sum(-1).cpu()
    means = (sums / max(count, 1)).tolist()
    return LensComparison(means[0], means[1], means[2], means[3], count)
