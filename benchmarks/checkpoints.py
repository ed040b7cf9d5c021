"""Checkpoint cost: a keyed job holding --keys keys, with and without checkpoints, both state backends.

The job: a generator of --events records (key = i % keys, value = 1), key_by(key), reduce(sum)
(one ReducingState entry per key in the keyed state backend), nothing emitted downstream. Each
backend runs twice side by side in this process on the same warm cluster: without checkpoints
(the baseline) and with a checkpoint every --interval-ms. Prints one JSON line per backend:

    {"backend", "snapshot_mode", "keys", "checkpoint_acked_s", "checkpoint_committed_s", "state_bytes",
     "events_per_s_without", "events_per_s_with", "cost_pct", "cost_pct_rounds", "checkpoints", "verified",
     "cpu_s_per_million_events_without", "cpu_s_per_million_events", ...}

cost_pct is the median over --rounds pairs of runs (without, with; the order alternates), each
pair's cost from its own two runs: on this shared machine one pair alone varies by ~5 points.

state.snapshot.async-mode: "fork" writes the state file in a forked child (copy-on-write image,
its own core), "thread" on a thread of the TaskManager (sharing its GIL); both are measured.

checkpoint_acked_s is the median of trigger -> the last task's acknowledgement (Flink's end-to-end
duration: every state file is written) over the completed checkpoints once every key is in state;
checkpoint_committed_s the median of trigger -> committed to Delta (the checkpoint exists from
then); state_bytes the size of the largest (a full one: incremental checkpoints mostly write a log,
median_checkpoint_bytes).

Every checkpointed run is checked: the newest checkpoint's keyed state, read back the way a
restoring task reads it, holds for every key exactly the number of records the source had emitted
before that checkpoint (its position is in the same checkpoint) (`verified`). Each row carries the
CPU seconds of the JobManager (this process) and the TaskManager per million events, without and
with checkpoints.

    .venv/bin/python benchmarks/checkpoints.py [--keys 1000000] [--events 3000000] [--interval-ms 2000] [--provider local|spark]
"""
from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from typing import Any

from bench_cluster import KeyOf, bench_cluster, check_sums, checkpointed_sums, expected_sums, generator_emitted, operator_ids
from measure import CpuMeter, emit, require

from runtime.api.common import Configuration, WatermarkStrategy
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.checkpoint import CheckpointingMode
from runtime.deploy.minicluster import MiniCluster
from runtime.rpc import messages as m

CHANGELOG_OPTIONS: dict[str, str] = {}  # --changelog KEY=VALUE (state.changelog.*) for rocksdb-incremental


def run(cluster: MiniCluster, backend: str, keys: int, events: int, interval_ms: int, checkpoint_dir: str, mode: str = "fork") -> dict[str, Any]:
    conf = Configuration()
    kind, _, variant = backend.partition("-")
    conf.set_string("state.backend.type", kind)
    if variant == "incremental":  # changelog + periodic materialization (runtime.state.changelog), Flink's defaults
        conf.set_string("state.backend.incremental", "true")
        for key, value in CHANGELOG_OPTIONS.items():
            conf.set_string(key, value)
    conf.set_string("state.snapshot.async-mode", mode)
    conf.set_string("state.checkpoints.dir", checkpoint_dir)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    if interval_ms:
        env.enable_checkpointing(interval_ms, CheckpointingMode.EXACTLY_ONCE)
    (
        env.from_source(DataGeneratorSource(KeyOf(keys), events), WatermarkStrategy.no_watermarks(), "records")
        .key_by(lambda r: r[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .name("sum per key")
        .filter(lambda r: False)
        .print()
    )
    job_graph = env.get_job_graph(f"checkpoints-{backend}-{interval_ms}")
    ops = operator_ids(job_graph)
    history: dict[int, dict[str, Any]] = {}
    gw = cluster.dispatcher_gateway()
    with CpuMeter.for_cluster(cluster) as cpu:
        client = cluster.submit(job_graph)
        while client.get_job_status().value not in ("FINISHED", "FAILED", "CANCELED"):
            time.sleep(0.5)  # sampling the statistics (they keep the newest 10), not waiting for a moment
            if interval_ms:
                stats = json.loads(gw.call_sync("request_checkpoint_statistics", m.JobIdMessage(job_id=client.job_id), timeout=10).statistics_json)
                for e in stats.get("history", []):
                    if e["status"] == "COMPLETED":
                        history[e["id"]] = e
        result = client.get_job_execution_result(timeout=3600)
    if result.status.value != "FINISHED":
        raise RuntimeError(f"checkpoints run {backend}/{mode} ended {result.status.value}")
    seconds = (result.running_ms or result.net_runtime_ms) / 1000
    out: dict[str, Any] = {"seconds": seconds, "events_per_s": events / seconds, **cpu.fields(events)}
    if interval_ms:
        location = f"{checkpoint_dir}/{client.job_id}"
        emitted = generator_emitted(location, ops["records"], events)
        out.update(check_sums(checkpointed_sums(location, ops["sum per key"]), expected_sums(emitted, keys)))
        out["records_in_checkpoint"] = int(len(emitted))
        done = [history[k] for k in sorted(history)]
        # once every key is in state (the keys arrive in the first keys/events of the run); sizes
        # cannot tell that apart for incremental checkpoints, whose sizes are those of their logs
        full = done[int(len(done) * min(1.0, keys / events)) + 1:] or done
        committed = [e["end_to_end_duration"] + (e.get("commit_duration") or 0) for e in full]
        out["checkpoints"] = len(done)
        out["checkpoint_acked_s"] = round(statistics.median(e["end_to_end_duration"] for e in full) / 1000, 3) if full else None
        out["checkpoint_committed_s"] = round(statistics.median(committed) / 1000, 3) if full else None
        out["max_checkpoint_committed_s"] = round(max(committed) / 1000, 3) if full else None
        out["state_bytes"] = max((e["state_size"] for e in done), default=0)  # the largest: a full one
        out["median_checkpoint_bytes"] = int(statistics.median(e["state_size"] for e in full)) if full else 0
        durations = (
            ("sync", "max_sync_duration"), ("async", "max_async_duration"), ("alignment", "max_alignment_duration"), ("start_delay", "max_start_delay"),
        )
        for part, field in durations:
            out[f"{part}_s"] = round(statistics.median(e[field] for e in full) / 1000, 3) if full else None
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--events", type=int, default=3_000_000)
    parser.add_argument("--interval-ms", type=int, default=2000)
    parser.add_argument("--backends", default="hashmap,rocksdb,rocksdb-incremental",
                        help="state backends; rocksdb-incremental: rocksdb with state.backend.incremental (changelog)")
    parser.add_argument("--modes", default="fork,thread", help="state.snapshot.async-mode values to compare")
    parser.add_argument("--rounds", type=int, default=3, help="(without, with) pairs per backend; cost_pct is their median")
    parser.add_argument("--provider", choices=["local", "spark"], default="local")
    parser.add_argument("--changelog", action="append", default=[], metavar="KEY=VALUE",
                        help="a state.changelog.* setting for rocksdb-incremental, e.g. state.changelog.max-log-size=256mb")
    args = parser.parse_args()
    CHANGELOG_OPTIONS.update(kv.split("=", 1) for kv in args.changelog)
    logging.basicConfig(level=logging.WARNING)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, bench_cluster(args.provider, "millrace-checkpoint-bench") as cluster:
        for backend in args.backends.split(","):
            for mode in args.modes.split(","):
                # rounds of (without, with), the order alternating: this machine's speed drifts by
                # several per cent between runs, so one pair can show a cost of 7 % or 12 % for the same code
                withouts: list[dict[str, Any]] = []
                withs: list[dict[str, Any]] = []
                for r in range(args.rounds):
                    for checkpointed in (False, True) if r % 2 == 0 else (True, False):
                        if checkpointed:
                            withs.append(run(cluster, backend, args.keys, args.events, args.interval_ms, tmp, mode))
                        else:
                            withouts.append(run(cluster, backend, args.keys, args.events, 0, tmp))
                costs = [round((1 - w["events_per_s"] / wo["events_per_s"]) * 100, 1) for wo, w in zip(withouts, withs)]
                with_cp = sorted(withs, key=lambda w: w["events_per_s"])[len(withs) // 2]  # the median run
                row = {
                    "backend": backend,
                    "snapshot_mode": mode,
                    "keys": args.keys,
                    "checkpoint_acked_s": with_cp.get("checkpoint_acked_s"),
                    "checkpoint_committed_s": with_cp.get("checkpoint_committed_s"),
                    "state_bytes": with_cp.get("state_bytes"),
                    "events_per_s_without": round(statistics.median(w["events_per_s"] for w in withouts)),
                    "events_per_s_with": round(with_cp["events_per_s"]),
                    "cost_pct": statistics.median(costs),
                    "cost_pct_rounds": costs,
                    "checkpoints": with_cp.get("checkpoints"),
                    "max_checkpoint_committed_s": with_cp.get("max_checkpoint_committed_s"),
                    "median_checkpoint_bytes": with_cp.get("median_checkpoint_bytes"),
                    "sync_s": with_cp.get("sync_s"),
                    "async_s": with_cp.get("async_s"),
                    "alignment_s": with_cp.get("alignment_s"),
                    "start_delay_s": with_cp.get("start_delay_s"),
                    # every checkpointed run's state was read back and checked, not only the median one
                    "verified": all(w["verified"] for w in withs),
                    "wrong_keys": sum(w["wrong_keys"] + w["missing_keys"] + w["extra_keys"] for w in withs),
                    "cpu_s_per_million_events_without": statistics.median(w["cpu_s_per_million_events"] for w in withouts),
                    "cpu_s_per_million_events": statistics.median(w["cpu_s_per_million_events"] for w in withs),
                }
                rows.append(emit(row))
    return require(rows)


if __name__ == "__main__":
    sys.exit(main())
