"""What the keyed-state benchmarks share: a MiniCluster on local processes or Spark, the key
generator, and the checks of what their jobs did (state read back from a checkpoint or savepoint,
final per-key sums from a sink) against plain-Python counts."""
from __future__ import annotations

import contextlib
import pickle
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import numpy as np

from runtime.api.datastream import SinkFunction
from runtime.core.keygroups import KeyGroupRange
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig
from runtime.rpc import messages as m
from runtime.state.rocksdb import native_to_keyed
from runtime.storage.state_files import read_operator_state
from runtime.storage.state_reader import resolve_checkpoint

STATE_TASK_HEAP_MB = 3072

# benchmarks/ is not on the TaskManagers' path: functions from here travel by value
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class KeyOf:
    """Record i of the generator: (i % keys, 1), so a keyed reduce holds `keys` entries."""

    def __init__(self, keys: int) -> None:
        self.keys = keys

    def __call__(self, i: int) -> tuple[int, int]:
        return (i % self.keys, 1)


class LastValuePerKey(SinkFunction):
    """Keeps the newest (key, sum) per key in the TaskManager; writes them to `folder` when the job ends."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.last: dict[int, int] = {}

    def invoke(self, value: tuple[int, int], context: Any = None) -> None:
        self.last[value[0]] = value[1]

    def close(self) -> None:
        (Path(self.folder) / f"{uuid.uuid4().hex}.pickle").write_bytes(pickle.dumps(self.last))


def read_last_values(folder: str) -> dict[int, int]:
    out: dict[int, int] = {}
    for f in Path(folder).glob("*.pickle"):
        out.update(pickle.loads(f.read_bytes()))  # a key lives in one subtask
    return out


def expected_sums(indices: np.ndarray, keys: int) -> np.ndarray:
    """Per key, how many of `indices` (records (i % keys, 1)) it got: the reduce's sum."""
    return np.bincount(indices % keys, minlength=keys)


def check_sums(got: dict[int, int], expected: np.ndarray) -> dict[str, Any]:
    """{"keys_checked", "wrong_keys", "missing_keys", "extra_keys", "verified"}: `got` against `expected` (0 = key absent)."""
    want = {int(k): int(v) for k, v in enumerate(expected.tolist()) if v}
    wrong = sum(1 for k, v in got.items() if k in want and want[k] != v)
    missing = sum(1 for k in want if k not in got)
    extra = sum(1 for k in got if k not in want)
    return {"keys_checked": len(want), "wrong_keys": wrong, "missing_keys": missing, "extra_keys": extra,
            "verified": bool(want) and not (wrong or missing or extra)}


def generator_emitted(location: str, source_id: str, events: int) -> np.ndarray:
    """The indices a DataGeneratorSource had emitted at a checkpoint: all but those its splits still hold."""
    meta = resolve_checkpoint(location)
    ctx = read_operator_state(location, meta.operator_files.get(source_id, []), source_id, KeyGroupRange(0, 127), 0, 1)
    left = np.zeros(events, dtype=bool)
    for splits in ctx.operator_lists.values():
        for nxt, end, chunk, stride in splits:
            while nxt < end:
                cell = nxt - nxt % chunk
                left[nxt:min(end, cell + chunk)] = True
                nxt = cell + stride * chunk
    return np.flatnonzero(~left)


def checkpointed_sums(location: str, operator_id: str) -> dict[int, int]:
    """key -> sum of the keyed reduce's state in the newest checkpoint at `location`, read back the way
    a restoring task reads it (heap rows, native RocksDB bundles and changelogs alike)."""
    meta = resolve_checkpoint(location)
    max_p = meta.max_parallelism.get(operator_id) or 128
    rng = KeyGroupRange(0, max_p - 1)
    ctx = read_operator_state(location, meta.operator_files.get(operator_id, []), operator_id, rng, 0, 1)
    out: dict[int, int] = {}
    for keyed in (ctx.keyed, native_to_keyed(ctx.native, rng) if ctx.native else {}):
        for states in keyed.values():
            for _kind, entries in states.values():
                for key, _ns, value in entries:
                    out[key] = value[1]
    return out


def operator_ids(job_graph: Any) -> dict[str, str]:
    """Operator name -> operator id in a JobGraph."""
    return {op.name: op.operator_id for v in job_graph.vertices for op in v.operators}


@contextlib.contextmanager
def bench_cluster(provider: str, app_name: str) -> Iterator[MiniCluster]:
    """A warm MiniCluster for a benchmark's runs; with provider "spark", TaskManagers on local[2] executors."""
    spark = None
    if provider == "spark":
        from runtime.deploy.spark_session import SparkSessionConfig, build_spark_session

        spark = build_spark_session(SparkSessionConfig(master="local[2]", app_name=app_name))
    try:
        # 1,000,000 keys of heap state (plus a snapshot being written) are ~800 MB of Python objects:
        # TaskManagers sized for it, as a Flink user sets taskmanager.memory.task.heap.size (docs/memory.md)
        profile = m.ResourceProfile(cpu_cores=1.0, task_heap_mb=STATE_TASK_HEAP_MB, managed_memory_mb=256)
        with MiniCluster(MiniClusterConfig(provider=provider, tm_log_level="WARNING", task_manager_profile=profile), spark=spark) as cluster:
            yield cluster
    finally:
        if spark is not None:
            spark.stop()
