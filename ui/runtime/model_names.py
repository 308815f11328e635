"""A model's name as the page passes it around: a checkpoint's name, and for a multilingual model the languages it
translates between after "@": the target ("m2m100_418M@fr"), or the source and the target ("m2m100_418M@de>fr"),
so that every handler given the name gets the checkpoint set for them without being told about languages."""

from __future__ import annotations

from transformer.files.checkpoint import Checkpoint

LANGUAGE_MARK = "@"  # never in a checkpoint's name: Hub ids and run names do not have it
SOURCE_MARK = ">"    # between the source and the target language, where the source is not the model's default


def in_language(name: str, target: str | None, source: str | None = None) -> str:
    """``name`` (with or without languages) set to translate from ``source`` into ``target`` (None: the model's
    defaults)."""
    base = checkpoint_name(name)
    if not target and not source:
        return base
    return f"{base}{LANGUAGE_MARK}{source + SOURCE_MARK if source else ''}{target or ''}"


def checkpoint_name(name: str) -> str:
    """The checkpoint's own name, without languages."""
    return name.partition(LANGUAGE_MARK)[0]


def set_for(checkpoint: Checkpoint, name: str) -> Checkpoint:
    """``checkpoint`` (the one ``checkpoint_name(name)`` names) set for the languages ``name`` asks for."""
    languages = name.partition(LANGUAGE_MARK)[2]
    if not languages:
        return checkpoint
    source, _, target = languages.rpartition(SOURCE_MARK)
    return checkpoint.in_languages(source or None, target or None)


def listed_with(names: list[str], current: str) -> list:
    """The model list for a picker showing ``current``: a name set for a language joins it as "name → language"."""
    if current in names or LANGUAGE_MARK not in current:
        return list(names)
    languages = current.partition(LANGUAGE_MARK)[2].replace(SOURCE_MARK, " → ")
    return [*names, (f"{checkpoint_name(current)} → {languages}", current)]
