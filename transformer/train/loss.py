"""The training loss: cross-entropy against label-smoothed targets (section 5.4), its gradient in one pass."""

from __future__ import annotations

import torch

from ..paper.tokenizer import PAD_ID


class SmoothedCrossEntropy(torch.autograd.Function):
    """Summed cross-entropy against label-smoothed targets (section 5.4), with its gradient in one pass.

    Smoothing ε over V pieces puts 1 - ε + ε/V on the label and ε/V on every piece, so for logits z

        loss = logsumexp(z) - (1 - ε) z_label - (ε / V) Σ_v z_v,    ∂loss/∂z = softmax(z) - (1 - ε) onehot - ε / V.

    This is ``F.cross_entropy(label_smoothing=ε)``'s value and gradient (a test holds them equal), but where
    PyTorch's backward runs through log_softmax and adds the gradients of its two terms, passing over the
    (tokens × vocabulary) logits six or seven times, this one passes three: on a CPU the loss of a small model
    costs a fifth of its training step, most of it here.
    """

    @staticmethod
    def forward(ctx, logits: torch.Tensor, labels: torch.Tensor, smoothing: float, ignore_index: int):
        kept = (labels != ignore_index).to(logits.dtype)
        normaliser = torch.logsumexp(logits, dim=-1)
        label_logit = logits.gather(1, labels.unsqueeze(1)).squeeze(1)
        losses = normaliser - (1 - smoothing) * label_logit - (smoothing / logits.size(1)) * logits.sum(dim=1)
        ctx.save_for_backward(logits, labels, normaliser, kept)
        ctx.smoothing = smoothing
        return (losses * kept).sum()

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        logits, labels, normaliser, kept = ctx.saved_tensors
        smoothing, scale = ctx.smoothing, (kept * grad_output).unsqueeze(1)
        grad = torch.exp(logits - normaliser.unsqueeze(1)).sub_(smoothing / logits.size(1)).mul_(scale)
        grad.scatter_add_(1, labels.unsqueeze(1), -(1 - smoothing) * scale)
        return grad, None, None, None


def token_loss(logits: torch.Tensor, labels: torch.Tensor, label_smoothing: float) -> torch.Tensor:
    """Summed cross-entropy over non-pad labels, with label smoothing (section 5.4), computed in float32.

    Flattening to (tokens, vocab) keeps the softmax over contiguous memory,
    several times faster than the (B, V, T) layout on a CPU.
    """
    return SmoothedCrossEntropy.apply(logits.float().reshape(-1, logits.size(-1)), labels.reshape(-1),
                                      label_smoothing, PAD_ID)


def batch_loss(model: torch.nn.Module, src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor,
               label_smoothing: float, bf16: bool = False) -> torch.Tensor:
    """A batch's summed training loss under teacher forcing: the forward pass (under bf16 autocast where the run
    uses it), then ``token_loss`` in float32."""
    with torch.autocast(src.device.type, dtype=torch.bfloat16, enabled=bf16):
        logits = model(src, tgt_in).logits
    return token_loss(logits, tgt_out, label_smoothing)
