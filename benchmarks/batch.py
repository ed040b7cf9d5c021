"""Batch benchmark: windowed_sum in BATCH and in STREAMING on Millrace, and as a Spark DataFrame job.

All on one Spark session (local[N], N = --parallelism + 1): Millrace's TaskManagers run on its
executors; the Spark job is the same computation written with DataFrames (generate, double,
group by user and 1 s window, count and sum, write Delta). Each configuration runs once to warm up
(JIT, imports, TaskManager launch) on --events/10, then is timed on --events; Millrace's cluster is
closed before Spark's job runs, so the TaskManagers hold no executor core then. `seconds` is the
client's wall time from building the program to its committed Delta output, for both. Every output is
checked against the plain-Python reference (`verified`). CPU: the JobManager (this process, also the
Spark driver), the TaskManagers, and the Spark JVM with its Python daemons ("spark"), for Spark's
job the driver and the JVM; `cpu_s_per_million_events` adds them all. Prints one JSON line per
configuration, then the ratio:

    {"name", "events", "seconds", "events_per_s", "verified", "jm_cpu_s", "tm_cpu_s", "spark_cpu_s", "cpu_s_per_million_events"}
    {"batch_vs_spark": <Spark seconds / Millrace batch seconds>}

    .venv/bin/python benchmarks/batch.py [--events 2000000] [--parallelism 2]
"""
from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from measure import CpuMeter, check_windowed_sum, emit, require, windowed_sum_reference

from pipelines.jobs import windowed_sum
from runtime.api.common import Configuration
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig


def millrace_job(cluster: MiniCluster, mode: str, parallelism: int, events: int, out: Path, blocking_dir: Path) -> float:
    conf = Configuration()
    conf.set_string("execution.runtime-mode", mode)
    conf.set_string("execution.batch.blocking-results.dir", str(blocking_dir))
    start = time.perf_counter()  # as for Spark's job: from building the program to its committed output
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    windowed_sum.build(env, events, str(out))
    result = cluster.submit(env.get_job_graph(f"windowed_sum-{mode.lower()}")).get_job_execution_result(timeout=1800)
    if result.status.value != "FINISHED":
        raise RuntimeError(f"{mode} run ended {result.status.value}")
    return time.perf_counter() - start


def spark_job(spark: Any, events: int, out: Path, partitions: int) -> float:
    """windowed_sum as DataFrames: the same generator, doubling, window and aggregates, into Delta."""
    from pyspark.sql import functions as F

    start = time.perf_counter()
    mod, base, size = windowed_sum.MODULUS, windowed_sum.BASE_TS_MS, windowed_sum.WINDOW_MS
    i = F.col("id")
    a = F.pmod(i * F.lit(1103515245) + F.lit(42), F.lit(mod))  # < 2**31: its square fits a long
    df = (
        spark.range(0, events, numPartitions=partitions)
        .select(a.alias("a"), (F.lit(base) + i).alias("ts_ms"))
        .select(F.pmod(F.col("a") * F.col("a"), F.lit(mod)).alias("x"), F.col("ts_ms"))
        .select((F.col("x") % 10000).alias("user_id"), F.col("ts_ms"), ((F.col("x") / 10000).cast("long") % 100 * 2).alias("value"))
        .groupBy("user_id", (F.col("ts_ms") - F.col("ts_ms") % size).alias("window_start"))
        .agg(F.count(F.lit(1)).alias("count"), F.sum("value").alias("sum"))
    )
    df.write.format("delta").mode("overwrite").save(str(out))
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--parallelism", type=int, default=2)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    from runtime.deploy.spark_session import SparkSessionConfig, build_spark_session

    windowed_sum_reference(args.events)  # for the checks, outside every timed span
    spark = build_spark_session(SparkSessionConfig(master=f"local[{args.parallelism + 1}]", app_name="millrace-batch-bench"))
    spark.sparkContext.setLogLevel("ERROR")
    rows: list[dict[str, Any]] = []

    def row(name: str, seconds: float, cpu: CpuMeter, out: Path) -> None:
        rows.append(emit({"name": name, "events": args.events, "seconds": round(seconds, 3), "events_per_s": round(args.events / seconds),
                          **check_windowed_sum(str(out), args.events), **cpu.fields(args.events)}))

    tmp = Path(tempfile.mkdtemp(prefix="millrace-batch-bench-"))
    try:
        with MiniCluster(MiniClusterConfig(provider="spark", tm_log_level="WARNING"), spark=spark) as cluster:
            for mode in ("BATCH", "STREAMING"):
                out = tmp / f"millrace-{mode.lower()}"
                millrace_job(cluster, mode, args.parallelism, max(1, args.events // 10), out, tmp / "blocking")  # warm-up
                shutil.rmtree(out, ignore_errors=True)
                with CpuMeter.for_cluster(cluster, spark=True) as cpu:
                    seconds = millrace_job(cluster, mode, args.parallelism, args.events, out, tmp / "blocking")
                row(f"millrace_{mode.lower()}", seconds, cpu, out)
        out = tmp / "spark"
        spark_job(spark, max(1, args.events // 10), out, args.parallelism)  # warm-up
        shutil.rmtree(out, ignore_errors=True)
        with CpuMeter.process_tree() as cpu:
            seconds = spark_job(spark, args.events, out, args.parallelism)
        row("spark_dataframe", seconds, cpu, out)
    finally:
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    by = {r["name"]: r["seconds"] for r in rows}
    print(json.dumps({"batch_vs_spark": round(by["spark_dataframe"] / by["millrace_batch"], 2),
                      "batch_vs_streaming": round(by["millrace_streaming"] / by["millrace_batch"], 2)}), flush=True)
    return require(rows)


if __name__ == "__main__":
    sys.exit(main())
