"""Memory that big computations freed goes back to the system, so a server does not keep its peak for ever."""

from __future__ import annotations

import ctypes
import gc


def release_memory(collect: bool = True) -> bool:
    """Hand freed memory back to the system. glibc keeps freed blocks in its arenas, so without this a server grows
    with every costly event or job it runs and never shrinks. ``collect``: first free what only reference cycles
    hold (a full collection holds every thread up for about a third of a second). Returns whether memory could be
    trimmed."""
    if collect:
        gc.collect()
    try:
        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):  # not glibc: nothing to trim this way
        return False
