"""A corpus run: many sentences translated (or their references forced), each translation's ALTI+ source share
per step (``contributions.py``), each head's sums (``head_roles.py``), and what each attention block projected its
queries and keys from, saved in chunks: an interrupted run resumes where it stopped, and a second run on the same
model, sentences and decoding reuses every chunk.

The folder (``--out``) holds:

- ``run.json``: what its chunks were made from: ``format``, ``model`` (a fingerprint of the checkpoint),
  ``decoding`` and ``chunk`` (sentences per chunk). A run of another model or decoding, or of other sentences, is
  refused in a folder that holds one: nothing saved is overwritten.
- ``chunk-NNNNN.json``: its sentences, each ``{source, reference, translation, source_pieces, target_pieces,
  source_ids, target_ids, log_probability, source_shares, ended, truncated, forced_steps, source_specials}``
  (``target_*`` are the decoder's inputs, ``<s>`` first; ``source_shares`` one per step).
- ``chunk-NNNNN.safetensors``: for sentence ``i`` of the chunk (from 0), float16 ``i.encoder`` (encoder layers,
  source, d_model), ``i.decoder`` and ``i.cross`` (decoder layers, target, d_model), ``i.memory`` (source,
  d_model): what each self-attention, and each cross-attention's queries and keys, were projected from; float64
  ``i.heads.KIND`` (layers, heads, ``head_roles.STATISTICS``) and float32 ``i.unlike.KIND`` (layers × heads,
  layers × heads), its sums (``head_roles.SentenceSums``).

A chunk's tensors are written first and its JSON last, each by a rename, so a chunk is there whole or not at all.
Its size per sentence is mostly the states: 2 bytes × d_model × (encoder layers × source + 2 × decoder layers ×
target + source) pieces (docs/corpus.md gives it measured).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from safetensors.torch import load_file
from safetensors.torch import save as safetensors_bytes
from torch import Tensor

from ..errors import InputError
from ..files.checkpoint import CONFIG, Checkpoint
from ..files.weights import weight_files
from ..paper.sentences import encode_source
from ..paper.translation import Translation, inspect_together
from .contributions import blocks_of, compose, record_blocks
from .head_roles import SentenceSums, alignable_rows, head_roles, sentence_sums
from .one_head import KINDS

FORMAT = 1
# Sentences decoded and saved together: a batch large enough that a CPU's search steps serve many sentences, small
# enough that an interruption loses a few seconds of work.
CHUNK = 32
RUN = "run.json"
STATES = ("encoder", "decoder", "cross", "memory")  # what each sentence's attention blocks read, saved
EDGE_BYTES = 1 << 16  # of each weights file, read into the fingerprint beside its size


@dataclass
class Decoding:
    """How the run's sentences were decoded: ``beam`` and ``length_penalty`` as ``transformer.translate`` chooses
    them unless given; ``forced``: the references were read teacher-forced instead."""

    beam: int
    length_penalty: float
    forced: bool = False
    languages: list[str] | None = None

    @classmethod
    def default(cls, checkpoint: Checkpoint, beam: int | None = None, length_penalty: float | None = None,
                forced: bool = False) -> "Decoding":
        return cls(beam=beam or int(checkpoint.search.get("beam_size", 5)),
                   length_penalty=checkpoint.length_penalty if length_penalty is None else length_penalty,
                   forced=forced, languages=list(checkpoint.pair) if checkpoint.pair else None)


@dataclass
class CorpusSentence:
    source: str
    reference: str | None
    translation: str
    source_pieces: list[str]
    target_pieces: list[str]
    source_ids: list[int]
    target_ids: list[int]
    log_probability: float
    source_shares: list[float]
    ended: bool
    truncated: bool
    forced_steps: int
    source_specials: int

    @property
    def source_share(self) -> float:
        """The mean of its steps' source shares: how much of the translation came from the source."""
        return sum(self.source_shares) / len(self.source_shares)


@dataclass
class CorpusRun:
    """A run's sentences and sums as saved in ``folder``; ``seconds``: how long this call computed."""

    folder: Path
    sentences: list[CorpusSentence] = field(default_factory=list)
    heads: list[dict[str, Tensor]] = field(default_factory=list)     # each sentence's SentenceSums.heads
    states: list[dict[str, Tensor]] = field(default_factory=list)    # each sentence's encoder, decoder, cross, memory
    unlike: dict[str, Tensor] = field(default_factory=dict)          # SentenceSums.unlike summed over them
    total: int = 0
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        return len(self.sentences) == self.total

    @property
    def bytes(self) -> int:
        return sum(path.stat().st_size for path in self.folder.iterdir() if path.is_file())

    def summary(self) -> dict:
        """The ``--json`` contract of ``python -m transformer.corpus`` (sentences and layers count from 1)."""
        least = sorted(range(len(self.sentences)), key=lambda index: self.sentences[index].source_share)
        return {"sentences": len(self.sentences), "seconds": round(self.seconds, 3), "bytes": self.bytes,
                "heads": [role.to_json() for role in head_roles(self.heads, self.unlike)] if self.heads else [],
                "least_source": [{"index": index + 1, "source": self.sentences[index].source,
                                  "translation": self.sentences[index].translation,
                                  "source_share": round(self.sentences[index].source_share, 6),
                                  "log_probability": round(self.sentences[index].log_probability, 6)}
                                 for index in least]}


def model_fingerprint(checkpoint: Checkpoint) -> str:
    """A SHA-256 of the checkpoint's config and, for each weights file, its name, size and first and last bytes
    (reading gigabytes to recognise a model would cost more than the run); a model not saved: of its weights."""
    digest = hashlib.sha256()
    if checkpoint.path is None:
        for name, tensor in sorted(checkpoint.model.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
        return digest.hexdigest()
    digest.update((Path(checkpoint.path) / CONFIG).read_bytes())
    for path in sorted(weight_files(Path(checkpoint.path))):
        size = path.stat().st_size
        digest.update(f"{path.name}:{size}".encode())
        with path.open("rb") as handle:
            digest.update(handle.read(EDGE_BYTES))
            handle.seek(max(0, size - EDGE_BYTES))
            digest.update(handle.read(EDGE_BYTES))
    return digest.hexdigest()


def chunk_paths(folder: Path, number: int) -> tuple[Path, Path]:
    return folder / f"chunk-{number:05d}.json", folder / f"chunk-{number:05d}.safetensors"


def prepared_folder(folder: Path, made_from: dict) -> None:
    """``folder`` ready for a run made from ``made_from``: new, or holding a run of the same."""
    if folder.exists() and not folder.is_dir():
        raise InputError(code="corpus.out_is_file", path=str(folder))
    held = folder / RUN
    if held.is_file():
        try:
            saved = json.loads(held.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            saved = None
        if saved != made_from:
            raise InputError(code="corpus.other_run", path=str(folder))
        return
    if folder.is_dir() and any(not path.name.endswith(".partial") for path in folder.iterdir()):
        raise InputError(code="corpus.folder_not_empty", path=str(folder))  # (another writer's partial run.json: ours)
    folder.mkdir(parents=True, exist_ok=True)
    written(folder / RUN, json.dumps(made_from, indent=1).encode())


def written(path: Path, data: bytes) -> None:
    """``data`` at ``path``, whole or not at all; two writers of the same file (two processes running the same
    corpus) each write their own partial copy, and the last renamed stays."""
    partial = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def run_corpus(checkpoint: Checkpoint, sources: list[str], references: list[str] | None, folder: str | Path,
               decoding: Decoding, progress: Callable[[int, int], None] | None = None,
               should_stop: Callable[[], bool] | None = None) -> CorpusRun:
    """Run (or resume, or reuse) a corpus in ``folder``; ``progress(done, total)`` hears after each chunk, and
    ``should_stop()`` between chunks ends the run early with what is saved (run it again to go on).

    A saved chunk is reused when it holds the same sentences, or more of them (a run asked for fewer sentences);
    one that holds fewer (a run asked for more) is made again, whole; one of other sentences is refused."""
    if not sources:
        raise InputError(code="corpus.empty")
    if decoding.forced and references is None:
        raise InputError(code="corpus.no_references")
    folder = Path(folder)
    prepared_folder(folder, {"format": FORMAT, "model": model_fingerprint(checkpoint), "decoding": vars(decoding),
                             "chunk": CHUNK})
    started, run = time.perf_counter(), CorpusRun(folder, total=len(sources))
    for number, start in enumerate(range(0, len(sources), CHUNK)):
        if should_stop is not None and should_stop():
            break
        asked = [(source, references[start + i] if references else None)
                 for i, source in enumerate(sources[start:start + CHUNK])]
        text_path, tensor_path = chunk_paths(folder, number)
        saved = saved_sentences(text_path)
        if saved[:len(asked)] != asked:
            if saved and saved != asked[:len(saved)]:
                differs = next(i for i, (held, wanted) in enumerate(zip(saved, asked)) if held != wanted)
                raise InputError(code="corpus.other_sentences", path=str(folder), first=start + differs + 1)
            save_chunk(text_path, tensor_path, *compute_chunk(checkpoint, [source for source, _ in asked],
                                                              references and [ref for _, ref in asked], decoding))
        add_chunk(run, text_path, tensor_path, len(asked))
        if progress is not None:
            progress(len(run.sentences), len(sources))
    run.seconds = time.perf_counter() - started
    return run


def saved_sentences(text_path: Path) -> list[tuple[str, str | None]]:
    """The (source, reference) pairs a saved chunk holds; none where it is not saved."""
    if not text_path.is_file():
        return []
    return [(record["source"], record["reference"]) for record in json.loads(text_path.read_text(encoding="utf-8"))]


def open_run(folder: str | Path) -> CorpusRun:
    """A run as saved: its chunks in order, as far as they go."""
    folder = Path(folder)
    if not (folder / RUN).is_file():
        raise InputError(code="corpus.no_run", path=str(folder))
    run, number = CorpusRun(folder), 0
    while chunk_paths(folder, number)[0].is_file():
        add_chunk(run, *chunk_paths(folder, number))
        number += 1
    run.total = len(run.sentences)
    return run


def add_chunk(run: CorpusRun, text_path: Path, tensor_path: Path, count: int | None = None) -> None:
    """A saved chunk's first ``count`` sentences (None: all) added to ``run``."""
    records = json.loads(text_path.read_text(encoding="utf-8"))[:count]
    tensors = load_file(tensor_path)
    for index, record in enumerate(records):
        run.sentences.append(CorpusSentence(**record))
        run.heads.append({kind: tensors[f"{index}.heads.{kind}"] for kind in KINDS})
        run.states.append({part: tensors[f"{index}.{part}"] for part in STATES})
        for kind in KINDS:
            run.unlike[kind] = run.unlike.get(kind, 0) + tensors[f"{index}.unlike.{kind}"]


def save_chunk(text_path: Path, tensor_path: Path, sentences: list[CorpusSentence], sums: list[SentenceSums],
               states: dict[str, Tensor]) -> None:
    tensors = dict(states)
    for index, sentence_sums_ in enumerate(sums):
        for kind in KINDS:
            tensors[f"{index}.heads.{kind}"] = sentence_sums_.heads[kind].contiguous()
            tensors[f"{index}.unlike.{kind}"] = sentence_sums_.unlike[kind].float().contiguous()
    written(tensor_path, safetensors_bytes(tensors))
    written(text_path, json.dumps([vars(sentence) for sentence in sentences], ensure_ascii=False).encode())


@torch.inference_mode()
def compute_chunk(checkpoint: Checkpoint, sources: list[str], references: list[str] | None, decoding: Decoding
                  ) -> tuple[list[CorpusSentence], list[SentenceSums], dict[str, Tensor]]:
    """One chunk's sentences, sums and states: one batched search (or forced pass), one recorded pass, one ALTI+
    decomposition of every block."""
    model = checkpoint.model
    translations = translated(checkpoint, sources, references, decoding)
    records = record_blocks(model, [t.source_ids for t in translations], [t.target_ids for t in translations])
    rollout = compose(*[blocks_of(model, records, kind) for kind in KINDS])[0][:, -1]    # (batch, steps, sources)
    specials = len(checkpoint.source_tokenizer.prefix_ids)
    sentences, sums, states = [], [], {}
    for row, (translation, reference) in enumerate(zip(translations, references or [None] * len(sources))):
        steps, keys = len(translation.target_ids), len(translation.source_ids)
        total = rollout[row, :steps, :keys]
        words = torch.arange(specials, keys - 1)
        alignment = words[total[alignable_rows(translation)][:, words].argmax(-1)] if len(words) else \
            torch.zeros(0, dtype=torch.long)
        sums.append(sentence_sums(translation, specials, alignment))
        sentences.append(CorpusSentence(
            source=translation.source_text, reference=reference, translation=translation.text,
            source_pieces=translation.source_pieces, target_pieces=translation.target_pieces,
            source_ids=translation.source_ids, target_ids=translation.target_ids,
            log_probability=translation.log_prob, source_shares=total.sum(-1).tolist(), ended=translation.ended,
            truncated=translation.truncated, forced_steps=translation.forced_steps, source_specials=specials))
        states[f"{row}.encoder"] = torch.stack([r.block_input[row, :keys] for r in records["encoder"]])
        states[f"{row}.decoder"] = torch.stack([r.block_input[row, :steps] for r in records["decoder"]])
        states[f"{row}.cross"] = torch.stack([r.block_input[row, :steps] for r in records["cross"]])
        states[f"{row}.memory"] = records["cross"][0].memory[row, :keys]
    return sentences, sums, {name: state.to(torch.float16).cpu().contiguous() for name, state in states.items()}


def translated(checkpoint: Checkpoint, sources: list[str], references: list[str] | None, decoding: Decoding
               ) -> list[Translation]:
    """The chunk's translations as ``decoding`` makes them: searched, or its references read teacher-forced."""
    if not decoding.forced:
        return checkpoint.translate_together(sources, decoding.beam, length_penalty=decoding.length_penalty)
    model, source_tokenizer = checkpoint.model, checkpoint.source_tokenizer
    target_tokenizer = checkpoint.target_tokenizer
    encoded = [encode_source(model, source_tokenizer, text) for text in sources]
    bodies = [target_tokenizer.encode(reference, add_eos=False) for reference in references]
    # A reference longer than the model's positions is read as far as they reach, and does not end there.
    whole = [len(body) <= model.config.max_len - 1 for body in bodies]
    translations = inspect_together(model, source_tokenizer, target_tokenizer, [ids for ids, _ in encoded], bodies,
                                    whole)
    for translation, text, (_, cut) in zip(translations, sources, encoded):
        translation.source_text, translation.truncated = text, cut
    return translations
