"""The selectors' vocabulary: attention kinds, heatmap views, keeping a chosen number within range, and the
translation a view looks at."""

from __future__ import annotations

import math

from transformer.errors import InputError

from ..runtime.language import ENGLISH, table

# The kinds' English names are also the Translate tab's choices, which scripts send: their words in ui/locales/.
ATTENTION_KINDS = {kind: table(ENGLISH)[f"map.kind.{kind}"] for kind in ("encoder", "decoder", "cross")}
VIEWS = ("one head", "all heads of the layer", "model view: every layer and head")
MEAN_OF_HEADS = "mean of heads"


def finite(value, name: str = "value") -> float:
    """``value`` as a finite number; an InputError naming ``name`` for anything else (an API client can send
    NaN or infinity as raw JSON, where no slider would)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(f"The {name} must be a number, not {str(value)[:40]!r}.") from None
    if not math.isfinite(number):
        raise InputError(f"The {name} must be a finite number, not {number}.")
    return number


def max_target_tokens(value) -> int | None:
    """The "maximum number of target tokens" field as a whole number; None (the model's own limit) when unset."""
    return int(finite(value, "maximum number of target tokens")) if value else None


def clamp(value, low: int, high: int, name: str = "value") -> int:
    """``value`` as a whole number within [low, high]: a typed or shared number past the ends means the end."""
    return max(low, min(high, int(finite(value, name))))


def kind_key(label: str) -> str:
    """Accept a key ("cross") or its display label."""
    for key, name in ATTENTION_KINDS.items():
        if label in (key, name):
            return key
    raise InputError(f"Choose an attention type ({', '.join(ATTENTION_KINDS.values())}), not {str(label)[:40]!r}.")


def head_options(heads: int) -> list[str]:
    """A head picker's choices: the mean, then each head counted from 1."""
    return [MEAN_OF_HEADS] + [str(h + 1) for h in range(heads)]


def chosen_head(choice, heads: int) -> int | None:
    """A head picker's value as a 1-based head, or None for the mean of heads."""
    return None if choice in (None, "", MEAN_OF_HEADS) else clamp(choice, 1, heads)


NO_TRANSLATION = ("Translate a sentence first (the Translate tab, or /translate for API clients): this looks at that "
                  "translation.")


def require_translation(translation):
    """The visitor's last translation, which a view looks into; one sentence if there is none yet."""
    if translation is None:
        raise InputError(NO_TRANSLATION)
    return translation
