"""Savepoint and restore cost: a keyed job holding --keys keys, stopped with a savepoint at one
parallelism and restored at another.

The job: a generator of 4 x keys records over ~8 s (key = i % keys, value = 1), key_by(key), reduce(sum)
(one ReducingState entry per key), into a sink that keeps each key's newest sum. It runs at --from
parallelism until every key is in state, then `stop-with-savepoint`; the same program is then
submitted at --to parallelism with execution.savepoint.path set and runs to its end. Side by side,
the same program is submitted at --to without a savepoint (the baseline: TaskManager deployment
without state). Prints one JSON line per (from, to) pair:

    {"keys", "parallelism_from", "parallelism_to", "savepoint_acked_s", "savepoint_committed_s", "restore_s",
     "start_s", "state_bytes", "backend", "verified", "cpu_s_per_million_events", ...}

savepoint_acked_s: trigger -> the last task's acknowledgement (every state file written);
savepoint_committed_s: trigger -> the savepoint committed to Delta (it exists from then), both
from the job's checkpoint statistics; restore_s: submission -> every task RUNNING (state is loaded
before a task runs) of the restored job; start_s the same for the baseline.

Checked: the restored job's final sum of every key equals the plain-Python count of its records
(4): each key's state came back from the savepoint exactly once, at the new parallelism, and the
records after the savepoint were added to it (`verified`, `wrong_keys`, `missing_keys`).
cpu_s_per_million_events: the JobManager (this process) and TaskManagers over the whole pair
(first job, savepoint, restored job to its end) per million records.

    .venv/bin/python benchmarks/savepoints.py [--keys 1000000] [--pairs 2:3,2:1] [--backend hashmap|rocksdb] [--provider local|spark]
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from typing import Any

import numpy as np
from bench_cluster import KeyOf, LastValuePerKey, bench_cluster, check_sums, expected_sums, read_last_values
from measure import CpuMeter, emit, require

from runtime.api.common import Configuration, WatermarkStrategy
from runtime.api.connectors.base import RateLimiterStrategy
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.deploy.minicluster import MiniCluster
from runtime.rpc import messages as m

EVENTS_PER_KEY = 4
RUN_SECONDS = 8


def job(keys: int, events: int, parallelism: int, backend: str, tmp: str, sink_folder: str, savepoint: str | None = None) -> Any:
    """The keyed job; its source is throttled so the run lasts ~8 s (about the unthrottled speed at 1M keys),
    so a stop-with-savepoint finds it running with every key in state whatever --keys is."""
    conf = Configuration()
    conf.set_string("state.backend.type", backend)
    conf.set_string("state.checkpoints.dir", f"{tmp}/checkpoints")
    if savepoint:
        conf.set_string("execution.savepoint.path", savepoint)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    (
        env.from_source(
            DataGeneratorSource(KeyOf(keys), events, rate_limiter_strategy=RateLimiterStrategy.per_second(events / RUN_SECONDS)),
            WatermarkStrategy.no_watermarks(), "records",
        ).uid("records")
        .key_by(lambda r: r[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1])).uid("sum per key")
        .add_sink(LastValuePerKey(sink_folder)).uid("last sum per key")
    )
    return env.get_job_graph(f"savepoints-{keys}")


def details(cluster: MiniCluster, job_id: str) -> m.JobDetailsMessage:
    return cluster.dispatcher_gateway().call_sync("request_job_details", m.JobIdMessage(job_id=job_id), timeout=30)


def wait_all_running(cluster: MiniCluster, job_id: str, timeout: float = 600) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        d = details(cluster, job_id)
        states = [s.state.value for v in d.vertices for s in v.subtasks]
        if states and all(s in ("RUNNING", "FINISHED") for s in states):
            return time.monotonic() - t0
        if any(s in ("FAILED", "CANCELED") for s in states):
            raise RuntimeError(f"job {job_id} did not start: {states}")
        time.sleep(0.05)
    raise TimeoutError(f"job {job_id} not running after {timeout}s")


def source_records(cluster: MiniCluster, job_id: str) -> int:
    d = details(cluster, job_id)
    first = d.vertices[0]  # the source vertex comes first (topological order)
    return sum(s.metrics.records_out for s in first.subtasks)


def stop_with_savepoint(cluster: MiniCluster, job_id: str, target: str) -> tuple[str, int]:
    gw = cluster.dispatcher_gateway()
    trig = gw.call_sync("trigger_savepoint", m.TriggerSavepoint(job_id=job_id, stop=True, target_directory=target), timeout=30)
    while True:
        st = gw.call_sync("request_savepoint_status", m.SavepointStatusRequest(job_id=job_id, trigger_id=trig.trigger_id), timeout=30)
        if st.status == "COMPLETED":
            assert st.location
            return st.location, 0
        if st.status == "FAILED":
            raise RuntimeError(f"savepoint failed: {st.failure.describe() if st.failure else '?'}")
        time.sleep(0.05)


def cancel(cluster: MiniCluster, job_id: str) -> None:
    def status() -> str:
        return cluster.dispatcher_gateway().call_sync("request_job_status", m.JobIdMessage(job_id=job_id), timeout=30).status.value

    cluster.dispatcher_gateway().call_sync("cancel_job", m.JobIdMessage(job_id=job_id), timeout=30)
    while status() not in ("CANCELED", "FINISHED", "FAILED"):
        time.sleep(0.1)


def run_pair(cluster: MiniCluster, keys: int, p_from: int, p_to: int, backend: str, tmp: str) -> dict[str, Any]:
    events = keys * EVENTS_PER_KEY
    folders = [tempfile.mkdtemp(dir=tmp) for _ in range(3)]
    with CpuMeter.for_cluster(cluster) as cpu:
        client = cluster.submit(job(keys, events, p_from, backend, tmp, folders[0]))
        wait_all_running(cluster, client.job_id)
        while source_records(cluster, client.job_id) < keys * 1.05:  # every key in state, most records still to come
            time.sleep(0.2)
        location, _ = stop_with_savepoint(cluster, client.job_id, f"{tmp}/savepoints")
        client.get_job_execution_result(timeout=600)
        stats_message = cluster.dispatcher_gateway().call_sync("request_checkpoint_statistics", m.JobIdMessage(job_id=client.job_id), timeout=30)
        stats = json.loads(stats_message.statistics_json)
        sp = next(e for e in stats["history"] if e["is_savepoint"] and e["status"] == "COMPLETED")
        restored = cluster.submit(job(keys, events, p_to, backend, tmp, folders[1], savepoint=location))
        restore_s = wait_all_running(cluster, restored.job_id)
        result = restored.get_job_execution_result(timeout=1800)
    if result.status.value != "FINISHED":
        raise RuntimeError(f"the restored job ended {result.status.value}")
    check = check_sums(read_last_values(folders[1]), expected_sums(np.arange(events), keys))
    fresh = cluster.submit(job(keys, events, p_to, backend, tmp, folders[2]))
    start_s = wait_all_running(cluster, fresh.job_id)
    cancel(cluster, fresh.job_id)
    return {
        "keys": keys, "parallelism_from": p_from, "parallelism_to": p_to, "backend": backend,
        "savepoint_acked_s": round(sp["end_to_end_duration"] / 1000, 3),
        "savepoint_committed_s": round((sp["end_to_end_duration"] + (sp.get("commit_duration") or 0)) / 1000, 3),
        "restore_s": round(restore_s, 3), "start_s": round(start_s, 3), "state_bytes": sp["state_size"],
        **check, **cpu.fields(events),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--pairs", default="2:3,2:1", help="from:to parallelism pairs")
    parser.add_argument("--backend", default="hashmap", choices=["hashmap", "rocksdb"])
    parser.add_argument("--provider", choices=["local", "spark"], default="local")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, bench_cluster(args.provider, "millrace-savepoint-bench") as cluster:
        for pair in args.pairs.split(","):
            p_from, p_to = (int(x) for x in pair.split(":"))
            rows.append(emit(run_pair(cluster, args.keys, p_from, p_to, args.backend, tmp)))
    return require(rows)


if __name__ == "__main__":
    sys.exit(main())
