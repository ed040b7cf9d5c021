"""Second example job: roll the windowed_sum table (per user and second) up to per user and minute.

Reads one version of the windowed_sum Delta table with the bounded DeltaSource (files split
across subtasks), takes each row's `window_start` as its event time, keys by user and sums over
tumbling 60 s event-time windows; the sink overwrites a Delta table
(user_id, minute_start, windows, count, sum): `windows` is how many 1 s windows were rolled up.

No watermarks are generated while reading (the files are in no particular time order); the
source's final watermark at the end of the table fires every window once, with complete data.

    millrace run pipelines/jobs/user_minute_totals.py --input warehouse/windowed_sum --output PATH
"""
from __future__ import annotations

import argparse

import numpy as np

from runtime.api.common import Time, TimestampAssigner, WatermarkStrategy
from runtime.api.connectors.delta import DeltaSink
from runtime.api.connectors.delta_source import DeltaSource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.datastream.aggregates import Aggregates, Count, Sum
from runtime.api.datastream.window import TumblingEventTimeWindows

MINUTE_MS = 60_000
INPUT_COLUMNS = ("user_id", "window_start", "count", "sum")
OUTPUT_COLUMNS = ("user_id", "minute_start", "windows", "count", "sum")
KEY_COLUMNS = ("user_id", "minute_start")


def select_output(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {
        "user_id": batch["user_id"],
        "minute_start": batch["window_start"],
        "windows": batch["windows"],
        "count": batch["count"],
        "sum": batch["sum"],
    }


def build(env: StreamExecutionEnvironment, input_path: str, output: str, version: int | None = None) -> DeltaSource:
    """Add the job to `env`; returns the source (its `snapshot_version` is the input version read)."""
    source = DeltaSource.for_path(input_path, version=version, columns=list(INPUT_COLUMNS))
    timestamps = WatermarkStrategy.no_watermarks().with_timestamp_assigner(TimestampAssigner.from_field("window_start"))
    (
        env.from_source(source, timestamps, "delta: windowed_sum")
        .key_by("user_id")
        .window(TumblingEventTimeWindows.of(Time.milliseconds(MINUTE_MS)))
        .aggregate(Aggregates.of(windows=Count(), count=Sum("count"), sum=Sum("sum")))
        .name("roll up per user and minute")
        .map_batches(select_output)
        .name("select columns")
        .sink_to(DeltaSink.for_path(output, mode="overwrite"))
        .name("delta: user_minute_totals")
    )
    return source


def reference(rows: list[dict[str, int]]) -> dict[tuple[int, int], tuple[int, int, int]]:
    """Plain-Python reference over windowed_sum rows: (user_id, minute_start) -> (windows, count, sum)."""
    out: dict[tuple[int, int], tuple[int, int, int]] = {}
    for r in rows:
        key = (r["user_id"], r["window_start"] - r["window_start"] % MINUTE_MS)
        w, c, s = out.get(key, (0, 0, 0))
        out[key] = (w + 1, c + r["count"], s + r["sum"])
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True, help="path of the windowed_sum Delta table")
    parser.add_argument("--version", type=int, default=None, help="table version to read (default: newest)")
    parser.add_argument("--output", required=True, help="path of the output Delta table")
    args = parser.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    build(env, args.input, args.output, args.version)
    env.execute("user_minute_totals")


if __name__ == "__main__":
    main()
