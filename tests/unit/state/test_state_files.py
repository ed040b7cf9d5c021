"""State files: the checkpoint table's row layout, written by tasks and read back on restore."""
from __future__ import annotations

import os
import time
from collections import Counter
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from runtime.core.checkpoint import KeyedSnapshot, OperatorSnapshot
from runtime.core.errors import StorageError
from runtime.core.keygroups import KeyGroupRange, assign_to_key_group, compute_key_group_range_for_operator_index
from runtime.core.row import Row
from runtime.storage.state_files import (
    STATE_FILE_SCHEMA,
    read_metadata,
    read_operator_state,
    write_metadata_file,
    write_state_file,
)

pytestmark = pytest.mark.unit

MAX_P = 128
FULL = KeyGroupRange(0, MAX_P - 1)


def restore(d: str, files: list[str], op: str = "op", subtask: int = 0, parallelism: int = 1) -> Any:
    kgr = compute_key_group_range_for_operator_index(MAX_P, parallelism, subtask)
    return read_operator_state(d, files, op, kgr, subtask, parallelism)


def keyed_by_group(entries: list[tuple[Any, Any, Any]], name: str = "s", kind: str = "value") -> KeyedSnapshot:
    out: KeyedSnapshot = {}
    for k, ns, v in entries:
        out.setdefault(assign_to_key_group(k, MAX_P), {}).setdefault(name, (kind, []))[1].append((k, ns, v))
    return out


class Custom:
    def __init__(self, x: int) -> None:
        self.x = x

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Custom) and other.x == self.x


VALUES: list[Any] = [
    0, -1, 1 << 62, (1 << 63) - 1, -(1 << 63), 1 << 70,  # the last one is beyond int64: pickled
    "", "héllo", "bad \ud800 surrogate", 1.5, float("inf"), -0.0, True, False, None, b"raw", (1, "a", None), [1, 2], {"a": 1},
    Row(1, "x"), Row(id=3, name="n"), np.int64(7), np.float32(2.5), Custom(3), frozenset({1}),
]


def test_round_trip_of_every_value_kind_preserves_types(tmp_path: Any) -> None:
    keys: list[Any] = [1, "k", (1, "t"), Row(2, "r"), True, 2.5, np.int32(4)]
    namespaces: list[Any] = [None, 5, "ns", ("w", 1)]
    entries = [(k, namespaces[i % len(namespaces)], VALUES[i % len(VALUES)]) for i, k in enumerate(keys)]
    entries += [(100 + i, None, v) for i, v in enumerate(VALUES)]
    keyed = {0: {"s": ("value", entries)}}
    lists = {"l": VALUES}
    h = write_state_file(str(tmp_path), 1, 0, 0, 1, {"op": OperatorSnapshot(keyed=keyed, operator_lists=lists, union_lists={"u": VALUES})})
    assert h is not None and h.rows == len(entries) + 2 * len(VALUES) and h.operator_ids == ["op"]
    ctx = restore(str(tmp_path), [h.path])
    assert ctx.restored_checkpoint_id is None
    got = ctx.keyed[0]["s"]
    assert got[0] == "value"
    assert [(type(k), type(n), type(v)) for k, n, v in got[1]] == [(type(k), type(n), type(v)) for k, n, v in entries]
    assert got[1] == entries
    assert ctx.operator_lists["l"] == VALUES and ctx.union_lists["u"] == VALUES
    assert [type(v) for v in ctx.operator_lists["l"]] == [type(v) for v in VALUES]


def test_file_layout_and_columns(tmp_path: Any) -> None:
    snap = OperatorSnapshot(keyed={3: {"s": ("value", [(1, None, 10), ("a", None, "v")])}}, operator_lists={"o": [1.5]})
    h = write_state_file(str(tmp_path), 42, 2, 1, 4, {"op": snap})
    assert h is not None
    assert h.path.startswith("checkpoint_id=42/state-2-1-") and h.path.endswith(".parquet")
    assert h.size == os.path.getsize(tmp_path / h.path)
    assert not [p for p in os.listdir(tmp_path / "checkpoint_id=42") if p.startswith(".")], "temp file left behind"
    t = pq.read_table(tmp_path / h.path)
    assert t.schema.equals(STATE_FILE_SCHEMA)  # plain strings, no partition column
    rows = t.to_pylist()
    assert rows[0]["kind"] == "keyed" and rows[0]["key_group"] == 3 and rows[0]["key_long"] == 1 and rows[0]["value_long"] == 10
    assert rows[1]["key_string"] == "a" and rows[1]["value_string"] == "v" and rows[1]["seq"] == 1
    assert rows[2]["kind"] == "operator" and rows[2]["key_group"] is None and rows[2]["value_double"] == 1.5
    assert {r["subtask"] for r in rows} == {2} and {r["parallelism"] for r in rows} == {4}
    assert all(r["namespace_long"] is None and r["namespace_bytes"] is None for r in rows)


def test_keyed_rescale_2_to_3_restores_every_entry_once(tmp_path: Any) -> None:
    d = str(tmp_path)
    files = []
    original: dict[Any, Any] = {}
    for sub in range(2):
        kgr = compute_key_group_range_for_operator_index(MAX_P, 2, sub)
        keys = [k for k in range(2000) if assign_to_key_group(k, MAX_P) in kgr]
        keyed = keyed_by_group([(k, None, k * 3) for k in keys])
        keyed_timers = keyed_by_group([(k, 99, None) for k in keys[:5]], name="timers", kind="timer")
        for kg, states in keyed_timers.items():
            keyed.setdefault(kg, {}).update(states)
        original.update({(kg, name): st for kg, sts in keyed.items() for name, st in sts.items()})
        h = write_state_file(d, 7, sub, 0, 2, {"op": OperatorSnapshot(keyed=keyed)})
        files.append(h.path)
    restored: dict[Any, Any] = {}
    for sub in range(3):
        ctx = restore(d, files, subtask=sub, parallelism=3)
        kgr = compute_key_group_range_for_operator_index(MAX_P, 3, sub)
        assert all(kg in kgr for kg in ctx.keyed)
        for kg, sts in ctx.keyed.items():
            for name, st in sts.items():
                assert (kg, name) not in restored
                restored[(kg, name)] = st
    assert restored == original


def test_operator_lists_same_parallelism_go_back_to_their_subtask(tmp_path: Any) -> None:
    d = str(tmp_path)
    files = [write_state_file(d, 1, i, 0, 3, {"op": OperatorSnapshot(operator_lists={"offsets": [f"s{i}-{j}" for j in range(i + 2)]})}).path for i in range(3)]
    for i in range(3):
        assert restore(d, list(reversed(files)), subtask=i, parallelism=3).operator_lists == {"offsets": [f"s{i}-{j}" for j in range(i + 2)]}


def test_operator_lists_2_to_3_contiguous_even_ranges(tmp_path: Any) -> None:
    d = str(tmp_path)
    old = {0: list(range(0, 6)), 1: list(range(100, 105))}  # 11 items -> 4, 4, 3
    files = [write_state_file(d, 1, i, 0, 2, {"op": OperatorSnapshot(operator_lists={"l": items})}).path for i, items in old.items()]
    shares = [restore(d, files[::-1], subtask=i, parallelism=3).operator_lists["l"] for i in range(3)]
    assert [len(s) for s in shares] == [4, 4, 3]
    assert sum(shares, []) == old[0] + old[1]  # every item exactly once, in (old subtask, seq) order


def test_operator_lists_scale_in_and_an_empty_share(tmp_path: Any) -> None:
    d = str(tmp_path)
    files = [write_state_file(d, 1, i, 0, 3, {"op": OperatorSnapshot(operator_lists={"l": [i]})}).path for i in range(3)]
    assert [restore(d, files, subtask=i, parallelism=2).operator_lists["l"] for i in range(2)] == [[0, 1], [2]]
    assert [restore(d, files, subtask=i, parallelism=4).operator_lists["l"] for i in range(4)] == [[0], [1], [2], []]


def test_union_lists_every_item_to_every_subtask(tmp_path: Any) -> None:
    d = str(tmp_path)
    files = [write_state_file(d, 1, i, 0, 2, {"op": OperatorSnapshot(union_lists={"u": [(i, j) for j in range(3)]})}).path for i in range(2)]
    want = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    for p in (1, 2, 5):
        for i in range(p):
            assert restore(d, files[::-1], subtask=i, parallelism=p).union_lists == {"u": want}


def test_supplier_based_keyed_snapshot_and_several_operators(tmp_path: Any) -> None:
    d = str(tmp_path)
    calls = []

    def supplier() -> KeyedSnapshot:
        calls.append(1)
        return {5: {"s": ("value", [("a", None, 1)])}}

    snaps = {"a": OperatorSnapshot(keyed=supplier), "b": OperatorSnapshot(operator_lists={"l": [1]}), "c": OperatorSnapshot(committables=["x"])}
    h = write_state_file(d, 1, 0, 0, 1, snaps)
    assert calls == [1] and h.operator_ids == ["a", "b"]
    assert restore(d, [h.path], op="a").keyed == {5: {"s": ("value", [("a", None, 1)])}}
    b = restore(d, [h.path], op="b")
    assert b.keyed == {} and b.operator_lists == {"l": [1]}
    c = restore(d, [h.path], op="c")
    assert c.keyed == {} and c.operator_lists == {} and c.union_lists == {}


def test_no_file_when_there_are_no_rows(tmp_path: Any) -> None:
    snaps = {"op": OperatorSnapshot(keyed=lambda: {}, operator_lists={"l": []}, committables=[b"c"])}
    assert write_state_file(str(tmp_path), 1, 0, 0, 1, snaps) is None
    assert write_state_file(str(tmp_path), 1, 0, 0, 1, {}) is None
    assert not (tmp_path / "checkpoint_id=1").exists() or not os.listdir(tmp_path / "checkpoint_id=1")


def test_missing_file_names_the_file_and_the_checkpoint(tmp_path: Any) -> None:
    with pytest.raises(StorageError) as e:
        restore(str(tmp_path), ["checkpoint_id=12/state-0-0-abc.parquet"])
    assert "checkpoint_id=12/state-0-0-abc.parquet" in str(e.value) and "checkpoint 12" in str(e.value)


def test_unpicklable_value_names_operator_and_state(tmp_path: Any) -> None:
    snap = OperatorSnapshot(keyed={1: {"good": ("value", [(1, None, 1)]), "bad": ("value", [(2, None, lambda: 0)])}})
    with pytest.raises(StorageError, match="operator 'op', state 'bad'.*key group 1"):
        write_state_file(str(tmp_path), 1, 0, 0, 1, {"op": snap})


def test_metadata_file_round_trip(tmp_path: Any) -> None:
    h = write_metadata_file(str(tmp_path), 9, b"\x00payload")
    assert h.path.startswith("checkpoint_id=9/metadata-") and h.rows == 1 and h.operator_ids == ["__checkpoint__"]
    assert read_metadata(str(tmp_path / h.path)) == b"\x00payload"
    row = pq.read_table(tmp_path / h.path).to_pylist()[0]
    assert row["kind"] == "meta" and row["operator_id"] == "__checkpoint__"
    with pytest.raises(StorageError, match="missing"):
        read_metadata(str(tmp_path / "checkpoint_id=9/metadata-nope.parquet"))


def test_timing_one_million_keyed_entries(tmp_path: Any) -> None:
    """Not an assertion on time (the machine is shared): prints write and read figures."""
    n = 1_000_000
    keyed = {kg: {"count": ("value", [(k, None, k * 2) for k in range(kg, n, MAX_P)])} for kg in range(MAX_P)}
    t0 = time.perf_counter()
    h = write_state_file(str(tmp_path), 1, 0, 0, 1, {"op": OperatorSnapshot(keyed=keyed)})
    t1 = time.perf_counter()
    ctx = restore(str(tmp_path), [h.path])
    t2 = time.perf_counter()
    third = restore(str(tmp_path), [h.path], subtask=0, parallelism=3)
    t3 = time.perf_counter()
    print(f"\n1,000,000 keyed entries: write {t1 - t0:.3f}s ({h.size / 1e6:.1f} MB), read all {t2 - t1:.3f}s, "
          f"read a third (rescale 1->3) {t3 - t2:.3f}s")
    assert h.rows == n
    assert sum(len(e) for sts in ctx.keyed.values() for _, e in sts.values()) == n
    assert ctx.keyed[5]["count"][1][:2] == [(5, None, 10), (133, None, 266)]
    assert Counter(kg in KeyGroupRange(0, 42) for kg in third.keyed) == Counter({True: 43})


def test_states_larger_than_an_encoding_batch_keep_their_order_and_positions(tmp_path: Any) -> None:
    """Segments are sliced into encoding batches: order, seq and key groups survive the slicing."""
    from runtime.core.checkpoint import StateEntries
    from runtime.storage import state_files

    n = state_files._BATCH_ROWS * 2 + 17
    big = {(k, None): (k, k * 2) for k in range(n)}  # one key group, a heap map's views
    small = [(k, None, f"v{k}") for k in range(5)]
    snap = OperatorSnapshot(
        keyed={7: {"big": ("value", StateEntries.of_map(big)), "small": ("value", small)}},
        operator_lists={"l": list(range(n))},
        union_lists={"u": [("u", i) for i in range(n)]},
    )
    h = write_state_file(str(tmp_path), 1, 0, 0, 1, {"op": snap})
    assert h is not None and h.rows == 2 * n + 5 + n
    seqs = pq.read_table(tmp_path / h.path, columns=["state_name", "seq"]).to_pylist()
    assert [r["seq"] for r in seqs if r["state_name"] == "l"] == list(range(n))
    ctx = restore(str(tmp_path), [h.path])
    assert ctx.keyed[7]["big"][1] == [(k, None, v) for (k, _), v in big.items()]
    assert ctx.keyed[7]["small"][1] == small
    assert ctx.operator_lists["l"] == list(range(n)) and ctx.union_lists["u"] == [("u", i) for i in range(n)]
    # rescaled 1 -> 2: the operator list is dealt out in contiguous halves, in order
    halves = [restore(str(tmp_path), [h.path], subtask=i, parallelism=2).operator_lists["l"] for i in range(2)]
    assert halves[0] + halves[1] == list(range(n)) and abs(len(halves[0]) - len(halves[1])) <= 1
