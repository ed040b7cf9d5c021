"""The per-record path (PyFlink-style Python functions per element) at p=2, beside plain loops (issue 13).

Runs side by side in one process, on one MiniCluster (TaskManagers warm: a small job first):
- `plain_python_loop`: map -> filter over the same records in a single Python loop, kept records
  counted and summed (the baseline of the stateless job);
- `plain_python_windowed_sum`: the main job's computation as a single Python loop
  (`windowed_sum.reference`: generate, key, window, count and sum; the baseline of the windowed job);
- `per_record_stateless_p2`: a per-record source of ints -> map(lambda) -> filter(lambda) -> a
  sink function (SinkFunction.invoke per record) that counts and sums what it gets, p=2;
- `per_record_windowed_sum_p2`: the main job with `per_record=True` (Rows, keyed state, Flink's
  WindowOperator), p=2, into Delta.
Every row is checked: the stateless sinks' count and sum equal the plain loop's, the windowed
Delta table equals the reference row for row (`verified`). Each row carries the CPU seconds of
the JobManager (this process) and TaskManager processes per million events.
Prints one JSON line per run {"name", "events", "seconds", "events_per_s", "verified", "cpu_s_per_million_events", ...}
and the ratios. Targets (issue 13): stateless >= 1,000,000 events/s, windowed_sum >= 250,000 events/s.

    .venv/bin/python benchmarks/per_record.py [--events 2000000] [--provider local|spark] [--cpus 0]
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import cloudpickle
from measure import CpuMeter, check_windowed_sum, emit, require, windowed_sum_reference

from pipelines.jobs import windowed_sum
from runtime.api.common import WatermarkStrategy
from runtime.api.connectors.generator import NumberSequenceSource
from runtime.api.datastream import SinkFunction, StreamExecutionEnvironment
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # benchmarks/ is not on the TaskManagers' path


class CountAndSum(SinkFunction):
    """Counts and sums its records (per record, as PyFlink's sinks); writes both to a file at the end."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.count = 0
        self.total = 0

    def invoke(self, value: int, context: Any = None) -> None:
        self.count += 1
        self.total += value

    def close(self) -> None:
        (Path(self.folder) / uuid.uuid4().hex).write_text(f"{self.count} {self.total}")


def plain_loop(events: int) -> tuple[int, int]:
    kept = total = 0
    for i in range(events):
        v = i * 3 + 1
        if v % 2 == 0:
            kept += 1
            total += v
    return kept, total


def stateless(cluster: MiniCluster, events: int) -> tuple[float, tuple[int, int]]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    with tempfile.TemporaryDirectory() as folder:
        (
            env.from_source(NumberSequenceSource(0, events - 1), WatermarkStrategy.no_watermarks(), "numbers")
            .map(lambda i: i * 3 + 1)
            .filter(lambda v: v % 2 == 0)
            .add_sink(CountAndSum(folder))
        )
        result = cluster.submit(env.get_job_graph("per-record stateless")).get_job_execution_result(timeout=900)
        parts = [tuple(map(int, f.read_text().split())) for f in Path(folder).iterdir()]
    if result.status.value != "FINISHED":
        raise RuntimeError(f"the stateless job ended {result.status.value}")
    return result.net_runtime_ms / 1000, (sum(c for c, _ in parts), sum(t for _, t in parts))


def windowed(cluster: MiniCluster, events: int, out: Path) -> float:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    windowed_sum.build(env, events, str(out), per_record=True)
    result = cluster.submit(env.get_job_graph("per-record windowed_sum")).get_job_execution_result(timeout=900)
    if result.status.value != "FINISHED":
        raise RuntimeError(f"the windowed job ended {result.status.value}")
    return result.net_runtime_ms / 1000


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=2_000_000)
    p.add_argument("--provider", choices=["local", "spark"], default="local")
    p.add_argument("--cpus", default="", help="pin this process and every process it starts (TaskManagers) to these CPUs, e.g. 0: "
                   "a machine with fewer free cores; events/s follows the cores, CPU seconds per event do not")
    args = p.parse_args()
    if args.cpus:
        os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})
    logging.basicConfig(level=logging.WARNING)
    n = args.events
    spark = None
    if args.provider == "spark":
        from runtime.deploy.spark_session import SparkSessionConfig, build_spark_session

        spark = build_spark_session(SparkSessionConfig(master="local[3]", app_name="millrace-per-record"))
    rows: list[dict[str, Any]] = []

    def row(name: str, seconds: float, cpu: CpuMeter, **check: Any) -> None:
        rows.append(emit({"name": name, "events": n, "seconds": round(seconds, 3), "events_per_s": round(n / seconds), **check, **cpu.fields(n)}))

    with CpuMeter() as cpu:
        t0 = time.perf_counter()
        expected = plain_loop(n)
        seconds = time.perf_counter() - t0
    row("plain_python_loop", seconds, cpu, kept=expected[0], verified=expected[0] > 0)
    with CpuMeter() as cpu:
        t0 = time.perf_counter()
        reference = windowed_sum.reference(n)
        seconds = time.perf_counter() - t0
    row("plain_python_windowed_sum", seconds, cpu, rows=len(reference), verified=bool(reference))
    windowed_sum_reference(n)  # cached for the check, outside the timed spans
    with tempfile.TemporaryDirectory() as tmp, MiniCluster(MiniClusterConfig(provider=args.provider, tm_log_level="WARNING"), spark=spark) as cluster:
        stateless(cluster, 10_000)  # warm-up
        with CpuMeter.for_cluster(cluster) as cpu:
            seconds, got = stateless(cluster, n)
        row("per_record_stateless_p2", seconds, cpu, kept=got[0], verified=got == expected)
        out = Path(tmp) / "out"
        with CpuMeter.for_cluster(cluster) as cpu:
            seconds = windowed(cluster, n, out)
        row("per_record_windowed_sum_p2", seconds, cpu, **check_windowed_sum(str(out), n))
    by = {r["name"]: r["events_per_s"] for r in rows}
    print(json.dumps({"ratios": {
        "per_record_stateless_p2_vs_plain_loop": round(by["per_record_stateless_p2"] / by["plain_python_loop"], 3),
        "per_record_windowed_sum_p2_vs_plain_windowed_sum": round(by["per_record_windowed_sum_p2"] / by["plain_python_windowed_sum"], 3),
    }}), flush=True)
    if spark is not None:
        spark.stop()
    return require(rows)


if __name__ == "__main__":
    sys.exit(main())
