"""One sentence into several languages at once, on a multilingual model: each translation, where its last layer
looked in the source, and each of its words aligned to the source word it looked at most."""

from __future__ import annotations

import plotly.graph_objects as go

from transformer.errors import InputError
from transformer.files.checkpoint import Checkpoint
from transformer.files.multilingual import iso_code
from transformer.inside import analysis

from ..drawing import charts
from ..runtime.language import ENGLISH, message
from ..runtime.language import text as words
from .text import clean_text, language_name
from .translate import one_map

MOST_LANGUAGES = 4  # side by side, each map stays readable on a classroom projector
LANGUAGES_HEADERS = ("languages.header.language", "languages.header.translation", "languages.header.aligned")


def language_label(code: str, language: str = ENGLISH) -> str:
    """A model's language code as a picker shows it: the language's name in ``language`` where the locales have
    one, then the code as the model writes it ("German (deu_Latn)"); the code alone otherwise."""
    name = language_name(iso_code(code), language)
    return f"{name} ({code})" if name else code


def language_choices(codes, language: str = ENGLISH) -> list[tuple[str, str]]:
    """A picker's (label, code) choices, named languages first, in the page's alphabetical order."""
    labelled = [(language_label(code, language), code) for code in codes]
    return sorted(labelled, key=lambda choice: (choice[0] == choice[1], choice[0].casefold()))


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
        name = language_label(code, language)
        panels.append((f"{name}: {translation.text}", merged, source_words, target_words))
        aligned = ", ".join(f"{word} ← {source_words[int(row.argmax())]}" for word, row in zip(target_words, merged))
        rows.append([name, translation.text, aligned])
    title = words(language, "languages.title", layer=checkpoint.model.config.n_decoder_layers)
    return charts.languages_side_by_side(panels, title, language=language), rows
