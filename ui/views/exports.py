"""Downloads of a translation's attention (JSON, CSV, NPZ) and of figures (SVG), each in a fresh directory."""

from __future__ import annotations

import csv
import itertools
import json
import shutil
import tempfile
import time
from pathlib import Path

import plotly.graph_objects as go

from transformer.errors import InputError
from transformer.paper.translation import Translation

from ..runtime.language import message
from .choices import ATTENTION_KINDS
from .translate import attention_axes, attention_tensor

EXPORT_ROOT = Path(tempfile.gettempdir()) / "transformer-explorer-exports"
EXPORT_LIFETIME_S = 3600


def fresh_export_directory() -> str:
    """A new directory for one download; those older than an hour are removed, so exports never pile up."""
    EXPORT_ROOT.mkdir(parents=True, exist_ok=True)
    cutoff = time.time() - EXPORT_LIFETIME_S
    for old in EXPORT_ROOT.iterdir():
        try:
            if old.stat().st_mtime < cutoff:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass
    return tempfile.mkdtemp(dir=EXPORT_ROOT)


def attention_json_file(translation: Translation, directory: str | None = None) -> str:
    """Write the current translation's raw attention (the --json contract) to a file for download."""
    directory = directory or fresh_export_directory()
    path = Path(directory) / "attention.json"
    payload = translation.to_json()
    payload["predicted_tokens"] = translation.predicted_pieces
    payload["token_probabilities"] = translation.token_probs
    path.write_text(json.dumps(payload, ensure_ascii=False))
    return str(path)


def attention_csv_file(translation: Translation, directory: str | None = None) -> str:
    """Every attention weight of a translation in long format (one row per layer, head, query, key); its columns
    are named in English in every language, as a data file's are (scripts read them)."""
    directory = directory or fresh_export_directory()
    path = Path(directory) / "attention.csv"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["attention", "layer", "head", "query", "key", "query_token", "key_token", "weight"])
        for kind in ATTENTION_KINDS:
            weights = attention_tensor(translation, kind)
            rows, columns, _, _ = attention_axes(translation, kind)
            for (layer, head, query, key), weight in zip(itertools.product(*(range(n) for n in weights.shape)),
                                                          weights.flatten().tolist()):
                writer.writerow([kind, layer + 1, head + 1, query, key, rows[query], columns[key], f"{weight:.6f}"])
    return str(path)


def attention_npz_file(translation: Translation, directory: str | None = None) -> str:
    """The three attention tensors and the token lists as a NumPy archive."""
    import numpy as np

    directory = directory or fresh_export_directory()
    path = Path(directory) / "attention.npz"
    np.savez_compressed(path, encoder=translation.encoder_attention.numpy(),
                        decoder=translation.decoder_attention.numpy(), cross=translation.cross_attention.numpy(),
                        source_tokens=np.array(translation.source_pieces),
                        target_tokens=np.array(translation.target_pieces),
                        predicted_tokens=np.array(translation.predicted_pieces))
    return str(path)


def figure_svg_file(figure: go.Figure, name: str = "figure") -> str:
    """An SVG of a figure (rendered server-side by kaleido, which needs a Chromium on the server)."""
    path = Path(fresh_export_directory()) / f"{name}.svg"
    try:
        figure.write_image(str(path), format="svg", width=1100, height=figure.layout.height or 600)
    except Exception as error:  # kaleido missing or no browser for it
        raise InputError(message("translate.svg_unavailable", error=type(error).__name__)) from None
    return str(path)
