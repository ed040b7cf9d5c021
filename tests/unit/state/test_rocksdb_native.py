"""Native RocksDB checkpoints: the checkpoint holds RocksDB's own files (no entry-by-entry encoding);
restoring them at another parallelism, or reading them with the state reader, gives exactly the
canonical entries (savepoints stay canonical: tests/integration/runtime/test_savepoints.py)."""
from __future__ import annotations

from typing import Any

import pytest

from runtime.api.datastream.state import ListStateDescriptor, MapStateDescriptor, ReducingStateDescriptor, ValueStateDescriptor
from runtime.core.checkpoint import OperatorSnapshot
from runtime.core.keygroups import KeyGroupRange, compute_key_group_range_for_operator_index
from runtime.state.rocksdb import RocksDBKeyedStateBackend, native_to_keyed
from runtime.storage.checkpoint_store import CheckpointMetadata, CheckpointStore
from runtime.storage.state_files import read_operator_state, write_state_file
from runtime.storage.state_reader import list_operators, read_keyed_state

pytestmark = pytest.mark.unit
MAX_P = 16


def _filled(n: int = 500) -> RocksDBKeyedStateBackend:
    b = RocksDBKeyedStateBackend(KeyGroupRange(0, MAX_P - 1), MAX_P, "op")
    total = b.get_partitioned_state(ReducingStateDescriptor("total", lambda a, c: (a[0], a[1] + c[1])))
    name = b.get_partitioned_state(ValueStateDescriptor("name"))
    seen = b.get_partitioned_state(ListStateDescriptor("seen"))
    tags = b.get_partitioned_state(MapStateDescriptor("tags"))
    for k in range(n):
        b.set_current_key(k)
        total.add((k, k))
        total.add((k, 1))
        name.update(f"user-{k}")
        seen.add(k)
        seen.add(-k)
        tags.put("even", k % 2 == 0)
    return b


def _canonical(keyed: dict[int, dict[str, Any]]) -> dict[tuple[int, str], list[tuple[Any, Any, Any]]]:
    out = {}
    for kg, states in keyed.items():
        for name, (_kind, entries) in states.items():
            pairs = list(zip(entries.pairs, entries.values)) if hasattr(entries, "pairs") else [((k, ns), v) for k, ns, v in entries]
            out[(kg, name)] = sorted(((k, ns, v) for (k, ns), v in pairs), key=repr)
    return out


def test_native_checkpoint_restores_any_key_group_range_exactly(tmp_path: Any) -> None:
    b = _filled()
    expected = _canonical(b.snapshot_sync()())
    bundle = b.snapshot_native_sync()()
    assert bundle.catalog["tables"].keys() == {"total", "name", "seen", "tags"} and bundle.files
    handle = write_state_file(str(tmp_path), 1, 0, 0, 1, {"op": OperatorSnapshot(native=bundle)})
    # rescale 1 -> 3: each new subtask reads its key groups out of the one native bundle
    restored: dict = {}
    for i in range(3):
        rng = compute_key_group_range_for_operator_index(MAX_P, 3, i)
        ctx = read_operator_state(str(tmp_path), [handle.path], "op", rng, i, 3)
        assert not ctx.keyed and len(ctx.native) == 1
        part = native_to_keyed(ctx.native, rng)
        assert set(part) <= set(rng)
        restored.update(part)
    assert _canonical(restored) == expected


def test_the_state_reader_decodes_native_checkpoints(tmp_path: Any) -> None:
    b = _filled(50)
    root = str(tmp_path)
    bundle = b.snapshot_native_sync()()
    files = [write_state_file(root, 1, 0, 0, 1, {"op": OperatorSnapshot(native=bundle)})]
    CheckpointStore(root, "job").commit(CheckpointMetadata(
        job_id="job", checkpoint_id=1, timestamp_ms=1, files=files, operator_files={"op": [f.path for f in files]},
        committables={}, parallelism={"op": 1}, max_parallelism={"op": MAX_P},
    ))
    (info,) = list_operators(root)
    assert info.states == {"total": ("reducing", None), "name": ("value", None), "seen": ("list", None), "tags": ("map", None)}
    assert info.rows is None
    t = read_keyed_state(root, "op", "total")
    assert sorted(zip(t.column("key").to_pylist(), [tuple(x["long"] for x in v) for v in t.column("value").to_pylist()])) == [
        (k, (k, k + 1)) for k in range(50)
    ]
    assert read_keyed_state(root, "op").num_rows == 4 * 50
