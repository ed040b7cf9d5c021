"""The main example job: per-user count and sum over tumbling 1 s event-time windows, into Delta.

Event i of the generator (0 <= i < N):
    x = ((i*1103515245 + 42) % 2147483647)**2 % 2147483647
    user_id = x % 10000, ts_ms = 1700000000000 + i, value = (x // 10000) % 100
Job: map value -> value*2, watermarks from ts_ms, key by user_id, tumbling event-time windows of
1000 ms, per (user, window) count and sum; sink: a Delta table (user_id, window_start, count, sum).

Written with the PyFlink-shaped API. By default it takes the vectorized path (columnar batches,
`map_batches`, a columnar window aggregate); `--per-record` runs the same job with per-record
Python functions (MapFunction, AggregateFunction + ProcessWindowFunction), as PyFlink would.

`--checkpoint-interval-ms MS` (0 = off) checkpoints every MS ms, exactly-once: the generator's
position, the windows and the Delta sink's pending files are state, so a restarted job goes on from
the last checkpoint and the table still holds every event exactly once. `--rate EVENTS_PER_S`
(0 = unthrottled) limits the source to that many events per second over all subtasks (Flink's
RateLimiterStrategy.per_second), e.g. to give checkpoints and failures time to happen; the result
is the same with or without a rate.

    millrace run pipelines/jobs/windowed_sum.py --parallelism 2 --events 2000000 --output PATH
    millrace run pipelines/jobs/windowed_sum.py --events 300000 --rate 30000 --checkpoint-interval-ms 500 --output PATH
    millrace run pipelines/jobs/windowed_sum.py --runtime-mode batch --output PATH    (the same table, stage by stage)
"""
from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

import numpy as np

from runtime.api.common import Row, Time, TimestampAssigner, Types, WatermarkStrategy
from runtime.api.connectors.base import RateLimiterStrategy
from runtime.api.connectors.delta import DeltaSink
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.datastream.aggregates import Aggregates, Count, Sum
from runtime.api.datastream.functions import AggregateFunction, ProcessWindowFunction
from runtime.api.datastream.window import TumblingEventTimeWindows
from runtime.core.checkpoint import CheckpointingMode
from runtime.core.errors import InvalidProgramError

MODULUS = 2147483647
BASE_TS_MS = 1700000000000
WINDOW_MS = 1000
OUTPUT_COLUMNS = ("user_id", "window_start", "count", "sum")


def event_columns(i: np.ndarray) -> dict[str, np.ndarray]:
    """The generator, vectorized over an int64 index array (no overflow: x < 2**31, x*x < 2**62)."""
    x = ((i * 1103515245 + 42) % MODULUS) ** 2 % MODULUS
    return {"user_id": x % 10000, "ts_ms": BASE_TS_MS + i, "value": (x // 10000) % 100}


def event_row(i: int) -> Row:
    """The same generator for one index, for the per-record path."""
    x = ((i * 1103515245 + 42) % MODULUS) ** 2 % MODULUS
    return Row(user_id=x % 10000, ts_ms=BASE_TS_MS + i, value=(x // 10000) % 100)


EVENT_TYPE = Types.ROW_NAMED(["user_id", "ts_ms", "value"], [Types.LONG(), Types.LONG(), Types.LONG()])
OUTPUT_TYPE = Types.ROW_NAMED(list(OUTPUT_COLUMNS), [Types.LONG(), Types.LONG(), Types.LONG(), Types.LONG()])


def double_value(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {**batch, "value": batch["value"] * 2}


def select_output(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {name: batch[name] for name in OUTPUT_COLUMNS}


class CountAndSum(AggregateFunction):
    def create_accumulator(self) -> tuple[int, int]:
        return (0, 0)

    def add(self, value: Row, acc: tuple[int, int]) -> tuple[int, int]:
        return (acc[0] + 1, acc[1] + value.value)

    def get_result(self, acc: tuple[int, int]) -> tuple[int, int]:
        return acc

    def merge(self, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
        return (a[0] + b[0], a[1] + b[1])


class EmitWindow(ProcessWindowFunction):
    def process(self, key: Any, context: ProcessWindowFunction.Context, elements: Iterable[tuple[int, int]]) -> Iterable[Row]:
        for count, total in elements:
            yield Row(user_id=key, window_start=context.window().start, count=count, sum=total)


def build(
    env: StreamExecutionEnvironment,
    events: int,
    output: str,
    per_record: bool = False,
    rate: int = 0,
    checkpoint_interval_ms: int = 0,
) -> None:
    """The job on `env`. `rate` > 0: events per second over all subtasks; `checkpoint_interval_ms`
    > 0: exactly-once checkpoints at that interval (0 leaves env's checkpointing as it is)."""
    if rate < 0 or checkpoint_interval_ms < 0:
        raise InvalidProgramError(f"windowed_sum: rate and checkpoint_interval_ms must be >= 0, got {rate}, {checkpoint_interval_ms}")
    if checkpoint_interval_ms > 0:
        env.enable_checkpointing(checkpoint_interval_ms, CheckpointingMode.EXACTLY_ONCE)
    limiter = RateLimiterStrategy.per_second(rate) if rate > 0 else None
    watermarks = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(TimestampAssigner.from_field("ts_ms"))
    windows = TumblingEventTimeWindows.of(Time.milliseconds(WINDOW_MS))
    if per_record:
        source = DataGeneratorSource(event_row, events, EVENT_TYPE, rate_limiter_strategy=limiter)
        stream = (
            env.from_source(source, WatermarkStrategy.no_watermarks(), "events")
            .map(lambda e: Row(user_id=e.user_id, ts_ms=e.ts_ms, value=e.value * 2), output_type=EVENT_TYPE)
            .name("double value")
            .assign_timestamps_and_watermarks(watermarks)
            .key_by(lambda e: e.user_id)
            .window(windows)
            .aggregate(CountAndSum(), EmitWindow(), output_type=OUTPUT_TYPE)
            .name("count and sum per user and window")
        )
    else:
        source = DataGeneratorSource(event_row, events, EVENT_TYPE, rate_limiter_strategy=limiter, batch_generator=event_columns)
        stream = (
            env.from_source(source, WatermarkStrategy.no_watermarks(), "events")
            .map_batches(double_value)
            .name("double value")
            .assign_timestamps_and_watermarks(watermarks)
            .key_by("user_id")
            .window(windows)
            .aggregate(Aggregates.of(count=Count(), sum=Sum("value")))
            .name("count and sum per user and window")
            .map_batches(select_output)
            .name("select columns")
        )
    # overwrite: re-running the job replaces the table's contents in one new version, never doubles it
    stream.sink_to(DeltaSink.for_path(output, mode="overwrite")).name("delta: windowed_sum")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--output", required=True, help="path of the output Delta table")
    parser.add_argument("--per-record", action="store_true", help="per-record Python functions instead of columnar batches")
    parser.add_argument("--checkpoint-interval-ms", type=int, default=0, metavar="MS", help="exactly-once checkpoints every MS ms (0 = off)")
    parser.add_argument("--rate", type=int, default=0, metavar="EVENTS_PER_S", help="events per second over all subtasks (0 = unthrottled)")
    parser.add_argument("--runtime-mode", choices=["streaming", "batch"], type=str.lower, default=None,
                        help="batch: stage by stage, exchanges through Delta (default: the environment's, streaming)")
    args = parser.parse_args(argv)
    if args.checkpoint_interval_ms < 0 or args.rate < 0:
        parser.error("--checkpoint-interval-ms and --rate must be >= 0")
    env = StreamExecutionEnvironment.get_execution_environment()
    if args.runtime_mode:
        env.set_runtime_mode(args.runtime_mode)
    build(env, args.events, args.output, args.per_record, rate=args.rate, checkpoint_interval_ms=args.checkpoint_interval_ms)
    env.execute("windowed_sum")


def reference(events: int) -> dict[tuple[int, int], tuple[int, int]]:
    """Plain-Python reference: (user_id, window_start) -> (count, sum)."""
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for i in range(events):
        x = ((i * 1103515245 + 42) % MODULUS) ** 2 % MODULUS
        key = (x % 10000, (BASE_TS_MS + i) - (BASE_TS_MS + i) % WINDOW_MS)
        c, s = out.get(key, (0, 0))
        out[key] = (c + 1, s + ((x // 10000) % 100) * 2)
    return out


if __name__ == "__main__":
    main()
