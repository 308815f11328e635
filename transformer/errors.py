"""Errors about what a user asked for, as opposed to bugs: shown to the user as they are.

Each names itself by a code and the values its sentence takes; the sentence, in English, is written once, in
``problems.json`` (a reader in another language says the same from the code: the app's ui/locales/).
"""

import json
from pathlib import Path

# What each problem says, in English, by its code: ``{placeholders}`` take the error's values.
SENTENCES: dict[str, str] = json.loads((Path(__file__).with_name("problems.json")).read_text(encoding="utf-8"))
# The problems that are failures at run time, not mistakes in what was asked: the network, a download, a training
# that diverged (a command exits 1 on them, 2 on a mistake: docs/command-line.md).
AT_RUN_TIME = frozenset({"data.download_failed", "data.checksum_mismatch", "hub.download_stopped", "hub.offline",
                         "train.loss_not_finite"})


def written(value) -> str:
    """A value as a sentence shows it: numbers grouped in thousands (1,200 MB), anything else as it is."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return format(value, ",")
    return str(value)


def rebuilt(kind: type, args: tuple, code: str | None, values: dict) -> "Explained":
    """An ``Explained`` error as it was pickled (a process sends one to another), its code and values kept."""
    error = kind(*args)
    error.code, error.values = code, values
    return error


def detail(error: BaseException):
    """What went wrong underneath, as a value of another error: one of ours as it is, so that a reader in another
    language reads it in theirs; anything else's text (Python's, a file format's, the network's), which is no one's
    words here and is quoted as it is."""
    return error if isinstance(error, Explained) else str(error)


class Explained(Exception):
    """An error for people, named by a ``code`` and the values its sentence takes (``SENTENCES``), so that a reader
    can say the same in another language (the app's ui/locales/: library.<code>). Its text is that sentence in
    English; an error without a code (a test's) takes its ``text`` as it is."""

    def __init__(self, text: str = "", *, code: str | None = None, **values):
        if code is not None and not text:
            text = SENTENCES[code].format(**{name: written(value) for name, value in values.items()})
        super().__init__(text)
        self.code, self.values = code, values

    def without(self, part: str) -> "Explained":
        """The same error with ``part`` (a server's own directory, say) taken out of its text and its values, an
        error of ours it wraps included."""
        def cut(value):
            if isinstance(value, Explained):
                return value.without(part)
            return value.replace(part, "") if isinstance(value, str) else value
        values = {name: cut(value) for name, value in self.values.items()}
        return type(self)(code=self.code, **values) if self.code else type(self)(cut(str(self)))

    def __reduce__(self):
        return rebuilt, (type(self), self.args, self.code, self.values)


class InputError(Explained, ValueError):
    """A problem with what the user typed or chose, phrased for the user."""


class MissingFile(Explained, FileNotFoundError):
    """A file the user named, or a model's directory must hold, is not there."""
