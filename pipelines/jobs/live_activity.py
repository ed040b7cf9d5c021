"""Long-running streaming example: live activity per user segment, for a session cluster.

An unbounded, rate-limited event source (the same event generator as windowed_sum, endless, with
event time = wall-clock time), key by segment (user_id % segments), tumbling event-time windows of
`window_ms`, per (segment, window) event count and value sum, printed to the TaskManagers' logs.
The job never ends by itself: it is submitted detached (`millrace run -d`, or the Dagster job
`submit_live_activity`) and stopped by cancelling it (`millrace cancel`, `cancel_live_activity`).

The source is a DataGeneratorSource over (practically) endless indices with a rate limiter, so its
position is checkpointed state like every generator's: with checkpoints on, a restarted job goes on
from the index where the checkpoint was taken instead of starting over at 0.

    millrace run pipelines/jobs/live_activity.py --cluster session --detached --rate 200
"""
from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from pipelines.jobs.windowed_sum import MODULUS
from runtime.api.common import Time, TimestampAssigner, WatermarkStrategy
from runtime.api.connectors.base import RateLimiterStrategy
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.connectors.source import Boundedness
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.datastream.aggregates import Aggregates, Count, Sum
from runtime.api.datastream.window import TumblingEventTimeWindows
from runtime.core.errors import InvalidProgramError

JOB_NAME = "live_activity"
ENDLESS = (1 << 63) - 1  # Flink's idiom for an unbounded generator: count = Long.MAX_VALUE
CHUNK = 1024


def live_event_columns(idx: np.ndarray) -> dict[str, np.ndarray]:
    """windowed_sum's generator for index `idx` (reduced mod MODULUS first: no int64 overflow at any
    index), stamped with the wall-clock time it is generated at."""
    x = (((idx % MODULUS) * 1103515245 + 42) % MODULUS) ** 2 % MODULUS
    ts = np.full(len(idx), int(time.time() * 1000), dtype=np.int64)
    return {"user_id": x % 10000, "ts_ms": ts, "value": (x // 10000) % 100}


class RateEventSource(DataGeneratorSource):
    """An unbounded source of about `rate` events per second (over all subtasks), in about
    `batches_per_second` batches per second per subtask. Its position (the next index per stripe of
    the index space) is checkpointed; on restore it goes on from there."""

    def __init__(self, rate: int = 200, batches_per_second: int = 5, clock: Callable[[], float] | None = None) -> None:
        if rate < 1 or batches_per_second < 1:
            raise InvalidProgramError(f"RateEventSource: rate and batches_per_second must be >= 1, got {rate}, {batches_per_second}")
        self.rate = int(rate)
        self.batches_per_second = int(batches_per_second)
        super().__init__(
            None,
            ENDLESS,
            rate_limiter_strategy=RateLimiterStrategy.per_second(self.rate, clock=clock, batch_seconds=1.0 / self.batches_per_second),
            batch_generator=live_event_columns,
            batch_size=CHUNK,
        )

    def get_boundedness(self) -> Boundedness:
        return Boundedness.CONTINUOUS_UNBOUNDED


def build(env: StreamExecutionEnvironment, rate: int = 200, segments: int = 10, window_ms: int = 10_000) -> None:
    watermarks = WatermarkStrategy.for_bounded_out_of_orderness(1000).with_timestamp_assigner(TimestampAssigner.from_field("ts_ms"))

    def segment(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"segment": batch["user_id"] % segments, "ts_ms": batch["ts_ms"], "value": batch["value"]}

    (
        env.from_source(RateEventSource(rate), watermarks, "live events")
        .map_batches(segment)
        .name("segment")
        .key_by("segment")
        .window(TumblingEventTimeWindows.of(Time.milliseconds(window_ms)))
        .aggregate(Aggregates.of(events=Count(), value_sum=Sum("value")))
        .name("activity per segment and window")
        .print("live_activity")
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=200, help="events per second")
    parser.add_argument("--segments", type=int, default=10)
    parser.add_argument("--window-ms", type=int, default=10_000)
    parser.add_argument("--name", default=JOB_NAME)
    args = parser.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    build(env, args.rate, args.segments, args.window_ms)
    env.execute(args.name)


if __name__ == "__main__":
    main()
