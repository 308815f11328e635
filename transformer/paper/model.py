"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017), built to be read and inspected.

Every block is a small module named after the idea it implements in the paper.
Any forward pass can hand back every attention probability it computed
(``need_weights=True``), and the decoder can run one token at a time from a
key/value cache, so decoding an n-token sentence costs n small steps rather
than n growing ones.

Shapes: B batch, S source length, T target length, H heads, D d_model.
Masks are boolean and True where attention is allowed, as in
``torch.nn.functional.scaled_dot_product_attention``.

The modules here are plain PyTorch. ``transformer.cpu.speed_up`` makes a built model fast on a CPU without
changing what it computes; a loaded checkpoint and a training run get it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .config import ModelConfig


def building_shapes_only() -> bool:
    """Whether modules are being built on the meta device, for their shapes only (as a checkpoint's are checked
    before it loads). There they draw no weights and compute no tables: on the meta device that would import
    PyTorch's compiler stack, 1.5 s of every start of the app."""
    return torch.empty(0).is_meta


def sinusoidal_table(length: int, d_model: int, layout: str = "interleaved") -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...) (section 3.5).

    ``layout="halves"`` puts the same sines in the first half of each row and the cosines in the second, as
    Marian (opus-mt) models were trained; the model cannot tell the two apart, its weights can. ``"fairseq"`` is
    halves too, with frequencies 10000^(-i/(d/2 - 1)), so the last one is exactly 1/10000 (tensor2tensor's
    table, which M2M100 and NLLB were trained with).
    """
    position = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    if layout == "fairseq":
        half = d_model // 2
        inverse_frequency = torch.exp(torch.arange(half, dtype=torch.float32) * -(math.log(10000.0) / (half - 1)))
        angles = position * inverse_frequency
        table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
        return torch.cat([table, torch.zeros(length, d_model % 2)], dim=1)
    inverse_frequency = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    angles = position * inverse_frequency
    sines, cosines = torch.sin(angles), torch.cos(angles[:, : d_model // 2])
    if layout == "halves":
        return torch.cat([sines, cosines], dim=1)
    table = torch.zeros(length, d_model)
    table[:, 0::2] = sines
    table[:, 1::2] = cosines
    return table


class PositionalEncoding(nn.Module):
    """Adds position signals to token embeddings: the paper's fixed sinusoids (section 3.5), or a learned table.

    The sinusoids are a non-persistent buffer: it moves with the module to any device and is rebuilt from the
    config, so it never needs to be stored in a checkpoint. A learned table (``layout="learned"``, mBART's; the
    paper found both equal, Table 3 row E) is a parameter like any other. ``offset`` rows come before the first
    position: fairseq's models number positions from 2, keeping 0 and 1 for padding.
    """

    def __init__(self, d_model: int, max_len: int, layout: str = "interleaved", offset: int = 0):
        super().__init__()
        self.offset = offset
        rows = max_len + offset
        if layout == "learned":
            self.table = nn.Parameter(torch.empty(rows, d_model))
            if not building_shapes_only():
                nn.init.normal_(self.table, mean=0.0, std=d_model**-0.5)
            return
        table = torch.empty(rows, d_model) if building_shapes_only() else sinusoidal_table(rows, d_model, layout)
        self.register_buffer("table", table, persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        length, start = x.size(1), self.offset + offset
        if start + length > self.table.size(0):
            raise ValueError(f"sequence of {offset + length} positions exceeds max_len "
                             f"{self.table.size(0) - self.offset}")
        return x + self.table[start : start + length]


class TokenEmbedding(nn.Embedding):
    """Token embedding multiplied by sqrt(d_model) (section 3.4), so it is not drowned by the positional signal."""

    def __init__(self, vocab_size: int, d_model: int, pad_id: int, scale: bool = True):
        shapes_only = building_shapes_only()
        super().__init__(vocab_size, d_model, padding_idx=pad_id,
                         _weight=torch.empty(vocab_size, d_model) if shapes_only else None)
        self.scale = math.sqrt(d_model) if scale else 1.0
        if shapes_only:
            return
        nn.init.normal_(self.weight, mean=0.0, std=d_model**-0.5)
        with torch.no_grad():
            self.weight[pad_id].zero_()

    def forward(self, tokens: Tensor) -> Tensor:
        return super().forward(tokens) * self.scale


class ScaledDotProductAttention(nn.Module):
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V (equation 1).

    Two paths, one result: PyTorch's fused kernel when nobody needs the
    probabilities, and the formula itself when they are to be returned.
    Masked keys get probability exactly 0 (their scores are -inf). In training,
    dropout falls on the probabilities (as in ``torch.nn.Transformer``).
    """

    def __init__(self, dropout: float = 0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None,
                need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        if not need_weights:
            dropout_p = self.dropout.p if self.training else 0.0
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p), None
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        if mask is not None:
            scores = torch.where(mask, scores, float("-inf"))
        weights = scores.softmax(dim=-1)
        return self.dropout(weights) @ v, weights


@dataclass
class KeyValue:
    """Projected keys and values of one attention block, shaped (B, H, length, head_dim)."""

    k: Tensor
    v: Tensor


class MultiHeadAttention(nn.Module):
    """H attention heads over learned projections of Q, K and V, concatenated and projected (section 3.2.2).

    The Q, K and V projections are one (3D, D) matrix, laid out like
    ``torch.nn.MultiheadAttention.in_proj_weight``: self-attention projects
    once, cross-attention splits it into the query part and the key/value part.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0):
        super().__init__()
        self.n_heads = n_heads
        self.d_model = d_model
        self.in_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.attention = ScaledDotProductAttention(dropout)
        nn.init.xavier_uniform_(self.in_proj.weight)
        nn.init.zeros_(self.in_proj.bias)
        nn.init.xavier_uniform_(self.out_proj.weight)
        nn.init.zeros_(self.out_proj.bias)

    def project_rows(self, x: Tensor, rows: slice) -> Tensor:
        """x through some rows of the (3D, D) projection: cross-attention's queries come from the decoder and its
        keys and values from the encoder, so each projects with its own rows (``in_proj``'s weight read directly,
        not called: a hook on ``in_proj`` sees self-attention only)."""
        return F.linear(x, self.in_proj.weight[rows], self.in_proj.bias[rows])

    def _split_heads(self, x: Tensor, parts: int) -> tuple[Tensor, ...]:
        """(B, L, parts * D) -> ``parts`` tensors (B, H, L, head_dim): views of the projection, head by head."""
        batch, length, _ = x.shape
        return x.view(batch, length, parts, self.n_heads, -1).permute(2, 0, 3, 1, 4).unbind(0)

    def forward(self, x: Tensor, memory: Tensor | None = None, mask: Tensor | None = None, *,
                past: KeyValue | None = None, need_weights: bool = False,
                head_mask: Tensor | None = None) -> tuple[Tensor, Tensor | None, KeyValue]:
        """Attend from ``x`` to itself (``memory`` None) or to ``memory`` (cross-attention).

        ``past`` holds keys/values computed earlier: for self-attention the new
        ones are appended to it; for cross-attention it is reused as it is.
        ``head_mask`` (H,) or (B, H) scales each head's output before the heads
        are merged; 0 switches a head off. Returns the output, the attention probabilities
        (B, H, queries, keys) when asked for, and the keys/values to cache.
        """
        d = self.d_model
        if memory is None:
            q, k, v = self._split_heads(self.in_proj(x), parts=3)
            if past is not None:
                k, v = torch.cat([past.k, k], dim=2), torch.cat([past.v, v], dim=2)
        else:
            (q,) = self._split_heads(self.project_rows(x, slice(0, d)), parts=1)
            if past is not None:
                k, v = past.k, past.v
            else:
                k, v = self._split_heads(self.project_rows(memory, slice(d, 3 * d)), parts=2)
        heads, weights = self.attention(q, k, v, mask, need_weights)
        if head_mask is not None:
            heads = heads * head_mask.to(heads.dtype).view(-1, self.n_heads, 1, 1)
        merged = heads.transpose(1, 2).reshape(x.size(0), x.size(1), d)
        return self.out_proj(merged), weights, KeyValue(k, v)


class LayerNorm(nn.LayerNorm):
    """Layer normalisation (Ba et al., 2016), applied around every sublayer (section 3.1)."""


ACTIVATIONS = {"relu": F.relu, "silu": F.silu, "gelu": F.gelu}


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2, the same at every position (equation 2).

    In training, dropout also falls on the hidden activations, at the residual
    rate. The paper does not say so; ``torch.nn.Transformer``'s layers do the
    same. ``activation`` replaces max(0, ·) where a converted model was trained with another (Marian: SiLU).
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu"):
        super().__init__()
        self.activation = ACTIVATIONS[activation]
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        for linear in (self.linear1, self.linear2):
            nn.init.xavier_uniform_(linear.weight)
            nn.init.zeros_(linear.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(self.activation(self.linear1(x))))


class AddAndNorm(nn.Module):
    """The paper's "Add & Norm": LayerNorm(x + Dropout(Sublayer(x))) (sections 3.1 and 5.4).

    With ``norm_first`` the norm moves to the sublayer's input instead
    (pre-norm): x + Dropout(Sublayer(LayerNorm(x))). A layer calls ``input``
    before its sublayer and ``output`` after it.
    """

    def __init__(self, d_model: int, dropout: float, norm_first: bool, eps: float):
        super().__init__()
        self.norm = LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def input(self, x: Tensor) -> Tensor:
        return self.norm(x) if self.norm_first else x

    def output(self, x: Tensor, sublayer_output: Tensor) -> Tensor:
        y = x + self.dropout(sublayer_output)
        return y if self.norm_first else self.norm(y)


class EncoderLayer(nn.Module):
    """Self-attention, then a feed-forward network, each wrapped in Add & Norm (section 3.1)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        args = (config.d_model, config.dropout, config.norm_first, config.layer_norm_eps)
        self.self_attn = MultiHeadAttention(config.d_model, config.n_heads, config.attention_dropout)
        self.self_attn_norm = AddAndNorm(*args)
        self.feed_forward = PositionwiseFeedForward(config.d_model, config.d_ff, config.dropout, config.activation)
        self.feed_forward_norm = AddAndNorm(*args)

    def forward(self, x: Tensor, mask: Tensor | None, need_weights: bool = False,
                head_mask: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        h, weights, _ = self.self_attn(self.self_attn_norm.input(x), mask=mask, need_weights=need_weights,
                                       head_mask=head_mask)
        x = self.self_attn_norm.output(x, h)
        x = self.feed_forward_norm.output(x, self.feed_forward(self.feed_forward_norm.input(x)))
        return x, weights


@dataclass
class LayerCache:
    """What one decoder layer keeps between steps: its own past keys/values and the encoder's."""

    self_attn: KeyValue | None = None
    cross_attn: KeyValue | None = None


@dataclass
class DecoderCache:
    """Incremental decoding state (fairseq's "incremental state"): one entry per decoder layer.

    Created empty, filled by the first ``Transformer.decode`` call, grown by one
    position per step. ``reorder`` follows beam search when it keeps, drops or
    duplicates hypotheses.
    """

    layers: list[LayerCache] = field(default_factory=list)

    @property
    def length(self) -> int:
        """Number of target positions already decoded."""
        if not self.layers or self.layers[0].self_attn is None:
            return 0
        return self.layers[0].self_attn.k.size(2)

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (a LongTensor), in that order, in every cached tensor."""
        for layer in self.layers:
            for name in ("self_attn", "cross_attn"):
                kv = getattr(layer, name)
                if kv is not None:
                    setattr(layer, name, KeyValue(kv.k.index_select(0, index), kv.v.index_select(0, index)))


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder output, feed-forward (section 3.1)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        args = (config.d_model, config.dropout, config.norm_first, config.layer_norm_eps)
        self.self_attn = MultiHeadAttention(config.d_model, config.n_heads, config.attention_dropout)
        self.self_attn_norm = AddAndNorm(*args)
        self.cross_attn = MultiHeadAttention(config.d_model, config.n_heads, config.attention_dropout)
        self.cross_attn_norm = AddAndNorm(*args)
        self.feed_forward = PositionwiseFeedForward(config.d_model, config.d_ff, config.dropout, config.activation)
        self.feed_forward_norm = AddAndNorm(*args)

    def forward(self, y: Tensor, memory: Tensor, self_mask: Tensor | None, memory_mask: Tensor | None,
                cache: LayerCache | None = None, need_weights: bool = False,
                self_head_mask: Tensor | None = None,
                cross_head_mask: Tensor | None = None) -> tuple[Tensor, Tensor | None, Tensor | None]:
        h, self_weights, self_kv = self.self_attn(
            self.self_attn_norm.input(y), mask=self_mask, past=cache.self_attn if cache else None,
            need_weights=need_weights, head_mask=self_head_mask)
        y = self.self_attn_norm.output(y, h)
        h, cross_weights, cross_kv = self.cross_attn(
            self.cross_attn_norm.input(y), memory, memory_mask, past=cache.cross_attn if cache else None,
            need_weights=need_weights, head_mask=cross_head_mask)
        y = self.cross_attn_norm.output(y, h)
        y = self.feed_forward_norm.output(y, self.feed_forward(self.feed_forward_norm.input(y)))
        if cache is not None:
            cache.self_attn, cache.cross_attn = self_kv, cross_kv
        return y, self_weights, cross_weights


class Encoder(nn.Module):
    """A stack of N identical encoder layers (section 3.1); pre-norm adds a final LayerNorm."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.n_encoder_layers))
        self.final_norm = LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else None

    def forward(self, x: Tensor, mask: Tensor | None, need_weights: bool = False,
                head_mask: Tensor | None = None) -> tuple[Tensor, list[Tensor]]:
        attentions = []
        for i, layer in enumerate(self.layers):
            x, weights = layer(x, mask, need_weights, None if head_mask is None else head_mask[..., i, :])
            if need_weights:
                attentions.append(weights)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x, attentions


class Decoder(nn.Module):
    """A stack of N identical decoder layers (section 3.1); pre-norm adds a final LayerNorm."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.n_decoder_layers))
        self.final_norm = LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else None

    def forward(self, y: Tensor, memory: Tensor, self_mask: Tensor | None, memory_mask: Tensor | None,
                cache: DecoderCache | None = None, need_weights: bool = False,
                self_head_mask: Tensor | None = None,
                cross_head_mask: Tensor | None = None) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        if cache is not None and not cache.layers:
            cache.layers = [LayerCache() for _ in self.layers]
        self_attentions, cross_attentions = [], []
        for i, layer in enumerate(self.layers):
            y, self_weights, cross_weights = layer(
                y, memory, self_mask, memory_mask, cache.layers[i] if cache is not None else None, need_weights,
                None if self_head_mask is None else self_head_mask[..., i, :],
                None if cross_head_mask is None else cross_head_mask[..., i, :])
            if need_weights:
                self_attentions.append(self_weights)
                cross_attentions.append(cross_weights)
        if self.final_norm is not None:
            y = self.final_norm(y)
        return y, self_attentions, cross_attentions


@dataclass
class EncoderOutput:
    """The encoded source ("memory"), its key mask (B, 1, 1, S) and, on request, encoder self-attention."""

    memory: Tensor
    source_mask: Tensor
    attentions: list[Tensor] = field(default_factory=list)


@dataclass
class DecoderOutput:
    """Next-token logits (B, T, V) and, on request, decoder self- and cross-attention per layer."""

    logits: Tensor
    self_attentions: list[Tensor] = field(default_factory=list)
    cross_attentions: list[Tensor] = field(default_factory=list)


@dataclass
class Seq2SeqOutput:
    """Everything one forward pass computed.

    Attention lists have one tensor per layer: ``encoder_attentions`` (B, H, S, S),
    ``decoder_attentions`` (B, H, T, T), ``cross_attentions`` (B, H, T, S); rows
    are queries, columns keys. They are empty unless ``need_weights=True``.
    """

    logits: Tensor
    encoder_output: Tensor
    encoder_attentions: list[Tensor] = field(default_factory=list)
    decoder_attentions: list[Tensor] = field(default_factory=list)
    cross_attentions: list[Tensor] = field(default_factory=list)


@dataclass
class HeadMask:
    """Per-head output multipliers, one tensor per attention type; 0 switches a head off.

    Each is (layers, heads) for the whole batch, or (batch, layers, heads) to
    give every sentence of a batch its own mask (one ablation per row).
    """

    encoder: Tensor | None = None
    decoder: Tensor | None = None
    cross: Tensor | None = None


def causal_mask(length: int, device: torch.device | None = None) -> Tensor:
    """(length, length), True on and below the diagonal: position i may see positions <= i (section 3.2.3)."""
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()


class Transformer(nn.Module):
    """Encoder-decoder Transformer (figure 1 of the paper)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.src_embed = TokenEmbedding(config.src_vocab_size, config.d_model, config.pad_id, config.scale_embeddings)
        self.tgt_embed = (self.src_embed if config.share_embeddings else
                          TokenEmbedding(config.tgt_vocab_size, config.d_model, config.pad_id, config.scale_embeddings))
        positions = (config.d_model, config.max_len, config.position_layout, config.position_offset)
        self.source_positions = PositionalEncoding(*positions)
        # One table of sinusoids serves both stacks; learned positions are a table per stack.
        self.target_positions = PositionalEncoding(*positions) if config.position_layout == "learned" \
            else self.source_positions
        self.source_embedding_norm, self.target_embedding_norm = (
            (LayerNorm(config.d_model, eps=config.layer_norm_eps), LayerNorm(config.d_model, eps=config.layer_norm_eps))
            if config.embedding_norm else (None, None))
        self.embed_dropout = nn.Dropout(config.dropout)
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)
        self.output_proj = (None if config.tie_output_projection
                            else nn.Linear(config.d_model, config.tgt_vocab_size, bias=False))
        self.output_bias = nn.Parameter(torch.zeros(config.tgt_vocab_size)) if config.output_bias else None

    @property
    def device(self) -> torch.device:
        return self.src_embed.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.src_embed.weight.dtype

    @property
    def positional_encoding(self) -> PositionalEncoding:
        """The source stack's positions (both stacks' when they are sinusoids)."""
        return self.source_positions

    def _embed(self, side: str, tokens: Tensor, offset: int = 0, positions: bool = True) -> Tensor:
        """Token embeddings of the ``side`` ("source" or "target") plus their positions (section 3.4-3.5)."""
        source = side == "source"
        x = (self.src_embed if source else self.tgt_embed)(tokens)
        if positions:
            x = (self.source_positions if source else self.target_positions)(x, offset)
        elif offset + tokens.size(1) > self.config.max_len:
            raise ValueError(f"sequence of {offset + tokens.size(1)} positions exceeds max_len {self.config.max_len}")
        norm = self.source_embedding_norm if source else self.target_embedding_norm
        return self.embed_dropout(x if norm is None else norm(x))

    def encode(self, src: Tensor, need_weights: bool = False, head_mask: HeadMask | None = None,
               positions: bool = True) -> EncoderOutput:
        """Encode source tokens (B, S); padding positions are masked out as keys.

        ``positions=False`` leaves out the positional encoding, so the encoder
        sees a bag of words (a classroom experiment on why positions matter).
        """
        source_mask = (src != self.config.pad_id)[:, None, None, :]
        memory, attentions = self.encoder(self._embed("source", src, positions=positions), source_mask,
                                          need_weights,
                                          head_mask.encoder if head_mask else None)
        return EncoderOutput(memory, source_mask, attentions)

    def decode(self, tgt: Tensor, encoded: EncoderOutput, cache: DecoderCache | None = None,
               need_weights: bool = False, head_mask: HeadMask | None = None, positions: bool = True) -> DecoderOutput:
        """Next-token logits for target prefix tokens (B, T).

        Without a cache, all T positions are decoded at once under a causal mask
        (training, forced decoding). With a cache, ``tgt`` holds only the new
        positions; earlier ones come from the cache, which is then extended.
        """
        hidden, self_attentions, cross_attentions = self.decode_states(tgt, encoded, cache, need_weights, head_mask,
                                                                       positions)
        return DecoderOutput(self.project(hidden), self_attentions, cross_attentions)

    def decode_states(self, tgt: Tensor, encoded: EncoderOutput, cache: DecoderCache | None = None,
                      need_weights: bool = False, head_mask: HeadMask | None = None,
                      positions: bool = True) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """``decode`` before the output projection: the decoder's last hidden states (B, T, D) and, on request,
        its attention per layer. A search that needs only the newest position's logits projects that one alone."""
        offset = cache.length if cache is not None else 0
        y = self._embed("target", tgt, offset, positions)
        if cache is None:
            # Padding is masked as a key, but never the first position: a Marian decoder starts from the padding token.
            keys = tgt != self.config.pad_id
            keys[:, 0] = True
            self_mask = causal_mask(tgt.size(1), tgt.device) & keys[:, None, None, :]
        elif tgt.size(1) > 1:
            self_mask = causal_mask(offset + tgt.size(1), tgt.device)[offset:]
        else:
            self_mask = None  # one new position may see every cached one
        return self.decoder(y, encoded.memory, self_mask, encoded.source_mask, cache, need_weights,
                            head_mask.decoder if head_mask else None, head_mask.cross if head_mask else None)

    def project(self, hidden: Tensor) -> Tensor:
        """Hidden states to vocabulary logits, through the (tied) output projection."""
        if self.output_proj is None:  # the target embedding's transpose (section 3.4)
            return F.linear(hidden, self.tgt_embed.weight, self.output_bias)
        logits = self.output_proj(hidden)
        return logits if self.output_bias is None else logits + self.output_bias

    def forward(self, src: Tensor, tgt: Tensor, need_weights: bool = False,
                head_mask: HeadMask | None = None, positions: bool = True) -> Seq2SeqOutput:
        """Teacher-forced pass: logits for every target position (B, T, V) given the whole prefix."""
        encoded = self.encode(src, need_weights, head_mask, positions)
        decoded = self.decode(tgt, encoded, need_weights=need_weights, head_mask=head_mask, positions=positions)
        return Seq2SeqOutput(decoded.logits, encoded.memory, encoded.attentions,
                             decoded.self_attentions, decoded.cross_attentions)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
