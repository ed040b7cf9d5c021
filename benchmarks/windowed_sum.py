"""Benchmark: the main job (windowed_sum) on the embedded cluster vs. a plain Python loop.

Runs in one process, side by side:
  - plain_python_loop: the same computation as a single-process Python loop (the baseline);
  - millrace p=1 and p=2: the job on a MiniCluster whose TaskManagers run on Spark executors
    (local[N]); `seconds` is the job's time from submission to FINISHED (Delta commit included)
    on TaskManagers that are already registered (a warm-up job ran first); Spark start and
    TaskManager launch are excluded and reported separately (`cold_seconds` = the first job on
    a fresh cluster, TaskManager launch included);
  - the per-record path (PyFlink-style functions) at p=2 on fewer events, for comparison.
Prints one JSON line per configuration, then the ratios.

    .venv/bin/python benchmarks/windowed_sum.py [--events 2000000] [--provider spark|local]
"""
from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path

from pipelines.jobs import windowed_sum  # importable on TaskManagers too (installed package)
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig


def plain_loop(events: int) -> float:
    start = time.perf_counter()
    acc: dict[tuple[int, int], list[int]] = {}
    base, mod, size = windowed_sum.BASE_TS_MS, windowed_sum.MODULUS, windowed_sum.WINDOW_MS
    for i in range(events):
        x = ((i * 1103515245 + 42) % mod) ** 2 % mod
        ts = base + i
        key = (x % 10000, ts - ts % size)
        a = acc.get(key)
        if a is None:
            acc[key] = [1, ((x // 10000) % 100) * 2]
        else:
            a[0] += 1
            a[1] += ((x // 10000) % 100) * 2
    rows = [(u, w, c, s) for (u, w), (c, s) in acc.items()]
    assert len(rows) > 0
    return time.perf_counter() - start


def run_job(cluster: MiniCluster, parallelism: int, events: int, out_dir: Path, per_record: bool = False) -> float:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    windowed_sum.build(env, events, str(out_dir), per_record=per_record)
    client = cluster.submit(env.get_job_graph("windowed_sum"))
    result = client.get_job_execution_result(timeout=900)
    return result.net_runtime_ms / 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--per-record-events", type=int, default=200_000)
    parser.add_argument("--provider", choices=["spark", "local"], default="spark")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    spark = None
    if args.provider == "spark":
        from runtime.deploy.spark_session import SparkSessionConfig, build_spark_session

        spark = build_spark_session(SparkSessionConfig(master="local[2]", app_name="millrace-bench"))

    results: list[dict] = []

    def emit(name: str, events: int, parallelism: int, seconds: float, **extra: float) -> None:
        row = {"name": name, "events": events, "parallelism": parallelism, "seconds": round(seconds, 3),
               "events_per_s": round(events / seconds), **extra}
        results.append(row)
        print(json.dumps(row), flush=True)

    emit("plain_python_loop", args.events, 1, plain_loop(args.events))
    with tempfile.TemporaryDirectory() as tmp:
        for p in (1, 2):
            with MiniCluster(MiniClusterConfig(provider=args.provider, tm_log_level="WARNING"), spark=spark) as cluster:
                t0 = time.perf_counter()
                run_job(cluster, p, 10_000, Path(tmp) / f"warmup{p}")
                cold = time.perf_counter() - t0
                seconds = run_job(cluster, p, args.events, Path(tmp) / f"p{p}")
                emit(f"millrace_columnar_p{p}", args.events, p, seconds, cold_seconds_10k_events=round(cold, 3))
                if p == 2 and args.per_record_events:
                    s = run_job(cluster, p, args.per_record_events, Path(tmp) / "per_record", per_record=True)
                    emit("millrace_per_record_p2", args.per_record_events, p, s)
    by = {r["name"]: r for r in results}
    base = by["plain_python_loop"]["events_per_s"]
    ratios = {
        "p1_vs_plain_loop": round(by["millrace_columnar_p1"]["events_per_s"] / base, 2),
        "p2_vs_plain_loop": round(by["millrace_columnar_p2"]["events_per_s"] / base, 2),
        "p2_vs_p1": round(by["millrace_columnar_p2"]["events_per_s"] / by["millrace_columnar_p1"]["events_per_s"], 2),
    }
    if "millrace_per_record_p2" in by:
        ratios["per_record_p2_vs_plain_loop"] = round(by["millrace_per_record_p2"]["events_per_s"] / base, 2)
    print(json.dumps({"ratios": ratios}), flush=True)
    if spark is not None:
        spark.stop()


if __name__ == "__main__":
    main()
