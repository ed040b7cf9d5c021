"""Delta-to-Delta tail latency: a live Delta table passed through to another Delta table by Millrace
(continuous DeltaSource -> exactly-once DeltaSink) and by Spark Structured Streaming (Delta source
-> Delta sink), over the same commits in the same run.

The input: benchmarks/delta_appender.py, in its own process (its own session), appends --commits
commits of --rows events each to an input Delta table, one every --interval-ms plus the time a
commit takes (~230 ms with the defaults: ~8,700 events/s offered). Commit k holds events
k*R .. (k+1)*R - 1 of windowed_sum's generator (user_id, ts_ms, value), and ts_ms = 1700000000000 + i
names event i, so every output row tells which input commit it came from: no column is added.

The consumers, pass-through (no windows: a window would add its own wait):
- millrace: continuous DeltaSource over the input, new commits looked for every
  --discovery-interval-ms (100) -> map_batches keeping the three columns -> DeltaSink into its own
  table, exactly-once checkpoints every --checkpoint-interval-ms (1000). The sink commits a
  checkpoint's files when the checkpoint completes: a row is in the output from the commit of the
  first checkpoint after it was read. A MiniCluster with TaskManagers as local processes
  (--provider local) or on Spark executors (--provider spark); --parallelism 1 (one file per
  input commit; 2 was no faster).
- spark_structured_streaming: `spark.readStream.format("delta")` over the same input -> select of
  the three columns -> `writeStream.format("delta")` with its own checkpoint location and a
  processing-time trigger of --trigger-ms (1000): each micro-batch with data is one output commit.
  The session comes from runtime.deploy.spark_session (the Delta jars infra/setup.sh resolved:
  nothing is downloaded), master local[2] (local[parallelism + 2] with --provider spark: its
  TaskManagers take task slots of the same session).

How latency is measured: per input row, the time of the first output commit that holds it minus
the time of the input commit that added it. Both times come from the Delta logs, the same way at
both ends: a commit's time is its log entry's (`_delta_log/<version>.json`) modification time, the
moment it became visible and Delta's own commit timestamp (what time travel uses) for tables
without in-commit timestamps (inCommitTimestamp is taken where a table has them); the same clock
of the one machine. commitInfo.timestamp, which the writer stamps before it writes the entry,
gives `p50/p99_latency_ms_commit_info` beside them: delta-rs (the appender, Millrace's sink)
stamps within ~2 ms of the entry's mtime, Spark 7-260 ms (median ~18 ms) before it, so by
commitInfo Spark would look up to a quarter second faster than it is. `appender_lag_ms`: the
median of the appender's own `committed_ms` (taken after its commit returned and the table was
opened again) minus the input entry's time, a check of the clocks, not a figure. Every row of
every output commit is read back (its data files' ts_ms), so each input commit counts with its
rows. p50/p99/max are over the rows of the measured commits: --warmup-commits (5) commits go first
(the consumers' first micro-batches and checkpoints, JIT, imports), both outputs are waited for,
then a second appender run appends the measured ones; warm-up rows are verified, not measured.
With 50 commits the p99 is about the slowest commit's latency.

Concurrent by default: both consumers follow one input table in one appender run, so both see the
same commits at the same moments (the fairest comparison of latency), but they share the machine's
2 cores with each other and with the appender: Spark's micro-batches keep about one core busy, and
each slows the other (against runs alone: ~+0.2-0.3 s on Millrace's p99, ~+0.5-1 s on Spark's).
`--mode sequential` runs each consumer alone over an appender run of its own (a fresh input, the
same commits at the same pace): each has the machine to itself, but the two see different moments
of a noisy machine. `--rounds N` repeats the whole run on the same cluster and Spark session and
adds median lines (`"round": "median"`): Spark's p99 varies most between runs (3.5-6.7 s in one
3-round run, the first round, on a fresh JVM, slowest), so record the median of --rounds 3.

Where the time goes (measured with this script): Millrace's latency is almost all the wait for
the next checkpoint. A checkpoint of this job takes ~15-25 ms trigger -> acknowledged and its
Delta commit lands ~40-50 ms after the trigger, so a row waits discovery (0..interval) + the rest
of the checkpoint interval (0..1 s) + ~50 ms: p50 ~ interval/2 + ~150 ms, p99 ~ interval +
~100-300 ms. The discovery interval moves p99 little (alone, median of 3 runs: 50 ms -> p99 1059,
100 -> 1109, 250 -> 1136, 500 -> 1215 ms) but costs JobManager CPU (2.9, 1.7, 0.95, 0.85 s per
run): 100 ms is the default. Spark's micro-batches take 1.5-3 s each on this machine
(query.recentProgress: addBatch, i.e. writing and committing to Delta, 1.0-1.5 s; latestOffset
0.3 s; every 10th commit writes a Delta checkpoint: ~4 s), so with a 1 s trigger it runs batch after
batch, behind the trigger, and a row waits for the batch running when it lands to end, then for
its own batch.

Checks before any figure: each output table (its current snapshot, and the rows of its commits
read one by one) holds exactly the appended events: the same multiset of ts_ms (nothing lost,
nothing twice), with user_id and value as the generator made them; no commit removed a file. A
row that is not verified (or whose consumer failed: `failure`) makes the exit status 1
(measure.require).

Prints one JSON line per consumer:
{"name", "mode", "commits", "rows", "output_commits", "events_per_s", "offered_events_per_s",
"p50_latency_ms", "p99_latency_ms", "max_latency_ms", "mean_latency_ms", "p50_latency_ms_commit_info",
"p99_latency_ms_commit_info", "verified", "duplicates", "missing", "wrong_values", "cpu_s",
"cpu_s_per_million_events", "other_cpu_s", "steal_pct", ...}, then {"name": "millrace_vs_spark",
"p99_ratio", "p50_ratio"} (millrace / spark: below 1, Millrace is faster). `commits`: measured
input commits the appender made; events_per_s = measured rows / (last output commit holding a
measured row - first measured input commit): the appender's pace bounds it (offered_events_per_s:
rows / the appender's span), so a consumer that keeps up shows about the offered rate and one
that falls behind less. cpu_s over the measured part: millrace = this process (the JobManager;
also the Spark driver's Python side and this script's polling of the logs, every 100 ms) + its
TaskManagers; spark = every other process below this one but the appender (the Spark JVM; with
--provider spark the TaskManagers' executors run in it too). In concurrent mode other_cpu_s and
steal_pct are the machine's, the same in both lines.

    .venv/bin/python benchmarks/delta_tail.py [--commits 50] [--rows 2000] [--interval-ms 200] [--discovery-interval-ms 100]
        [--checkpoint-interval-ms 1000] [--trigger-ms 1000] [--mode concurrent|sequential] [--rounds 1] [--provider local|spark]
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # measure.py beside it

import cloudpickle
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from delta_appender import AppenderProcess
from measure import CpuMeter, descendants, emit, require

from pipelines.jobs import windowed_sum
from runtime.api.common import Configuration, WatermarkStrategy
from runtime.api.connectors.delta import DeltaSink
from runtime.api.connectors.delta_source import DeltaSource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.checkpoint import CheckpointingMode
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig
from runtime.rpc import messages as m

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # benchmarks/ is not on the TaskManagers' path

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ["user_id", "ts_ms", "value"]
BASE_TS_MS = windowed_sum.BASE_TS_MS
MILLRACE, SPARK = "millrace", "spark_structured_streaming"
log = logging.getLogger("delta_tail")


# --- the input ----------------------------------------------------------------------------------------
def create_input(path: str) -> None:
    """An empty input table (version 0): both consumers start on it and then follow its commits."""
    from deltalake import write_deltalake

    empty = pa.table({c: pa.array([], pa.int64()) for c in COLUMNS})
    write_deltalake(path, empty)


# --- reading a Delta log ------------------------------------------------------------------------------
@dataclass
class Commit:
    version: int
    timestamp_ms: float  # when the entry became visible: inCommitTimestamp if the table has them, else the file's mtime
    info_timestamp_ms: float  # commitInfo.timestamp: taken by the writer before it writes the entry
    operation: str
    adds: list[tuple[str, int]]  # (path relative to the table, numRecords or -1)
    removes: int


def log_entry(table: str, version: int) -> Commit | None:
    """One entry of the table's log, or None if it is not there (yet): Delta writes an entry whole (put-if-absent)."""
    path = Path(table) / "_delta_log" / f"{version:020d}.json"
    try:
        text = path.read_text()
        mtime_ms = path.stat().st_mtime_ns / 1e6
    except FileNotFoundError:
        return None
    ts, ict, op, adds, removes = None, None, "", [], 0
    for line in text.splitlines():
        if not line.strip():
            continue
        action = json.loads(line)
        if "commitInfo" in action:
            info = action["commitInfo"]
            ict, ts = info.get("inCommitTimestamp"), info.get("timestamp")
            op = info.get("operation", "")
        elif "add" in action:
            add = action["add"]
            stats = json.loads(add["stats"]) if add.get("stats") else {}
            adds.append((urllib.parse.unquote(add["path"]), int(stats.get("numRecords", -1))))
        elif "remove" in action:
            removes += 1
    # Delta's commit timestamp: the entry's modification time (what time travel uses) unless the
    # table keeps in-commit timestamps
    return Commit(version, float(ict) if ict else mtime_ms, float(ts) if ts else mtime_ms, op, adds, removes)


@dataclass
class LogFollower:
    """The commits of a table so far, read incrementally (cheap enough to poll every 100 ms)."""

    table: str
    commits: list[Commit] = field(default_factory=list)
    rows: int = 0

    def poll(self) -> int:
        while (c := log_entry(self.table, len(self.commits))) is not None:
            self.commits.append(c)
            self.rows += sum(max(n, 0) for _, n in c.adds)
        return self.rows


# --- the consumers ------------------------------------------------------------------------------------
def pass_through(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The columnar map: the same rows, the three columns (nothing added, nothing computed)."""
    return {c: batch[c] for c in COLUMNS}


class MillraceConsumer:
    name = MILLRACE

    def __init__(self, cluster: MiniCluster, source: str, output: str, work: str, args: argparse.Namespace) -> None:
        conf = Configuration()
        conf.set_string("state.checkpoints.dir", os.path.join(work, "millrace-checkpoints"))
        env = StreamExecutionEnvironment.get_execution_environment(conf)
        env.set_parallelism(args.parallelism)
        env.enable_checkpointing(args.checkpoint_interval_ms, CheckpointingMode.EXACTLY_ONCE)
        src = DeltaSource.for_table(source).columns(COLUMNS).continuous(args.discovery_interval_ms).build()
        (
            env.from_source(src, WatermarkStrategy.no_watermarks(), "delta: input (continuous)")
            .map_batches(pass_through).name("pass through")
            .sink_to(DeltaSink.for_path(output)).name("delta: output")
        )
        self.cluster = cluster
        self.output = output
        self.client = cluster.submit(env.get_job_graph("delta_tail"))

    def _details(self) -> m.JobDetailsMessage:
        return self.cluster.dispatcher_gateway().call_sync("request_job_details", m.JobIdMessage(job_id=self.client.job_id), timeout=10)

    def _completed_checkpoints(self) -> int:
        stats = self.cluster.dispatcher_gateway().call_sync(
            "request_checkpoint_statistics", m.JobIdMessage(job_id=self.client.job_id), timeout=10)
        return int(json.loads(stats.statistics_json)["counts"]["completed"])

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Every subtask running and a checkpoint completed (the sink's commit path has run once)."""
        deadline = time.monotonic() + timeout
        while True:
            subtasks = [s for v in self._details().vertices for s in v.subtasks]
            if subtasks and all(s.state.name == "RUNNING" for s in subtasks) and self._completed_checkpoints() >= 1:
                return
            status = self.client.get_job_status()
            if status.is_globally_terminal:
                raise RuntimeError(f"the millrace job ended {status.name} before it ran")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the millrace job did not run within {timeout} s")
            time.sleep(0.1)

    def failure(self) -> str | None:
        """Why the job ended, if it did (it should run until stopped)."""
        status = self.client.get_job_status()
        if not status.is_globally_terminal:
            return None
        result = self.client.wait_result_message(timeout=10)
        return f"{status.name}: {result.error.describe() if result.error else 'no cause recorded'}"

    def stop(self) -> None:
        """Cancel: the output already holds every row (committed checkpoints stay; the sink removes only uncommitted files)."""
        if not self.client.get_job_status().is_globally_terminal:
            self.client.cancel()
        result = self.client.wait_result_message(timeout=60)
        log.info("millrace job %s", result.status.name)


class SparkConsumer:
    name = SPARK

    def __init__(self, spark: Any, source: str, output: str, work: str, args: argparse.Namespace) -> None:
        self.output = output
        self.query = (
            spark.readStream.format("delta").load(source)
            .select(*COLUMNS)
            .writeStream.format("delta")
            .outputMode("append")
            .option("checkpointLocation", os.path.join(work, "spark-checkpoint"))
            .trigger(processingTime=f"{args.trigger_ms} milliseconds")
            .queryName("delta_tail")
            .start(output)
        )

    def wait_ready(self, timeout: float = 120.0) -> None:
        """The first trigger ran (the source's initial, empty, snapshot planned and written)."""
        deadline = time.monotonic() + timeout
        while not self.query.recentProgress:
            if self.query.exception() is not None:
                raise RuntimeError(f"the Spark query failed: {self.query.exception()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the Spark query made no progress within {timeout} s")
            time.sleep(0.1)

    def failure(self) -> str | None:
        error = self.query.exception()
        return None if error is None and self.query.isActive else f"the query stopped: {error}"

    def stop(self) -> None:
        self.query.stop()


# --- checks and figures -------------------------------------------------------------------------------
def check_output(output: str, commits: list[Commit], total_events: int) -> tuple[dict[str, Any], list[tuple[Commit, np.ndarray]]]:
    """The output against the events 0..total_events-1: its snapshot (deltalake) and its commits read
    file by file; returns the check and, per commit, (the commit, the event indices it added)."""
    from deltalake import DeltaTable

    per_commit: list[tuple[Commit, np.ndarray]] = []
    removes = 0
    for c in commits:
        removes += c.removes
        idx = [pq.read_table(os.path.join(output, p), columns=["ts_ms"]).column("ts_ms").to_numpy() - BASE_TS_MS for p, _ in c.adds]
        per_commit.append((c, np.concatenate(idx) if idx else np.empty(0, dtype=np.int64)))
    from_log = np.concatenate([i for _, i in per_commit]) if per_commit else np.empty(0, dtype=np.int64)
    snap = DeltaTable(output).to_pyarrow_table(columns=COLUMNS) if commits else pa.table({c: pa.array([], pa.int64()) for c in COLUMNS})
    ts = snap.column("ts_ms").to_numpy()
    i = ts - BASE_TS_MS
    in_range = (i >= 0) & (i < total_events)
    counts = np.bincount(i[in_range], minlength=total_events)
    expected = windowed_sum.event_columns(np.clip(i, 0, None))
    wrong = int(np.sum((snap.column("user_id").to_numpy() != expected["user_id"]) | (snap.column("value").to_numpy() != expected["value"])))
    out = {
        "output_rows": snap.num_rows,
        "duplicates": int(np.sum(np.clip(counts - 1, 0, None))),
        "missing": int(np.sum(counts == 0)),
        "foreign": int(np.sum(~in_range)),
        "wrong_values": wrong,
        "removes": removes,
        # the commits read one by one hold the same rows as the snapshot (nothing removed, nothing hidden)
        "log_matches_snapshot": bool(np.array_equal(np.sort(from_log), np.sort(i))),
    }
    out["verified"] = (snap.num_rows == total_events and out["duplicates"] == 0 and out["missing"] == 0 and out["foreign"] == 0
                       and wrong == 0 and removes == 0 and out["log_matches_snapshot"])
    return out, per_commit


def row_latencies(per_commit: list[tuple[Commit, np.ndarray]], inputs: dict[int, Commit], rows: int, measured: range,
                  stamp: str) -> tuple[np.ndarray, float | None, int]:
    """Per measured row, ms from its input commit to the first output commit holding it (by the
    commits' `stamp` attribute); the newest such output commit's stamp; how many output commits hold measured rows."""
    lat: list[np.ndarray] = []
    last_out, out_commits = None, 0
    for c, idx in per_commit:
        k = idx // rows
        keep = (k >= measured.start) & (k < measured.stop)
        if not keep.any():
            continue
        out_commits += 1
        ts = getattr(c, stamp)
        last_out = ts if last_out is None else max(last_out, ts)
        ks, n = np.unique(k[keep], return_counts=True)
        lat.append(np.repeat(np.array([ts - getattr(inputs[int(x)], stamp) for x in ks], dtype=np.float64), n))
    return (np.concatenate(lat) if lat else np.empty(0)), last_out, out_commits


def latency_figures(per_commit: list[tuple[Commit, np.ndarray]], inputs: dict[int, Commit], rows: int, measured: range) -> dict[str, Any]:
    """p50/p99/max/mean of the measured rows' latencies, events/s; p50/p99 by commitInfo.timestamp beside them."""
    values, last_out, out_commits = row_latencies(per_commit, inputs, rows, measured, "timestamp_ms")
    if len(values) == 0 or last_out is None or not all(k in inputs for k in measured):
        return {"output_commits": out_commits, "events_per_s": None, "p50_latency_ms": None, "p99_latency_ms": None}
    by_info, _, _ = row_latencies(per_commit, inputs, rows, measured, "info_timestamp_ms")
    first_in = min(inputs[k].timestamp_ms for k in measured)
    last_in = max(inputs[k].timestamp_ms for k in measured)
    n_rows = rows * len(measured)
    return {
        "output_commits": out_commits,
        "events_per_s": round(n_rows / ((last_out - first_in) / 1000.0)),
        "offered_events_per_s": round(n_rows / ((last_in - first_in) / 1000.0)) if last_in > first_in else None,
        "p50_latency_ms": round(float(np.percentile(values, 50)), 1),
        "p99_latency_ms": round(float(np.percentile(values, 99)), 1),
        "max_latency_ms": round(float(values.max()), 1),
        "min_latency_ms": round(float(values.min()), 1),
        "mean_latency_ms": round(float(values.mean()), 1),
        "latency_rows": int(len(values)),
        # the same by the writers' commitInfo.timestamp (Spark stamps it before the work of its commit)
        "p50_latency_ms_commit_info": round(float(np.percentile(by_info, 50)), 1),
        "p99_latency_ms_commit_info": round(float(np.percentile(by_info, 99)), 1),
    }


def input_commits(table: str, lines: list[dict[str, Any]]) -> tuple[dict[int, Commit], float]:
    """Input commit k -> its entry in the input's log; and the appender's median lag (ms) behind the entry's timestamp."""
    out: dict[int, Commit] = {}
    lags = []
    for line in lines:
        c = log_entry(table, int(line["version"]))
        if c is None:
            raise RuntimeError(f"input version {line['version']} (commit {line['commit']}) is not in {table}'s log")
        out[int(line["commit"])] = c
        lags.append(int(line["committed_ms"]) - c.timestamp_ms)
    return out, round(statistics.median(lags), 1) if lags else 0.0


def spark_pids(cluster: MiniCluster, appender: AppenderProcess | None) -> set[int]:
    """Processes below this one that are neither a local TaskManager (nor its children) nor the appender: the Spark JVM and its daemons."""
    others = {t.pid for t in cluster.task_managers() if t.pid} | ({appender.proc.pid} if appender is not None else set())
    for pid in list(others):
        others |= descendants(pid)
    return descendants(os.getpid()) - others


def wait_rows(followers: dict[str, LogFollower], consumers: list[Any], rows: int, timeout: float, failures: dict[str, str]) -> bool:
    """Until every output holds `rows` rows (or a consumer failed, or `timeout` s passed)."""
    deadline = time.monotonic() + timeout
    polls = 0
    while not all(f.poll() >= rows for f in followers.values()):
        polls += 1
        for c in consumers if polls % 10 == 0 else ():  # the consumers' health once a second (RPC / py4j calls)
            if c.name not in failures and (why := c.failure()) is not None:
                failures[c.name] = why
                log.error("%s failed: %s", c.name, why)
        if len(failures) == len(consumers) or all(f.rows >= rows or n in failures for n, f in followers.items()):
            return False
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


# --- one round: an input table, its consumers, two appender runs ----------------------------------------
def run_round(names: list[str], args: argparse.Namespace, cluster: MiniCluster, spark: Any, work: str, mode: str) -> list[dict[str, Any]]:
    source = os.path.join(work, "input")
    create_input(source)
    consumers: list[Any] = []
    appender: AppenderProcess | None = None
    total = args.warmup_commits + args.commits
    rows: dict[str, dict[str, Any]] = {}
    failures: dict[str, str] = {}
    try:
        for name in names:  # all started before any is waited for: the Spark query starts while the job deploys
            out = os.path.join(work, f"out-{name}")
            cls = SparkConsumer if name == SPARK else MillraceConsumer
            consumers.append(cls(spark if name == SPARK else cluster, source, out, os.path.join(work, name), args))
        for c in consumers:
            c.wait_ready()
        followers = {c.name: LogFollower(c.output) for c in consumers}
        lines: list[dict[str, Any]] = []
        if args.warmup_commits:
            appender = AppenderProcess(source, args.warmup_commits, 0, args.rows, args.interval_ms)
            appender.wait(timeout=300)
            lines += appender.lines
            if not wait_rows(followers, consumers, args.warmup_commits * args.rows, args.timeout_s, failures):
                log.warning("the warm-up rows did not all reach the outputs within %s s", args.timeout_s)
        groups: dict[str, Any] = {
            "jm": lambda: (os.getpid(),),
            "tm": lambda: [t.pid for t in cluster.task_managers() if t.pid],
            "appender": lambda: [appender.proc.pid] if appender is not None else [],
            "spark": lambda: spark_pids(cluster, appender),
        }
        with CpuMeter(groups) as cpu:
            appender = AppenderProcess(source, args.commits, args.warmup_commits, args.rows, args.interval_ms)
            appender.wait(timeout=600)
            lines += appender.lines
            complete = wait_rows(followers, consumers, total * args.rows, args.timeout_s, failures)
        if not complete:
            log.warning("not every row reached the outputs within %s s after the last commit", args.timeout_s)
    finally:
        for c in consumers:
            try:
                c.stop()
            except Exception:  # stop the others too
                log.exception("stopping %s failed", c.name)
        if appender is not None:
            appender.stop()
    inputs, lag = input_commits(source, lines)
    measured = range(args.warmup_commits, total)
    for c in consumers:
        f = followers[c.name]
        f.poll()
        check, per_commit = check_output(c.output, f.commits, total * args.rows)
        cpu_s = cpu.seconds("jm") + cpu.seconds("tm") if c.name == MILLRACE else cpu.seconds("spark")
        n = args.commits * args.rows
        extra = {"discovery_interval_ms": args.discovery_interval_ms, "checkpoint_interval_ms": args.checkpoint_interval_ms,
                 "parallelism": args.parallelism, "provider": args.provider,
                 "jm_cpu_s": round(cpu.seconds("jm"), 2), "tm_cpu_s": round(cpu.seconds("tm"), 2)} if c.name == MILLRACE else {"trigger_ms": args.trigger_ms}
        base = cpu.fields(n)
        rows[c.name] = {
            "name": c.name, "mode": mode, "commits": sum(1 for k in measured if k in inputs), "rows": n,
            "warmup_commits": args.warmup_commits, "rows_per_commit": args.rows, "interval_ms": args.interval_ms,
            **latency_figures(per_commit, inputs, args.rows, measured),
            "verified": check["verified"] and len(inputs) == total, **{k: v for k, v in check.items() if k != "verified"},
            "cpu_s": round(cpu_s, 2), "cpu_s_per_million_events": round(cpu_s / (n / 1e6), 2),
            "appender_cpu_s": round(cpu.seconds("appender"), 2), "other_cpu_s": base["other_cpu_s"], "steal_pct": base["steal_pct"],
            "appender_lag_ms": lag, **extra,
        }
        if c.name in failures:
            rows[c.name].update(verified=False, failure=failures[c.name])
    return [rows[n] for n in names if n in rows]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--commits", type=int, default=50, help="measured input commits")
    p.add_argument("--rows", type=int, default=2000, help="events per input commit")
    p.add_argument("--interval-ms", type=int, default=200, help="the appender's pause between commits")
    p.add_argument("--warmup-commits", type=int, default=5, help="commits appended (and verified) before the measured ones")
    p.add_argument("--discovery-interval-ms", type=int, default=100, help="how often the millrace source looks for new commits")
    p.add_argument("--checkpoint-interval-ms", type=int, default=1000, help="millrace: exactly-once checkpoints (= output commits)")
    p.add_argument("--trigger-ms", type=int, default=1000, help="Spark: processing-time trigger")
    p.add_argument("--parallelism", type=int, default=1)
    p.add_argument("--mode", choices=["concurrent", "sequential"], default="concurrent")
    p.add_argument("--only", choices=[MILLRACE, SPARK], default=None, help="run one consumer only")
    p.add_argument("--provider", choices=["local", "spark"], default="local")
    p.add_argument("--timeout-s", type=float, default=120.0, help="how long to wait for the outputs after the last commit")
    p.add_argument("--rounds", type=int, default=1, help="whole runs on the same cluster and Spark session; >1 adds median lines")
    p.add_argument("--workdir", default=None, help="keep the tables here (default: a temporary directory, removed)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    names = [args.only] if args.only else [MILLRACE, SPARK]
    mode = "alone" if len(names) == 1 else args.mode
    work = args.workdir or tempfile.mkdtemp(prefix="delta-tail-")
    spark = None
    if SPARK in names or args.provider == "spark":
        from runtime.deploy.spark_session import SparkSessionConfig, build_spark_session

        slots = 2 if args.provider == "local" else args.parallelism + 2  # TaskManagers on Spark take task slots of the same session
        spark = build_spark_session(SparkSessionConfig(master=f"local[{slots}]", app_name="millrace-delta-tail",
                                                       warehouse_dir=os.path.join(work, "spark-warehouse")))
    rows: list[dict[str, Any]] = []
    try:
        with MiniCluster(MiniClusterConfig(provider=args.provider, tm_log_level="WARNING"), spark=spark) as cluster:
            for r in range(args.rounds):
                groups = [names] if mode != "sequential" else [[n] for n in names]
                round_rows = []
                for group in groups:
                    round_rows += run_round(group, args, cluster, spark, os.path.join(work, f"round{r}-{'-'.join(group)}"), mode)
                round_rows = [emit({**row, "round": r} if args.rounds > 1 else row) for row in round_rows]
                rows += round_rows
                emit_ratio(round_rows, mode)
    finally:
        if spark is not None:
            spark.stop()
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    if args.rounds > 1:
        medians = []
        for name in names:
            mine = [r for r in rows if r["name"] == name]
            med = {"name": name, "mode": mode, "round": "median", "rounds": len(mine), "verified": all(r["verified"] for r in mine)}
            for k in ("events_per_s", "p50_latency_ms", "p99_latency_ms", "max_latency_ms", "cpu_s_per_million_events"):
                vals = [r[k] for r in mine if r.get(k) is not None]
                med[k] = statistics.median(vals) if vals else None
                if k == "p99_latency_ms":
                    med["p99_latency_ms_rounds"] = vals
            medians.append(emit(med))
        emit_ratio(medians, mode)
    return require(rows)


def emit_ratio(rows: list[dict[str, Any]], mode: str) -> None:
    """{"name": "millrace_vs_spark", "p99_ratio", "p50_ratio"}: millrace's latency / Spark's (below 1: millrace is faster)."""
    by = {r["name"]: r for r in rows}
    if MILLRACE not in by or SPARK not in by or not by[SPARK].get("p99_latency_ms") or by[MILLRACE].get("p99_latency_ms") is None:
        return
    emit({"name": "millrace_vs_spark", "mode": mode, **({"round": by[MILLRACE]["round"]} if "round" in by[MILLRACE] else {}),
          "p99_ratio": round(by[MILLRACE]["p99_latency_ms"] / by[SPARK]["p99_latency_ms"], 3),
          "p50_ratio": round(by[MILLRACE]["p50_latency_ms"] / by[SPARK]["p50_latency_ms"], 3)})


if __name__ == "__main__":
    sys.exit(main())
