"""Speculative execution: windowed_sum in BATCH with one slow TaskManager, with and without speculation.

Three runs side by side, each on a fresh MiniCluster of local TaskManager processes (1 slot each,
two started before the job; the first one is slow: every task on it waits `--delay` seconds before
it works, as on an overloaded machine):

- `fast`: no slow TaskManager (the baseline: the time of the fast tasks);
- `slow`: the slow TaskManager, speculation off (the job waits for it);
- `speculative`: the slow TaskManager, `execution.batch.speculative.enabled` (its tasks get attempts
  elsewhere, the first to finish wins).

Each run's Delta table is checked row for row against the plain-Python reference. Prints one JSON
line per run: {"name", "events", "seconds", "speculative_attempts", "rows", "duplicate_keys", "missing_keys", "wrong_values",
"verified", "jm_cpu_s", "tm_cpu_s", "cpu_s_per_million_events"} (the slow TaskManager's wait costs no CPU).

    .venv/bin/python benchmarks/speculative.py --events 1000000 --delay 20
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # chaos.py beside it
from chaos import _details
from measure import CpuMeter, check_windowed_sum

from pipelines.jobs import windowed_sum
from runtime.api.common import Configuration
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.states import JobStatus
from runtime.deploy.local_provider import LocalProcessProvider
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig
from runtime.taskmanager.runner import TaskManagerConfig

SPECULATIVE_CONF = {
    "execution.batch.speculative.enabled": "true",
    "slow-task-detector.check-interval": "200 ms",
    # Flink's defaults wait a minute before anything counts as slow; this job's tasks take seconds
    "slow-task-detector.execution-time.baseline-lower-bound": "1 s",
    "slow-task-detector.execution-time.baseline-ratio": "0.5",
}


def run_one(name: str, args: argparse.Namespace, slow: bool, speculative: bool) -> dict[str, Any]:
    out = os.path.join(args.output, name)
    shutil.rmtree(out, ignore_errors=True)
    provider = LocalProcessProvider(log_level="WARNING")
    started: list[str] = []

    def configure(cfg: TaskManagerConfig) -> TaskManagerConfig:
        started.append(cfg.tm_id)
        return cfg.model_copy(update={"testing_task_delay_s": args.delay}) if slow and len(started) == 1 else cfg

    provider.configure = configure
    with MiniCluster(MiniClusterConfig(slots_per_task_manager=1, initial_task_managers=args.parallelism, tm_log_level="WARNING"), provider=provider) as cluster:
        cluster.wait_for_task_managers(args.parallelism)
        conf = Configuration()
        conf.set_string("execution.runtime-mode", "BATCH")
        conf.set_string("execution.batch.blocking-results.dir", out + "-blocking")
        for k, v in (SPECULATIVE_CONF if speculative else {}).items():
            conf.set_string(k, v)
        env = StreamExecutionEnvironment.get_execution_environment(conf)
        env.set_parallelism(args.parallelism)
        windowed_sum.build(env, args.events, out)
        start = time.monotonic()
        with CpuMeter.for_cluster(cluster) as cpu:
            client = cluster.submit(env.get_job_graph(f"windowed_sum-{name}"))
            result = client.get_job_execution_result(timeout=args.delay * 4 + 300)
        seconds = time.monotonic() - start
        if result.status is not JobStatus.FINISHED:
            raise SystemExit(f"{name}: job ended {result.status.name}")
        details = _details(cluster, client.job_id)
    speculative_attempts = sum(len(s.other_concurrent_attempts) for v in details.vertices for s in v.subtasks)
    return {"name": name, "events": args.events, "seconds": round(seconds, 2), "speculative_attempts": speculative_attempts,
            **check_windowed_sum(out, args.events), **cpu.fields(args.events)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--delay", type=float, default=20.0, help="seconds every task on the slow TaskManager waits")
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--output", default="/tmp/millrace-speculative")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    failed = False
    for name, slow, speculative in (("fast", False, False), ("slow", True, False), ("speculative", True, True)):
        line = run_one(name, args, slow, speculative)
        print(json.dumps(line), flush=True)
        failed |= not line["verified"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
