"""Small untrained models whose searches part ways or never end: for tests where the reverse task's model,
right about every sequence, would let a wrong search find the same answer."""

import torch

from transformer.paper.config import ModelConfig
from transformer.paper.model import Transformer
from transformer.paper.tokenizer import EOS_ID


def untrained_model(vocabulary: int, seed: int, eos_scale: float) -> Transformer:
    """A small untrained model (2 + 2 layers, d_model 32), its eos embedding scaled by ``eos_scale``: 0 never
    ends a sentence, more than 1 brings eos within reach."""
    torch.manual_seed(seed)
    model = Transformer(ModelConfig(src_vocab_size=vocabulary, tgt_vocab_size=vocabulary, d_model=32, n_heads=4,
                                    n_encoder_layers=2, n_decoder_layers=2, d_ff=64, dropout=0.0, max_len=64)).eval()
    with torch.no_grad():
        model.tgt_embed.weight[EOS_ID] *= eos_scale
    return model


def unsure_model(vocabulary: int) -> Transformer:
    """Seed 2, eos within reach: its hypotheses end at many lengths, its beams go different ways, and a length
    penalty or limit changes which one wins."""
    return untrained_model(vocabulary, seed=2, eos_scale=4)
