"""Subword tokenization with sentencepiece: train, encode, decode, and pieces for display.

One joint model serves both languages by default, which is what lets the
Transformer share one embedding matrix between encoder, decoder and output
(paper, section 3.4). The special ids are fixed so that configs stay simple:
pad 0, unk 1, bos 2, eos 3.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


class Tokenizer:
    """A thin wrapper around one trained sentencepiece model."""

    def __init__(self, model_proto: bytes):
        self.model_proto = model_proto
        self.processor = spm.SentencePieceProcessor(model_proto=model_proto)
        expected = {"pad": PAD_ID, "unk": UNK_ID, "bos": BOS_ID, "eos": EOS_ID}
        actual = {"pad": self.processor.pad_id(), "unk": self.processor.unk_id(),
                  "bos": self.processor.bos_id(), "eos": self.processor.eos_id()}
        if actual != expected:
            raise ValueError(f"sentencepiece model has special ids {actual}, expected {expected}")

    pad_id, unk_id, bos_id, eos_id = PAD_ID, UNK_ID, BOS_ID, EOS_ID

    @classmethod
    def train(cls, sentences: Iterable[str], vocab_size: int = 8000, model_type: str = "unigram",
              character_coverage: float = 1.0, **options) -> "Tokenizer":
        """Train a sentencepiece model in memory from an iterable of sentences.

        ``vocab_size`` is a ceiling for tiny corpora (such as synthetic tasks),
        where sentencepiece could not fill it.
        """
        sentences = [s for s in sentences if s.strip()]
        if not sentences:
            raise ValueError("cannot train a tokenizer on no text")
        buffer = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences), model_writer=buffer, vocab_size=vocab_size,
            model_type=model_type, character_coverage=character_coverage,
            pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID, hard_vocab_limit=False,
            input_sentence_size=2_000_000, shuffle_input_sentence=True, num_threads=2,
            minloglevel=2, **options)
        return cls(buffer.getvalue())

    @classmethod
    def load(cls, path: str | Path) -> "Tokenizer":
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"tokenizer model not found: {path}")
        try:
            return cls(path.read_bytes())
        except RuntimeError as error:
            raise ValueError(f"{path} is not a valid sentencepiece model ({error})") from None

    def save(self, path: str | Path) -> None:
        Path(path).write_bytes(self.model_proto)

    @property
    def vocab_size(self) -> int:
        return self.processor.get_piece_size()

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = True) -> list[int]:
        ids = self.processor.encode(text)
        return ([BOS_ID] if add_bos else []) + ids + ([EOS_ID] if add_eos else [])

    def encode_batch(self, texts: list[str], add_bos: bool = False, add_eos: bool = True) -> list[list[int]]:
        return [([BOS_ID] if add_bos else []) + ids + ([EOS_ID] if add_eos else [])
                for ids in self.processor.encode(texts)]

    def decode(self, ids: Iterable[int]) -> str:
        """Text for ids; special tokens are dropped."""
        return self.processor.decode([int(i) for i in ids if int(i) > EOS_ID])

    def piece(self, token_id: int) -> str:
        """How a token is shown to a person: sentencepiece's piece, specials in angle brackets."""
        token_id = int(token_id)
        special = {PAD_ID: "<pad>", UNK_ID: "<unk>", BOS_ID: "<s>", EOS_ID: "</s>"}
        return special.get(token_id) or self.processor.id_to_piece(token_id)

    def pieces(self, ids: Iterable[int]) -> list[str]:
        return [self.piece(i) for i in ids]

    def id_of(self, piece: str) -> int:
        """Id of a piece as shown by ``piece`` (unknown pieces map to unk)."""
        for token_id, name in ((PAD_ID, "<pad>"), (UNK_ID, "<unk>"), (BOS_ID, "<s>"), (EOS_ID, "</s>")):
            if piece == name:
                return token_id
        return self.processor.piece_to_id(piece)
