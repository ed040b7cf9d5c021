"""Side outputs on a cluster: across the network, chained, from timers, and a window's late data."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from runtime.api.common import Duration, Time, Types, WatermarkStrategy
from runtime.api.connectors.collection import CollectionSource
from runtime.api.datastream import KeyedProcessFunction, OutputTag, ProcessWindowFunction, StreamExecutionEnvironment
from runtime.api.datastream.window import TumblingEventTimeWindows
from runtime.api.execution import use_executor
from runtime.deploy.minicluster import MiniCluster

pytestmark = pytest.mark.integration

LATE = OutputTag("late", Types.TUPLE([Types.STRING(), Types.INT()]))
TIMERS = OutputTag("timers", Types.STRING())


class Sum(ProcessWindowFunction):
    def process(self, key: str, context: Any, elements: Iterable[tuple]) -> Iterable[tuple]:
        context.output(TIMERS, f"fired {key} {context.window().start}")  # from a window function
        return [(key, context.window().start, sum(e[1] for e in elements))]


class Alarm(KeyedProcessFunction):
    def process_element(self, value: tuple, ctx: Any):
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 100)
        return []

    def on_timer(self, timestamp: int, ctx: Any):
        yield TIMERS, f"timer {ctx.get_current_key()} {timestamp}"  # from on_timer


def reference(events: list[tuple[str, int]]) -> tuple[set[tuple[str, int, int]], list[tuple[str, int]]]:
    """Windows of 10 ms over `events` in order with watermark = max seen - 1 after each event."""
    wm, sums, late = -(2**63), {}, []
    for key, ts in events:
        start = ts - ts % 10
        if start + 9 <= wm:
            late.append((key, ts))
        else:
            sums[(key, start)] = sums.get((key, start), 0) + ts
        wm = max(wm, ts - 1)
    return {(k, s, v) for (k, s), v in sums.items()}, late


def test_late_data_and_side_outputs_of_windows_and_timers(mini_cluster: MiniCluster) -> None:
    events = [("a", 1), ("b", 2), ("a", 12), ("a", 4), ("b", 25), ("b", 8), ("a", 26), ("a", 15), ("b", 31), ("a", 29)]
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    # one element per batch and a watermark after every batch (interval 0): which ones are late is fixed
    env.get_config().set_auto_watermark_interval(0)
    source = env.from_source(CollectionSource(events, batch_size=1), WatermarkStrategy.no_watermarks(), "events").set_parallelism(1)
    wm = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0)).with_timestamp_assigner(lambda e, _ts: e[1])
    stamped = source.assign_timestamps_and_watermarks(wm).set_parallelism(1)  # one watermark sequence for all
    keyed = stamped.key_by(lambda e: e[0], key_type=Types.STRING())
    windows = keyed.window(TumblingEventTimeWindows.of(Time.milliseconds(10))).side_output_late_data(LATE).process(
        Sum(), Types.TUPLE([Types.STRING(), Types.INT(), Types.INT()])
    )
    alarms = keyed.process(Alarm(), Types.STRING())
    with use_executor(mini_cluster.executor()):
        got = sorted(
            windows.map(lambda t: ("window", t))
            .union(windows.get_side_output(LATE).map(lambda t: ("late", t)))
            .union(windows.get_side_output(TIMERS).rebalance().map(lambda s: ("fired", s)))
            .union(alarms.get_side_output(TIMERS).map(lambda s: ("timer", s)))
            .execute_and_collect("side outputs"),
            key=repr,
        )
    sums, late = reference(events)
    assert sorted(t for kind, t in got if kind == "window") == sorted(sums)
    assert sorted(t for kind, t in got if kind == "late") == sorted(late) and late  # ('a', 4), ('b', 8), ('a', 15)
    assert sorted(s for kind, s in got if kind == "fired") == sorted(f"fired {k} {s}" for k, s, _ in sums)
    timers = {}
    for key, ts in events:  # one event-time timer per (key, ts + 100); all fire at the end of input
        timers[(key, ts + 100)] = True
    assert sorted(s for kind, s in got if kind == "timer") == sorted(f"timer {k} {t}" for k, t in timers)
