"""A checkpoint of opus-mt-en-de's shapes with random weights, for measuring the app on a real translator's size.

A ``MarianMTModel`` of ``hub_decode.OPUS_MT_EN_DE``'s shapes (d_model 512, 6+6 layers of 8 heads, feed-forward
2048, vocabulary 58,101) is written in the Hugging Face layout, with SentencePiece models trained here on the
app's sample sentences and a ``vocab.json`` that fills Marian's vocabulary up to its size, then converted by
``transformer.files.hub.convert`` as a downloaded opus-mt model is. Its translations are random pieces; its cost is a
real translator's. The bundled multi30k-en-de is linked beside it, so the app lists both (a model switch).

    python benchmarks/opus_shaped.py /tmp/opus-shaped
    python benchmarks/browser_latency.py --checkpoint /tmp/opus-shaped/opus-mt-en-de-shaped --max-tokens 20 --json
"""

from __future__ import annotations

import argparse
import io
import json
import tempfile
from pathlib import Path

import sentencepiece as spm
import torch

from common import ROOT
from hub_decode import OPUS_MT_EN_DE
from transformer.files import hub
from transformer.files.checkpoint import REPOSITORY_CHECKPOINTS

NAME = "opus-mt-en-de-shaped"
SENTENCES = ROOT / "assets" / "sample_sentences.en.txt"


def sentencepiece_model(lines: list[str], vocab_size: int = 400) -> bytes:
    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=buffer, vocab_size=vocab_size,
                                   model_type="unigram", hard_vocab_limit=False, minloglevel=2)
    return buffer.getvalue()


def vocabulary(proto: bytes, size: int) -> dict[str, int]:
    """The model's pieces numbered as Marian numbers them (``</s>`` 0, ``<unk>`` 1, ``<pad>`` last), filled to
    ``size`` with pieces no sentence produces."""
    pieces = {"</s>": 0, "<unk>": 1}
    processor = spm.SentencePieceProcessor(model_proto=proto)
    for i in range(processor.get_piece_size()):
        if not (processor.is_control(i) or processor.is_unknown(i)):
            pieces.setdefault(processor.id_to_piece(i), len(pieces))
    while len(pieces) < size - 1:
        pieces[f"▁w{len(pieces)}"] = len(pieces)
    pieces["<pad>"] = size - 1
    return pieces


def write_marian(directory: Path, seed: int = 0) -> Path:
    from transformers import MarianConfig, MarianMTModel

    lines = [line.strip() for line in SENTENCES.read_text(encoding="utf-8").splitlines() if line.strip()]
    proto = sentencepiece_model(lines)
    torch.manual_seed(seed)
    MarianMTModel(MarianConfig(**OPUS_MT_EN_DE)).eval().save_pretrained(directory)
    (directory / "source.spm").write_bytes(proto)
    (directory / "target.spm").write_bytes(proto)
    (directory / "vocab.json").write_text(json.dumps(vocabulary(proto, OPUS_MT_EN_DE["vocab_size"]),
                                                     ensure_ascii=False), encoding="utf-8")
    return directory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="folder to write the checkpoint into (created)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as marian:
        converted = hub.convert(write_marian(Path(marian)), args.out / NAME)
    bundled = args.out / "multi30k-en-de"
    if not bundled.exists():
        bundled.symlink_to(REPOSITORY_CHECKPOINTS / "multi30k-en-de", target_is_directory=True)
    print(converted)


if __name__ == "__main__":
    main()
