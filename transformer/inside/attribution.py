"""Which source tokens drove each output token? Gradient attributions and attention rollout, for putting beside
the attention maps (attention is not an explanation, and neither is a gradient: they are two kinds of evidence).

    python -m transformer.attribute "A dog runs across the grass." --method integrated_gradients --steps 64 --json

Attributions are taken with respect to the source token embeddings after the √d_model scaling and before the
positional encoding is added (section 3.4), for each output token's log-probability given the translation's own
prefix (teacher forcing over the translation, as ``translate`` records attention):

- gradient × input: ∂ log p / ∂e · e, summed over the embedding's dimensions (Shrikumar et al., 2016);
- integrated gradients: (e − e') · ∫₀¹ ∂ log p(e' + α(e − e')) / ∂e dα with a zero baseline e', by the midpoint
  rule (Sundararajan et al., 2017). By completeness the attributions of a token sum to log p(e) − log p(e');
  ``completeness_gap`` reports how far the sum is from that, relative to the difference;
- rollout: attention with the residual connection counted as half of each block, multiplied through the layers
  (Abnar & Zuidema, 2020); for output tokens, through the decoder's self- and cross-attention.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..paper.translation import Translation
from ..paper.model import Transformer

METHODS = ("gradient_x_input", "integrated_gradients", "rollout")


@dataclass
class Attribution:
    """``scores`` (output tokens, source tokens): how much each source token drove each output token.
    ``completeness_gap`` (output tokens,): for integrated gradients only."""

    method: str
    scores: Tensor
    completeness_gap: Tensor | None = None

    def to_json(self, translation: Translation) -> dict:
        result = {"method": self.method, "translation": translation.text, "source_tokens": translation.source_pieces,
                  "target_tokens": translation.target_pieces, "predicted_tokens": translation.predicted_pieces,
                  "attribution": [[round(x, 6) for x in row] for row in self.scores.tolist()]}
        if self.completeness_gap is not None:
            result["completeness_gap"] = [round(x, 6) for x in self.completeness_gap.tolist()]
        return result


def _target_log_probs(model: Transformer, translation: Translation, source_embeddings: Tensor) -> Tensor:
    """log p of each output token given its prefix, (batch, output tokens), for a batch of source embeddings
    that replace what the source embedding layer would give (the positional encoding is added after them)."""
    batch = source_embeddings.size(0)
    src = torch.tensor([translation.source_ids], device=model.device).expand(batch, -1)
    tgt = torch.tensor([translation.target_ids], device=model.device).expand(batch, -1)

    def replace_source(module, args, output):
        return source_embeddings if args[0] is src else None

    hook = model.src_embed.register_forward_hook(replace_source)
    try:
        encoded = model.encode(src)
        logits = model.decode(tgt, encoded).logits
    finally:
        hook.remove()
    chosen = torch.tensor(translation.predicted_ids, device=model.device)
    return logits.log_softmax(-1).gather(-1, chosen.view(1, -1, 1).expand(batch, -1, 1)).squeeze(-1)


def _source_embeddings(model: Transformer, translation: Translation) -> Tensor:
    with torch.no_grad():
        return model.src_embed(torch.tensor([translation.source_ids], device=model.device))


def _gradients(model: Transformer, translation: Translation, points: Tensor) -> tuple[Tensor, Tensor]:
    """∂ log p_t / ∂ embeddings at each of ``points`` (batch, source, d_model), for every output token t:
    (output tokens, batch, source, d_model); and the log-probabilities (batch, output tokens)."""
    points = points.detach().requires_grad_(True)
    log_probs = _target_log_probs(model, translation, points)
    grads = [torch.autograd.grad(log_probs[:, t].sum(), points, retain_graph=t + 1 < log_probs.size(1))[0]
             for t in range(log_probs.size(1))]
    return torch.stack(grads), log_probs.detach()


def gradient_x_input(model: Transformer, translation: Translation) -> Attribution:
    model.eval()
    embeddings = _source_embeddings(model, translation)
    grads, _ = _gradients(model, translation, embeddings)
    return Attribution("gradient_x_input", (grads[:, 0] * embeddings[0]).sum(-1).cpu())


def integrated_gradients(model: Transformer, translation: Translation, steps: int = 64,
                         batch: int = 32) -> Attribution:
    """Integrated gradients from a zero baseline by the midpoint rule over ``steps`` points (``batch`` at a time)."""
    model.eval()
    embeddings = _source_embeddings(model, translation)
    alphas = (torch.arange(steps, device=model.device, dtype=embeddings.dtype) + 0.5) / steps
    total = torch.zeros(len(translation.predicted_ids), *embeddings.shape[1:], device=model.device,
                        dtype=embeddings.dtype)
    for start in range(0, steps, batch):
        chunk = alphas[start:start + batch].view(-1, 1, 1)
        grads, _ = _gradients(model, translation, chunk * embeddings)
        total += grads.sum(1)
    scores = (total / steps * embeddings[0]).sum(-1)
    with torch.no_grad():
        ends = _target_log_probs(model, translation, torch.cat([embeddings, torch.zeros_like(embeddings)]))
    difference = ends[0] - ends[1]
    gap = (scores.sum(-1) - difference).abs() / difference.abs().clamp_min(1e-6)
    return Attribution("integrated_gradients", scores.cpu(), gap.cpu())


def _with_residual(attention: Tensor) -> Tensor:
    """Abnar & Zuidema's account of the residual connection: half the block's attention, half the identity."""
    mixed = 0.5 * attention + 0.5 * torch.eye(attention.size(-1))
    return mixed / mixed.sum(-1, keepdim=True)


def encoder_rollout(translation: Translation) -> Tensor:
    """(source, source): how much each encoder output position draws on each source token, through all layers."""
    rollout = torch.eye(len(translation.source_ids))
    for layer in translation.encoder_attention.float():
        rollout = _with_residual(layer.mean(0)) @ rollout
    return rollout


def rollout(translation: Translation) -> Attribution:
    """(output tokens, source tokens): the source information reaching each output token. Each decoder layer
    mixes the decoder positions (self-attention, residual counted) and then adds, with the residual's half,
    what cross-attention brings from the encoder's rolled-out output; rows end normalised to sum 1."""
    from_source = encoder_rollout(translation)
    steps = len(translation.target_ids)
    reached = torch.zeros(steps, from_source.size(0))
    for self_attention, cross_attention in zip(translation.decoder_attention.float(),
                                               translation.cross_attention.float()):
        reached = _with_residual(self_attention.mean(0)) @ reached
        reached = 0.5 * reached + 0.5 * cross_attention.mean(0) @ from_source
    return Attribution("rollout", reached / reached.sum(-1, keepdim=True).clamp_min(1e-12))


def attribute(model: Transformer, translation: Translation, method: str, steps: int = 64) -> Attribution:
    if method == "gradient_x_input":
        return gradient_x_input(model, translation)
    if method == "integrated_gradients":
        return integrated_gradients(model, translation, steps)
    if method == "rollout":
        return rollout(translation)
    raise ValueError(f"method must be one of {', '.join(METHODS)}, not {method!r}")


def spearman(a: Tensor, b: Tensor) -> float:
    """Rank correlation of two vectors (ties broken by position); nan for vectors of fewer than 2 values."""
    if a.numel() < 2:
        return float("nan")
    rank_a = a.argsort(stable=True).argsort().float()  # the inverse of a permutation: nothing ties
    rank_b = b.argsort(stable=True).argsort().float()
    return float(torch.corrcoef(torch.stack([rank_a, rank_b]))[0, 1])


def agreement(attention: Tensor, evidence: Tensor) -> tuple[float, float]:
    """How far a (output tokens, source tokens) attention map agrees with attributions of the same shape: the
    share of rows whose most-attended source token is the most-attributed one, and the mean rank correlation."""
    top = float((attention.argmax(-1) == evidence.argmax(-1)).float().mean())
    correlations = torch.tensor([spearman(a, e) for a, e in zip(attention, evidence)])
    return top, float(correlations.nanmean())
