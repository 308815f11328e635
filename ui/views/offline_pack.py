"""The Model tab's "Download for offline use": the model shown, as the offline pack ``python -m transformer.pack``
makes (docs/offline-pack.md), zipped. It is made in the costly worker and kept, so that the same weights packed by
the same code are packed once: a second visitor asking for it gets the zip at once."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from transformer.errors import InputError
from transformer.files.checkpoint import Checkpoint
from transformer.inside.corpus_run import model_fingerprint
from transformer.pack import archive_of, make_pack, pack_version

from ..runtime.language import message
from .pack_lessons import pack_lessons

PACKS_KEPT = 4  # zips kept on disk; the least recently asked for goes first
MAKING = ".making-"  # a pack being made, in the folder of packs
# Where the packs are kept: a folder Gradio serves files from (its own temporary directory's parent), as the
# Analysis tab's exports are.
PACKS = Path(tempfile.gettempdir()) / "transformer-explorer-packs"


def pack_key(checkpoint: Checkpoint) -> str:
    """What names a pack: the model's weights and config, and the version of the code that packs them."""
    return f"{model_fingerprint(checkpoint)[:32]}-{pack_version()[:12]}"


def offline_archive(checkpoint: Checkpoint, folder: Path) -> Path:
    """The zip of ``checkpoint``'s pack, kept in ``folder`` (made there unless a pack of the same key is)."""
    if checkpoint.path is None:
        raise InputError(message("model.offline.unsaved"))
    kept = folder / pack_key(checkpoint) / f"{checkpoint.name}-offline.zip"
    if kept.is_file():
        os.utime(kept)  # asked for: the last to be dropped
        return kept
    folder.mkdir(parents=True, exist_ok=True)
    for stopped in folder.glob(f"{MAKING}*"):  # one made at a time: any other was stopped half-way (Stop)
        shutil.rmtree(stopped, ignore_errors=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=MAKING) as making:
        pack = make_pack([Path(checkpoint.path)], Path(making) / f"{checkpoint.name}-offline", zipped=True,
                         lessons=pack_lessons)
        kept.parent.mkdir(exist_ok=True)
        os.replace(archive_of(pack), kept)  # whole or not at all
    _drop_oldest(folder)
    return kept


def _drop_oldest(folder: Path) -> None:
    packs = sorted((zipped for zipped in folder.glob("*/*.zip")), key=lambda path: path.stat().st_mtime)
    for old in packs[:-PACKS_KEPT]:
        shutil.rmtree(old.parent, ignore_errors=True)
