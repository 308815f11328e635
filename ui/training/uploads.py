"""A visitor's training file, checked before anything reads it as sentences: its size, compressed and as text, then
its lines (each problem named, in the page's language)."""

from __future__ import annotations

from pathlib import Path

from transformer import data as datasets

from ..runtime.language import Number, message

MAX_UPLOAD_BYTES = 5 * 1024 * 1024
MAX_UPLOAD_TEXT_BYTES = 20 * 10**6  # what an upload may decompress to
MAX_UPLOAD_LINES = 200_000
MAX_UPLOAD_LINE_CHARS = 2_000


def read_upload(path: str | Path, limit: int = MAX_UPLOAD_BYTES) -> datasets.ParallelCorpus:
    """Check an uploaded parallel TSV: size first (compressed and as text), then rows (errors name the problem).

    A gzip upload may hold at most ``MAX_UPLOAD_TEXT_BYTES`` of text, and no line may be longer than
    ``MAX_UPLOAD_LINE_CHARS``: a sentence pair is a line or two of a caption, not a megabyte.
    """
    path = Path(path)
    size = path.stat().st_size
    if size > limit:
        raise datasets.DataError(message("train.error.upload_too_big", file=path.name, size=Number(size / 1e6, ".1f"),
                                         limit=Number(limit / 1e6, ".0f")))
    lines = datasets.read_lines(path, MAX_UPLOAD_TEXT_BYTES)
    if len(lines) > MAX_UPLOAD_LINES:
        raise datasets.DataError(message("train.error.too_many_lines", file=path.name, lines=Number(len(lines), ","),
                                         limit=Number(MAX_UPLOAD_LINES, ",")))
    longest = max(range(len(lines)), key=lambda i: len(lines[i]), default=None)
    if longest is not None and len(lines[longest]) > MAX_UPLOAD_LINE_CHARS:
        raise datasets.DataError(message("train.error.line_too_long", line=longest + 1, file=path.name,
                                         chars=Number(len(lines[longest]), ","),
                                         limit=Number(MAX_UPLOAD_LINE_CHARS, ",")))
    return datasets.load_training_tsv(path)
