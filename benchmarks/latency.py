"""End-to-end latency of a keyed streaming job under a steady rate (issue 13).

A rate-limited source emits `--rate` events/s (each batch stamped with its creation time in µs),
keyed by `key` (1,000 keys) into a running per-key sum (KeyedStream.reduce: keyed state per record),
then a step that measures now - created for every record and keeps every 10th; a sink keeps
the samples in the TaskManager and writes them to a file when the job ends (Flink measures
latency in its TaskManagers too: shipping 10,000 samples/s through execute_and_collect to the
client, which hosts the embedded JobManager, made the client's garbage collections -- up to
85 ms as the result list grows -- stall the collecting tasks). The first `--warmup` seconds are
left out. Runs the same job once per buffer
timeout (Flink's execution.buffer-timeout; 100 ms is Flink's default) side by side and prints one
JSON line per run: {"name", "rate", "events", "buffer_timeout_ms", "p50_ms", "p99_ms", "max_ms", "samples"}.

    .venv/bin/python benchmarks/latency.py [--rate 100000] [--seconds 12] [--provider local|spark]
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import cloudpickle

import numpy as np

from runtime.api.common import Configuration, Row, Types, WatermarkStrategy
from runtime.api.connectors.base import RateLimiterStrategy
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import SinkFunction, StreamExecutionEnvironment
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig

KEYS = 1000
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # benchmarks/ is not on the TaskManagers' path


class KeepSamples(SinkFunction):
    """Keeps (created_us, lat_us) in the TaskManager; writes them to `folder` when the job ends."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.samples: list[tuple[int, int]] = []

    def invoke(self, value: Any, context: Any = None) -> None:
        self.samples.append((value["created_us"], value["lat_us"]) if isinstance(value, dict) else (value.created_us, value.lat_us))

    def close(self) -> None:
        np.save(Path(self.folder) / f"{uuid.uuid4().hex}.npy", np.array(self.samples, dtype=np.int64).reshape(-1, 2))


def stamped(idx: np.ndarray) -> dict[str, np.ndarray]:
    now_us = time.time_ns() // 1000
    return {"key": idx % KEYS, "v": np.ones(len(idx), dtype=np.int64), "created_us": np.full(len(idx), now_us, dtype=np.int64)}


def latencies(cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    now_us = time.time_ns() // 1000
    created = np.asarray(cols["created_us"], dtype=np.int64)
    return {"created_us": created[::10], "lat_us": now_us - created[::10]}


def run(cluster: MiniCluster, rate: int, seconds: float, warmup: float, parallelism: int, buffer_timeout_ms: int) -> dict[str, Any]:
    conf = Configuration()
    conf.set_string("execution.buffer-timeout", str(buffer_timeout_ms))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    n = int(rate * seconds)
    source = DataGeneratorSource(None, n, batch_generator=stamped, rate_limiter_strategy=RateLimiterStrategy.per_second(rate))
    out_type = Types.ROW_NAMED(["key", "v", "created_us"], [Types.LONG(), Types.LONG(), Types.LONG()])
    stream = (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "events")
        .map(lambda r: r, output_type=out_type)
        .key_by(lambda r: r.key)
        # a running sum per key that carries the newest record's creation time (sum("v") keeps the first's)
        .reduce(lambda a, b: Row(key=b.key, v=a.v + b.v, created_us=b.created_us))
        .map_batches(latencies)
    )
    start_us = time.time_ns() // 1000
    with tempfile.TemporaryDirectory() as folder:
        stream.add_sink(KeepSamples(folder))
        cluster.submit(env.get_job_graph(f"latency-{buffer_timeout_ms}ms")).get_job_execution_result(timeout=600)
        parts = [np.load(f) for f in Path(folder).glob("*.npy")]
    samples = np.concatenate(parts) if parts else np.empty((0, 2), dtype=np.int64)
    samples = samples[samples[:, 0] >= start_us + warmup * 1e6]
    if len(samples) == 0:
        raise RuntimeError("no latency samples")
    lat = samples[:, 1].astype(np.float64) / 1000.0
    return {
        "name": f"keyed_sum_buffer_timeout_{buffer_timeout_ms}ms", "rate": rate, "events": n, "buffer_timeout_ms": buffer_timeout_ms,
        "p50_ms": round(float(np.percentile(lat, 50)), 2), "p99_ms": round(float(np.percentile(lat, 99)), 2),
        "max_ms": round(float(lat.max()), 2), "samples": int(len(lat)),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=int, default=100_000)
    p.add_argument("--seconds", type=float, default=12.0)
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--buffer-timeouts", default="100,10", help="comma-separated ms; 100 is Flink's default")
    p.add_argument("--provider", choices=["local", "spark"], default="local")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    spark = None
    if args.provider == "spark":
        from runtime.deploy.spark_session import SparkSessionConfig, build_spark_session

        spark = build_spark_session(SparkSessionConfig(master=f"local[{args.parallelism + 1}]", app_name="millrace-latency"))
    with MiniCluster(MiniClusterConfig(provider=args.provider, tm_log_level="WARNING"), spark=spark) as cluster:
        run(cluster, args.rate, 2.0, 0.5, args.parallelism, 100)  # warm-up: TaskManagers up, code loaded
        for t in (int(x) for x in args.buffer_timeouts.split(",")):
            print(json.dumps(run(cluster, args.rate, args.seconds, args.warmup, args.parallelism, t)), flush=True)
    if spark is not None:
        spark.stop()


if __name__ == "__main__":
    main()
