"""The app's memory with an opus-mt-sized model open: resident and peak, after greedy and beam translations.

Builds a Marian model of opus-mt-en-de's shapes with random weights and tokenizer files made here (SentencePiece
models trained on the app's sample sentences, a vocabulary filled to 58,101 pieces), converts it with
``transformer.files.hub`` as a download would be, serves ``python app.py --checkpoint DIR`` and translates with it
through the API. Goal: at most 1.2 GB. Prints JSON last: {"server_rss_mb", "server_peak_mb", "startup_s", ...}.

    python benchmarks/hub_memory.py --json
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import sentencepiece as spm
import torch

from common import ROOT, machine, report
from hub_decode import OPUS_MT_EN_DE
from transformer.files import hub

SENTENCE = "A young girl is playing with a red ball in the park."


def marian_directory(directory: Path) -> Path:
    """An opus-mt-shaped MarianMTModel in the Hugging Face layout."""
    from transformers import MarianConfig, MarianMTModel

    lines = [line for line in (ROOT / "assets" / "sample_sentences.en.txt").read_text().splitlines() if line.strip()]
    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=buffer, vocab_size=300,
                                   hard_vocab_limit=False, minloglevel=2)
    processor = spm.SentencePieceProcessor(model_proto=buffer.getvalue())
    vocabulary = {"</s>": 0, "<unk>": 1}
    for i in range(processor.get_piece_size()):
        if not (processor.is_control(i) or processor.is_unknown(i)):
            vocabulary.setdefault(processor.id_to_piece(i), len(vocabulary))
    while len(vocabulary) < OPUS_MT_EN_DE["vocab_size"] - 1:  # pieces no sentence here uses, as a real one has
        vocabulary[f"▁filler{len(vocabulary)}"] = len(vocabulary)
    vocabulary["<pad>"] = len(vocabulary)
    torch.manual_seed(0)
    MarianMTModel(MarianConfig(**OPUS_MT_EN_DE)).save_pretrained(directory)
    for name in ("source.spm", "target.spm"):
        (directory / name).write_bytes(buffer.getvalue())
    (directory / "vocab.json").write_text(json.dumps(vocabulary))
    return directory


def serve_and_measure(checkpoint: Path, port: int) -> dict:
    from gradio_client import Client

    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False"}
    log = tempfile.TemporaryFile("w+")
    started = time.perf_counter()
    server = subprocess.Popen([sys.executable, "app.py", "--checkpoint", str(checkpoint), "--port", str(port)],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        client = None
        while client is None:
            try:
                client = Client(f"http://127.0.0.1:{port}/", verbose=False)
            except Exception:  # not serving yet
                if server.poll() is not None:
                    log.seek(0)
                    raise SystemExit("the app did not start: " + log.read()[-2000:])
                time.sleep(0.5)
        startup = time.perf_counter() - started
        for decoding, beam in (("greedy", 2), ("beam", 5), ("beam", 5)):  # the slider starts at 2
            client.predict(checkpoint.name, SENTENCE, decoding, beam, 40, api_name="/translate")
        status = dict(line.split(":", 1) for line in Path(f"/proc/{server.pid}/status").read_text().splitlines())
        kilobytes = lambda key: int(status[key].split()[0])  # noqa: E731
        return {"server_rss_mb": round(kilobytes("VmRSS") / 1024), "server_peak_mb": round(kilobytes("VmHWM") / 1024),
                "startup_s": round(startup, 1)}
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=7871)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        marian = marian_directory(scratch / "marian")
        checkpoint = hub.convert(marian, scratch / "checkpoints" / "opus-mt-shaped")
        result = {**serve_and_measure(checkpoint, args.port), "goal_mb": 1200, "machine": machine()}
    result["goal_met"] = result["server_peak_mb"] <= result["goal_mb"]
    report(result, args.json)


if __name__ == "__main__":
    main()
