"""What every translator in transformers' layout shares, Marian or a multilingual family: the error that says why
one cannot be opened, its JSON files read, its feed-forward's nonlinearity named, and its layers' weights renamed
onto this project's modules. ``hub.py`` (Marian) and ``multilingual.py`` (M2M100, NLLB-200, SMaLL-100, mBART-50)
both build on it.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from ..errors import Explained, detail
from ..paper.config import ModelConfig

# transformers' names for the feed-forward's nonlinearity, as ModelConfig names them.
ACTIVATIONS = {"swish": "silu", "silu": "silu", "relu": "relu", "gelu": "gelu"}


class HubError(Explained):
    """Why a model could not be opened, in one sentence for the person who asked."""


def read_json(path: Path) -> dict:
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise HubError(code="hub.unreadable_json", file=path.name,
                       error=detail(error)) from None
    if not isinstance(values, dict):
        raise HubError(code="hub.not_json_object", file=path.name)
    return values


def feed_forward_activation(values: dict) -> str:
    """The nonlinearity a transformers config.json names, as ModelConfig names it; refused by name where our layers
    cannot hold it (encoder and decoder of different widths, an activation we do not have)."""
    if values.get("encoder_attention_heads") != values.get("decoder_attention_heads") \
            or values.get("encoder_ffn_dim") != values.get("decoder_ffn_dim"):
        raise HubError(code="hub.unequal_sides")
    activation = ACTIVATIONS.get(values.get("activation_function"))
    if activation is None:
        named, supported = repr(values.get("activation_function")), ", ".join(sorted(ACTIVATIONS))
        raise HubError(code="hub.activation",
                       activation=named, supported=supported)
    return activation


ENCODER_NORMS = {"self_attn_norm": "self_attn_layer_norm", "feed_forward_norm": "final_layer_norm"}
DECODER_NORMS = {**ENCODER_NORMS, "cross_attn_norm": "encoder_attn_layer_norm"}


def layer_weights(marian: dict[str, torch.Tensor], prefix: str, attentions: dict[str, str],
                   norms: dict[str, str]) -> dict[str, torch.Tensor]:
    """One layer's tensors under our names (``prefix`` is the layer's in both): each attention's q, k and v stacked
    into in_proj, the norms and the feed-forward renamed."""
    weights = {}
    for part in ("weight", "bias"):
        for ours, theirs in attentions.items():
            weights[f"{prefix}.{ours}.in_proj.{part}"] = torch.cat(
                [marian[f"{prefix}.{theirs}.{p}_proj.{part}"] for p in "qkv"])
            weights[f"{prefix}.{ours}.out_proj.{part}"] = marian[f"{prefix}.{theirs}.out_proj.{part}"]
        for ours, theirs in norms.items():
            weights[f"{prefix}.{ours}.norm.{part}"] = marian[f"{prefix}.{theirs}.{part}"]
        for ours, theirs in (("linear1", "fc1"), ("linear2", "fc2")):
            weights[f"{prefix}.feed_forward.{ours}.{part}"] = marian[f"{prefix}.{theirs}.{part}"]
    return weights


def shared_embedding(weights: dict[str, torch.Tensor]) -> torch.Tensor:
    """The one embedding matrix of a model that shares it, under whichever name its state dict keeps it."""
    return next(weights[name] for name in (
        "shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight")
        if name in weights)


def stack_weights(weights: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """Every encoder and decoder layer's tensors under our names (layer_weights)."""
    ours = {}
    for i in range(config.n_encoder_layers):
        ours.update(layer_weights(weights, f"encoder.layers.{i}", {"self_attn": "self_attn"}, ENCODER_NORMS))
    for i in range(config.n_decoder_layers):
        ours.update(layer_weights(weights, f"decoder.layers.{i}",
                                  {"self_attn": "self_attn", "cross_attn": "encoder_attn"}, DECODER_NORMS))
    return ours
