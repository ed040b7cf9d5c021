"""Pausing the cyclic garbage collector around bulk object building (snapshots, restores)."""
from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Building or loading a million entries would trigger repeated collections over the whole live
    heap, none of which can free anything (every new object is referenced): pause the collector."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
