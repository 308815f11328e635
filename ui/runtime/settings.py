"""Every setting the app reads from the environment, ``EXPLORER_*``, in one table: what each accepts and its
default. Each is read where it is used, by ``value(name)``, and all are checked as the app starts
(``problems()``): a value the app cannot use stops it with one line naming the variable, the value and what the
variable accepts, where it used to crash at import or fall back without a word.

A blank value is the default, except for the settings that take text, where blank means none
(``EXPLORER_HUB_MODELS=`` opens no Hub model). The README's table says what each setting does.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch


class SettingError(ValueError):
    """A setting's value the app cannot use, in one line for whoever starts it."""


@dataclass(frozen=True)
class Setting:
    parse: Callable[[str], object]  # raises ValueError (or RuntimeError: torch) on a value it cannot use
    accepts: str  # in words, for the error
    default: object = None
    text: bool = False  # any text is a value; blank too


def whole_number(at_least: int) -> Callable[[str], int]:
    def parse(value: str) -> int:
        number = int(value)
        if number < at_least:
            raise ValueError(value)
        return number
    return parse


def positive_number(value: str) -> float:
    number = float(value)
    if not (math.isfinite(number) and number > 0):
        raise ValueError(value)
    return number


def yes_or_no(value: str) -> bool:
    answer = value.strip().lower()
    if answer not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        raise ValueError(value)
    return answer in ("1", "true", "yes", "on")


def device(value: str) -> torch.device:
    return torch.device(value.strip())


def text(value: str) -> str:
    return value


WHOLE, POSITIVE, YES_OR_NO = "a whole number of 1 or more", "a positive number", "1 or 0 (yes or no, on or off)"
SETTINGS: dict[str, Setting] = {
    "EXPLORER_DISABLE_TRAINING": Setting(yes_or_no, YES_OR_NO, False),
    "EXPLORER_OPEN_AT_START": Setting(text, "Hub ids or directories, comma-separated", text=True),
    "EXPLORER_HUB_MODELS": Setting(text, "shell patterns of Hub ids, comma-separated", text=True),
    "EXPLORER_HUB_MODEL_MB": Setting(positive_number, POSITIVE, 600.0),  # opus-mt weighs about 300 MB
    "EXPLORER_HUB_CACHE": Setting(text, "a directory", text=True),
    "EXPLORER_HUB_CACHE_MB": Setting(positive_number, POSITIVE, 3000.0),
    "EXPLORER_MODELS_MB": Setting(positive_number, POSITIVE, 2000.0),
    "EXPLORER_KEPT_MODELS": Setting(whole_number(1), WHOLE, 10),
    "EXPLORER_RUNS_DIR": Setting(text, "a directory", text=True),
    # The Corpus tab's first corpus: 200 Multi30K test sentences run in about 8 s on two cores (docs/corpus.md).
    "EXPLORER_CORPUS_SENTENCES": Setting(whole_number(1), WHOLE, 200),
    "EXPLORER_MAX_CLASSES": Setting(whole_number(1), WHOLE, 20),
    "EXPLORER_MAX_STUDENTS": Setting(whole_number(1), WHOLE, 250),
    "EXPLORER_CLASSES_PER_ADDRESS": Setting(whole_number(1), WHOLE, 2),
    # About what three attribution agreements over the sample sentences cost; a student exploring spends far less.
    "EXPLORER_COSTLY_CPU_SECONDS": Setting(positive_number, POSITIVE, 180.0),
    "EXPLORER_COSTLY_WINDOW_S": Setting(positive_number, POSITIVE, 600.0),
    "EXPLORER_TRUSTED_PROXIES": Setting(whole_number(1), WHOLE, 1),
    "EXPLORER_DEVICE": Setting(device, "a device PyTorch knows (cpu, cuda, cuda:1)"),
    # Unset: the cores nothing else keeps busy as the server starts (transformer.cpu.threads_for_machine).
    "EXPLORER_THREADS": Setting(whole_number(1), WHOLE),
}


def value(name: str):
    """The setting ``name`` as the app uses it: its value in the environment, or its default when unset (or blank,
    for a setting that does not take text). A value it cannot use raises ``SettingError``."""
    setting = SETTINGS[name]
    written = os.environ.get(name)
    if written is None or (not setting.text and not written.strip()):
        return setting.default
    try:
        return setting.parse(written)
    except (ValueError, RuntimeError):
        raise SettingError(f"{name}={written!r} cannot be used: it takes {setting.accepts}") from None


def hub_directory() -> Path:
    """``EXPLORER_HUB_CACHE``: where converted Hub models are kept, and what this host keeps across starts beside
    them (each model's speed choices)."""
    return Path(value("EXPLORER_HUB_CACHE") or Path.home() / ".cache" / "transformer-explorer" / "hub")


def problems() -> list[str]:
    """One line for each setting whose value the app cannot use; none when all can be."""
    found = []
    for name in SETTINGS:
        try:
            value(name)
        except SettingError as error:
            found.append(str(error))
    return found
