"""Long-running streaming example: live activity per user segment, for a session cluster.

An unbounded, rate-limited event source (the same event generator as windowed_sum, endless, with
event time = wall-clock time), key by segment (user_id % segments), tumbling event-time windows of
`window_ms`, per (segment, window) event count and value sum, printed to the TaskManagers' logs.
The job never ends by itself: it is submitted detached (`millrace run -d`, or the Dagster job
`submit_live_activity`) and stopped by cancelling it (`millrace cancel`, `cancel_live_activity`).

    millrace run pipelines/jobs/live_activity.py --cluster session --detached --rate 200
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from runtime.api.common import Time, TimestampAssigner, WatermarkStrategy
from runtime.api.connectors.base import Source
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.datastream.aggregates import Aggregates, Count, Sum
from runtime.api.datastream.window import TumblingEventTimeWindows
from runtime.api.operators.base import InputStatus, SourceOperator
from runtime.core.errors import InvalidProgramError
from runtime.core.records import ColumnBatch

from pipelines.jobs.windowed_sum import MODULUS

JOB_NAME = "live_activity"


class RateSourceOperator(SourceOperator):
    """Emits one batch per `1 / batches_per_second` s; between batches it reports NOTHING_AVAILABLE
    so the task's loop sleeps briefly and stays responsive to cancellation."""

    def __init__(self, source: "RateEventSource") -> None:
        super().__init__()
        self.source = source
        self._next_index = 0
        self._next_due = 0.0

    def open(self) -> None:
        assert self.ctx is not None
        self._next_index = self.ctx.subtask_index  # subtask k takes indices k, k+p, k+2p, ...
        self._next_due = time.monotonic()

    def emit_next(self) -> InputStatus:
        assert self.ctx is not None and self.output is not None
        now = time.monotonic()
        if now < self._next_due:
            return InputStatus.NOTHING_AVAILABLE
        s, p = self.source, self.ctx.parallelism
        per_batch = max(1, s.rate // (s.batches_per_second * p))
        idx = self._next_index + p * np.arange(per_batch, dtype=np.int64)
        self._next_index = int(idx[-1]) + p
        x = ((idx * 1103515245 + 42) % MODULUS) ** 2 % MODULUS
        ts = np.full(per_batch, int(time.time() * 1000), dtype=np.int64)
        self.output.emit(ColumnBatch({"user_id": x % 10000, "ts_ms": ts, "value": (x // 10000) % 100}))
        self._next_due = max(self._next_due + 1.0 / s.batches_per_second, now - 1.0)  # no burst after a stall
        return InputStatus.MORE_AVAILABLE


class RateEventSource(Source):
    """An unbounded source of about `rate` events per second (over all subtasks)."""

    def __init__(self, rate: int = 200, batches_per_second: int = 5) -> None:
        if rate < 1 or batches_per_second < 1:
            raise InvalidProgramError(f"RateEventSource: rate and batches_per_second must be >= 1, got {rate}, {batches_per_second}")
        self.rate = int(rate)
        self.batches_per_second = int(batches_per_second)

    def create_operator(self) -> RateSourceOperator:
        return RateSourceOperator(self)

    def is_bounded(self) -> bool:
        return False


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
