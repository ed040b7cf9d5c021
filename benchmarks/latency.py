"""End-to-end latency of a keyed streaming job at an offered rate, without coordinated omission.

The job: a rate-limited source of `--rate` events/s over all subtasks -> key_by(key) over 1,000
keys -> a running per-key count (KeyedStream.reduce: keyed state per record) -> a sink
(SinkFunction.invoke per record), p=2 on local TaskManagers (or on Spark executors).

How latency is measured (Gil Tene's coordinated omission, avoided):
- every record is stamped with its *intended* send time, not the time it was generated: subtask s
  of p is offered rate/p events/s, so its k-th record is due at start_s + k / (rate/p), where
  start_s is one batch interval (10 ms) before its first batch went out (a source collects a batch
  of records that arrived during the interval before it sends them). A source that falls behind
  its schedule (a busy task, back pressure) keeps stamping by the schedule, so the waits it caused
  count as latency instead of being left out;
- latency = the time the record reached the sink - its stamp, at the sink (every 10th record is
  kept; every record is counted);
- `achieved_rate` is events / (last record at the sink - first stamp), beside `offered_rate`; a run
  whose achieved rate falls below 97 % of the offered one is marked `"saturated": true` (its
  latency grows without bound with the run's length: its percentiles describe that run only).
The sinks keep their samples, counts and the last count per key in the TaskManagers and write them
to files when the job ends (shipping samples to the client, which hosts the embedded JobManager,
would let the client's garbage collections stall the job). Every run is checked: the sink saw
every event exactly once, and each key's final count equals the plain-Python count.

Runs once per buffer timeout (Flink's execution.buffer-timeout; 100 ms is its default) at --rate,
then searches the highest rate at which p99 stays under --target-p99-ms (with a 10 ms buffer
timeout): rates rise by --search-step until p99 passes the target or the run saturates, then one
bisection step. Prints one JSON line per run:
{"name", "offered_rate", "achieved_rate", "saturated", "events", "buffer_timeout_ms", "p50_ms",
"p99_ms", "max_ms", "samples", "verified", "jm_cpu_s", "tm_cpu_s", "cpu_s_per_million_events"},
then {"name": "max_rate_p99_under_50ms", "rate", ...}.

    .venv/bin/python benchmarks/latency.py [--rate 100000] [--seconds 12] [--buffer-timeouts 100,10,0] [--provider local|spark]
"""
from __future__ import annotations

import argparse
import logging
import pickle
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import cloudpickle
import numpy as np
from measure import CpuMeter, emit, require

from runtime.api.common import Configuration, Row, Types, WatermarkStrategy
from runtime.api.connectors.base import DEFAULT_BATCH_SECONDS, RateLimiterStrategy
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import SinkFunction, StreamExecutionEnvironment
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig

KEYS = 1000
SAMPLE_EVERY = 10
SATURATED_BELOW = 0.97
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # benchmarks/ is not on the TaskManagers' path


class IntendedTimeStamps:
    """The batch generator: the records of one source subtask, each stamped with its intended send time (µs)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.per_subtask_rate = rate
        self.start_us: float | None = None
        self.sent = 0

    def open(self, ctx: Any) -> None:
        self.per_subtask_rate = self.rate / ctx.get_number_of_parallel_subtasks()

    def __call__(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        if self.start_us is None:  # the first batch holds what arrived during the interval before it
            self.start_us = time.time_ns() / 1000 - DEFAULT_BATCH_SECONDS * 1e6
        k = self.sent + np.arange(len(idx), dtype=np.float64)
        self.sent += len(idx)
        due = (self.start_us + k * (1e6 / self.per_subtask_rate)).astype(np.int64)
        return {"key": idx % KEYS, "v": np.ones(len(idx), dtype=np.int64), "created_us": due}


class MeasuringSink(SinkFunction):
    """Per record: latency of every 10th, a count of all, the newest running count per key; a file at the end."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.samples: list[tuple[int, int]] = []
        self.counts: dict[int, int] = {}
        self.records = 0
        self.first_due_us: int | None = None
        self.last_arrival_us = 0

    def invoke(self, value: Any, context: Any = None) -> None:
        self.records += 1
        self.counts[value.key] = value.v
        if self.records % SAMPLE_EVERY == 1:
            now = time.time_ns() // 1000
            self.samples.append((value.created_us, now - value.created_us))
            self.last_arrival_us = now
            if self.first_due_us is None or value.created_us < self.first_due_us:
                self.first_due_us = value.created_us

    def close(self) -> None:
        out = {"samples": np.array(self.samples, dtype=np.int64).reshape(-1, 2), "counts": self.counts, "records": self.records,
               "first_due_us": self.first_due_us, "last_arrival_us": max(self.last_arrival_us, time.time_ns() // 1000 if self.records else 0)}
        (Path(self.folder) / f"{uuid.uuid4().hex}.pickle").write_bytes(pickle.dumps(out))


def expected_counts(n: int) -> dict[int, int]:
    return dict(enumerate(np.bincount(np.arange(n) % KEYS, minlength=KEYS).tolist()))


def run(cluster: MiniCluster, rate: int, seconds: float, warmup: float, parallelism: int, buffer_timeout_ms: int, name: str) -> dict[str, Any]:
    conf = Configuration()
    conf.set_string("execution.buffer-timeout", str(buffer_timeout_ms))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    n = int(rate * seconds)
    source = DataGeneratorSource(None, n, batch_generator=IntendedTimeStamps(rate), rate_limiter_strategy=RateLimiterStrategy.per_second(rate))
    out_type = Types.ROW_NAMED(["key", "v", "created_us"], [Types.LONG(), Types.LONG(), Types.LONG()])
    with tempfile.TemporaryDirectory() as folder:
        (
            env.from_source(source, WatermarkStrategy.no_watermarks(), "events")
            .map(lambda r: r, output_type=out_type)
            .key_by(lambda r: r.key)
            # a running count per key that carries the newest record's stamp (sum("v") keeps the first's)
            .reduce(lambda a, b: Row(key=b.key, v=a.v + b.v, created_us=b.created_us))
            .add_sink(MeasuringSink(folder))
        )
        with CpuMeter.for_cluster(cluster) as cpu:
            result = cluster.submit(env.get_job_graph(f"latency-{name}")).get_job_execution_result(timeout=600)
        if result.status.value != "FINISHED":
            raise RuntimeError(f"latency run {name} ended {result.status.value}")
        parts = [pickle.loads(f.read_bytes()) for f in Path(folder).glob("*.pickle")]
    samples = np.concatenate([p["samples"] for p in parts]) if parts else np.empty((0, 2), dtype=np.int64)
    counts: dict[int, int] = {}
    for p in parts:
        counts.update(p["counts"])  # a key lives in one subtask
    records = sum(p["records"] for p in parts)
    verified = records == n and counts == expected_counts(n)
    first_due = min(p["first_due_us"] for p in parts if p["first_due_us"] is not None)
    span_s = (max(p["last_arrival_us"] for p in parts) - first_due) / 1e6
    achieved = n / span_s if span_s > 0 else 0.0
    kept = samples[samples[:, 0] >= first_due + warmup * 1e6]
    if len(kept) == 0:
        raise RuntimeError(f"latency run {name}: no samples after the {warmup} s warm-up")
    lat = kept[:, 1].astype(np.float64) / 1000.0
    return {
        "name": name, "offered_rate": rate, "achieved_rate": round(achieved), "saturated": achieved < SATURATED_BELOW * rate,
        "events": n, "buffer_timeout_ms": buffer_timeout_ms,
        "p50_ms": round(float(np.percentile(lat, 50)), 2), "p99_ms": round(float(np.percentile(lat, 99)), 2),
        "max_ms": round(float(lat.max()), 2), "samples": int(len(lat)), "sink_records": records, "verified": verified,
        **cpu.fields(n),
    }


def highest_rate(cluster: MiniCluster, args: argparse.Namespace, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The highest offered rate whose run keeps up and has p99 < target (10 ms buffer timeout)."""
    def passes(rate: int) -> bool:
        r = emit(run(cluster, rate, args.search_seconds, args.warmup, args.parallelism, 10, f"search_{rate}"))
        rows.append(r)
        return not r["saturated"] and r["p99_ms"] < args.target_p99_ms

    best, rate, failed = 0, args.search_start, None
    while rate <= args.search_max:
        if not passes(rate):
            failed = rate
            break
        best, rate = rate, rate + args.search_step
    if best and failed:
        mid = (best + failed) // 2
        if passes(mid):
            best = mid
    return {"name": f"max_rate_p99_under_{args.target_p99_ms:g}ms", "rate": best, "first_failing_rate": failed,
            "buffer_timeout_ms": 10, "parallelism": args.parallelism, "run_seconds": args.search_seconds}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=int, default=100_000)
    p.add_argument("--seconds", type=float, default=12.0)
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--buffer-timeouts", default="100,10,0", help="comma-separated ms; 100 is Flink's default")
    p.add_argument("--target-p99-ms", type=float, default=50.0)
    p.add_argument("--search-start", type=int, default=50_000, help="first rate of the search (0: no search)")
    p.add_argument("--search-step", type=int, default=50_000)
    p.add_argument("--search-max", type=int, default=1_000_000)
    p.add_argument("--search-seconds", type=float, default=8.0)
    p.add_argument("--provider", choices=["local", "spark"], default="local")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    spark = None
    if args.provider == "spark":
        from runtime.deploy.spark_session import SparkSessionConfig, build_spark_session

        spark = build_spark_session(SparkSessionConfig(master=f"local[{args.parallelism + 1}]", app_name="millrace-latency"))
    rows: list[dict[str, Any]] = []
    with MiniCluster(MiniClusterConfig(provider=args.provider, tm_log_level="WARNING"), spark=spark) as cluster:
        run(cluster, args.rate, 2.0, 0.5, args.parallelism, 100, "warmup")  # TaskManagers up, code loaded
        for t in (int(x) for x in args.buffer_timeouts.split(",") if x):
            rows.append(emit(run(cluster, args.rate, args.seconds, args.warmup, args.parallelism, t, f"keyed_sum_buffer_timeout_{t}ms")))
        if args.search_start:
            emit(highest_rate(cluster, args, rows))
    if spark is not None:
        spark.stop()
    return require(rows)


if __name__ == "__main__":
    sys.exit(main())
