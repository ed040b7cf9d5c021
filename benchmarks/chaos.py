"""Chaos run: the main job with checkpoints and the exactly-once Delta sink, TaskManagers SIGKILLed.

Runs windowed_sum (checkpoints every 500 ms, exactly-once, the source throttled to --rate events
per second over all subtasks) on a MiniCluster whose TaskManagers run on Spark executors (or as
local processes), SIGKILLs a random TaskManager process --kills times at random moments spread
over the run (each kill waits until the job runs again and at least one checkpoint completed
since the last one), waits for FINISHED and checks the Delta table row for row against the
plain-Python reference. Prints one JSON line:

    {"kills", "kills_requested", "restarts", "rows", "duplicate_keys", "missing_keys", "wrong_values", "verified",
     "max_recovery_s", "median_recovery_s", "seconds", "jm_cpu_s", "tm_cpu_s", "cpu_s_per_million_events"}

recovery = kill -> every task RUNNING again (new attempts deployed and running). Exits non-zero
on any lost, duplicated or wrong row, and when fewer kills happened than --kills asked for (the
job ended first: give it more events or a lower rate). TaskManager CPU counts the killed
processes up to their last reading (every 0.5 s) and the replacements from their start.

    .venv/bin/python benchmarks/chaos.py --events 300000 --rate 30000 --kills 5 --output /tmp/chaos --provider spark [--state-backend rocksdb-incremental]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import shutil
import signal
import statistics
import sys
import time
from collections.abc import Iterator
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # measure.py beside it, also when loaded by a test
from measure import CpuMeter, check_windowed_sum

from pipelines.jobs import windowed_sum
from runtime.api.common import Configuration
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.checkpoint import CheckpointingMode
from runtime.core.states import ExecutionState, JobStatus
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig
from runtime.rpc import messages as m

log = logging.getLogger("chaos")


def _details(cluster: MiniCluster, job_id: str) -> m.JobDetailsMessage:
    return cluster.dispatcher_gateway().call_sync("request_job_details", m.JobIdMessage(job_id=job_id), timeout=10)


def _subtasks(cluster: MiniCluster, job_id: str) -> list[m.SubtaskDetails]:
    return [s for v in _details(cluster, job_id).vertices for s in v.subtasks]


def _completed_checkpoints(cluster: MiniCluster, job_id: str) -> int:
    stats = cluster.dispatcher_gateway().call_sync("request_checkpoint_statistics", m.JobIdMessage(job_id=job_id), timeout=10)
    return int(json.loads(stats.statistics_json)["counts"]["completed"])


@contextlib.contextmanager
def chaos_cluster(provider: str, parallelism: int, spark: Any, app_name: str) -> Iterator[MiniCluster]:
    """A MiniCluster for a failure run (5 s heartbeat timeout); with provider "spark" on `spark`, or on
    a SparkSession of its own (local[parallelism + 1]) that is stopped afterwards."""
    own_spark = spark is None and provider == "spark"
    if own_spark:
        from runtime.deploy.spark_session import SparkSessionConfig, build_spark_session

        spark = build_spark_session(SparkSessionConfig(master=f"local[{parallelism + 1}]", app_name=app_name))
    try:
        with MiniCluster(MiniClusterConfig(provider=provider, tm_log_level="WARNING", heartbeat_timeout_ms=5000), spark=spark) as cluster:
            yield cluster
    finally:
        if own_spark:
            spark.stop()


def run(args: argparse.Namespace, spark: Any = None) -> dict[str, Any]:
    """One chaos run; `spark`: an existing SparkSession to put TaskManagers on (else one is started and stopped)."""
    if os.path.exists(args.output):
        shutil.rmtree(args.output)
    rng = random.Random(args.seed)
    with chaos_cluster(args.provider, args.parallelism, spark, "millrace-chaos") as cluster:
        conf = Configuration()
        conf.set_string("state.checkpoints.dir", os.path.join(args.output + "-checkpoints"))
        kind, _, variant = args.state_backend.partition("-")
        conf.set_string("state.backend.type", kind)
        if variant == "incremental":  # changelog checkpoints: restores replay base + logs
            conf.set_string("state.backend.incremental", "true")
            conf.set_string("state.changelog.periodic-materialize.interval", "3 s")
        env = StreamExecutionEnvironment.get_execution_environment(conf)
        env.set_parallelism(args.parallelism)
        env.enable_checkpointing(args.checkpoint_interval_ms, CheckpointingMode.EXACTLY_ONCE)
        windowed_sum.build(env, args.events, args.output, per_record=args.per_record, rate=args.rate)
        start = time.monotonic()
        cpu = CpuMeter.for_cluster(cluster).__enter__()
        client = cluster.submit(env.get_job_graph("windowed_sum-chaos"))
        expected_s = args.events / args.rate if args.rate else 10.0
        recoveries: list[float] = []
        kills = 0
        checkpoints_at_last = 0
        while kills < args.kills and client.get_job_status() not in (JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELED):
            # a random moment, spread over the run: after the job runs again and a checkpoint completed since
            time.sleep(rng.uniform(0.3, max(0.6, expected_s / (args.kills + 1))))
            subtasks = _subtasks(cluster, client.job_id)
            if not all(s.state is ExecutionState.RUNNING for s in subtasks) or _completed_checkpoints(cluster, client.job_id) <= checkpoints_at_last:
                continue
            tms = [t for t in cluster.task_managers() if t.pid and any(s.tm_id == t.tm_id for s in subtasks)]
            if not tms:
                continue
            victim = rng.choice(tms)
            before = {(s.subtask_index, s.attempt_id) for s in subtasks}
            os.kill(victim.pid, signal.SIGKILL)
            killed_at = time.monotonic()
            kills += 1
            log.warning("kill %d: TaskManager %s (pid %d)", kills, victim.tm_id, victim.pid)
            while True:
                status = client.get_job_status()
                if status in (JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELED):
                    break
                now_subtasks = _subtasks(cluster, client.job_id)
                restarted = any((s.subtask_index, s.attempt_id) not in before for s in now_subtasks)
                if restarted and all(s.state in (ExecutionState.RUNNING, ExecutionState.FINISHED) for s in now_subtasks):
                    recoveries.append(time.monotonic() - killed_at)
                    break
                if time.monotonic() - killed_at > 120:
                    raise RuntimeError("the job did not recover within 120 s")
                time.sleep(0.05)
            checkpoints_at_last = _completed_checkpoints(cluster, client.job_id)
        result = client.get_job_execution_result(timeout=900)
        seconds = time.monotonic() - start
        cpu.__exit__(None, None, None)
        exceptions = cluster.dispatcher_gateway().call_sync("request_job_exceptions", m.JobIdMessage(job_id=client.job_id), timeout=10)
        out: dict[str, Any] = {
            "kills": kills,
            "kills_requested": args.kills,
            "restarts": exceptions.num_restarts,
            **check_windowed_sum(args.output, args.events),
            "max_recovery_s": round(max(recoveries), 2) if recoveries else None,
            "median_recovery_s": round(statistics.median(recoveries), 2) if recoveries else None,
            "seconds": round(seconds, 2),
            "status": result.status.value,
            **cpu.fields(args.events),
        }
        return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--rate", type=int, default=30_000, help="events per second over all subtasks (0 = unthrottled)")
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--output", required=True, help="path of the output Delta table (replaced)")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--provider", choices=["spark", "local"], default="spark")
    parser.add_argument("--checkpoint-interval-ms", type=int, default=500)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--per-record", action="store_true", help="the per-record job (WindowOperator state in the state backend)")
    parser.add_argument("--state-backend", default="hashmap", choices=["hashmap", "rocksdb", "rocksdb-incremental"],
                        help="rocksdb-incremental: changelog checkpoints materialized every 3 s (chains of ~6)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    out = run(args)
    print(json.dumps(out), flush=True)
    if out["kills"] < out["kills_requested"]:
        print(f"chaos: only {out['kills']} of {out['kills_requested']} kills happened before the job ended", file=sys.stderr)
    bad = not out["verified"] or out["status"] != "FINISHED" or out["kills"] < out["kills_requested"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
