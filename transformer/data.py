"""Parallel text in, token batches out: Multi30K, your own corpus, synthetic tasks, and token-bucketed batching."""

from __future__ import annotations

import gzip
import hashlib
import logging
import os
import random
import urllib.error
import urllib.request
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from .errors import Explained, detail

log = logging.getLogger(__name__)

MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/{name}"
MULTI30K_SPLITS = ("train", "val", "test_2016_flickr")
MULTI30K_LANGS = ("en", "de", "fr", "cs")
# SHA-256 of the task-1 files as published by the dataset's repository.
MULTI30K_SHA256 = {
    "test_2016_flickr.cs.gz": "200a4a74cc9560f051924abb9803be008d1908d77f747e9141aeb86dfd2797f1",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
    "train.cs.gz": "a65adb8b32e3bc664f21ecba7a6e7f6950fd1f405e135f7c312faabdb6255077",
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "val.cs.gz": "b63226e05c4bd5dd6a42897d74b86a1b9d2c31498252c572b1ea7f7996927fcc",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
}


class DataError(Explained):
    """Input data that cannot be used, with a message meant for the person who supplied it."""


@dataclass
class ParallelCorpus:
    """Aligned sentence pairs, plus what was skipped on the way in and why."""

    sources: list[str]
    targets: list[str]
    skipped: int = 0
    problems: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.sources)


# --- files ---------------------------------------------------------------------------------------

MAX_TEXT_BYTES = 200 * 10**6  # far above Multi30K's largest file (about 4 MB of text)


def sha256_of(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_lines(path: str | Path, max_bytes: int = MAX_TEXT_BYTES) -> list[str]:
    """Lines of a UTF-8 text file, gzip-compressed or plain, without line endings.

    At most ``max_bytes`` of text are read, decompressed or not: a small gzip file can expand to gigabytes.
    """
    path = Path(path)
    if not path.is_file():
        if not path.exists():
            raise DataError(code="data.missing", path=str(path))
        raise DataError(code="data.not_a_file", path=str(path))
    with path.open("rb") as handle:
        compressed = handle.read(2) == b"\x1f\x8b"
    try:
        with (gzip.open(path, "rb") if compressed else path.open("rb")) as handle:
            raw = handle.read(max_bytes + 1)
    except (OSError, EOFError, zlib.error) as error:
        raise DataError(code="data.bad_gzip",
                        name=path.name, error=detail(error)) from None
    if len(raw) > max_bytes:
        megabytes = round(max_bytes / 1e6)
        if compressed:
            raise DataError(code="data.too_large_decompressed", name=path.name, megabytes=megabytes)
        raise DataError(code="data.too_large", name=path.name, megabytes=megabytes)
    if b"\x00" in raw[:8192]:
        raise DataError(code="data.binary", name=path.name)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise DataError(code="data.not_utf8", name=path.name,
                        byte=error.start) from None
    return text.splitlines()


# --- Multi30K ------------------------------------------------------------------------------------

def default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "transformer-explorer" / "multi30k"


def split_file(directory: Path, split: str, lang: str) -> Path | None:
    for name in (f"{split}.{lang}.gz", f"{split}.{lang}"):
        if (directory / name).is_file():
            return directory / name
    return None


def download_multi30k(cache_dir: str | Path | None = None, splits=MULTI30K_SPLITS, langs=("en", "de")) -> Path:
    """Fetch Multi30K task-1 files into ``cache_dir`` and check their SHA-256; skips files already verified."""
    cache_dir = Path(cache_dir or default_cache_dir())
    cache_dir.mkdir(parents=True, exist_ok=True)
    for split in splits:
        for lang in langs:
            name = f"{split}.{lang}.gz"
            target = cache_dir / name
            if target.is_file() and sha256_of(target) == MULTI30K_SHA256[name]:
                continue
            url = MULTI30K_URL.format(name=name)
            log.info("downloading %s", url)
            try:
                with urllib.request.urlopen(url, timeout=30) as response:
                    data = response.read()
            except (urllib.error.URLError, OSError) as error:
                raise DataError(code="data.download_failed", error=detail(error), name=name) from None
            if hashlib.sha256(data).hexdigest() != MULTI30K_SHA256[name]:
                raise DataError(code="data.checksum_mismatch", name=name)
            tmp = target.with_suffix(".part")
            tmp.write_bytes(data)
            tmp.replace(target)
    return cache_dir


def multi30k_dir(data_dir: str | Path | None = None, download: bool = True) -> Path:
    """The directory holding Multi30K: ``data_dir``, else $MULTI30K_DIR, else the download cache."""
    chosen = data_dir or os.environ.get("MULTI30K_DIR")
    if chosen:
        path = Path(chosen).expanduser()
        if not path.is_dir():
            raise DataError(code="data.no_multi30k_dir", path=str(path))
        return path
    if download:
        return download_multi30k()
    cache = default_cache_dir()
    if all((cache / f"{split}.{lang}.gz").is_file() for split in MULTI30K_SPLITS for lang in ("en", "de")):
        return cache  # downloaded earlier (by a training run), and checked then
    raise DataError(code="data.multi30k_not_found")


def load_multi30k(split: str, src_lang: str = "en", tgt_lang: str = "de",
                  data_dir: str | Path | None = None) -> ParallelCorpus:
    """One Multi30K split as a parallel corpus (reading .gz or plain text)."""
    if split not in MULTI30K_SPLITS:
        raise DataError(code="data.unknown_split", split=repr(split), splits=", ".join(MULTI30K_SPLITS))
    unknown = [lang for lang in dict.fromkeys((src_lang, tgt_lang)) if lang not in MULTI30K_LANGS]
    if len(unknown) == 1:
        raise DataError(code="data.unknown_language", missing=unknown[0], available=", ".join(MULTI30K_LANGS))
    if unknown:
        raise DataError(code="data.unknown_languages", first=unknown[0], second=unknown[1],
                        available=", ".join(MULTI30K_LANGS))
    if data_dir or os.environ.get("MULTI30K_DIR"):
        directory = multi30k_dir(data_dir)
        paths = [split_file(directory, split, lang) for lang in (src_lang, tgt_lang)]
        if None in paths:
            missing = [f"{split}.{lang}.gz" for lang, p in zip((src_lang, tgt_lang), paths) if p is None]
            raise DataError(code="data.missing_files",
                            directory=str(directory), files=", ".join(missing))
    else:  # fetched (or found already checked) in the cache: this split only, not the whole corpus
        directory = download_multi30k(splits=(split,), langs=(src_lang, tgt_lang))
        paths = [split_file(directory, split, lang) for lang in (src_lang, tgt_lang)]
    return load_parallel_files(*paths)


# --- your own data -------------------------------------------------------------------------------

MULTI30K_PREFIX = "multi30k:"


def corpus_sentences(spec: str, source_lang: str = "en", target_lang: str | None = None,
                     data_dir: str | Path | None = None) -> tuple[list[str], list[str] | None]:
    """The sentences to look at, and their references where the input has them: ``multi30k:SPLIT`` (the
    ``source_lang`` side, with the ``target_lang`` side as references where Multi30K has it), a ``.tsv`` of source
    and reference, or a text file of one sentence a line (blank lines skipped)."""
    if spec.startswith(MULTI30K_PREFIX):
        split = spec[len(MULTI30K_PREFIX):]
        if target_lang in MULTI30K_LANGS and target_lang != source_lang:
            corpus = load_multi30k(split, source_lang, target_lang, data_dir)
            return corpus.sources, corpus.targets
        corpus = load_multi30k(split, source_lang, source_lang, data_dir)
        return corpus.sources, None
    if Path(spec).suffix.lower() == ".tsv":
        corpus = load_parallel_tsv(spec)
        return corpus.sources, corpus.targets
    sentences = [line.strip() for line in read_lines(spec) if line.strip()]
    if not sentences:
        raise DataError(code="data.empty", name=Path(spec).name)
    return sentences, None


def _check_pairs(rows: list[tuple[int, str, str]], origin: str) -> ParallelCorpus:
    corpus = ParallelCorpus([], [])
    for line_number, source, target in rows:
        source, target = source.strip(), target.strip()
        if not source or not target:
            corpus.skipped += 1
            if len(corpus.problems) < 10:
                corpus.problems.append(f"{origin} line {line_number}: empty source or target")
            continue
        corpus.sources.append(source)
        corpus.targets.append(target)
    if not corpus.sources:
        raise DataError(code="data.no_usable_pairs", name=str(origin))
    return corpus


MIN_TRAINING_PAIRS = 20  # fewer leave no validation split worth the name


def load_training_tsv(path: str | Path) -> ParallelCorpus:
    """A parallel TSV to train on: ``load_parallel_tsv``, refused when too few pairs are usable."""
    corpus = load_parallel_tsv(path)
    if len(corpus) < MIN_TRAINING_PAIRS:
        raise _too_few_pairs(Path(path).name, len(corpus), corpus.skipped, corpus.problems)
    return corpus


def _too_few_pairs(name: str, count: int, skipped: int, problems: list[str]) -> DataError:
    """Why a TSV is too small to train on, one code for each way English counts its pairs and skipped rows."""
    needed, first = MIN_TRAINING_PAIRS, problems[0] if problems else ""
    if not problems:
        if count == 1:
            return DataError(code="data.too_few_pairs_one", name=name, needed=needed)
        return DataError(code="data.too_few_pairs", name=name, count=count, needed=needed)
    if count == 1 and skipped == 1:
        return DataError(code="data.too_few_pairs_one_skipped_one_row", name=name, needed=needed, first=first)
    if count == 1:
        return DataError(code="data.too_few_pairs_one_skipped", name=name, needed=needed, skipped=skipped,
                         first=first)
    if skipped == 1:
        return DataError(code="data.too_few_pairs_skipped_one_row", name=name, count=count, needed=needed,
                         first=first)
    return DataError(code="data.too_few_pairs_skipped", name=name, count=count, needed=needed,
                     skipped=skipped, first=first)


def load_parallel_tsv(path: str | Path) -> ParallelCorpus:
    """source<TAB>target per line (Tatoeba/Anki format; further columns such as attribution are ignored)."""
    path = Path(path)
    lines = read_lines(path)
    if not any(line.strip() for line in lines):
        raise DataError(code="data.empty", name=path.name)
    rows, bad, problems = [], 0, []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        columns = line.split("\t")
        if len(columns) < 2:
            bad += 1
            if len(problems) < 10:
                problems.append(f"{path.name} line {number}: no tab between source and target")
            continue
        rows.append((number, columns[0], columns[1]))
    if not rows:
        raise DataError(code="data.no_pairs", name=path.name)
    corpus = _check_pairs(rows, path.name)
    corpus.skipped += bad
    corpus.problems = problems + corpus.problems
    return corpus


def load_parallel_files(source_path: str | Path, target_path: str | Path) -> ParallelCorpus:
    """Two aligned text files, one sentence per line."""
    sources, targets = read_lines(source_path), read_lines(target_path)
    if len(sources) != len(targets):
        raise DataError(code="data.not_aligned",
                        source=Path(source_path).name, source_lines=len(sources), target=Path(target_path).name,
                        target_lines=len(targets))
    return _check_pairs([(i + 1, s, t) for i, (s, t) in enumerate(zip(sources, targets))], Path(source_path).name)


# --- synthetic tasks -----------------------------------------------------------------------------

SYNTHETIC_TASKS = ("copy", "reverse", "sort")
SYNTHETIC_ALPHABET = "0123456789"


def synthetic_pair(task: str, rng: random.Random, min_length: int = 3, max_length: int = 10) -> tuple[str, str]:
    """One example: a random digit sequence and its copy, reversal or sorted version (space-separated)."""
    symbols = [rng.choice(SYNTHETIC_ALPHABET) for _ in range(rng.randint(min_length, max_length))]
    if task == "copy":
        target = symbols
    elif task == "reverse":
        target = symbols[::-1]
    elif task == "sort":
        target = sorted(symbols)
    else:
        raise DataError(code="data.unknown_task", task=repr(task), tasks=", ".join(SYNTHETIC_TASKS))
    return " ".join(symbols), " ".join(target)


def synthetic_corpus(task: str, size: int, seed: int = 0, min_length: int = 3, max_length: int = 10) -> ParallelCorpus:
    rng = random.Random(seed)
    pairs = [synthetic_pair(task, rng, min_length, max_length) for _ in range(size)]
    return ParallelCorpus([s for s, _ in pairs], [t for _, t in pairs])


# --- batching ------------------------------------------------------------------------------------

Example = tuple[list[int], list[int]]


def filter_by_length(examples: list[Example], max_length: int) -> tuple[list[Example], int]:
    """Drop empty pairs and those that would not fit ``max_length`` positions.

    Examples hold ids ending in eos; the decoder reads bos + the target
    without its eos, so both sides need ``len(ids)`` positions.
    """
    kept = [ex for ex in examples if 1 < len(ex[0]) <= max_length and 1 < len(ex[1]) <= max_length]
    return kept, len(examples) - len(kept)


def token_batches(examples: list[Example], max_tokens: int, seed: int = 0, epoch: int = 0,
                  shuffle: bool = True) -> list[list[int]]:
    """Indices of examples grouped so each batch holds at most ``max_tokens`` padded tokens.

    Similar lengths go together (sorted by target then source length, after a
    seeded shuffle that breaks ties differently each epoch), so little compute
    is spent on padding; the batch order is shuffled too.
    """
    rng = random.Random(seed * 1_000_003 + epoch)
    order = list(range(len(examples)))
    if shuffle:
        rng.shuffle(order)
    order.sort(key=lambda i: (len(examples[i][1]), len(examples[i][0])))
    batches, current, longest = [], [], 0
    for i in order:
        length = max(len(examples[i][0]), len(examples[i][1]))
        if current and (len(current) + 1) * max(longest, length) > max_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, length)
    if current:
        batches.append(current)
    if shuffle:
        rng.shuffle(batches)
    return batches
