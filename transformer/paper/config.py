"""Model configuration: one dataclass, named presets, and a JSON round-trip.

The config is written as ``config.json`` beside every checkpoint, so a model can
always be rebuilt from its directory alone.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError


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
                raise InputError(code="config.not_positive", name=name, value=repr(value))
        if self.d_model % self.n_heads:
            raise InputError(code="config.heads_do_not_divide", d_model=self.d_model, n_heads=self.n_heads)
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise InputError(code="config.shared_needs_one_vocabulary")
        if not (0.0 <= self.dropout < 1.0 and 0.0 <= self.attention_dropout < 1.0):
            raise InputError(code="config.bad_dropout")
        for name in ("pad_id", "start_id", "eos_id"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InputError(code="config.not_a_token_id", name=name, value=repr(value))
        if self.activation not in ACTIVATIONS:
            raise InputError(code="config.unknown_activation", choices=", ".join(ACTIVATIONS),
                             value=repr(self.activation))
        if isinstance(self.position_offset, bool) or not isinstance(self.position_offset, int) \
                or self.position_offset < 0:
            raise InputError(code="config.bad_position_offset", value=repr(self.position_offset))
        if self.position_layout not in POSITION_LAYOUTS:
            raise InputError(code="config.unknown_position_layout", choices=", ".join(POSITION_LAYOUTS),
                             value=repr(self.position_layout))

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
            raise InputError(code="config.unknown_keys", keys=", ".join(unknown))
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
        raise InputError(code="config.unknown_preset", name=repr(name), choices=", ".join(PRESETS))
    values = {**PRESETS[name], **{k: v for k, v in overrides.items() if v is not None}}
    return ModelConfig(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, **values)
