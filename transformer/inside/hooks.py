"""Hooks that watch or change one call of a model others share: each acts only in the thread that set it, so that
a server's other visitors, whose passes run through the same modules meanwhile, neither feed it nor see what it
changes."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable


def in_this_thread(hook: Callable) -> Callable:
    """``hook`` as PyTorch calls it, for the passes of the thread that made it; other threads' passes go on as if
    it were not there (a hook returning None changes nothing)."""
    thread = threading.get_ident()

    @functools.wraps(hook)
    def guarded(*args, **kwargs):
        return hook(*args, **kwargs) if threading.get_ident() == thread else None
    return guarded
