"""A handler's own numbers, whatever a client sent: a finite number, or a whole number within a range, each
refused with a sentence naming its field (the page's sliders never send NaN or infinity; an API client can)."""

from __future__ import annotations

import math

from transformer.errors import InputError

from .language import Message, message


def finite(value, name: str | Message | None = None) -> float:
    """``value`` as a finite number; an InputError naming ``name`` (default: "value") for anything else (an API
    client can send NaN or infinity as raw JSON, where no slider would)."""
    name = message("translate.name.value") if name is None else name
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(message("translate.not_a_number", name=name, value=repr(str(value)[:40]))) from None
    if not math.isfinite(number):
        raise InputError(message("translate.not_finite", name=name, value=number))
    return number


def clamp(value, low: int, high: int, name: str | Message | None = None) -> int:
    """``value`` as a whole number within [low, high]: a typed or shared number past the ends means the end.
    Mirrored from 1 by `ui/static/explorer.js:within`, which makes what is not a number 1 where this refuses it."""
    return max(low, min(high, int(finite(value, name))))
