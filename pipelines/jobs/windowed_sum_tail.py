"""windowed_sum over a live Delta table: the continuous DeltaSource follows the table's commits.

The input table holds windowed_sum's events (user_id, ts_ms, value), appended commit by commit by
another process (`benchmarks/delta_appender.py`, a Spark job, a Dagster asset). The job reads each
new commit as it lands, with event time from `ts_ms` per file, and computes windowed_sum's
per-user count and sum over tumbling 1 s event-time windows into a Delta table (appended, exactly
once with checkpoints). A window is written once the watermark passes its end, so the newest one
waits for later events, or for `millrace stop --drain`.

    millrace run pipelines/jobs/windowed_sum_tail.py --input /tmp/in --output /tmp/out --checkpoint-interval-ms 1000
"""
from __future__ import annotations

import argparse
from typing import Any

from pipelines.jobs.windowed_sum import WINDOW_MS, double_value, select_output
from runtime.api.common import Time, TimestampAssigner, WatermarkStrategy
from runtime.api.connectors.delta import DeltaSink
from runtime.api.connectors.delta_source import DeltaSource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.datastream.aggregates import Aggregates, Count, Sum
from runtime.api.datastream.window import TumblingEventTimeWindows
from runtime.core.checkpoint import CheckpointingMode
from runtime.core.errors import InvalidProgramError

SOURCE_UID = "windowed-sum-tail-source"


def build(
    env: StreamExecutionEnvironment,
    input_path: str,
    output: str,
    discovery_interval_ms: int = 1000,
    checkpoint_interval_ms: int = 1000,
    starting_version: int | str | None = None,
) -> DeltaSource:
    """The job on `env`; returns its source (`snapshot_version`: where it started)."""
    if checkpoint_interval_ms < 0:
        raise InvalidProgramError(f"windowed_sum_tail: checkpoint_interval_ms must be >= 0, got {checkpoint_interval_ms}")
    if checkpoint_interval_ms > 0:
        env.enable_checkpointing(checkpoint_interval_ms, CheckpointingMode.EXACTLY_ONCE)
    builder = DeltaSource.for_table(input_path).columns(["user_id", "ts_ms", "value"]).continuous(discovery_interval_ms)
    if starting_version is not None:
        builder.starting_version(starting_version)
    source = builder.build()
    # event time per file of the table: ts_ms grows with each commit, so each file's watermark may follow its largest ts_ms
    watermarks = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(TimestampAssigner.from_field("ts_ms"))
    windows_to_delta(env.from_source(source, watermarks, "delta: events (continuous)").uid(SOURCE_UID), output, "windowed_sum_tail")
    return source


def windows_to_delta(events: Any, output: str, name: str) -> None:
    """windowed_sum's computation over a live stream of its events: value doubled, count and sum per
    user and 1 s event-time window, appended to the Delta table `output` (uids "windows", "sink")."""
    (
        events.map_batches(double_value).name("double value")
        .key_by("user_id")
        .window(TumblingEventTimeWindows.of(Time.milliseconds(WINDOW_MS)))
        .aggregate(Aggregates.of(count=Count(), sum=Sum("value"))).name("count and sum per user and window").uid("windows")
        .map_batches(select_output).name("select columns")
        .sink_to(DeltaSink.for_path(output)).name(f"delta: {name}").uid("sink")
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True, help="the Delta table to follow")
    parser.add_argument("--output", required=True, help="path of the output Delta table")
    parser.add_argument("--discovery-interval-ms", type=int, default=1000)
    parser.add_argument("--checkpoint-interval-ms", type=int, default=1000, metavar="MS")
    parser.add_argument("--starting-version", default=None, help="a version, or 'latest' (default: the table as it is, then new commits)")
    args = parser.parse_args(argv)
    start = args.starting_version
    env = StreamExecutionEnvironment.get_execution_environment()
    build(env, args.input, args.output, args.discovery_interval_ms, args.checkpoint_interval_ms,
          int(start) if start is not None and start != "latest" else start)
    env.execute("windowed_sum_tail")


if __name__ == "__main__":
    main()
