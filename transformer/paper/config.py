"""Model configuration: one dataclass, named presets, and a JSON round-trip.

The config is written as ``config.json`` beside every checkpoint, so a model can
always be rebuilt from its directory alone.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path


ACTIVATIONS = ("relu", "silu", "gelu")
POSITION_LAYOUTS = ("interleaved", "halves", "fairseq", "learned")


@dataclass
class ModelConfig:
    """Sizes and switches of an encoder-decoder Transformer (paper, section 3)."""

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512
    n_heads: int = 8
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    d_ff: int = 2048
    dropout: float = 0.1
    attention_dropout: float = 0.0
    max_len: int = 256
    # One embedding matrix for source, target and the output projection
    # (section 3.4). Needs a joint vocabulary.
    share_embeddings: bool = True
    # Output projection reuses the target embedding (section 3.4).
    tie_output_projection: bool = True
    # False: the paper's post-norm, LayerNorm(x + Sublayer(x)).
    # True: pre-norm, x + Sublayer(LayerNorm(x)), which trains more stably when deep.
    norm_first: bool = False
    layer_norm_eps: float = 1e-5
    # Token ids the model was trained with: padding, the decoder's first input, the end of a sentence.
    pad_id: int = 0
    start_id: int = 2
    eos_id: int = 3
    # Where a converted model (transformers' Marian, see hub.py) departs from the paper; the defaults are the paper's.
    activation: str = "relu"  # the feed-forward's nonlinearity (equation 2); Marian: "silu" (swish)
    # Sin and cos of one frequency side by side; "halves": sines, then cosines (Marian); "fairseq": halves whose
    # frequencies run to 10000^-1 (M2M100, NLLB); "learned": a trained table per stack (mBART).
    position_layout: str = "interleaved"
    position_offset: int = 0  # rows of the position table before the first position (fairseq's models: 2)
    embedding_norm: bool = False  # a LayerNorm on embeddings plus positions, before the first layer (mBART)
    scale_embeddings: bool = True  # embeddings times sqrt(d_model) (section 3.4)
    output_bias: bool = False  # a learned bias on the vocabulary logits (Marian's final_logits_bias)

    def __post_init__(self) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "d_ff", "max_len",
                     "n_encoder_layers", "n_decoder_layers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive whole number, got {value!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError("share_embeddings needs one joint vocabulary (src_vocab_size == tgt_vocab_size)")
        if not (0.0 <= self.dropout < 1.0 and 0.0 <= self.attention_dropout < 1.0):
            raise ValueError("dropout rates must lie in [0, 1)")
        for name in ("pad_id", "start_id", "eos_id"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a token id (a whole number from 0), got {value!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, got {self.activation!r}")
        if isinstance(self.position_offset, bool) or not isinstance(self.position_offset, int) \
                or self.position_offset < 0:
            raise ValueError(f"position_offset must be a whole number from 0, got {self.position_offset!r}")
        if self.position_layout not in POSITION_LAYOUTS:
            raise ValueError(f"position_layout must be one of {', '.join(POSITION_LAYOUTS)}, "
                             f"got {self.position_layout!r}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def layers(self, kind: str) -> int:
        """The layers of the stack an attention kind lives in: the encoder's for "encoder" self-attention, the
        decoder's for "decoder" self-attention and "cross"-attention."""
        return self.n_encoder_layers if kind == "encoder" else self.n_decoder_layers

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "ModelConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown model config keys: {', '.join(unknown)}")
        return cls(**values)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> "ModelConfig":
        return cls.from_dict(json.loads(Path(path).read_text()))


# Sizes by name; vocabulary sizes come from the tokenizer at training time.
PRESETS: dict[str, dict] = {
    # Seconds on a CPU: synthetic tasks, tests, the app's Train tab.
    "tiny": dict(d_model=64, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=256, dropout=0.1, max_len=128),
    # Multi30K on a laptop CPU in about an hour.
    "small": dict(d_model=256, n_heads=4, n_encoder_layers=3, n_decoder_layers=3, d_ff=1024, dropout=0.3,
                  attention_dropout=0.1, max_len=256),
    # The paper's base model (Table 3, row "base").
    "base": dict(d_model=512, n_heads=8, n_encoder_layers=6, n_decoder_layers=6, d_ff=2048, dropout=0.1, max_len=256),
}


def preset(name: str, src_vocab_size: int, tgt_vocab_size: int, **overrides) -> ModelConfig:
    """Build a config from a preset name, overriding any field by keyword."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    values = {**PRESETS[name], **{k: v for k, v in overrides.items() if v is not None}}
    return ModelConfig(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, **values)
