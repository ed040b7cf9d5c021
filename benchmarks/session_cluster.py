"""Benchmark: job submission latency on a warm session cluster, and TaskManager replacement on Spark.

Side by side in one run:
  - session: `millrace cluster start`'s JobManager process with TaskManagers already running on
    Spark executors; 20 small jobs submitted one after another over REST. Per job: submit ->
    job RUNNING (Flink's figure, ~1 s) and submit -> every task RUNNING, submit -> FINISHED.
  - baseline: the same small job on the embedded default (a fresh JobManager and TaskManagers
    on Spark executors per job, as `millrace run` without --cluster does), a few times.
  - replacement: a TaskManager's process is killed; time until the ResourceManager has a new one
    registered (the session keeps its minimum of TaskManagers).
Prints one JSON line per measurement, then the medians. Each job's row carries the CPU seconds of
the JobManager and TaskManager processes it took (session: the cluster's JobManager process; the
embedded baseline: this process, and everything below it -- Spark's JVM and the TaskManagers -- as
"spark"), and per million events
(each job has 100 events, so that figure is per-job overhead, not throughput).

    .venv/bin/python benchmarks/session_cluster.py [--jobs 20] [--kills 3] [--provider spark|local]
        [--slot-jobs 50] [--slots-only]

First, static against dynamic slots (fine-grained resources): a warm session cluster of each kind
in turn (alternating, `--slot-rounds` of each; the run with the median median reported), `--slot-jobs` jobs whose one slot sharing group declares 0.5 CPU
and 256 MB of task heap, one after another: {"slots", "jobs", "median_ms", "p95_ms"} for submit ->
every task RUNNING (the job is RUNNING before it has any slot: that figure is in
"job_running_median_ms").
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import tempfile
import time
from pathlib import Path

from measure import CpuMeter

from runtime.api.common.typeinfo import Types
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.execution import StatusListener
from runtime.core.states import JobStatus
from runtime.deploy.cluster_entrypoint import ClusterConfig
from runtime.deploy.cluster_process import start_cluster_process, stop_cluster
from runtime.deploy.remote import rest_client

JOB_EVENTS = 100


def small_job(parallelism: int):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    (
        env.from_collection(list(range(JOB_EVENTS)), type_info=Types.LONG())
        .map(lambda x: x * 2, output_type=Types.LONG())
        .key_by(lambda x: x % 3)
        .reduce(lambda a, b: a + b)
        .print()
    )
    return env.get_job_graph("small job")


def _all_tasks_running_or_done(details: dict) -> bool:
    subtasks = [st for v in details["vertices"] for st in v["subtasks"]]
    return bool(subtasks) and all(st["status"] in ("RUNNING", "FINISHED") for st in subtasks)


def follow_job(client, job_id: str, t0: float, interval_s: float) -> tuple[float, float, float]:
    """Seconds from `t0` until the job was RUNNING, every task RUNNING (or done), and FINISHED;
    asserts it FINISHED (every benchmark job must run to its end)."""
    running = tasks = None
    while True:
        d = client.job_details(job_id).model_dump(by_alias=True, mode="json")
        now = time.perf_counter() - t0
        if running is None and d["state"] in ("RUNNING", "FINISHED"):
            running = now
        if tasks is None and (_all_tasks_running_or_done(d) or d["state"] == "FINISHED"):
            tasks = now
        if d["state"] in ("FINISHED", "FAILED", "CANCELED"):
            assert d["state"] == "FINISHED", d
            assert running is not None and tasks is not None
            return running, tasks, now
        time.sleep(interval_s)


def session_latencies(client, jobs: int, parallelism: int, jm_pid: int) -> list[dict]:
    out = []
    for i in range(jobs):
        job_graph = small_job(parallelism)
        cpu = CpuMeter({"jm": lambda: (jm_pid,), "tm": lambda: [int(t.model_dump(by_alias=True)["pid"]) for t in client.task_managers()]}).__enter__()
        t0 = time.perf_counter()
        job_id = client.submit_job(job_graph)
        running, tasks, now = follow_job(client, job_id, t0, 0.005)
        cpu.__exit__(None, None, None)
        row = {"config": "session", "job": i, "submit_to_running_s": round(running, 4), "submit_to_tasks_running_s": round(tasks, 4),
               "submit_to_finished_s": round(now, 4), **cpu.fields(JOB_EVENTS)}
        print(json.dumps(row), flush=True)
        out.append(row)
    return out


def _status_times(seen: dict[str, float], t0: float) -> StatusListener:
    """A status listener noting, into this run's `seen`, the seconds from `t0` to each status's first report."""

    def on_status(_job_id: str, status: JobStatus, _cause: str | None) -> None:
        seen.setdefault(status.name, time.perf_counter() - t0)

    return on_status


def embedded_latencies(runs: int, parallelism: int, provider: str) -> list[dict]:
    """`millrace run` without a cluster: a JobManager and TaskManagers per job (Spark already up)."""
    from runtime.deploy.embedded import EmbeddedExecutor

    if provider == "spark":  # the SparkSession outlives the per-job clusters, as in a Dagster run process
        from runtime.deploy.spark_session import SparkSessionConfig, build_spark_session

        started = time.perf_counter()
        build_spark_session(SparkSessionConfig(master=f"local[{max(2, parallelism)}]"))
        print(json.dumps({"config": "embedded: Spark session start (excluded)", "seconds": round(time.perf_counter() - started, 2)}), flush=True)
    out = []
    for i in range(runs):
        job_graph = small_job(parallelism)
        seen: dict[str, float] = {}
        with CpuMeter.process_tree() as cpu:
            t0 = time.perf_counter()
            client = EmbeddedExecutor(provider=provider).execute(job_graph, _status_times(seen, t0))
            result = client.get_job_execution_result(timeout=300)
            total = time.perf_counter() - t0
        row = {"config": "embedded (baseline)", "job": i, "submit_to_running_s": round(seen.get("RUNNING", total), 4),
               "submit_to_tasks_running_s": round(total - (result.running_ms or 0) / 1000, 4), "submit_to_finished_s": round(total, 4),
               **cpu.fields(JOB_EVENTS)}
        print(json.dumps(row), flush=True)
        out.append(row)
    return out


def replacement_times(client, kills: int) -> list[float]:
    times = []
    for i in range(kills):
        tms = [t.model_dump(by_alias=True, mode="json") for t in client.task_managers()]
        victim = tms[0]
        before = {t["id"] for t in tms}
        pid = victim.get("pid")
        t0 = time.perf_counter()
        os.kill(int(pid), signal.SIGKILL)
        while True:
            now = {t.model_dump(by_alias=True, mode="json")["id"] for t in client.task_managers()}
            if victim["id"] not in now and len(now) >= len(before):
                break
            time.sleep(0.02)
        elapsed = time.perf_counter() - t0
        print(json.dumps({"config": "replace killed TaskManager", "kill": i, "tm": victim["id"], "seconds": round(elapsed, 3)}), flush=True)
        times.append(elapsed)
        time.sleep(1)
    return times


SLOT_GROUP_CPU, SLOT_GROUP_HEAP_MB = 0.5, 256  # the group every job of the slots comparison declares


def grouped_job(parallelism: int):
    """small_job in one slot sharing group with declared resources (half a default slot)."""
    from runtime.api.datastream import SlotSharingGroup

    group = SlotSharingGroup.builder("bench").set_cpu_cores(SLOT_GROUP_CPU).set_task_heap_memory_mb(SLOT_GROUP_HEAP_MB).build()
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    (
        env.from_collection(list(range(JOB_EVENTS)), type_info=Types.LONG()).slot_sharing_group(group)
        .map(lambda x: x * 2, output_type=Types.LONG())
        .key_by(lambda x: x % 3)
        .reduce(lambda a, b: a + b)
        .print()
    )
    return env.get_job_graph("grouped job")


def slot_latencies(dynamic: bool, jobs: int, parallelism: int, provider: str, spread: bool) -> dict:
    """A warm session cluster with static or dynamic slots; `jobs` grouped jobs one after another:
    submit -> job RUNNING and submit -> every task RUNNING (what slot allocation is part of).
    `spread`: one subtask per TaskManager in both modes (packing would put both half-size dynamic
    slots into one TaskManager, and two subtasks starting in one process is a different layout)."""
    home = Path(tempfile.mkdtemp(prefix="millrace-bench-slots-"))
    proc, endpoint = start_cluster_process(ClusterConfig(
        home=str(home), provider=provider, task_managers=parallelism, max_task_managers=parallelism, idle_timeout_s=None,
        log_level="WARNING", cluster={"resource_manager": {"dynamic_slots": dynamic, "evenly_spread_out_slots": spread}},
    ))
    client = rest_client(endpoint)
    try:
        while len(client.task_managers()) < parallelism:
            time.sleep(0.05)
        rows = []
        for i in range(jobs + 2):  # the first two warm up (imports, first deployments)
            t0 = time.perf_counter()
            job_id = client.submit_job(grouped_job(parallelism))
            running, tasks, _ = follow_job(client, job_id, t0, 0.002)
            if i >= 2:
                rows.append((running * 1000, tasks * 1000))
            # its slots are free again before the next job (static and dynamic alike)
            while sum(t.free_slots for t in client.task_managers()) < parallelism:
                time.sleep(0.002)
        if dynamic:  # the slots were cut: a TaskManager reports dynamic slots
            assert all(t.model_dump(by_alias=True)["dynamicSlots"] for t in client.task_managers())
    finally:
        stop_cluster(endpoint, home, proc=proc)
    tasks_ms = sorted(r[1] for r in rows)
    return {
        "slots": "dynamic" if dynamic else "static", "jobs": len(rows),
        "median_ms": round(statistics.median(tasks_ms), 1), "p95_ms": round(tasks_ms[int(0.95 * (len(tasks_ms) - 1))], 1),
        "job_running_median_ms": round(statistics.median(r[0] for r in rows), 1), "measured": "submit -> every task RUNNING",
        "provider": provider, "placement": "spread" if spread else "pack",
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--baseline-runs", type=int, default=3)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--provider", choices=["spark", "local"], default="spark")
    parser.add_argument("--slot-jobs", type=int, default=50, help="jobs per slots mode (static, dynamic) in the comparison")
    parser.add_argument("--slots-only", action="store_true", help="only the static vs dynamic slots comparison")
    parser.add_argument("--slot-rounds", type=int, default=3, help="warm clusters per slots mode, alternating")
    parser.add_argument("--slot-placement", choices=["spread", "pack"], default="spread", help="placement in the slots comparison")
    args = parser.parse_args()
    slots = []
    for dynamic in (False, True) * args.slot_rounds if args.slot_jobs else ():  # alternating: drift hits both alike
        slots.append(slot_latencies(dynamic, args.slot_jobs, args.parallelism, args.provider, args.slot_placement == "spread"))
    for mode in ("static", "dynamic"):
        runs = sorted((r for r in slots if r["slots"] == mode), key=lambda r: r["median_ms"])
        if runs:
            mid = runs[(len(runs) - 1) // 2]  # the run with the median median
            print(json.dumps({**mid, "median_ms_runs": [r["median_ms"] for r in runs], "p95_ms_runs": [r["p95_ms"] for r in runs]}), flush=True)
    if args.slots_only:
        return
    home = Path(tempfile.mkdtemp(prefix="millrace-bench-"))
    t0 = time.perf_counter()
    proc, endpoint = start_cluster_process(ClusterConfig(
        home=str(home), provider=args.provider, task_managers=args.parallelism, max_task_managers=args.parallelism + 2, idle_timeout_s=None,
        log_level="WARNING",
    ))
    client = rest_client(endpoint)
    while len(client.task_managers()) < args.parallelism:
        time.sleep(0.05)
    print(json.dumps({"config": "session cluster start", "seconds_until_task_managers_registered": round(time.perf_counter() - t0, 2)}), flush=True)
    try:
        session_latencies(client, 2, args.parallelism, endpoint.pid)  # warm-up: imports, first deployments
        session = session_latencies(client, args.jobs, args.parallelism, endpoint.pid)
        replace = replacement_times(client, args.kills)
    finally:
        stop_cluster(endpoint, home, proc=proc)
    baseline = embedded_latencies(args.baseline_runs, args.parallelism, args.provider)

    def med(rows: list[dict], key: str) -> float:
        return round(statistics.median(r[key] for r in rows), 4)

    summary = {
        "session_median_submit_to_running_s": med(session, "submit_to_running_s"),
        "session_median_submit_to_tasks_running_s": med(session, "submit_to_tasks_running_s"),
        "session_median_submit_to_finished_s": med(session, "submit_to_finished_s"),
        "embedded_median_submit_to_running_s": med(baseline, "submit_to_running_s"),
        "embedded_median_submit_to_finished_s": med(baseline, "submit_to_finished_s"),
        "session_median_cpu_s_per_job": round(statistics.median(r["jm_cpu_s"] + r["tm_cpu_s"] for r in session), 3),
        "embedded_median_cpu_s_per_job": round(statistics.median(r["jm_cpu_s"] + r["tm_cpu_s"] + r["spark_cpu_s"] for r in baseline), 3),
        "finished_ratio_embedded_over_session": round(med(baseline, "submit_to_finished_s") / med(session, "submit_to_finished_s"), 1),
        "replace_killed_task_manager_median_s": round(statistics.median(replace), 3) if replace else None,
        "provider": args.provider,
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
