"""A SentencePiece model as the ``tokenizer.json`` that tokenizers.js reads (the offline pack's tokenizer in the
browser, ``transformer.pack``), segmenting text as SentencePiece does.

SentencePiece's ``.model`` file is a protocol buffer (sentencepiece_model.proto); the few fields read here are
decoded by hand, so making a pack needs no protobuf package. A unigram model (the models this project trains)
becomes a unigram tokenizer over the same pieces and scores, after the same normalisation: the model's
precompiled character map (NFKC and its rules), extra spaces removed, spaces written as ▁, one ▁ before the
text. Control pieces (<pad>, <s>, </s>) and the unknown piece keep their ids but never match text, as in
SentencePiece (typed "<unk>" is five characters to it).
"""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass, field

from ..errors import InputError

WORD_START = "▁"
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6  # SentencePiece.Type
MODEL_TYPES = {1: "unigram", 3: "word"}  # TrainerSpec.ModelType: those the pack segments (BPE and char it does not)
# A control or unknown piece's text in the browser's vocabulary: it holds U+0000, which the character map removes from any
# text before segmenting, so the piece keeps its id and never matches.
NEVER_IN_TEXT = "\u0000{}"


@dataclass
class SentencePieceSpec:
    """What segmenting needs from a SentencePiece model."""

    pieces: list[tuple[str, float, int]] = field(default_factory=list)  # piece, score, type
    model_type: int = 1
    byte_fallback: bool = False
    charsmap: bytes = b""
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = True
    escape_whitespaces: bool = True


def _fields(data: bytes):
    """(field number, wire type, value) of each field of one protocol buffer message."""
    position = 0
    while position < len(data):
        key, position = _varint(data, position)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, position = _varint(data, position)
        elif wire == 1:
            value, position = data[position:position + 8], position + 8
        elif wire == 2:
            length, position = _varint(data, position)
            value, position = data[position:position + length], position + length
        elif wire == 5:
            value, position = data[position:position + 4], position + 4
        else:
            raise ValueError(f"wire type {wire}")
        yield number, wire, value


def _varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position


def read_spec(model_proto: bytes) -> SentencePieceSpec:
    """The pieces, model type and normalisation of a SentencePiece model file's bytes."""
    spec = SentencePieceSpec()
    try:
        for number, _, value in _fields(model_proto):
            if number == 1:  # ModelProto.pieces
                piece, score, kind = "", 0.0, NORMAL
                for inner, _, item in _fields(value):
                    if inner == 1:
                        piece = item.decode("utf-8")
                    elif inner == 2:
                        score = struct.unpack("<f", item)[0]
                    elif inner == 3:
                        kind = item
                spec.pieces.append((piece, score, kind))
            elif number == 2:  # trainer_spec
                for inner, _, item in _fields(value):
                    if inner == 3:
                        spec.model_type = item
                    elif inner == 35:
                        spec.byte_fallback = bool(item)
            elif number == 3:  # normalizer_spec
                for inner, _, item in _fields(value):
                    if inner == 2:
                        spec.charsmap = bytes(item)
                    elif inner in (3, 4, 5):
                        setattr(spec, {3: "add_dummy_prefix", 4: "remove_extra_whitespaces",
                                       5: "escape_whitespaces"}[inner], bool(item))
    except (IndexError, ValueError, UnicodeDecodeError, struct.error) as error:
        raise InputError(code="pack.tokenizer_unreadable", error=str(error)) from None
    return spec


def segmenting(model_proto: bytes) -> str:
    """How the SentencePiece model in ``model_proto`` cuts normalised text: "unigram" (the most probable pieces:
    the translators this project trains) or "word" (each word whole: its synthetic tasks). A word model's words
    are cut in the page (ui/static/pack/engine.js), after tokenizers.js normalised the text."""
    spec = read_spec(model_proto)
    if spec.model_type not in MODEL_TYPES or spec.byte_fallback:
        raise InputError(code="pack.tokenizer_kind")
    return MODEL_TYPES[spec.model_type]


def tokenizer_json(model_proto: bytes) -> dict:
    """tokenizers.js's description of the SentencePiece model in ``model_proto``: its normalisation, and for a
    unigram model its segmentation too."""
    segmenting(model_proto)
    spec = read_spec(model_proto)
    unknown = [i for i, (_, _, kind) in enumerate(spec.pieces) if kind == UNKNOWN]
    if len(unknown) != 1:
        raise InputError(code="pack.tokenizer_unreadable", error="no single unknown piece")
    vocabulary = [[NEVER_IN_TEXT.format(piece) if kind in (CONTROL, UNUSED, UNKNOWN) else piece, score]
                  for piece, score, kind in spec.pieces]
    normalizers = []
    if spec.charsmap:
        normalizers.append({"type": "Precompiled", "precompiled_charsmap": base64.b64encode(spec.charsmap).decode()})
    if spec.remove_extra_whitespaces:
        normalizers += [{"type": "Replace", "pattern": {"Regex": r"\A +| +\z"}, "content": ""},
                        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]
    if spec.escape_whitespaces:
        normalizers.append({"type": "Replace", "pattern": {"String": " "}, "content": WORD_START})
    if spec.add_dummy_prefix:
        normalizers.append({"type": "Prepend", "prepend": WORD_START})
    return {
        "version": "1.0",
        "added_tokens": [],
        "normalizer": {"type": "Sequence", "normalizers": normalizers},
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": None,
        "model": {"type": "Unigram", "unk_id": unknown[0], "vocab": vocabulary, "byte_fallback": False},
    }
