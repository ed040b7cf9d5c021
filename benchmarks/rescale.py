"""Rescaling a running job with the adaptive scheduler: the downtime, and that no key is lost or counted twice.

The job: a generator of 4 x keys records, throttled to last --seconds (record i = (key i % keys, value i)),
key_by(key), a running count and sum per key (KeyedStream.reduce: one ReducingState entry per key; it emits
every key's running (count, sum) per record), into an exactly-once Delta sink; checkpoints every 500 ms,
hashmap state. It runs under the adaptive scheduler (jobmanager.scheduler: adaptive) on a MiniCluster of
max(--from, --to) one-slot TaskManagers, all started before the job (local processes, or on Spark executors
with --provider spark), its resource requirements' upper bound --from for every vertex. Once every task is
RUNNING at --from, every key is in state and a checkpoint has completed since, the benchmark sets every
vertex's upper bound to --to through the Dispatcher (update_job_resource_requirements, Flink's PUT
/jobs/:jobid/resource-requirements) and polls request_job_details until every task is RUNNING at --to. The job
then runs to its end. Prints one JSON line per round (and one with the medians when --rounds > 1):

    {"keys", "from", "to", "downtime_s", "scheduler_downtime_s", "rows", "duplicate_keys", "missing_keys",
     "wrong_values", "verified", "slots_s", "checkpoint_s", "cancel_s", "deploy_restore_s", "start_s",
     "cpu_s_per_million_events", "jm_cpu_s", "tm_cpu_s", ...}

downtime_s: the PUT -> every task RUNNING at the new parallelism (tasks restore their key groups before they
run), as a user sees it; scheduler_downtime_s: the scheduler's own RescaleEvent.downtime_ms (its rescale
decision -> every task RUNNING). The parts, from the JobManager's log (this process): slots_s the PUT -> the
scheduler decides to rescale (a scale-up waits for the slot it now declares), checkpoint_s -> the checkpoint
taken before the rescale completed, cancel_s -> the old execution ended, deploy_restore_s -> every new task
RUNNING; rescale_checkpoint the checkpoint taken then (None: none completed, e.g. a periodic one was in flight
and the cancel aborted it: aborted_in_rescale) and restored_checkpoint the one the new execution restored;
periodic_checkpoint_s the newest periodic checkpoint before the PUT, trigger -> committed. start_s, the baseline
side by side: the same program submitted at --to without state, submission -> every task RUNNING (what a
rescale would cost without a checkpoint, a cancel and a restore).

Checked against a plain-Python count and sum per key: the Delta table holds every key's running values
exactly once (rows == 4 x keys; a key with a (key, count) row twice counts in duplicate_keys, a key without
rows in missing_keys, a key whose counts are not 1..4 or whose last (count, sum) differs in wrong_values). A
key group lost or restored twice by the rescale shows as a count starting again (duplicate and wrong), a
record replayed into the sink as a count above 4. Exits non-zero when a round is not verified.

    .venv/bin/python benchmarks/rescale.py --keys 100000 --from 2 --to 3 [--provider local|spark] [--rounds N] [--seconds S]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import cloudpickle
from bench_cluster import STATE_TASK_HEAP_MB
from measure import CpuMeter, emit, require

from runtime.api.common import Configuration, Row, Types, WatermarkStrategy
from runtime.api.connectors.base import RateLimiterStrategy
from runtime.api.connectors.delta import DeltaSink
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.checkpoint import CheckpointingMode
from runtime.core.states import ExecutionState
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig
from runtime.rpc import messages as m

EVENTS_PER_KEY = 4
CHECKPOINT_INTERVAL_MS = 500
OUTPUT_TYPE = Types.ROW_NAMED(["key", "count", "sum"], [Types.LONG(), Types.LONG(), Types.LONG()])
ADAPTIVE = {
    "jobmanager.scheduler": "adaptive",
    "jobmanager.adaptive-scheduler.resource-stabilization-timeout": "1 s",
    # no cooldown: a higher upper bound is acted on when its slot arrives, and that arrival is a scale-up under
    # scaling-interval.min (default 30 s from the execution's start; with it, this job waited ~16 s for it)
    "jobmanager.adaptive-scheduler.scaling-interval.min": "0 ms",
}
SCHEDULER_LOG = "runtime.jobmanager.scheduler.adaptive.scheduler"
CHECKPOINT_LOG = "runtime.jobmanager.checkpoint.coordinator"

# benchmarks/ is not on the TaskManagers' path: the generator travels by value (also when a test imports this)
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class KeyAndIndex:
    """Record i of the generator: (i % keys, 1, i), a reduce's (key, count, sum) of one record."""

    def __init__(self, keys: int) -> None:
        self.keys = keys

    def __call__(self, i: int) -> tuple[int, int, int]:
        return (i % self.keys, 1, i)


def job(keys: int, parallelism: int, seconds: float, tmp: str, output: str) -> Any:
    events = keys * EVENTS_PER_KEY
    conf = Configuration()
    conf.set_string("state.backend.type", "hashmap")
    conf.set_string("state.checkpoints.dir", f"{tmp}/checkpoints")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    env.enable_checkpointing(CHECKPOINT_INTERVAL_MS, CheckpointingMode.EXACTLY_ONCE)
    (
        env.from_source(
            DataGeneratorSource(KeyAndIndex(keys), events, rate_limiter_strategy=RateLimiterStrategy.per_second(events / seconds)),
            WatermarkStrategy.no_watermarks(), "records",
        ).uid("records")
        .key_by(lambda r: r[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1], a[2] + b[2])).uid("count and sum per key")
        .map(lambda t: Row(key=t[0], count=t[1], sum=t[2]), output_type=OUTPUT_TYPE).uid("as rows")
        .sink_to(DeltaSink.for_path(output)).uid("delta")
    )
    graph = env.get_job_graph(f"rescale-{keys}")
    return graph.model_copy(update={"config": {**graph.config, **ADAPTIVE}})


def reference(keys: int) -> tuple[list[int], list[int]]:
    """The plain-Python count and sum of every key's records."""
    counts, sums = [0] * keys, [0] * keys
    for i in range(keys * EVENTS_PER_KEY):
        counts[i % keys] += 1
        sums[i % keys] += i
    return counts, sums


def check_table(path: str, keys: int) -> dict[str, Any]:
    """The Delta table against the reference: {"rows", "duplicate_keys", "missing_keys", "wrong_values", "verified"}."""
    from deltalake import DeltaTable

    counts, sums = reference(keys)
    table = DeltaTable(path).to_pyarrow_table()
    per_key: dict[int, dict[int, int]] = {}
    duplicates: set[int] = set()
    for k, c, s in zip(*(table.column(name).to_pylist() for name in ("key", "count", "sum"))):
        seen = per_key.setdefault(k, {})
        if c in seen:
            duplicates.add(k)
        seen[c] = s
    missing = sum(1 for k in range(keys) if k not in per_key)
    wrong = 0
    for k, seen in per_key.items():
        if not 0 <= k < keys or set(seen) != set(range(1, counts[k] + 1)) or seen[counts[k]] != sums[k]:
            wrong += 1
    expected_rows = sum(counts)
    verified = table.num_rows == expected_rows and not (duplicates or missing or wrong)
    return {"rows": table.num_rows, "expected_rows": expected_rows, "duplicate_keys": len(duplicates), "missing_keys": missing,
            "wrong_values": wrong, "verified": verified}


class JobManagerLog(logging.Handler):
    """The adaptive scheduler's and the checkpoint coordinator's INFO lines (this process hosts the JobManager), timed."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[tuple[float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.created, record.getMessage()))

    def lines_of(self, job_id: str, after: float, before: float, *words: str) -> list[tuple[float, str]]:
        """(time, line) of the job's lines between `after` and `before` holding every one of `words`."""
        return [(t, line) for t, line in self.lines if after <= t <= before and job_id in line and all(w in line for w in words)]


@contextlib.contextmanager
def jobmanager_log() -> Iterator[JobManagerLog]:
    handler = JobManagerLog()
    for handler_of_root in logging.getLogger().handlers:
        handler_of_root.setLevel(logging.WARNING)  # INFO goes to the handler below only
    loggers = [logging.getLogger(SCHEDULER_LOG), logging.getLogger(CHECKPOINT_LOG)]
    for logger in loggers:
        logger.setLevel(logging.INFO)
        logger.addHandler(handler)
    try:
        yield handler
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def details(cluster: MiniCluster, job_id: str) -> m.JobDetailsMessage:
    return cluster.dispatcher_gateway().call_sync("request_job_details", m.JobIdMessage(job_id=job_id), timeout=30)


def checkpoint_statistics(cluster: MiniCluster, job_id: str) -> dict[str, Any]:
    stats = cluster.dispatcher_gateway().call_sync("request_checkpoint_statistics", m.JobIdMessage(job_id=job_id), timeout=30)
    return dict(json.loads(stats.statistics_json))


def running_at(d: m.JobDetailsMessage, parallelism: int) -> bool:
    """Executing at `parallelism` (every vertex) with every subtask RUNNING."""
    subtasks = [s for v in d.vertices for s in v.subtasks]
    return (d.scheduler_state == "Executing" and bool(subtasks) and all(v.parallelism == parallelism for v in d.vertices)
            and all(s.state is ExecutionState.RUNNING for s in subtasks))


def wait_running_at(cluster: MiniCluster, job_id: str, parallelism: int, timeout: float = 300, interval: float = 0.02) -> float:
    """Seconds until every task of the job is RUNNING at `parallelism`."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        d = details(cluster, job_id)
        if running_at(d, parallelism):
            return time.monotonic() - t0
        if d.status.is_globally_terminal:
            raise RuntimeError(f"job {job_id} ended {d.status.value} before every task ran at parallelism {parallelism}")
        time.sleep(interval)
    raise TimeoutError(f"job {job_id} not RUNNING at parallelism {parallelism} after {timeout}s")


def source_records(cluster: MiniCluster, job_id: str) -> int:
    first = details(cluster, job_id).vertices[0]  # the source vertex comes first (topological order)
    return sum(s.metrics.records_out for s in first.subtasks)


def wait_for_state_and_checkpoint(cluster: MiniCluster, job_id: str, keys: int, timeout: float = 300) -> None:
    """Until every key is in state (the source emitted > keys records) and a checkpoint triggered after that completed."""
    deadline = time.monotonic() + timeout
    while source_records(cluster, job_id) < keys * 1.05:
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id}: fewer than {keys} records after {timeout}s")
        time.sleep(0.1)
    since_ms = int(time.time() * 1000)
    while True:
        latest = checkpoint_statistics(cluster, job_id).get("latest_completed")
        if latest and latest["trigger_timestamp"] >= since_ms:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id}: no checkpoint completed after every key was in state ({timeout}s)")
        time.sleep(0.05)


def upper_bounds(cluster: MiniCluster, job_id: str) -> dict[str, int]:
    """Each vertex's upper bound in the job's resource requirements."""
    current = cluster.dispatcher_gateway().call_sync("request_job_resource_requirements", m.JobIdMessage(job_id=job_id), timeout=30)
    return {v: b.upper_bound for v, b in current.requirements.items()}


def set_upper_bound(cluster: MiniCluster, job_id: str, vertices: list[str], parallelism: int) -> None:
    """PUT every vertex's upper bound (Flink's PUT /jobs/:jobid/resource-requirements)."""
    bounds = {v: m.VertexParallelismBounds(lower_bound=1, upper_bound=parallelism) for v in vertices}
    ack = cluster.dispatcher_gateway().call_sync("update_job_resource_requirements", m.JobResourceRequirements(job_id=job_id, requirements=bounds), timeout=30)
    if not ack.ok:
        raise RuntimeError(f"job {job_id}: new resource requirements refused: {ack.message}")


def scheduler_downtime_s(cluster: MiniCluster, job_id: str, p_to: int, timeout: float = 30) -> tuple[float | None, str]:
    """The scheduler's RescaleEvent to `p_to` (its downtime is filled in once every task runs): (seconds, cause)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = [r for r in details(cluster, job_id).rescales if set(r.to_parallelism.values()) == {p_to}]
        if events and events[-1].downtime_ms is not None:
            return events[-1].downtime_ms / 1000, events[-1].cause
        time.sleep(0.05)
    return None, events[-1].cause if events else "no rescale event"


def phases(log: JobManagerLog, job_id: str, trigger: float, running: float) -> dict[str, Any]:
    """The downtime's parts from the JobManager's log lines (wall-clock times of this process), and which
    checkpoint the rescale took (None: none completed between the decision and the cancel) and restored."""
    decided = next(iter(log.lines_of(job_id, trigger, running, "rescaling ")), None)
    ended = next(iter(log.lines_of(job_id, decided[0], running, "Restarting -> CreatingExecutionGraph")), None) if decided else None
    checkpointed = aborted = started = None
    if decided and ended:
        checkpointed = next(reversed(log.lines_of(job_id, decided[0], ended[0], "completed checkpoint")), None)
        aborted = next(iter(log.lines_of(job_id, decided[0], ended[0], "aborted")), None)
        started = next(iter(log.lines_of(job_id, ended[0], running, "running at parallelism")), None)

    def span(a: tuple[float, str] | None, b: tuple[float, str] | None) -> float | None:
        return round(b[0] - a[0], 3) if a is not None and b is not None else None

    def checkpoint_id(line: tuple[float, str] | None, pattern: str) -> int | None:
        found = re.search(pattern, line[1]) if line else None
        return int(found.group(1)) if found else None

    return {"slots_s": span((trigger, ""), decided), "checkpoint_s": span(decided, checkpointed), "cancel_s": span(checkpointed or decided, ended),
            "deploy_restore_s": span(ended, (running, "")), "rescale_checkpoint": checkpoint_id(checkpointed, r"completed checkpoint (\d+)"),
            "restored_checkpoint": checkpoint_id(started, r"from checkpoint (\d+)"),
            "aborted_in_rescale": aborted[1].split("] ", 1)[-1] if aborted else None}


def cancel(cluster: MiniCluster, job_id: str) -> None:
    def status() -> str:
        return cluster.dispatcher_gateway().call_sync("request_job_status", m.JobIdMessage(job_id=job_id), timeout=30).status.value

    cluster.dispatcher_gateway().call_sync("cancel_job", m.JobIdMessage(job_id=job_id), timeout=30)
    while status() not in ("CANCELED", "FINISHED", "FAILED"):
        time.sleep(0.1)


def run_round(cluster: MiniCluster, log: JobManagerLog, keys: int, p_from: int, p_to: int, seconds: float, tmp: str, spark: bool) -> dict[str, Any]:
    events = keys * EVENTS_PER_KEY
    output, baseline_output = tempfile.mkdtemp(dir=tmp), tempfile.mkdtemp(dir=tmp)
    with CpuMeter.for_cluster(cluster, spark=spark) as cpu:
        client = cluster.submit(job(keys, p_from, seconds, tmp, output))
        wait_running_at(cluster, client.job_id, p_from)
        bounds = upper_bounds(cluster, client.job_id)
        if set(bounds.values()) != {p_from}:
            raise RuntimeError(f"job {client.job_id} started with upper bounds {bounds}, not {p_from}")
        wait_for_state_and_checkpoint(cluster, client.job_id, keys)
        emitted_before = source_records(cluster, client.job_id)
        periodic = checkpoint_statistics(cluster, client.job_id)["latest_completed"]
        trigger_wall, trigger = time.time(), time.monotonic()
        set_upper_bound(cluster, client.job_id, list(bounds), p_to)
        wait_running_at(cluster, client.job_id, p_to, interval=0.01)
        downtime_s, running_wall = time.monotonic() - trigger, time.time()
        scheduler_s, cause = scheduler_downtime_s(cluster, client.job_id, p_to)
        result = client.get_job_execution_result(timeout=1800)
        exceptions = cluster.dispatcher_gateway().call_sync("request_job_exceptions", m.JobIdMessage(job_id=client.job_id), timeout=30)
        rescales = details(cluster, client.job_id).rescales
    if result.status.value != "FINISHED":
        raise RuntimeError(f"job {client.job_id} ended {result.status.value}")
    check = check_table(output, keys)
    fresh = cluster.submit(job(keys, p_to, seconds, tmp, baseline_output))
    start_s = wait_running_at(cluster, fresh.job_id, p_to)
    cancel(cluster, fresh.job_id)
    return {
        "keys": keys, "from": p_from, "to": p_to, "downtime_s": round(downtime_s, 3),
        "scheduler_downtime_s": scheduler_s, **phases(log, client.job_id, trigger_wall, running_wall), "start_s": round(start_s, 3),
        "periodic_checkpoint_s": round((periodic["end_to_end_duration"] + (periodic.get("commit_duration") or 0)) / 1000, 3),
        **check, "records_before_rescale": emitted_before, "rescales": len(rescales),
        "restarts": exceptions.num_restarts, "cause": cause, **cpu.fields(events),
    }


def medians(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One line for several rounds: the median of each figure, the sums of the checks."""
    out: dict[str, Any] = {"keys": rows[0]["keys"], "from": rows[0]["from"], "to": rows[0]["to"], "rounds": len(rows)}
    for name in ("downtime_s", "scheduler_downtime_s", "slots_s", "checkpoint_s", "cancel_s", "deploy_restore_s", "start_s",
                 "periodic_checkpoint_s", "cpu_s_per_million_events", "jm_cpu_s", "tm_cpu_s", "spark_cpu_s"):
        values = [r[name] for r in rows if r.get(name) is not None]
        if values:
            out[f"median_{name}"] = round(statistics.median(values), 3)
    out["downtime_s_rounds"] = [r["downtime_s"] for r in rows]
    for name in ("rows", "duplicate_keys", "missing_keys", "wrong_values", "restarts"):
        out[name] = sum(r[name] for r in rows)
    out["verified"] = all(r["verified"] for r in rows)
    return out


@contextlib.contextmanager
def rescale_cluster(provider: str, task_managers: int) -> Iterator[MiniCluster]:
    """`task_managers` one-slot TaskManagers, all started before the job and kept (no TaskManager start inside a rescale)."""
    spark = None
    if provider == "spark":
        from runtime.deploy.spark_session import SparkSessionConfig, build_spark_session

        # a TaskManager holds a Spark task (a core of local[n]) for its life
        spark = build_spark_session(SparkSessionConfig(master=f"local[{task_managers + 1}]", app_name="millrace-rescale-bench"))
    try:
        profile = m.ResourceProfile(cpu_cores=1.0, task_heap_mb=STATE_TASK_HEAP_MB, managed_memory_mb=256)
        config = MiniClusterConfig(
            provider=provider, tm_log_level="WARNING", task_manager_profile=profile, slots_per_tm=1,
            initial_task_managers=task_managers, min_task_managers=task_managers, max_task_managers=task_managers,
        )
        with MiniCluster(config, spark=spark) as cluster:
            cluster.wait_for_task_managers(task_managers, timeout=300)
            yield cluster
    finally:
        if spark is not None:
            spark.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--from", dest="p_from", type=int, default=2, help="parallelism (every vertex's upper bound) before the rescale")
    parser.add_argument("--to", dest="p_to", type=int, default=3, help="parallelism after it")
    parser.add_argument("--provider", choices=["local", "spark"], default="local")
    parser.add_argument("--rounds", type=int, default=1, help="jobs, each rescaled once; > 1 adds a line of medians")
    parser.add_argument("--seconds", type=float, default=16.0, help="the throttled source's run time")
    args = parser.parse_args()
    if min(args.p_from, args.p_to) < 1 or args.p_from == args.p_to or args.keys < 1 or args.rounds < 1:
        parser.error("--from and --to must differ and be >= 1; --keys and --rounds >= 1")
    logging.basicConfig(level=logging.WARNING)
    rows = []
    with (tempfile.TemporaryDirectory() as tmp, jobmanager_log() as log,
          rescale_cluster(args.provider, max(args.p_from, args.p_to)) as cluster):
        for _ in range(args.rounds):
            rows.append(emit(run_round(cluster, log, args.keys, args.p_from, args.p_to, args.seconds, tmp, args.provider == "spark")))
        if args.rounds > 1:
            emit(medians(rows))
    return require(rows)


if __name__ == "__main__":
    sys.exit(main())
