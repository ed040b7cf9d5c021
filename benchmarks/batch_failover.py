"""Batch failover: windowed_sum in BATCH mode, the TaskManager of a consumer task SIGKILLed mid-stage.

Runs windowed_sum with `execution.runtime-mode: BATCH` (the key_by exchange is blocking: the source
stage writes its output to Delta, the window stage reads it) on a MiniCluster whose TaskManagers
run on Spark executors (or as local processes). As soon as a window (consumer) subtask runs, the
TaskManager process it runs in is SIGKILLed, and with it every TaskManager that ran a producer
(the producers have finished by then): region failover restarts the consumer from the committed
blocking results in Delta, so the producers never run again although no TaskManager that ran them
is left. Checks the Delta table row for row against the plain-Python
reference and prints one JSON line:

    {"producer_subtasks", "producer_attempts", "consumer_subtasks", "consumer_attempts", "rows", "seconds", ...}

(attempts summed over subtasks). Exits non-zero unless every producer subtask ran exactly once, at
least one consumer ran twice, and the table equals the reference.

    .venv/bin/python benchmarks/batch_failover.py --events 2000000 --output /tmp/batch-failover --provider spark
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # chaos.py beside it, also when loaded by a test
from chaos import _details, chaos_cluster
from measure import CpuMeter, check_windowed_sum

from pipelines.jobs import windowed_sum
from runtime.api.common import Configuration
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.states import ExecutionState, JobStatus

log = logging.getLogger("batch_failover")


def run(args: argparse.Namespace, spark: Any = None) -> dict[str, Any]:
    for path in (args.output, args.output + "-blocking"):
        if os.path.exists(path):
            shutil.rmtree(path)
    with chaos_cluster(args.provider, args.parallelism, spark, "millrace-batch-failover") as cluster:
        conf = Configuration()
        conf.set_string("execution.runtime-mode", "BATCH")
        conf.set_string("execution.batch.blocking-results.dir", args.output + "-blocking")
        if args.restart_delay_ms is not None:  # else a batch job's default: 3 attempts, 1 s apart
            conf.set_string("restart-strategy.type", "fixed-delay")
            conf.set_string("restart-strategy.fixed-delay.attempts", "3")
            conf.set_string("restart-strategy.fixed-delay.delay", f"{args.restart_delay_ms} ms")
        env = StreamExecutionEnvironment.get_execution_environment(conf)
        env.set_parallelism(args.parallelism)
        windowed_sum.build(env, args.events, args.output, per_record=args.per_record)
        start = time.monotonic()
        cpu = CpuMeter.for_cluster(cluster).__enter__()
        client = cluster.submit(env.get_job_graph("windowed_sum-batch-failover"))
        killed: list[str] = []
        while not killed and client.get_job_status() not in (JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELED):
            details = _details(cluster, client.job_id)
            consumers = details.vertices[1:]  # [0]: the source stage
            running = [s for v in consumers for s in v.subtasks if s.state is ExecutionState.RUNNING and s.tm_id]
            if not running:
                time.sleep(0.01)
                continue
            # the consumer's TaskManager, and every one that ran a producer: no producer output survives outside Delta
            targets = {running[0].tm_id} | {s.tm_id for s in details.vertices[0].subtasks if s.tm_id}
            victims = [t for t in cluster.task_managers() if t.tm_id in targets and t.pid]
            if not any(t.tm_id == running[0].tm_id for t in victims):
                time.sleep(0.01)
                continue
            for victim in victims:
                os.kill(victim.pid, signal.SIGKILL)
                killed.append(victim.tm_id)
            log.warning("killed TaskManagers %s (running consumer subtask %d, or having run a producer)", killed, running[0].subtask_index)
        result = client.get_job_execution_result(timeout=900)
        seconds = time.monotonic() - start
        cpu.__exit__(None, None, None)
        details = _details(cluster, client.job_id)
        producers = details.vertices[0].subtasks  # the source stage, then the window stage
        consumers = [s for v in details.vertices[1:] for s in v.subtasks]
        return {
            "producer_subtasks": len(producers),
            "producer_attempts": sum(s.attempt_number + 1 for s in producers),
            "consumer_subtasks": len(consumers),
            "consumer_attempts": sum(s.attempt_number + 1 for s in consumers),
            **check_windowed_sum(args.output, args.events),
            "seconds": round(seconds, 2),
            "killed_task_managers": killed,
            # every TaskManager that ran a producer was killed: the restarted consumer read their output from Delta
            "killed_every_producers_task_manager": all(s.tm_id in killed for s in producers),
            "status": result.status.value,
            "blocking_results_left": os.path.exists(os.path.join(args.output + "-blocking", client.job_id)),
            **cpu.fields(args.events),
        }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--output", required=True, help="path of the output Delta table (replaced)")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--provider", choices=["spark", "local"], default="spark")
    parser.add_argument("--per-record", action="store_true", help="the per-record job")
    parser.add_argument("--restart-delay-ms", type=int, default=None,
                        help="fixed-delay restarts this far apart (default: none configured, a batch job's default strategy)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    out = run(args)
    print(json.dumps(out), flush=True)
    ok = (
        out["status"] == "FINISHED" and out["producer_attempts"] == out["producer_subtasks"]
        and out["consumer_attempts"] > out["consumer_subtasks"]
        and out["verified"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
