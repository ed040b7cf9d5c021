"""Deterministic inputs and plain-Python reference helpers shared by the API integration tests.

Everything here is module-level so cloudpickle ships functions by reference: the TaskManager
processes import this module (their working directory is the repo root, like the test run's).
"""
from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

import numpy as np

from runtime.api.common import WatermarkStrategy
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import StreamExecutionEnvironment

N = 2000
KEYS = 7


def rec(i: int) -> tuple[str, int, int]:
    """(key, value, event time ms): record i of the standard input."""
    return (f"k{i % KEYS}", (i * 37) % 101, i * 10)


RECORDS = [rec(i) for i in range(N)]


def ts_of(value: Any, record_timestamp: int) -> int:
    return value[2]


def env_p(parallelism: int = 2) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    return env


def records_source(env: StreamExecutionEnvironment, *, event_time: bool = False, batch_size: int = 100, count: int = N):
    """The standard input from a parallel DataGeneratorSource (chunk k on subtask k % p), so
    records start on every source subtask. With event_time, timestamps are field 2 and every
    subtask's timestamps ascend (monotonous watermarks)."""
    src = DataGeneratorSource(rec, count, batch_size=batch_size)
    strategy = (
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ts_of)
        if event_time
        else WatermarkStrategy.no_watermarks()
    )
    return env.from_source(src, strategy, "records")


def source_subtask_of(i: int, batch_size: int, parallelism: int) -> int:
    """Which DataGeneratorSource subtask produces index i."""
    return (i // batch_size) % parallelism


# -- columnar input -----------------------------------------------------------------------------

COL_N = 3000


def col_batch(idx: np.ndarray) -> dict[str, np.ndarray]:
    return {"k": idx % 5, "v": (idx * 7) % 23, "ts": idx * 3}


def col_row(i: int):
    """Record i of the columnar data as a named Row with a string key."""
    from runtime.core.row import Row

    return Row(k=f"key{i % 5}", v=(i * 7) % 23, ts=i * 3)


def col_rows() -> list[dict[str, int]]:
    return [{"k": i % 5, "v": (i * 7) % 23, "ts": i * 3} for i in range(COL_N)]


# -- out-of-order input ----------------------------------------------------------------------------

OOO_N = 1200
OOO_BLOCK = 30  # records are shuffled within blocks of 30 (300 ms of event time)
OOO_BATCH = 10  # source batch size: a block spans 3 batches


def _ooo_events() -> list[tuple[str, int]]:
    rng = random.Random(1234)
    out: list[tuple[str, int]] = []
    for b in range(0, OOO_N, OOO_BLOCK):
        block = [(f"k{i % 3}", i * 10) for i in range(b, b + OOO_BLOCK)]
        rng.shuffle(block)
        out.extend(block)
    return out


OOO_EVENTS = _ooo_events()


def ooo_event(i: int) -> tuple[str, int]:
    return OOO_EVENTS[i]


def ooo_ts(value: Any, record_timestamp: int) -> int:
    return value[1]


# -- session input ---------------------------------------------------------------------------------

SESSION_GAP = 50


def _session_events() -> list[tuple[str, int, int]]:
    """(key, value, ts) sorted by ts; steps within a session are 5..20 ms, between sessions
    80..300 ms (never exactly the gap)."""
    rng = random.Random(99)
    events = []
    for k in range(4):
        t = k * 7
        for j in range(150):
            t += rng.choice([5, 10, 20, 5, 10]) if rng.random() < 0.9 else rng.choice([80, 120, 300])
            events.append((f"s{k}", j, t))
    events.sort(key=lambda e: (e[2], e[0]))
    return events


SESSION_EVENTS = _session_events()


def session_event(i: int) -> tuple[str, int, int]:
    return SESSION_EVENTS[i]


def reference_sessions(events: Iterable[tuple[str, int, int]], gap: int) -> dict[tuple[str, int, int], list[int]]:
    """(key, start, end) -> values, Flink session semantics (windows [ts, ts+gap) merge when they
    overlap or touch)."""
    by_key: dict[str, list[tuple[int, int]]] = {}
    for k, v, t in events:
        by_key.setdefault(k, []).append((t, v))
    out: dict[tuple[str, int, int], list[int]] = {}
    for k, items in by_key.items():
        items.sort()
        cur_start, cur_end, vals = None, None, []
        for t, v in items:
            if cur_start is None:
                cur_start, cur_end, vals = t, t + gap, [v]
            elif t <= cur_end:  # [t, t+gap) touches/overlaps [cur_start, cur_end)
                cur_end = max(cur_end, t + gap)
                vals.append(v)
            else:
                out[(k, cur_start, cur_end)] = vals
                cur_start, cur_end, vals = t, t + gap, [v]
        out[(k, cur_start, cur_end)] = vals
    return out


def _shuffled_sessions(block: int = 24) -> list[tuple[str, int, int]]:
    rng = random.Random(7)
    out: list[tuple[str, int, int]] = []
    for b in range(0, len(SESSION_EVENTS), block):
        chunk = list(SESSION_EVENTS[b : b + block])
        rng.shuffle(chunk)
        out.extend(chunk)
    return out


SHUFFLED_SESSION_EVENTS = _shuffled_sessions()


def shuffled_session_event(i: int) -> tuple[str, int, int]:
    return SHUFFLED_SESSION_EVENTS[i]


def max_disorder_ms(timestamps: list[int]) -> int:
    """How far (ms) a record comes after a later timestamp at most."""
    worst, seen = 0, None
    for t in timestamps:
        seen = t if seen is None else max(seen, t)
        worst = max(worst, seen - t)
    return worst
