"""Our model's weights inside PyTorch's own ``torch.nn.Transformer``: the reference that tests check against and benchmarks race."""

from __future__ import annotations

import warnings

import torch
from torch import nn

from .model import MultiHeadAttention, Transformer


def _copy(theirs: nn.Module, ours: nn.Module) -> None:
    theirs.weight.copy_(ours.weight)
    theirs.bias.copy_(ours.bias)


@torch.no_grad()
def copy_attention(theirs: nn.MultiheadAttention, ours: MultiHeadAttention) -> None:
    """Our attention block's weights into ``nn.MultiheadAttention``, whose in_proj layout ours shares."""
    theirs.in_proj_weight.copy_(ours.in_proj.weight)
    theirs.in_proj_bias.copy_(ours.in_proj.bias)
    _copy(theirs.out_proj, ours.out_proj)


@torch.no_grad()
def to_torch_transformer(model: Transformer) -> nn.Transformer:
    """A ``torch.nn.Transformer`` (batch first, ReLU, dropout off) computing exactly what ``model``'s stacks compute.

    Embeddings, positions and the output projection stay with ``model``:
    ``nn.Transformer`` maps embedded sequences to hidden states. Post-norm
    stacks end without a final norm, as in the paper; pre-norm ones keep it.
    """
    config = model.config
    with warnings.catch_warnings():  # its nested-tensor fast path is off for pre-norm, and says so
        warnings.filterwarnings("ignore", message="enable_nested_tensor is True")
        reference = nn.Transformer(config.d_model, config.n_heads, config.n_encoder_layers,
                                   config.n_decoder_layers, config.d_ff, dropout=0.0,
                                   layer_norm_eps=config.layer_norm_eps, batch_first=True,
                                   norm_first=config.norm_first, device=model.device)
    for theirs, ours in zip(reference.encoder.layers, model.encoder.layers):
        copy_attention(theirs.self_attn, ours.self_attn)
        _copy(theirs.linear1, ours.feed_forward.linear1)
        _copy(theirs.linear2, ours.feed_forward.linear2)
        _copy(theirs.norm1, ours.self_attn_norm.norm)
        _copy(theirs.norm2, ours.feed_forward_norm.norm)
    for theirs, ours in zip(reference.decoder.layers, model.decoder.layers):
        copy_attention(theirs.self_attn, ours.self_attn)
        copy_attention(theirs.multihead_attn, ours.cross_attn)
        _copy(theirs.linear1, ours.feed_forward.linear1)
        _copy(theirs.linear2, ours.feed_forward.linear2)
        _copy(theirs.norm1, ours.self_attn_norm.norm)
        _copy(theirs.norm2, ours.cross_attn_norm.norm)
        _copy(theirs.norm3, ours.feed_forward_norm.norm)
    for stack, theirs in ((model.encoder, reference.encoder), (model.decoder, reference.decoder)):
        if stack.final_norm is None:
            theirs.norm = None
        else:
            _copy(theirs.norm, stack.final_norm)
    return reference.to(model.src_embed.weight.dtype)
