"""Checkpoint cost: a keyed job holding --keys keys, with and without checkpoints, both state backends.

The job: a generator of --events records (key = i % keys, value = 1), key_by(key), reduce(sum)
(one ReducingState entry per key in the keyed state backend), nothing emitted downstream. Each
backend runs twice side by side in this process on the same warm cluster: without checkpoints
(the baseline) and with a checkpoint every --interval-ms. Prints one JSON line per backend:

    {"backend", "snapshot_mode", "keys", "checkpoint_s", "state_bytes", "events_per_s_without", "events_per_s_with",
     "cost_pct", "cost_pct_rounds", "checkpoints"}

cost_pct is the median over --rounds pairs of runs (without, with; the order alternates), each
pair's cost from its own two runs: on this shared machine one pair alone varies by ~5 points.

state.snapshot.async-mode: "fork" writes the state file in a forked child (copy-on-write image,
its own core), "thread" on a thread of the TaskManager (sharing its GIL); both are measured.

checkpoint_s is the median end-to-end duration of the completed checkpoints once every key is in
state (trigger -> committed to Delta); state_bytes the size of the largest (a full one: incremental
checkpoints mostly write a log, median_checkpoint_bytes).

    .venv/bin/python benchmarks/checkpoints.py [--keys 1000000] [--events 3000000] [--interval-ms 2000] [--provider local|spark]
"""
from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import time
from typing import Any

from runtime.api.common import Configuration, WatermarkStrategy
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.checkpoint import CheckpointingMode
from bench_cluster import KeyOf, bench_cluster
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
    client = cluster.submit(env.get_job_graph(f"checkpoints-{backend}-{interval_ms}"))
    history: dict[int, dict[str, Any]] = {}
    gw = cluster.dispatcher_gateway()
    while client.get_job_status().value not in ("FINISHED", "FAILED", "CANCELED"):
        time.sleep(0.5)
        if interval_ms:
            stats = json.loads(gw.call_sync("request_checkpoint_statistics", m.JobIdMessage(job_id=client.job_id), timeout=10).statistics_json)
            for e in stats.get("history", []):
                if e["status"] == "COMPLETED":
                    history[e["id"]] = e
    result = client.get_job_execution_result(timeout=3600)
    seconds = (result.running_ms or result.net_runtime_ms) / 1000
    out: dict[str, Any] = {"seconds": seconds, "events_per_s": events / seconds}
    if interval_ms:
        done = [history[k] for k in sorted(history)]
        # once every key is in state (the keys arrive in the first keys/events of the run); sizes
        # cannot tell that apart for incremental checkpoints, whose sizes are those of their logs
        full = done[int(len(done) * min(1.0, keys / events)) + 1:] or done
        out["checkpoints"] = len(done)
        out["checkpoint_s"] = round(statistics.median(e["end_to_end_duration"] for e in full) / 1000, 3) if full else None
        out["max_checkpoint_s"] = round(max(e["end_to_end_duration"] for e in full) / 1000, 3) if full else None
        out["state_bytes"] = max((e["state_size"] for e in done), default=0)  # the largest: a full one
        out["median_checkpoint_bytes"] = int(statistics.median(e["state_size"] for e in full)) if full else 0
        for part, field in (("sync", "max_sync_duration"), ("async", "max_async_duration"), ("alignment", "max_alignment_duration"), ("start_delay", "max_start_delay")):
            out[f"{part}_s"] = round(statistics.median(e[field] for e in full) / 1000, 3) if full else None
    return out


def main() -> None:
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
    with tempfile.TemporaryDirectory() as tmp, bench_cluster(args.provider, "millrace-checkpoint-bench") as cluster:
        for backend in args.backends.split(","):
            for mode in args.modes.split(","):
                # rounds of (without, with), the order alternating: this machine's speed drifts by
                # several per cent between runs, so one pair can show a cost of 7 % or 12 % for the same code
                withouts: list[float] = []
                withs: list[dict[str, Any]] = []
                for r in range(args.rounds):
                    for checkpointed in (False, True) if r % 2 == 0 else (True, False):
                        if checkpointed:
                            withs.append(run(cluster, backend, args.keys, args.events, args.interval_ms, tmp, mode))
                        else:
                            withouts.append(run(cluster, backend, args.keys, args.events, 0, tmp)["events_per_s"])
                costs = [round((1 - w["events_per_s"] / wo) * 100, 1) for wo, w in zip(withouts, withs)]
                with_cp = sorted(withs, key=lambda w: w["events_per_s"])[len(withs) // 2]  # the median run
                row = {
                    "backend": backend,
                    "snapshot_mode": mode,
                    "keys": args.keys,
                    "checkpoint_s": with_cp.get("checkpoint_s"),
                    "state_bytes": with_cp.get("state_bytes"),
                    "events_per_s_without": round(statistics.median(withouts)),
                    "events_per_s_with": round(with_cp["events_per_s"]),
                    "cost_pct": statistics.median(costs),
                    "cost_pct_rounds": costs,
                    "checkpoints": with_cp.get("checkpoints"),
                    "max_checkpoint_s": with_cp.get("max_checkpoint_s"),
                    "median_checkpoint_bytes": with_cp.get("median_checkpoint_bytes"),
                    "sync_s": with_cp.get("sync_s"),
                    "async_s": with_cp.get("async_s"),
                    "alignment_s": with_cp.get("alignment_s"),
                    "start_delay_s": with_cp.get("start_delay_s"),
                }
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
