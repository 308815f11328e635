"""A model whose searches part ways: for tests where the reverse task's model, right about every sequence, would
make a wrong search find the same answer."""

import torch

from transformer.paper.config import ModelConfig
from transformer.paper.model import Transformer
from transformer.paper.tokenizer import EOS_ID


def unsure_model(vocabulary: int) -> Transformer:
    """Untrained (seed 2), with eos within reach: its hypotheses end at many lengths, its beams go different ways,
    and a length penalty or limit changes which one wins."""
    torch.manual_seed(2)
    model = Transformer(ModelConfig(src_vocab_size=vocabulary, tgt_vocab_size=vocabulary, d_model=32, n_heads=4,
                                    n_encoder_layers=2, n_decoder_layers=2, d_ff=64, dropout=0.0, max_len=64)).eval()
    with torch.no_grad():
        model.tgt_embed.weight[EOS_ID] *= 4
    return model
