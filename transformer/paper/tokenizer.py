"""Subword tokenization with sentencepiece: train, encode, decode, and pieces for display.

One joint model serves both languages by default, which is what lets the
Transformer share one embedding matrix between encoder, decoder and output
(paper, section 3.4). The special ids of the models trained here are fixed so
that configs stay simple: pad 0, unk 1, bos 2, eos 3.

A converted Marian (opus-mt) model segments with sentencepiece too, but its ids
come from a vocabulary of its own (``vocab.json``, piece -> id, shared by a
source and a target segmenter): there ``</s>`` is 0, ``<unk>`` 1, ``<pad>`` the
last id, and there is no ``<s>``.

A multilingual model (M2M100, NLLB, mBART-50) is told its languages by tokens in
that vocabulary: ``Languages`` says which, and gives each side's tokenizer the
token its sequences start with (``prefix_ids``): the source language's on the
source, the target language's on the target, which decoding forces as its
first step.
"""

from __future__ import annotations

import copy
import io
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import sentencepiece as spm

from ..errors import InputError, MissingFile, detail

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
SPECIAL_PIECES = {"pad": "<pad>", "unk": "<unk>", "bos": "<s>", "eos": "</s>"}
WORD_START = "▁"  # sentencepiece's mark of a piece that starts a word


class Tokenizer:
    """One trained sentencepiece model, and the vocabulary its pieces are numbered by (its own by default)."""

    def __init__(self, model_proto: bytes, vocabulary: dict[str, int] | None = None):
        self.model_proto = model_proto
        self.processor = spm.SentencePieceProcessor(model_proto=model_proto)
        self.vocabulary = vocabulary
        if vocabulary is None:
            expected = {"pad": PAD_ID, "unk": UNK_ID, "bos": BOS_ID, "eos": EOS_ID}
            actual = {"pad": self.processor.pad_id(), "unk": self.processor.unk_id(),
                      "bos": self.processor.bos_id(), "eos": self.processor.eos_id()}
            if actual != expected:
                raise InputError(code="tokenizer.special_ids", actual=actual, expected=expected)
            self.pad_id, self.unk_id, self.bos_id, self.eos_id = PAD_ID, UNK_ID, BOS_ID, EOS_ID
            self._pieces_by_id: list[str] | None = None
        else:
            self._pieces_by_id = _pieces_by_id(vocabulary)
            ids = {name: vocabulary.get(piece) for name, piece in SPECIAL_PIECES.items()}
            missing = [SPECIAL_PIECES[name] for name in ("pad", "unk", "eos") if ids[name] is None]
            if missing:
                raise InputError(code="tokenizer.vocabulary_lacks", pieces=", ".join(missing))
            self.pad_id, self.unk_id, self.bos_id, self.eos_id = ids["pad"], ids["unk"], ids["bos"], ids["eos"]
        self.special_ids = {i for i in (self.pad_id, self.unk_id, self.bos_id, self.eos_id) if i is not None}
        self.prefix_ids: tuple[int, ...] = ()  # what every sequence of this side starts with (a language token)

    def starting_with(self, prefix_ids: Iterable[int], special_ids: Iterable[int] = ()) -> "Tokenizer":
        """This tokenizer with sequences that start with ``prefix_ids``, and ``special_ids`` (a multilingual
        model's language tokens) left out of decoded text; the original is unchanged."""
        tokenizer = copy.copy(self)
        tokenizer.prefix_ids = tuple(int(i) for i in prefix_ids)
        tokenizer.special_ids = self.special_ids | {int(i) for i in special_ids}
        return tokenizer

    @classmethod
    def train(cls, sentences: Iterable[str], vocab_size: int = 8000, model_type: str = "unigram",
              character_coverage: float = 1.0, **options) -> "Tokenizer":
        """Train a sentencepiece model in memory from an iterable of sentences.

        ``vocab_size`` is a ceiling for tiny corpora (such as synthetic tasks),
        where sentencepiece could not fill it.
        """
        sentences = [s for s in sentences if s.strip()]
        if not sentences:
            raise InputError(code="tokenizer.no_text")
        buffer = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences), model_writer=buffer, vocab_size=vocab_size,
            model_type=model_type, character_coverage=character_coverage,
            pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID, hard_vocab_limit=False,
            input_sentence_size=2_000_000, shuffle_input_sentence=True, num_threads=2,
            minloglevel=2, **options)
        return cls(buffer.getvalue())

    @classmethod
    def load(cls, path: str | Path, vocabulary: dict[str, int] | None = None) -> "Tokenizer":
        path = Path(path)
        if not path.is_file():
            raise MissingFile(code="tokenizer.not_found", path=str(path))
        try:
            return cls(path.read_bytes(), vocabulary)
        except RuntimeError as error:
            raise InputError(code="tokenizer.invalid_model", path=str(path), error=detail(error)) from None

    def save(self, path: str | Path) -> None:
        Path(path).write_bytes(self.model_proto)

    @property
    def vocab_size(self) -> int:
        return self.processor.get_piece_size() if self._pieces_by_id is None else len(self._pieces_by_id)

    def _ids(self, segmented: list[str] | list[int]) -> list[int]:
        if self.vocabulary is None:
            return segmented
        unk = self.unk_id
        return [self.vocabulary.get(piece, unk) for piece in segmented]

    def _with_specials(self, ids: list[int], add_bos: bool, add_eos: bool) -> list[int]:
        if add_bos and self.bos_id is None:
            raise InputError(code="tokenizer.no_start")
        return ([self.bos_id] if add_bos else []) + list(self.prefix_ids) + ids + ([self.eos_id] if add_eos else [])

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = True) -> list[int]:
        out_type = int if self.vocabulary is None else str
        return self._with_specials(self._ids(self.processor.encode(text, out_type=out_type)), add_bos, add_eos)

    def encode_batch(self, texts: list[str], add_bos: bool = False, add_eos: bool = True) -> list[list[int]]:
        out_type = int if self.vocabulary is None else str
        return [self._with_specials(self._ids(segmented), add_bos, add_eos)
                for segmented in self.processor.encode(texts, out_type=out_type)]

    def decode(self, ids: Iterable[int]) -> str:
        """Text for ids; special tokens are dropped."""
        kept = [int(i) for i in ids if int(i) not in self.special_ids]
        if self._pieces_by_id is None:
            return self.processor.decode(kept)
        # A piece of the shared vocabulary that this side's segmenter lacks comes back as it is, ▁ and all (as
        # transformers' MarianTokenizer decodes it too).
        return self.processor.decode_pieces([self._pieces_by_id[i] for i in kept]).replace(WORD_START, " ").strip()

    def typed_id(self, text: str) -> int | None:
        """The id of a piece a person typed: as ``piece`` shows it, else as a word start (a word typed without its
        ``▁``); None when it is neither (``<unk>`` itself is a piece)."""
        token_id = self.id_of(text)
        if token_id != self.unk_id or text == self.piece(self.unk_id):
            return token_id
        token_id = self.id_of(WORD_START + text.lstrip(WORD_START))
        return None if token_id == self.unk_id else token_id

    def piece(self, token_id: int) -> str:
        """How a token is shown to a person: sentencepiece's piece, specials in angle brackets."""
        token_id = int(token_id)
        if self._pieces_by_id is not None:
            return self._pieces_by_id[token_id]
        special = {PAD_ID: "<pad>", UNK_ID: "<unk>", BOS_ID: "<s>", EOS_ID: "</s>"}
        return special.get(token_id) or self.processor.id_to_piece(token_id)

    def pieces(self, ids: Iterable[int]) -> list[str]:
        return [self.piece(i) for i in ids]

    def id_of(self, piece: str) -> int:
        """Id of a piece as shown by ``piece`` (unknown pieces map to unk)."""
        if self.vocabulary is not None:
            return self.vocabulary.get(piece, self.unk_id)
        for token_id, name in ((PAD_ID, "<pad>"), (UNK_ID, "<unk>"), (BOS_ID, "<s>"), (EOS_ID, "</s>")):
            if piece == name:
                return token_id
        return self.processor.piece_to_id(piece)


def _pieces_by_id(vocabulary: dict[str, int]) -> list[str]:
    """The pieces of a vocabulary in id order; its ids must be 0, 1, ... without gaps or repeats."""
    pieces = [""] * len(vocabulary)
    for piece, token_id in vocabulary.items():
        if isinstance(token_id, bool) or not isinstance(token_id, int) or not 0 <= token_id < len(vocabulary) \
                or pieces[token_id]:
            raise InputError(code="tokenizer.bad_ids", last=len(vocabulary) - 1, piece=repr(piece),
                             id=repr(token_id))
        pieces[token_id] = piece
    return pieces


@dataclass(frozen=True)
class Languages:
    """How a multilingual model is told which languages it translates between: a token per language.

    ``tokens`` maps each language's code, as the family writes it ("de" for M2M100, "deu_Latn" for NLLB, "de_DE"
    for mBART-50), to its piece. The source starts with the source language's token (``source_marked_by``
    "source"; SMaLL-100 puts the target language's there instead, "target"), and with ``target_forced`` the
    decoder's first generated token is forced to the target language's: the one token that steers the whole
    translation.
    """

    tokens: dict[str, str]
    source: str
    target: str
    source_marked_by: str = "source"
    target_forced: bool = True

    def check(self, code: str) -> str:
        """``code`` if it is one of this model's languages; else an error that names some of them."""
        if code not in self.tokens:
            codes = sorted(self.tokens)
            shown = ", ".join(codes[:12]) + (", …" if len(codes) > 12 else "")
            raise InputError(code="tokenizer.unknown_language", language=str(code), languages=shown)
        return code

    def tokenizers(self, source_tokenizer: Tokenizer, target_tokenizer: Tokenizer, source: str | None = None,
                   target: str | None = None) -> tuple[Tokenizer, Tokenizer]:
        """Both tokenizers set for translating ``source`` into ``target`` (the defaults unless given)."""
        source, target = self.check(source or self.source), self.check(target or self.target)
        language_ids = [target_tokenizer.id_of(piece) for piece in self.tokens.values()]
        if target_tokenizer.unk_id in language_ids:
            raise InputError(code="tokenizer.language_not_in_vocabulary")
        marker = self.tokens[source if self.source_marked_by == "source" else target]
        forced = [target_tokenizer.id_of(self.tokens[target])] if self.target_forced else []
        return (source_tokenizer.starting_with([source_tokenizer.id_of(marker)], language_ids),
                target_tokenizer.starting_with(forced, language_ids))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "Languages":
        unknown = sorted(set(values) - set(cls.__dataclass_fields__))
        if unknown:
            raise InputError(code="tokenizer.unknown_language_keys", keys=", ".join(unknown))
        tokens = values.get("tokens")
        if not isinstance(tokens, dict) or not tokens \
                or not all(isinstance(k, str) and isinstance(v, str) for k, v in tokens.items()):
            raise ValueError("the language tokens must map each code to its piece")
        if not all(isinstance(values.get(name), str) for name in ("source", "target")):
            raise ValueError("the default source and target must be language codes")
        if values.get("source_marked_by", "source") not in ("source", "target"):
            raise ValueError("source_marked_by must be \"source\" or \"target\"")
        return cls(**values)
