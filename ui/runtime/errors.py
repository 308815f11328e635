"""How problems reach a visitor: a clear message, never a stack trace, and earlier results left in view."""

from __future__ import annotations

import contextlib
import html
import logging

import gradio as gr

from transformer.data import DataError
from transformer.errors import InputError
from transformer.files.checkpoint import CheckpointError
from transformer.files.hub import HubError

from .language import ENGLISH, message, said
from .worker import WorkerDied

log = logging.getLogger("app")

# The app's own problems for a visitor derive from InputError (a training request that cannot be done: training_plans.JobError).
USER_PROBLEMS = (InputError, CheckpointError, DataError, HubError, WorkerDied)
UNEXPECTED = message("error.unexpected")


def as_html(problem, language: str = ENGLISH) -> str:
    """Gradio shows messages as HTML: escaped, a "<unk>" or a file name with "<" in it stays visible."""
    return html.escape(said(problem, language), quote=False)


@contextlib.contextmanager
def as_user_message(name: str, html: bool = True, language: str = ENGLISH):
    """Problems with the input (or a model, data, job) become ``gr.Error`` with their own words, in the page's
    language; bugs are logged.

    ``html``: the message goes to the page, which shows it as HTML, so "<unk>" is escaped; an API client reads
    it as plain text and gets it as it is.
    """
    try:
        yield
    except USER_PROBLEMS as error:
        raise gr.Error(as_html(error, language) if html else said(error, language), print_exception=False) from None
    except gr.Error:
        raise
    except Exception:  # a bug or a resource problem: log it, tell the user plainly
        log.exception("unexpected error in %s", name)
        raise gr.Error(UNEXPECTED.in_(language), print_exception=False) from None


@contextlib.contextmanager
def as_warning(language: str = ENGLISH):
    """For a page's own actions: an input problem is a warning toast, and the caller leaves its outputs alone.

    ``gr.Error`` would cover each output with an error badge until dismissed. Yields a list that holds the
    problem, if there was one.
    """
    problems: list[Exception] = []
    try:
        yield problems
    except InputError as problem:
        gr.Warning(as_html(problem, language))
        problems.append(problem)


def warn(notes: list[str]) -> None:
    for note in notes:
        gr.Warning(as_html(note))
