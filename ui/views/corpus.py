"""The Corpus tab's logic: which sentences a model's corpus holds, where its run is kept, and what each view shows
of it: every head at a glance, a head's queries and keys, the corpus's tokens nearest to one, the sentences that
owe least to their source. The run is ``transformer/inside/corpus_run.py``; what each figure measures,
docs/corpus.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import torch
from torch import Tensor

from transformer import data as datasets
from transformer.errors import InputError
from transformer.files.checkpoint import Checkpoint
from transformer.inside.contributions import record_blocks
from transformer.inside.corpus_run import CorpusRun, Decoding, model_fingerprint, open_run, run_corpus
from transformer.inside.head_roles import head_roles
from transformer.inside.head_space import HeadSpace, Place, head_space, nearest_tokens, query_and_key_inputs
from transformer.inside.one_head import KINDS, block_modules
from transformer.paper.translation import Translation

from ..drawing import corpus as drawing
from ..runtime import settings
from ..runtime.language import ENGLISH, Message, Number, message, percent, said, text
from ..runtime.numbers import clamp
from .choices import require_translation
from .samples import sample_sentences

DEFAULT_SPLIT = "test_2016_flickr"   # the model's Multi30K test sentences (the first EXPLORER_CORPUS_SENTENCES)
SAMPLE_SENTENCES = 64                # else the app's own sample sentences, all of them
MAX_SENTENCES = 500                  # an upload's rows: a run of about 20 s on the bundled model, 41 MB on disk
MAX_FILE_BYTES = 1_000_000           # and its size: 500 rows of 2,000 characters
MAX_SENTENCE_CHARS = 2_000           # a sentence is a line or two of a caption, not a page
KEPT_OPEN = 4                        # runs the server holds in memory (about 16 MB each for 200 sentences)
SPACES_KEPT = 8                      # heads' projections kept per run
NEIGHBOURS = 10                      # nearest tokens a search lists
MOST_POINTS = 1_200                  # of a head's queries, and of its keys, drawn: a click drawn within 0.3 s
                                     # (docs/corpus.md); the projection is of them all
CONTEXT_PIECES = 3                   # pieces either side of a token in its hover and in a table
SHOWN_CHARS = 90                     # of a sentence in a table's cell
FOLDER = "corpus"                    # under the app's runs folder: one folder per model and corpus
RUNS_KEPT = 20                       # runs kept on disk, the last made or used (at most about 0.8 GB)


@dataclass(frozen=True)
class Corpus:
    """The sentences a run reads, what the page calls them, and their references where given."""

    name: Message
    sources: tuple[str, ...]
    references: tuple[str, ...] | None = None


def default_corpus(checkpoint: Checkpoint) -> Corpus:
    """What the tab opens on: the first ``EXPLORER_CORPUS_SENTENCES`` of Multi30K's test set in the model's
    languages where this machine has Multi30K and the model reads one of them, else the app's own sample sentences."""
    source, target = checkpoint.direction
    if source in datasets.MULTI30K_LANGS:
        try:  # never a download: a page opens on what this machine has
            sources, references = datasets.corpus_sentences(datasets.MULTI30K_PREFIX + DEFAULT_SPLIT, source, target,
                                                            datasets.multi30k_dir(download=False))
        except datasets.DataError:
            pass
        else:
            count = settings.value("EXPLORER_CORPUS_SENTENCES")
            sources, references = sources[:count], references and references[:count]
            return Corpus(message("corpus.name.multi30k", count=len(sources), split=DEFAULT_SPLIT), tuple(sources),
                          references and tuple(references))
    samples = sample_sentences(checkpoint, SAMPLE_SENTENCES)
    return Corpus(message("corpus.name.samples", count=len(samples)), tuple(samples))


def uploaded_corpus(path: str | Path) -> Corpus:
    """A visitor's file: a ``.tsv`` of sentence and reference a line, or a text file of one sentence a line; its
    size and rows within the tab's limits, each named where it is not."""
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise InputError(message("corpus.error.too_big", file=path.name, size=Number(size / 1e6, ".1f"),
                                 limit=Number(MAX_FILE_BYTES / 1e6, ".0f")))
    datasets.read_lines(path, MAX_FILE_BYTES)  # its text too: a small gzip file can expand to gigabytes
    sources, references = datasets.corpus_sentences(str(path))
    longest = max(range(len(sources)), key=lambda index: len(sources[index]))
    if len(sources[longest]) > MAX_SENTENCE_CHARS:
        raise InputError(message("corpus.error.too_long", file=path.name, sentence=longest + 1,
                                 chars=Number(len(sources[longest]), ","), limit=Number(MAX_SENTENCE_CHARS, ",")))
    if len(sources) > MAX_SENTENCES:
        raise InputError(message("corpus.error.too_many", file=path.name, count=Number(len(sources), ","),
                                 limit=Number(MAX_SENTENCES, ",")))
    return Corpus(message("corpus.name.upload", file=path.name, count=len(sources)), tuple(sources),
                  references and tuple(references))


def run_folder(runs_dir: Path, checkpoint: Checkpoint, corpus: Corpus) -> Path:
    """Where a model's run of a corpus is kept: one folder per model (by its fingerprint) and sentences, so the
    tab opens a run made before, by any visitor, at once."""
    digest = hashlib.sha256(model_fingerprint(checkpoint).encode())
    digest.update(json.dumps([corpus.sources, corpus.references], ensure_ascii=False).encode())
    return Path(runs_dir) / FOLDER / digest.hexdigest()[:24]


def prune_runs(runs_dir: Path, corpora: "OpenCorpora", kept: int = RUNS_KEPT) -> list[Path]:
    """The oldest runs removed past the ``kept`` last made or used, never one the server holds open: a public
    server's uploads would otherwise fill its disk (each run a cache, made again when asked for). The ones removed."""
    folder = Path(runs_dir) / FOLDER
    runs = sorted((path for path in folder.iterdir() if path.is_dir()), key=lambda path: path.stat().st_mtime,
                  reverse=True) if folder.is_dir() else []
    removed = [path for path in runs[kept:] if corpora.held(path) is None]
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
    return removed


def is_complete(folder: Path, corpus: Corpus, corpora: "OpenCorpora | None" = None) -> bool:
    """Whether ``folder`` holds the whole run of ``corpus`` (else a run computes, or resumes, what is missing):
    as ``corpora`` holds it open, else as saved."""
    held = corpora.held(folder) if corpora is not None else None
    if held is not None and len(held.run.sentences) == len(corpus.sources):
        return True
    try:
        return len(open_run(folder).sentences) == len(corpus.sources)
    except (InputError, OSError, ValueError):
        return False


def run_in_folder(checkpoint: Checkpoint, corpus: Corpus, folder: str, progress=None) -> int:
    """The corpus run (or its missing chunks) in ``folder``, as ``python -m transformer.corpus`` makes it; how many
    sentences it holds. Runs in the worker process (ui/runtime/worker.py): only the count comes back."""
    run = run_corpus(checkpoint, list(corpus.sources), corpus.references and list(corpus.references), folder,
                     Decoding.default(checkpoint), progress=progress)
    return len(run.sentences)


@dataclass
class OpenCorpus:
    """A run as the tab reads it, held in the server's memory: its figures computed once, a few heads' projections
    and layers' states kept."""

    run: CorpusRun
    spaces: OrderedDict = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @cached_property
    def roles(self) -> list[dict]:
        return [role.to_json() for role in head_roles(self.run.heads, self.run.unlike)] if self.run.heads else []

    @cached_property
    def least_source(self) -> list[int]:
        return sorted(range(len(self.run.sentences)), key=lambda index: self.run.sentences[index].source_share)

    def space(self, model, kind: str, layer: int, head: int) -> HeadSpace:
        with self.lock:
            if (kind, layer, head) not in self.spaces:
                self.spaces[kind, layer, head] = head_space(self.run, model, kind, layer, head)
                while len(self.spaces) > SPACES_KEPT:
                    self.spaces.popitem(last=False)
            self.spaces.move_to_end((kind, layer, head))
            return self.spaces[kind, layer, head]

    def query_states(self, kind: str, layer: int) -> tuple[Tensor, list[Place]]:
        """What every query of a ``kind`` block in ``layer`` was projected from, over the corpus, with its place."""
        key = ("states", kind, layer)
        with self.lock:
            if key not in self.spaces:
                states, places = [], []
                for number, sentence in enumerate(self.run.sentences):
                    states.append(query_and_key_inputs(self.run, kind, layer, number)[0])
                    pieces = sentence.source_pieces if kind == "encoder" else sentence.target_pieces
                    places += [Place(number, position, piece) for position, piece in enumerate(pieces)]
                self.spaces[key] = torch.cat(states).float(), places
            return self.spaces[key]


class OpenCorpora:
    """The runs the server holds open, the last used kept (``KEPT_OPEN``)."""

    def __init__(self, kept: int = KEPT_OPEN):
        self.kept, self.runs, self.lock = kept, OrderedDict(), threading.Lock()

    def get(self, folder: str | Path) -> OpenCorpus:
        folder = str(folder)
        with self.lock:
            if folder not in self.runs:
                self.runs[folder] = OpenCorpus(open_run(folder))
                os.utime(folder)  # used now: the last to go (prune_runs)
                while len(self.runs) > self.kept:
                    self.runs.popitem(last=False)
            self.runs.move_to_end(folder)
            return self.runs[folder]

    def held(self, folder: str | Path) -> OpenCorpus | None:
        """The run of ``folder`` if it is open, without opening it."""
        with self.lock:
            return self.runs.get(str(folder))

    def forget(self, folder: str | Path) -> None:
        """A run that has changed on disk, to be read again."""
        with self.lock:
            self.runs.pop(str(folder), None)


# --- what the views show ------------------------------------------------------------------------------

def status_text(name: Message, opened: OpenCorpus, total: int, language: str = ENGLISH) -> str:
    run = opened.run
    done = len(run.sentences)
    key = "corpus.status.done" if done == total else "corpus.status.partial"
    return text(language, key, name=said(name, language), done=Number(done, ","), total=Number(total, ","),
                megabytes=Number(run.bytes / 1e6, ".1f"))


def heads_figure(opened: OpenCorpus, model_name: str, language: str = ENGLISH):
    return drawing.heads_map(opened.roles, KINDS, text(language, "corpus.map.title", model=model_name,
                                                       count=Number(len(opened.run.sentences), ",")),
                             language)


def heads_rows(opened: OpenCorpus, language: str = ENGLISH) -> list[list]:
    """A row per head: what names its role, and the example sentences where it does it most."""
    def share(value):  # a figure its kind has not: an empty cell
        return "" if value is None else round(100 * value, 1)
    return [[text(language, f"map.kind.{role['kind']}"), role["layer"], role["head"],
             drawing.role_name(role["role"], language), share(role["previous"]), share(role["same"]),
             share(role["next"]), share(role["special"]), share(role["aligned"]), share(role["spread"]),
             round(role["confidence"], 3),
             f"{role['most_alike']['layer']}.{role['most_alike']['head']}" if role["most_alike"] else "",
             " | ".join(shortened(opened.run.sentences[index - 1].source) for index in role["examples"])]
            for role in opened.roles]


HEADS_HEADERS = tuple(f"corpus.header.{name}" for name in (
    "kind", "layer", "head", "role", "previous", "same", "next", "special", "aligned", "spread", "confidence",
    "most_alike", "examples"))
LEAST_HEADERS = tuple(f"corpus.header.{name}" for name in (
    "sentence", "source_share", "log_probability", "lowest_step", "source", "translation"))
NEIGHBOUR_HEADERS = tuple(f"corpus.header.{name}" for name in (
    "similarity", "token", "sentence", "in_context", "looks_at", "weight"))


def headers(keys, language: str = ENGLISH) -> list[str]:
    return [text(language, key) for key in keys]


def shortened(sentence: str, most: int = SHOWN_CHARS) -> str:
    return sentence if len(sentence) <= most else sentence[:most - 1] + "…"


def lowest_step(sentence) -> int:
    """The step (from 1) whose token owes least to the source."""
    shares = sentence.source_shares
    return min(range(len(shares)), key=shares.__getitem__) + 1


def least_rows(opened: OpenCorpus) -> list[list]:
    """Every sentence by its source share, lowest first: its number (from 1), share (%), log-probability, its
    lowest-share step, source and translation."""
    sentences = opened.run.sentences
    return [[index + 1, round(100 * sentences[index].source_share, 1), round(sentences[index].log_probability, 2),
             lowest_step(sentences[index]), sentences[index].source, sentences[index].translation]
            for index in opened.least_source]


def in_context(pieces: list[str], position: int, around: int = CONTEXT_PIECES) -> str:
    """A token among its neighbours, itself in brackets."""
    start, end = max(0, position - around), min(len(pieces), position + around + 1)
    shown = [f"[{piece}]" if index == position else piece for index, piece in enumerate(pieces[start:end], start)]
    return ("… " if start else "") + " ".join(shown) + (" …" if end < len(pieces) else "")


def pieces_of(opened: OpenCorpus, place: Place, side: str) -> list[str]:
    sentence = opened.run.sentences[place.sentence]
    return sentence.source_pieces if side == "source" else sentence.target_pieces


def head_choice(checkpoint: Checkpoint, kind: str, layer, head) -> tuple[str, int, int]:
    """A head the model has: its kind's key, layer and head (from 1), each checked."""
    if kind not in KINDS:
        raise InputError(message("corpus.error.kind", kind=str(kind)))
    config = checkpoint.model.config
    layers = config.n_encoder_layers if kind == "encoder" else config.n_decoder_layers
    return (kind, clamp(layer, 1, layers, message("corpus.name.layer")),
            clamp(head, 1, config.n_heads, message("corpus.name.head")))


def evenly(count: int, most: int) -> list[int]:
    """``most`` indices spread evenly over ``count`` (all of them where there are no more)."""
    if count <= most:
        return list(range(count))
    return [round(index * (count - 1) / (most - 1)) for index in range(most)]


def space_figure(opened: OpenCorpus, checkpoint: Checkpoint, kind: str, layer: int, head: int, colour_by: str,
                 language: str = ENGLISH):
    """A head's queries and keys over the corpus in one picture (``head_space``: projected together, all of them),
    at most ``MOST_POINTS`` of each drawn, spread evenly over the corpus; each point's customdata is
    ``[sentence, step]`` (from 1): where a click opens it."""
    space = opened.space(checkpoint.model, kind, layer, head)
    query_side = "source" if kind == "encoder" else "target"
    key_side = "target" if kind == "decoder" else "source"
    queries = evenly(len(space.query_places), MOST_POINTS)
    keys = evenly(len(space.key_places), MOST_POINTS)
    places = [(space.query_places[index], query_side) for index in queries] + \
             [(space.key_places[index], key_side) for index in keys]
    rows = [*queries, *(len(space.query_places) + index for index in keys)]
    hovers, positions, tokens, opens = [], [], [], []
    for place, side in places:
        pieces = pieces_of(opened, place, side)
        hovers.append(text(language, "corpus.space.hover", token=drawing.escape(place.piece),
                           sentence=place.sentence + 1, context=drawing.escape(in_context(pieces, place.position))))
        positions.append(place.position / max(1, len(pieces) - 1))
        tokens.append(place.piece)
        step = place.position + 1 if side == "target" else 1
        opens.append([place.sentence + 1, min(step, len(opened.run.sentences[place.sentence].target_pieces))])
    counts = {"kind": text(language, f"map.kind.{kind}"), "layer": layer, "head": head,
              "queries": Number(len(space.query_places), ","), "keys": Number(len(space.key_places), ",")}
    title = text(language, "corpus.space.title", **counts) if len(places) == len(space.points) else \
        text(language, "corpus.space.title_drawn", shown_queries=Number(len(queries), ","),
             shown_keys=Number(len(keys), ","), **counts)
    return drawing.queries_and_keys(space.points[rows].tolist(), len(queries), hovers, positions, tokens, opens,
                                    colour_by, title, language)


def token_choices(translation: Translation | None, language: str = ENGLISH) -> list[tuple[str, str]]:
    """The last translation's tokens, each labelled with its place and valued by it: the source's, whose states an
    encoder head's queries come from, then the decoder's inputs (a step's token, ``<s>`` first), a decoder or
    cross-attention head's."""
    if translation is None:
        return []
    return [*((text(language, "corpus.search.source_token", position=index + 1, token=piece), f"source:{index}")
              for index, piece in enumerate(translation.source_pieces)),
            *((text(language, "corpus.search.step_token", step=index + 1, token=piece), f"target:{index}")
              for index, piece in enumerate(translation.target_pieces))]


@torch.inference_mode()
def token_state(checkpoint: Checkpoint, translation: Translation, kind: str, layer: int, position: int) -> Tensor:
    """What a ``kind`` block of ``layer`` projected the query at ``position`` from, in the last translation."""
    records = record_blocks(checkpoint.model, [translation.source_ids], [translation.target_ids])
    return records[kind][layer - 1].block_input[0, position].float().cpu()


def chosen_token(translation: Translation | None, kind: str, value) -> int:
    """The position a token choice names, on the side a ``kind`` head's queries are on; none chosen, that side's
    first word piece (the source's first, the translation's first after ``<s>``)."""
    require_translation(translation)
    if not value:
        return 0 if kind == "encoder" else min(1, len(translation.target_pieces) - 1)
    side, _, position = str(value).partition(":")
    pieces = translation.source_pieces if kind == "encoder" else translation.target_pieces
    if side != ("source" if kind == "encoder" else "target") or not position.isdigit() or \
            int(position) >= len(pieces):
        raise InputError(message("corpus.error.token_encoder" if kind == "encoder" else "corpus.error.token_target"))
    return int(position)


@torch.inference_mode()
def looks_at(opened: OpenCorpus, checkpoint: Checkpoint, kind: str, layer: int, head: int, place: Place
             ) -> tuple[str, float]:
    """Where the head looks from a corpus token: the key it weighs most, and that weight."""
    attention, _ = block_modules(checkpoint.model, kind, layer)
    queries_from, keys_from = query_and_key_inputs(opened.run, kind, layer, place.sentence)
    d_model, d_head = attention.d_model, attention.d_model // attention.n_heads
    columns = slice((head - 1) * d_head, head * d_head)
    dtype, device = attention.in_proj.weight.dtype, attention.in_proj.weight.device
    query = attention.project_rows(queries_from[place.position].to(device, dtype), slice(0, d_model))[columns]
    keys = attention.project_rows(keys_from.to(device, dtype), slice(d_model, 2 * d_model))[:, columns]
    scores = (keys.float() @ query.float()) / d_head ** 0.5
    if kind == "decoder":
        scores[place.position + 1:] = -torch.inf
    weights = scores.softmax(-1)
    best = int(weights.argmax())
    key_pieces = pieces_of(opened, Place(place.sentence, best, ""), "target" if kind == "decoder" else "source")
    return key_pieces[best], float(weights[best])


def nearest_rows(opened: OpenCorpus, checkpoint: Checkpoint, translation: Translation | None, kind: str, layer: int,
                 head: int, token, count: int = NEIGHBOURS) -> list[list]:
    """The corpus's tokens whose states entering the head's block point most nearly the way the chosen token's
    does (``nearest_tokens``), each with its sentence and where the head looks from it."""
    position = chosen_token(translation, kind, token)
    states, places = opened.query_states(kind, layer)
    mine = token_state(checkpoint, translation, kind, layer, position)
    side = "source" if kind == "encoder" else "target"
    rows = []
    stacked = torch.cat([states, mine[None]])
    pieces = translation.source_pieces if side == "source" else translation.target_pieces
    asked = Place(-1, position, pieces[position])
    for neighbour in nearest_tokens(stacked, [*places, asked], asked, count):
        place = neighbour.place
        piece, weight = looks_at(opened, checkpoint, kind, layer, head, place)
        rows.append([round(neighbour.similarity, 3), place.piece, place.sentence + 1,
                     in_context(pieces_of(opened, place, side), place.position), piece, round(weight, 3)])
    return rows


def opening(opened: OpenCorpus, sentence, step=None) -> tuple[str, int, int]:
    """A corpus sentence (from 1) to open in Translate: its text, its number and its step (the one given, else its
    lowest-share step), each as checked."""
    sentences = opened.run.sentences
    number = clamp(sentence, 1, len(sentences), message("corpus.name.sentence"))
    chosen = sentences[number - 1]
    steps = max(1, len(chosen.source_shares))
    return chosen.source, number, lowest_step(chosen) if step in (None, "", 0) else clamp(
        step, 1, steps, message("corpus.name.step"))


def the_shares(opened: OpenCorpus) -> tuple[float, float, float]:
    """The corpus's lowest, mean and highest source share."""
    shares = [sentence.source_share for sentence in opened.run.sentences]
    return min(shares), sum(shares) / len(shares), max(shares)


def least_note(opened: OpenCorpus, language: str = ENGLISH) -> str:
    lowest, mean, highest = the_shares(opened)
    return text(language, "corpus.least.summary", lowest=said(percent(lowest), language),
                mean=said(percent(mean), language), highest=said(percent(highest), language))
