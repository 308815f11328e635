"""Errors about what a user asked for, as opposed to bugs: shown to the user as they are."""


class InputError(ValueError):
    """A problem with what the user typed or chose, phrased for the user."""
