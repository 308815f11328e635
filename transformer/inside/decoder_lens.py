"""What each encoder layer already knows: DecoderLens (Langedijk et al., "DecoderLens: Layerwise Interpretation of
Encoder-Decoder Transformers", Findings of NAACL 2024).

The decoder is made to cross-attend to the output of encoder layer k instead of the last one, and translates from
it as it always does (greedy or beam, with the model's own search rules). What comes out says what the first k
layers have worked out: the paper finds word-by-word output from low layers, reordering and fluency later. At
k = N it is the ordinary translation.

Nothing is retrained and nothing copied: ``read_at_layer`` gives a view of the model whose encoder stops early,
sharing every weight with it, so every search and inspection of ``paper/`` runs on it unchanged. A model whose
encoder ends in a final norm (the pre-norm families: M2M100, NLLB-200, SMaLL-100, mBART-50) applies it to layer k's
output, as the paper's authors do: the decoder was trained to read normalised states. Layers count from 1.
"""

from __future__ import annotations

import copy
import dataclasses

import torch
from torch import Tensor, nn

from ..files.checkpoint import Checkpoint
from ..paper.model import Encoder, Transformer
from ..paper.sentences import translate_batch
from ..paper.translation import Translation


class EncoderReadAt(nn.Module):
    """The encoder's own layers, stopped after layer ``read_at`` (one number for every sentence, or one per
    sentence of the batch: a batch of one source repeated reads every layer at once), then its final norm."""

    def __init__(self, encoder: Encoder, read_at: int | list[int]):
        super().__init__()
        self.layers, self.final_norm = encoder.layers, encoder.final_norm
        self.read_at = read_at

    def forward(self, x: Tensor, mask: Tensor | None, need_weights: bool = False,
                head_mask: Tensor | None = None) -> tuple[Tensor, list[Tensor]]:
        if not isinstance(self.read_at, int) and len(self.read_at) != x.size(0):
            raise ValueError(f"{len(self.read_at)} layers to read for a batch of {x.size(0)} sentences")
        per_row = torch.as_tensor(self.read_at, device=x.device).expand(x.size(0))
        read = x
        attentions = []
        for number, layer in enumerate(self.layers[:int(per_row.max())], start=1):
            x, weights = layer(x, mask, need_weights, None if head_mask is None else head_mask[..., number - 1, :])
            read = torch.where((per_row == number).view(-1, 1, 1), x, read)
            if need_weights:
                attentions.append(weights)
        if self.final_norm is not None:
            read = self.final_norm(read)
        return read, attentions


def read_at_layer(model: Transformer, read_at: int | list[int]) -> Transformer:
    """``model`` with its decoder reading encoder layer ``read_at`` (1 … N; a list: one layer per batch row),
    every weight shared. A shallow copy: its own table of submodules, the encoder's replaced; the model is not
    changed, so a server's other visitors translate through it meanwhile as before."""
    layers = model.config.n_encoder_layers
    for layer in [read_at] if isinstance(read_at, int) else read_at:
        if not 1 <= layer <= layers:
            raise ValueError(f"encoder layer {layer} is out of range: the encoder has {layers} (counting from 1)")
    view = copy.copy(model)
    view._modules = {**model._modules, "encoder": EncoderReadAt(model.encoder, read_at)}
    return view


def cut_to_layers(translation: Translation, layer: int) -> Translation:
    """A translation read from encoder layer ``layer`` keeps the encoder maps of its layers only (a batch reading
    deeper layers beside it ran more)."""
    return dataclasses.replace(translation, encoder_attention=translation.encoder_attention[:layer])


def translations_by_layer(checkpoint: Checkpoint, text: str, beam_size: int = 1, max_length: int | None = None,
                          length_penalty: float | None = None) -> list[Translation]:
    """``text`` translated from every encoder layer, first to last, in one batched search (each row reads its own
    layer), decoded as ``checkpoint.translate`` decodes, each with every attention map of its translation."""
    layers = list(range(1, checkpoint.model.config.n_encoder_layers + 1))
    lens = dataclasses.replace(checkpoint, model=read_at_layer(checkpoint.model, layers))
    translations = lens.translate_together([text] * len(layers), beam_size, max_length, length_penalty)
    return [cut_to_layers(translation, layer) for translation, layer in zip(translations, layers)]


def translate_from_layer(checkpoint: Checkpoint, texts: list[str], layer: int, beam_size: int = 1,
                         max_length: int | None = None, length_penalty: float | None = None) -> list[Translation]:
    """Sentences translated from encoder layer ``layer``, as ``checkpoint.translate_together`` decodes them."""
    lens = dataclasses.replace(checkpoint, model=read_at_layer(checkpoint.model, layer))
    return [cut_to_layers(translation, layer)
            for translation in lens.translate_together(texts, beam_size, max_length, length_penalty)]


def texts_from_layer(checkpoint: Checkpoint, texts: list[str], layer: int, beam_size: int = 1,
                     length_penalty: float | None = None) -> list[str]:
    """Many sentences translated from encoder layer ``layer``, batched by length as ``transformer.evaluate``
    translates: the texts alone, no attention maps."""
    lens = read_at_layer(checkpoint.model, layer)
    return translate_batch(lens, checkpoint.source_tokenizer, checkpoint.target_tokenizer, texts, beam_size,
                           checkpoint.length_penalty if length_penalty is None else length_penalty,
                           rules=checkpoint.rules)
