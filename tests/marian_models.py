"""Small Marian translators built with ``transformers`` in the Hugging Face layout, as the Hub serves opus-mt models.

Each has SentencePiece models trained here (English sources from assets/, a few German sentences written for the
tests) numbered by one ``vocab.json`` in Marian's order (``</s>`` 0, ``<unk>`` 1, ``<pad>`` last), SiLU
feed-forwards, a random logits bias, and the generation config opus-mt models are published with. ``trained_steps``
teaches it to copy the first words of a sentence, so its beams end at different lengths as a real translator's do.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import sentencepiece as spm
import torch

ROOT = Path(__file__).resolve().parents[1]
ENGLISH = [line.strip() for line in (ROOT / "assets" / "sample_sentences.en.txt").read_text().splitlines()
           if line.strip()]
GERMAN = ["Ein Hund läuft durch den Schnee.", "Zwei Kinder spielen am Strand Fußball.",
          "Eine Frau liest ein Buch im Park.", "Ein alter Mann sitzt auf einer Bank.",
          "Ein Mann fährt mit dem Fahrrad die Straße entlang.", "Drei Leute stehen vor einem Gebäude.",
          "Ein Mädchen in einem roten Kleid tanzt.", "Die Katze schläft auf dem Sofa."]


def sentencepiece_model(lines: list[str], vocab_size: int) -> bytes:
    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=buffer, vocab_size=vocab_size,
                                   model_type="unigram", hard_vocab_limit=False, character_coverage=1.0,
                                   minloglevel=2)
    return buffer.getvalue()


def marian_vocabulary(*protos: bytes) -> dict[str, int]:
    """The pieces of every SentencePiece model in one vocabulary, numbered as Marian's converter does."""
    vocabulary = {"</s>": 0, "<unk>": 1}
    for proto in protos:
        processor = spm.SentencePieceProcessor(model_proto=proto)
        for i in range(processor.get_piece_size()):
            if not (processor.is_control(i) or processor.is_unknown(i)):
                vocabulary.setdefault(processor.id_to_piece(i), len(vocabulary))
    vocabulary["<pad>"] = len(vocabulary)
    return vocabulary


def build_marian(directory: Path, trained_steps: int = 0, seed: int = 0, d_model: int = 32,
                 encoder_layers: int = 2, decoder_layers: int = 3, heads: int = 4) -> Path:
    """Write a MarianMTModel with its tokenizer files to ``directory``; returns it."""
    from transformers import MarianConfig, MarianMTModel

    source, target = sentencepiece_model(ENGLISH, 150), sentencepiece_model(GERMAN * 4, 120)
    vocabulary = marian_vocabulary(source, target)
    pad = len(vocabulary) - 1
    torch.manual_seed(seed)
    config = MarianConfig(vocab_size=len(vocabulary), d_model=d_model, encoder_layers=encoder_layers,
                          decoder_layers=decoder_layers, encoder_attention_heads=heads, decoder_attention_heads=heads,
                          encoder_ffn_dim=2 * d_model, decoder_ffn_dim=2 * d_model, activation_function="swish",
                          scale_embedding=True, pad_token_id=pad, decoder_start_token_id=pad, eos_token_id=0,
                          forced_eos_token_id=0, max_position_embeddings=256)
    model = MarianMTModel(config)
    with torch.no_grad():
        model.final_logits_bias.normal_(0, 1)
    if trained_steps:
        _learn_to_copy_first_words(model, source, vocabulary, trained_steps)
    model.eval()
    generation = model.generation_config  # as Helsinki-NLP/opus-mt-en-de publishes it
    generation.num_beams, generation.bad_words_ids, generation.renormalize_logits = 4, [[pad]], True
    generation.max_length = 512
    model.save_pretrained(directory)
    (directory / "source.spm").write_bytes(source)
    (directory / "target.spm").write_bytes(target)
    (directory / "vocab.json").write_text(json.dumps(vocabulary, ensure_ascii=False))
    (directory / "README.md").write_text("---\nlicense: cc-by-4.0\n---\n# A tiny test translator\n")
    return directory


def _learn_to_copy_first_words(model, source: bytes, vocabulary: dict[str, int], steps: int, words: int = 5) -> None:
    processor = spm.SentencePieceProcessor(model_proto=source)
    examples = [[vocabulary.get(piece, 1) for piece in processor.encode(" ".join(line.split()[:words]), out_type=str)]
                + [0] for line in ENGLISH]
    pad = len(vocabulary) - 1
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    generator = torch.Generator().manual_seed(0)
    model.train()
    for _ in range(steps):
        batch = [examples[i] for i in torch.randint(len(examples), (16,), generator=generator).tolist()]
        longest = max(map(len, batch))
        inputs = torch.tensor([example + [pad] * (longest - len(example)) for example in batch])
        labels = torch.tensor([example + [-100] * (longest - len(example)) for example in batch])
        loss = model(input_ids=inputs, attention_mask=inputs != pad, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
