"""Sentences that ship with the app, for the views computed over a sample (head ranking, head statistics).

The English ones are captions written for this project (``assets/sample_sentences.en.txt``), so these
views work offline and without Multi30K; digit models get fresh task examples.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from transformer import data as datasets
from transformer.errors import InputError
from transformer.files.checkpoint import Checkpoint

from ..runtime.language import message

SAMPLE_FILE = Path(__file__).resolve().parents[2] / "assets" / "sample_sentences.en.txt"
SAMPLE_SIZE = 20  # sentences a view over the sample reads: enough for a stable mean, quick enough for a class
# Minimal pairs for activation patching (English sources: the bundled models'): a pronoun, a gender the German
# adjective agrees with, who gives to whom, an adjective. The first is the patching panel's placeholder and a
# lesson's pair.
MINIMAL_PAIRS = (("The doctor said that she was tired.", "The doctor said that he was tired."),
                 ("A little girl is climbing a tree.", "A little boy is climbing a tree."),
                 ("The boy gives the girl a ball.", "The girl gives the boy a ball."),
                 ("The old man is reading a newspaper.", "The young man is reading a newspaper."))


@lru_cache(maxsize=1)
def english_samples() -> tuple[str, ...]:
    lines = SAMPLE_FILE.read_text(encoding="utf-8").splitlines()
    return tuple(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def sample_sentences(checkpoint: Checkpoint, count: int = SAMPLE_SIZE) -> list[str]:
    """``count`` sentences this model reads: task examples for a digits model, else the English samples."""
    task = checkpoint.info.get("training", {}).get("data")
    if task in datasets.SYNTHETIC_TASKS:
        return datasets.synthetic_corpus(task, count, seed=4242).sources
    source = checkpoint.info.get("source_lang", "en")
    if source != "en":
        raise InputError(message("common.samples_not_english", source=repr(source)))
    return list(english_samples()[:count])
