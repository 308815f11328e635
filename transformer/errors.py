"""Errors about what a user asked for, as opposed to bugs: shown to the user as they are."""


def rebuilt(kind: type, args: tuple, code: str | None, values: dict) -> "Explained":
    """An ``Explained`` error as it was pickled (a process sends one to another), its code and values kept."""
    error = kind(*args)
    error.code, error.values = code, values
    return error


class Explained(Exception):
    """An error whose text is for people, in English, and which also names itself: a ``code`` and the values its
    sentence takes, so that a reader can say the same in another language (the app's ui/locales/: library.<code>).
    """

    def __init__(self, text: str = "", *, code: str | None = None, **values):
        super().__init__(text)
        self.code, self.values = code, values

    def without(self, part: str) -> "Explained":
        """The same error with ``part`` (a server's own directory, say) taken out of its text and its values."""
        def cut(value):
            return value.replace(part, "") if isinstance(value, str) else value
        return type(self)(cut(str(self)), code=self.code, **{name: cut(value) for name, value in self.values.items()})

    def __reduce__(self):
        return rebuilt, (type(self), self.args, self.code, self.values)


class InputError(Explained, ValueError):
    """A problem with what the user typed or chose, phrased for the user."""
