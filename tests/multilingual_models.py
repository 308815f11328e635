"""Small multilingual translators built with ``transformers`` in the Hugging Face layout, as the Hub serves M2M100,
NLLB-200, SMaLL-100 and mBART-50: random weights, and a SentencePiece model trained here on the tests' sentences
with fairseq's special ids (``<unk>`` 0, ``<s>`` 1, ``</s>`` 2), numbered as each family numbers its pieces."""

from __future__ import annotations

import io
import json
from pathlib import Path

import sentencepiece as spm
import torch

from marian_models import ENGLISH, GERMAN

FAMILIES = ("m2m100", "nllb", "small100", "mbart50")
TOKENIZER_CLASSES = {"m2m100": "M2M100Tokenizer", "small100": "SMALL100Tokenizer", "nllb": "NllbTokenizer",
                     "mbart50": "MBart50Tokenizer"}
FAIRSEQ_SPECIALS = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}


def fairseq_sentencepiece(vocab_size: int = 160) -> bytes:
    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(ENGLISH + GERMAN * 4), model_writer=buffer,
                                   vocab_size=vocab_size, model_type="unigram", unk_id=0, bos_id=1, eos_id=2,
                                   pad_id=-1, hard_vocab_limit=False, character_coverage=1.0, minloglevel=2)
    return buffer.getvalue()


def m2m100_vocabulary(proto: bytes) -> dict[str, int]:
    """vocab.json as M2M100's converter writes it: fairseq's specials, then the SentencePiece pieces."""
    processor = spm.SentencePieceProcessor(model_proto=proto)
    vocabulary = dict(FAIRSEQ_SPECIALS)
    for i in range(3, processor.get_piece_size()):
        vocabulary.setdefault(processor.id_to_piece(i), len(vocabulary))
    return vocabulary


def vocabulary_size(family: str, proto: bytes) -> int:
    """The embedding rows each family has: pieces, language tokens, and (M2M100) eight made-up words."""
    pieces = spm.SentencePieceProcessor(model_proto=proto).get_piece_size() + 1  # fairseq's four for spm's three
    codes = json.loads((Path(__file__).resolve().parents[1] / "transformer" / "files" / "languages.json").read_text())
    return {"m2m100": pieces + len(codes["m2m100"]) + 8, "small100": pieces + len(codes["m2m100"]) + 8,
            "nllb": pieces + len(codes["nllb"]) + 1 + 2, "mbart50": pieces + len(codes["mbart50"]) + 1}[family]


def build_multilingual(directory: Path, family: str, seed: int = 0, d_model: int = 32, encoder_layers: int = 2,
                       decoder_layers: int = 3, heads: int = 4) -> Path:
    """Write a translator of ``family`` with its tokenizer files to ``directory``; returns it."""
    from transformers import M2M100Config, M2M100ForConditionalGeneration, MBartConfig, MBartForConditionalGeneration

    proto = fairseq_sentencepiece()
    sizes = dict(vocab_size=vocabulary_size(family, proto), d_model=d_model, encoder_layers=encoder_layers,
                 decoder_layers=decoder_layers, encoder_attention_heads=heads, decoder_attention_heads=heads,
                 encoder_ffn_dim=2 * d_model, decoder_ffn_dim=2 * d_model, max_position_embeddings=128,
                 scale_embedding=True, pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2,
                 forced_eos_token_id=2)
    torch.manual_seed(seed)
    if family == "mbart50":
        model = MBartForConditionalGeneration(MBartConfig(activation_function="gelu", **sizes))
        with torch.no_grad():
            model.final_logits_bias.normal_(0, 1)
            for norm in (model.model.encoder.layernorm_embedding, model.model.decoder.layernorm_embedding):
                norm.weight.normal_(1, 0.2)
                norm.bias.normal_(0, 0.2)
    else:
        model = M2M100ForConditionalGeneration(M2M100Config(activation_function="relu", **sizes))
    model.eval().save_pretrained(directory)
    (directory / "sentencepiece.bpe.model").write_bytes(proto)
    tokenizer_config = {"tokenizer_class": TOKENIZER_CLASSES[family]}
    if family in ("m2m100", "small100"):
        (directory / "vocab.json").write_text(json.dumps(m2m100_vocabulary(proto), ensure_ascii=False))
        tokenizer_config.update(language_codes="m2m100", num_madeup_words=8)
    (directory / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    licence = "cc-by-nc-4.0" if family == "nllb" else "mit"
    (directory / "README.md").write_text(f"---\nlicense: {licence}\n---\n# A tiny multilingual test translator\n")
    return directory
