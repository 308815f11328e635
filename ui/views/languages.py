"""One sentence into several languages at once, on a multilingual model: each translation, where its last layer
looked in the source, and each of its words aligned to the source word it looked at most."""

from __future__ import annotations

import plotly.graph_objects as go

from transformer.errors import InputError
from transformer.files.checkpoint import Checkpoint
from transformer.inside import analysis

from .. import figures
from ..runtime.language import ENGLISH, message
from ..runtime.language import text as words
from .text import clean_text
from .translate import one_map

MOST_LANGUAGES = 4  # side by side, each map stays readable on a classroom projector
LANGUAGES_HEADERS = ("languages.header.language", "languages.header.translation", "languages.header.aligned")


def chosen_languages(checkpoint: Checkpoint, targets) -> list[str]:
    """The target languages asked for, checked: one to four of this model's."""
    if checkpoint.languages is None:
        raise InputError(message("languages.one_pair", name=checkpoint.name))
    targets = [str(code) for code in (targets or [])]
    if not targets:
        raise InputError(message("languages.none_chosen"))
    if len(targets) > MOST_LANGUAGES:
        raise InputError(message("languages.too_many", most=MOST_LANGUAGES, chosen=len(targets)))
    for code in targets:
        checkpoint.languages.check(code)
    return targets


def many_languages_view(checkpoint: Checkpoint, text: str, targets, language: str = ENGLISH
                        ) -> tuple[go.Figure, list[list[str]]]:
    """(the maps side by side, a row per language: its code, its translation, its words aligned), in ``language``."""
    targets = chosen_languages(checkpoint, targets)
    cleaned, _ = clean_text(text)
    panels, rows = [], []
    for code, translation in zip(targets, checkpoint.translate_into(cleaned, targets)):
        forced = translation.forced_steps  # the language token itself: chosen by nobody, aligned to nothing
        weights, _ = one_map(translation, "cross", translation.cross_attention.shape[0], None)
        merged, target_words, source_words = analysis.word_attention(
            weights[forced:], translation.predicted_pieces[forced:], translation.source_pieces)
        panels.append((f"{code}: {translation.text}", merged, source_words, target_words))
        aligned = ", ".join(f"{word} ← {source_words[int(row.argmax())]}" for word, row in zip(target_words, merged))
        rows.append([code, translation.text, aligned])
    title = words(language, "languages.title", layer=checkpoint.model.config.n_decoder_layers)
    return figures.languages_side_by_side(panels, title, language=language), rows
