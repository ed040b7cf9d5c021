"""The cyclic garbage collector's thresholds in Millrace's own processes (TaskManagers, the
session cluster's JobManager; not an embedded run's client, whose process is the user's).

CPython's defaults (700, 10, 10) suit programs with small heaps. A TaskManager allocates several
objects per record and keeps large long-lived structures (heap state, timers, window panes): the
default gen-0 threshold runs a collection every 700 allocations, and the full collections it leads
to walk the whole state again and again without freeing anything (state is referenced). Measured on
the per-record windowed_sum (1M events, p=2): 17.6 s of TaskManager CPU with the defaults, 10.8 s
with (50000, 20, 100), 10.5 s with the collector off. Reference counting still frees acyclic
garbage at once; cycles are collected, later. The memory watchdog (runtime.taskmanager.memory)
collects in full before it judges a TaskManager over its budget. The JobManager's heap grows with
execution graphs, checkpoint metadata and results held for clients: with the default thresholds its
full collections came every ~2 s and took up to 85 ms, stalling its RPC loop.
"""
from __future__ import annotations

import gc
import logging

from pydantic import BaseModel, Field

log = logging.getLogger(__name__)


class GcConfig(BaseModel):
    """gc.set_threshold for a Millrace process (gc.freeze() after start-up measured no better)."""

    thresholds: tuple[int, int, int] = Field(
        (50_000, 20, 100), description="gen-0 allocations, gen-1 and gen-2 collection ratios; (0, 0, 0) keeps CPython's defaults"
    )


def tune_gc(cfg: GcConfig) -> None:
    if any(t < 0 for t in cfg.thresholds):
        raise ValueError(f"gc thresholds must be >= 0, got {cfg.thresholds}")
    if cfg.thresholds != (0, 0, 0):
        gc.set_threshold(*cfg.thresholds)
    log.debug("gc thresholds %s", gc.get_threshold())
