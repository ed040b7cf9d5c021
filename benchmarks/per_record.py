"""The per-record path (PyFlink-style Python functions per element) at p=2, beside a plain loop (issue 13).

Runs side by side in one process, on one MiniCluster (TaskManagers warm: a small job first):
- `plain_python_loop`: map -> filter over the same records in a single Python loop (the baseline
  of the stateless job);
- `plain_python_windowed_sum`: the main job's computation as a single Python loop
  (`windowed_sum.reference`: generate, key, window, count and sum; the baseline of the windowed job);
- `per_record_stateless_p2`: a per-record source of ints -> map(lambda) -> filter(lambda) -> a
  sink function that counts (SinkFunction.invoke per record), p=2;
- `per_record_windowed_sum_p2`: the main job with `per_record=True` (Rows, keyed state, Flink's
  WindowOperator), p=2, into Delta.
Prints one JSON line per run {"name", "events", "seconds", "events_per_s"} and the ratios.
Targets (issue 13): stateless >= 1,000,000 events/s, windowed_sum >= 250,000 events/s.

    .venv/bin/python benchmarks/per_record.py [--events 2000000] [--provider local|spark]
"""
from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path

from pipelines.jobs import windowed_sum
from runtime.api.common import WatermarkStrategy
from runtime.api.connectors.generator import NumberSequenceSource
from runtime.api.datastream import SinkFunction, StreamExecutionEnvironment
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig


class Count(SinkFunction):
    def invoke(self, value, context=None) -> None:  # noqa: D102 - per record, as PyFlink's sinks
        pass


def plain_loop(events: int) -> float:
    start = time.perf_counter()
    kept = 0
    for i in range(events):
        v = i * 3 + 1
        if v % 2 == 0:
            kept += 1
    assert kept > 0
    return time.perf_counter() - start


def stateless(cluster: MiniCluster, events: int) -> float:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    (
        env.from_source(NumberSequenceSource(0, events - 1), WatermarkStrategy.no_watermarks(), "numbers")
        .map(lambda i: i * 3 + 1)
        .filter(lambda v: v % 2 == 0)
        .add_sink(Count())
    )
    result = cluster.submit(env.get_job_graph("per-record stateless")).get_job_execution_result(timeout=900)
    return result.net_runtime_ms / 1000


def windowed(cluster: MiniCluster, events: int, out: Path) -> float:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    windowed_sum.build(env, events, str(out), per_record=True)
    return cluster.submit(env.get_job_graph("per-record windowed_sum")).get_job_execution_result(timeout=900).net_runtime_ms / 1000


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=2_000_000)
    p.add_argument("--provider", choices=["local", "spark"], default="local")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    spark = None
    if args.provider == "spark":
        from runtime.deploy.spark_session import SparkSessionConfig, build_spark_session

        spark = build_spark_session(SparkSessionConfig(master="local[3]", app_name="millrace-per-record"))
    rows = []

    def emit(name: str, seconds: float) -> None:
        row = {"name": name, "events": args.events, "seconds": round(seconds, 3), "events_per_s": round(args.events / seconds)}
        rows.append(row)
        print(json.dumps(row), flush=True)

    emit("plain_python_loop", plain_loop(args.events))
    start = time.perf_counter()
    windowed_sum.reference(args.events)
    emit("plain_python_windowed_sum", time.perf_counter() - start)
    with tempfile.TemporaryDirectory() as tmp, MiniCluster(MiniClusterConfig(provider=args.provider, tm_log_level="WARNING"), spark=spark) as cluster:
        stateless(cluster, 10_000)  # warm-up
        emit("per_record_stateless_p2", stateless(cluster, args.events))
        emit("per_record_windowed_sum_p2", windowed(cluster, args.events, Path(tmp) / "out"))
    by = {r["name"]: r["events_per_s"] for r in rows}
    print(json.dumps({"ratios": {
        "per_record_stateless_p2_vs_plain_loop": round(by["per_record_stateless_p2"] / by["plain_python_loop"], 3),
        "per_record_windowed_sum_p2_vs_plain_windowed_sum": round(by["per_record_windowed_sum_p2"] / by["plain_python_windowed_sum"], 3),
    }}), flush=True)
    if spark is not None:
        spark.stop()


if __name__ == "__main__":
    main()
