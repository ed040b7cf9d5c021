"""Restore cost of incremental (changelog) RocksDB checkpoints against a full one.

One RocksDB backend holds --keys keys of a ReducingState (the checkpoints.py job's state). The first
checkpoint materializes (a full native checkpoint, written like a task writes it); each further one
logs --writes-per-log writes (keys in turn, as that job at ~135k events/s over 2 s). For each chain
length in --logs, the restore path a task runs (read its state files, then the entries of its key
groups out of base + logs) is timed, side by side with the full checkpoint alone (0 logs, the
baseline). Prints one JSON line per chain:

    {"logs", "files", "checkpoint_bytes", "read_s", "apply_and_read_s", "restore_s", "entries", "verified",
     "jm_cpu_s", "tm_cpu_s", "cpu_s_per_million_events"}

The restore runs in this process (as in a TaskManager): its CPU is tm_cpu_s, per million entries
restored. `verified`: every key came back with the sum of all the writes logged for it.

    .venv/bin/python benchmarks/changelog_restore.py [--keys 1000000] [--logs 0,14,58] [--writes-per-log 270000]

58 logs of 270k writes are ~256 MB (state.changelog.max-log-size's default, after which the
backend materializes again): the longest chain a restore replays with default settings.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from measure import CpuMeter

from runtime.api.datastream.state import ReducingStateDescriptor
from runtime.core.checkpoint import OperatorSnapshot
from runtime.core.keygroups import KeyGroupRange
from runtime.state.changelog import ChangelogOptions
from runtime.state.rocksdb import RocksDBKeyedStateBackend, native_to_keyed
from runtime.storage.state_files import read_operator_state, write_state_file

MAX_P = 128


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--logs", default="0,14,58")
    parser.add_argument("--writes-per-log", type=int, default=270_000)
    args = parser.parse_args()
    chains = sorted(int(x) for x in args.logs.split(","))
    rng = KeyGroupRange(0, MAX_P - 1)
    with tempfile.TemporaryDirectory() as root:
        never = ChangelogOptions(enabled=True, materialize_interval_ms=10**12, max_log_bytes=1 << 50)
        backend = RocksDBKeyedStateBackend(rng, MAX_P, "op", changelog=never)
        total = backend.get_partitioned_state(ReducingStateDescriptor("sum", lambda a, c: (a[0], a[1] + c[1])))
        paths: dict[int, str] = {}
        ok = True
        written = 0
        for cid in range(1, chains[-1] + 2):
            for _ in range(args.keys if cid == 1 else args.writes_per_log):
                key = written % args.keys
                written += 1
                backend.set_current_key(key)
                total.add((key, 1))
            supplier = backend.snapshot_native_sync(cid)
            shared = backend.shared_checkpoints(cid)
            handle = write_state_file(root, cid, 0, 0, 1, {"op": OperatorSnapshot(native=supplier, shared_checkpoints=shared)})
            assert handle is not None
            paths[cid] = handle.path
            backend.notify_checkpoint_complete(cid)
            if cid - 1 in chains:
                files = [paths[c] for c in shared] + [handle.path]
                with CpuMeter({"tm": lambda: (os.getpid(),)}) as cpu:
                    t0 = time.perf_counter()
                    ctx = read_operator_state(root, files, "op", rng, 0, 1)
                    t1 = time.perf_counter()
                    keyed = native_to_keyed(ctx.native, rng)
                    t2 = time.perf_counter()
                sums = {k: v[1] for states in keyed.values() for _, e in states.values() for k, _ns, v in e}
                # key k got one write per round of the key space: written // keys, plus one if k < written % keys
                verified = len(sums) == args.keys and all(v == written // args.keys + (k < written % args.keys) for k, v in sums.items())
                ok &= verified
                print(json.dumps({
                    "logs": cid - 1,
                    "files": len(files),
                    "checkpoint_bytes": sum(os.path.getsize(os.path.join(root, p)) for p in files),
                    "read_s": round(t1 - t0, 3),
                    "apply_and_read_s": round(t2 - t1, 3),
                    "restore_s": round(t2 - t0, 3),
                    "entries": len(sums),
                    "verified": verified,
                    **cpu.fields(len(sums)),
                }), flush=True)
        backend.dispose()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
