"""The selectors' vocabulary: attention kinds, heatmap views, heads, and the translation a view looks at."""

from __future__ import annotations

from transformer.errors import InputError

from ..runtime.numbers import clamp, finite
from ..runtime.language import ENGLISH, message, table, text

# The kinds' English names are also the Translate tab's choices, which scripts send: their words in ui/locales/.
ATTENTION_KINDS = {kind: table(ENGLISH)[f"map.kind.{kind}"] for kind in ("encoder", "decoder", "cross")}
# The heatmap's views' words, and as scripts send them: their English words (the page's choices: these values,
# labelled in its language). So is every choice of the page: its English words are its value.
VIEW_LABELS = ("translate.view.one_head", "translate.view.layer_heads", "translate.view.model")
VIEWS = tuple(text(ENGLISH, key) for key in VIEW_LABELS)
MEAN_OF_HEADS = text(ENGLISH, "translate.mean_of_heads")  # a head picker's value for the mean
# What a view of the last translation says where there is none; in English, as tests and scripts read it.
NO_TRANSLATION = table(ENGLISH)["translate.no_translation"]


def attention_kind_choices(language: str = ENGLISH) -> list[tuple[str, str]]:
    """The attention type's choices: each kind's name in ``language``, its English name the value."""
    return [(text(language, f"map.kind.{kind}"), value) for kind, value in ATTENTION_KINDS.items()]


def view_choices(language: str = ENGLISH) -> list[tuple[str, str]]:
    """The heatmap view's choices: each view in ``language``, its English name the value."""
    return [(text(language, key), view) for key, view in zip(VIEW_LABELS, VIEWS)]


def max_target_tokens(value) -> int | None:
    """The "maximum number of target tokens" field as a whole number; None (the model's own limit) when unset."""
    return int(finite(value, message("translate.name.max_tokens"))) if value else None


def kind_key(label: str) -> str:
    """Accept a key ("cross") or its display label. Mirrored by `ui/static/explorer.js:kindKey`."""
    for key, name in ATTENTION_KINDS.items():
        if label in (key, name):
            return key
    raise InputError(message("translate.choose_kind", kinds=", ".join(ATTENTION_KINDS.values()),
                             label=repr(str(label)[:40])))


def head_options(heads: int) -> list[str]:
    """A head picker's values: the mean, then each head counted from 1."""
    return [MEAN_OF_HEADS] + [str(h + 1) for h in range(heads)]


def head_choices(heads: int, language: str = ENGLISH) -> list[tuple[str, str]]:
    """``head_options`` labelled in ``language`` (the mean's value stays ``MEAN_OF_HEADS``, which scripts send)."""
    return [(text(language, "translate.mean_of_heads") if value == MEAN_OF_HEADS else value, value)
            for value in head_options(heads)]


def chosen_head(choice, heads: int) -> int | None:
    """A head picker's value as a 1-based head, or None for the mean of heads."""
    return None if choice in (None, "", MEAN_OF_HEADS) else clamp(choice, 1, heads)


def require_translation(translation):
    """The visitor's last translation, which a view looks into; one sentence if there is none yet."""
    if translation is None:
        raise InputError(message("translate.no_translation"))
    return translation


def other_candidates(translation, step) -> list[str]:
    """The top-k pieces of a decoding step (1-based, clamped) other than the one the model chose there, most
    probable first: the tokens to compare its choice with. None for no translation."""
    if translation is None:
        return []
    index = clamp(step, 1, translation.num_steps) - 1
    return [piece for piece in translation.top_pieces[index] if piece != translation.predicted_pieces[index]]
