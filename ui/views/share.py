"""Links that reopen the app on a model, sentence, decoding and view: made, read back and checked."""

from __future__ import annotations

import urllib.parse

from transformer.errors import InputError
from transformer.files.checkpoint import Checkpoint

from ..runtime.language import ENGLISH, text
from ..runtime.model_names import checkpoint_name
from .choices import ATTENTION_KINDS, VIEWS, kind_key
from ..runtime.numbers import clamp
from .text import clean_text, suits, uses_digits
from .translate import MAX_BEAM, TARGET_TOKENS, layer_and_head_counts

MOST_DIGITS = 6  # a link's numbers are small; a longer one is read as nothing asked for


def share_query(model: str, text: str, kind: str, view: str, layer: int, head: int, beam: int = 1,
                max_tokens: int | None = None) -> str:
    """The query string that reopens the app on the same sentence, decoding (``beam`` 1: greedy) and view."""
    query = {"model": model, "text": text, "kind": kind_key(kind), "view": VIEWS.index(view) if view in VIEWS else 0,
             "layer": int(layer), "head": int(head), "beam": int(beam)}
    if max_tokens:
        query["max"] = int(max_tokens)
    return urllib.parse.urlencode(query)


def parse_share_query(params: dict, names: list[str]) -> dict:
    """Validated values from a shared link's query parameters (unknown or bad values are dropped)."""
    values = {}
    if checkpoint_name(str(params.get("model") or "")) in names:  # a multilingual model's language may follow
        values["model"] = params["model"]
    if params.get("text"):
        try:
            values["text"] = clean_text(params["text"])[0]
        except InputError:  # nothing to translate in it; the link's other choices still hold
            pass
    if params.get("kind") in ATTENTION_KINDS:
        values["kind"] = ATTENTION_KINDS[params["kind"]]
    for key in ("view", "layer", "head", "beam", "max"):
        value = str(params.get(key, ""))
        # not isdigit(): "²" is a digit that int() refuses; and int() refuses over 4,300 digits
        if value.isdecimal() and len(value) <= MOST_DIGITS:
            values[key] = int(value)
    if "view" in values:
        values["view"] = VIEWS[min(values["view"], len(VIEWS) - 1)]
    if "beam" in values:
        values["beam"] = clamp(values["beam"], 1, MAX_BEAM)
    if "max" in values:
        values["max"] = clamp(values["max"], *TARGET_TOKENS)
    return values


def share_link_problems(params: dict, names: list[str], checkpoint: Checkpoint,
                        language: str = ENGLISH) -> list[str]:
    """What a shared link asked for and will not get, said to the person who opened it (in ``language``).

    ``checkpoint`` is the model the link opens: the one it names, or the default.
    """
    problems = []
    if params.get("model") and checkpoint_name(params["model"]) not in names:
        problems.append(text(language, "translate.link.model_missing", model=params["model"], name=checkpoint.name))
    sentence = params.get("text") or ""
    if not sentence.strip():
        return problems
    try:
        notes = clean_text(sentence, language=language)[1]
    except InputError:  # said first: such a sentence is for no model
        problems.append(text(language, "translate.link.nothing"))
        return problems
    if not suits(checkpoint, sentence):
        wanted = "digits" if uses_digits(checkpoint) else "words"
        problems.append(text(language, f"translate.link.not_for_{wanted}", name=checkpoint.name))
        return problems
    return problems + [text(language, "translate.link.changed", note=note) for note in notes]


def fit_share_values(values: dict, checkpoint: Checkpoint) -> dict:
    """A shared link's layer and head, kept within the model it opens (a link may outlive the model it was made on)."""
    limits = dict(zip(("layer", "head"), layer_and_head_counts(checkpoint)))
    return {**values, **{key: clamp(values[key], 1, limit) for key, limit in limits.items() if key in values}}
