"""Evictors (Flink's EvictingWindowOperator) through the local executor, against plain-Python references."""
from __future__ import annotations

import pytest

from runtime.api.common import Time, Types, WatermarkStrategy
from runtime.api.connectors.collection import CollectionSource
from runtime.api.datastream import AggregateFunction, StreamExecutionEnvironment, WindowFunction
from runtime.api.datastream.window import (
    CountEvictor,
    CountTrigger,
    DeltaEvictor,
    GlobalWindows,
    TimeEvictor,
    TumblingEventTimeWindows,
)
from runtime.api.execution import use_executor
from runtime.core.errors import InvalidProgramError
from tests.unit.api.local_runner import LocalExecutor

pytestmark = pytest.mark.unit

EVENTS = [("a", t, v) for t, v in [(1, 5), (2, 1), (3, 7), (4, 2), (6, 9), (8, 3)]] + [("b", 5, 4), ("b", 9, 6)]


def keyed(env: StreamExecutionEnvironment):
    wm = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _t: e[1])
    return env.from_source(CollectionSource(EVENTS), wm, "events").key_by(lambda e: e[0])


def run(stream) -> list:
    with use_executor(LocalExecutor()):
        return sorted(stream.execute_and_collect(), key=repr)


@pytest.fixture
def env() -> StreamExecutionEnvironment:
    e = StreamExecutionEnvironment.get_execution_environment()
    e.set_parallelism(1)
    return e


def test_count_evictor_keeps_the_last_n_of_a_pane_before_the_function(env) -> None:
    got = run(keyed(env).window(TumblingEventTimeWindows.of(Time.milliseconds(10))).evictor(CountEvictor.of(2))
              .reduce(lambda x, y: (x[0], max(x[1], y[1]), x[2] + y[2])))
    # a: the last two by arrival, (6, 9) and (8, 3); b: both
    assert got == sorted([("a", 8, 12), ("b", 9, 10)], key=repr)


def test_time_evictor_and_evicting_after_with_a_count_trigger(env) -> None:
    # a global window firing every 2 elements; TimeEvictor keeps elements within 3 ms of the newest
    got = run(keyed(env).window(GlobalWindows.create()).trigger(CountTrigger.of(2)).evictor(TimeEvictor.of(Time.milliseconds(3)))
              .apply(_Times()))
    ref = []
    for key in ("a", "b"):
        pane: list[tuple] = []
        for i, e in enumerate([e for e in EVENTS if e[0] == key], start=1):
            pane.append(e)
            if i % 2 == 0:  # fire: evict before, keep what is left
                newest = max(x[1] for x in pane)
                pane = [x for x in pane if x[1] > newest - 3]
                ref.append((key, [x[1] for x in pane]))
    assert got == sorted(ref, key=repr)


def test_delta_evictor_after_the_function_and_a_bad_evictor(env) -> None:
    got = run(keyed(env).window(GlobalWindows.create()).trigger(CountTrigger.of(3))
              .evictor(DeltaEvictor.of(4.0, lambda x, y: abs(x[2] - y[2]), do_evict_after=True))
              .aggregate(_Sum(), output_type=Types.INT()))
    ref, pane = [], []
    for i, e in enumerate([e for e in EVENTS if e[0] == "a"], start=1):
        pane.append(e)
        if i % 3 == 0:
            ref.append(sum(x[2] for x in pane))  # the function sees the whole pane
            last = pane[-1][2]
            pane = [x for x in pane if abs(x[2] - last) < 4.0]  # evicted after
    assert got == sorted(ref)
    with pytest.raises(InvalidProgramError, match="Evictor"):
        keyed(env).window(GlobalWindows.create()).evictor(3)


class _Times(WindowFunction):
    def apply(self, key, window, inputs):
        return [(key, [e[1] for e in inputs])]


class _Sum(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, acc):
        return acc + value[2]

    def get_result(self, acc):
        return acc

    def merge(self, a, b):
        return a + b
