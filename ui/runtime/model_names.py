"""A model's name as the page passes it around: a checkpoint's name, and for a multilingual model the target
language it translates into after "@" ("m2m100_418M@fr"), so that every handler given the name gets the
checkpoint set for that language without being told about languages."""

from __future__ import annotations

from transformer.files.checkpoint import Checkpoint

LANGUAGE_MARK = "@"  # never in a checkpoint's name: Hub ids and run names do not have it


def in_language(name: str, target: str | None) -> str:
    """``name`` (with or without a language) set to translate into ``target`` (None: the model's default)."""
    base = checkpoint_name(name)
    return f"{base}{LANGUAGE_MARK}{target}" if target else base


def checkpoint_name(name: str) -> str:
    """The checkpoint's own name, without a language."""
    return name.partition(LANGUAGE_MARK)[0]


def set_for(checkpoint: Checkpoint, name: str) -> Checkpoint:
    """``checkpoint`` (the one ``checkpoint_name(name)`` names) set for the language ``name`` asks for."""
    target = name.partition(LANGUAGE_MARK)[2]
    return checkpoint.in_languages(target=target) if target else checkpoint


def listed_with(names: list[str], current: str) -> list:
    """The model list for a picker showing ``current``: a name set for a language joins it as "name → language"."""
    if current in names or LANGUAGE_MARK not in current:
        return list(names)
    return [*names, (f"{checkpoint_name(current)} → {current.partition(LANGUAGE_MARK)[2]}", current)]
