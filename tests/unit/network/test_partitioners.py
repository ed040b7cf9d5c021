from __future__ import annotations

import numpy as np
import pytest

from runtime.core.keygroups import key_to_subtask
from runtime.core.records import ColumnBatch, ObjectBatch, RecordBatch
from runtime.core.row import Row
from runtime.graph.transformations import PartitionerKind
from runtime.taskmanager.network.partitioners import create_partitioner

pytestmark = pytest.mark.unit


def ids_per_channel(selection: list[RecordBatch | None], field: str = "id") -> list[list[int]]:
    out: list[list[int]] = []
    for b in selection:
        if b is None:
            out.append([])
        elif isinstance(b, ColumnBatch):
            out.append(b.columns[field].tolist())
        else:
            out.append([r[field] if isinstance(r, Row) else r for r in b.rows()])
    return out


def make_batch(n: int, start: int = 0) -> ColumnBatch:
    ids = np.arange(start, start + n, dtype=np.int64)
    return ColumnBatch({"id": ids, "key": ids * 7919 % 1000}, ids * 10)


@pytest.mark.parametrize("parallelism,max_par", [(2, 128), (3, 128), (7, 128), (5, 16), (128, 128)])
def test_hash_agrees_with_key_to_subtask_for_every_key(parallelism: int, max_par: int) -> None:
    batch = make_batch(5000)
    p = create_partitioner(PartitionerKind.HASH, "key", parallelism, max_par)
    sel = p.select(batch)
    seen = 0
    for ch, b in enumerate(sel):
        if b is None:
            continue
        assert isinstance(b, ColumnBatch)
        for k in b.columns["key"].tolist():
            assert key_to_subtask(k, max_par, parallelism) == ch
        np.testing.assert_array_equal(b.timestamps, b.columns["id"] * 10)  # timestamps follow rows
        assert list(b.columns["id"]) == sorted(b.columns["id"])  # order kept
        seen += len(b)
    assert seen == len(batch)


def test_hash_field_selector_equals_lambda_on_rows() -> None:
    batch = make_batch(3000)
    by_field = create_partitioner(PartitionerKind.HASH, "key", 4, 128).select(batch)
    by_lambda = create_partitioner(PartitionerKind.HASH, lambda r: r["key"], 4, 128).select(batch)
    as_objects = ObjectBatch(batch.rows(), batch.timestamps)
    by_lambda_obj = create_partitioner(PartitionerKind.HASH, lambda r: r.key, 4, 128).select(as_objects)
    assert ids_per_channel(by_field) == ids_per_channel(by_lambda) == ids_per_channel(by_lambda_obj)


def test_hash_string_and_tuple_keys_on_objects() -> None:
    values = [(f"user{i % 37}", i) for i in range(500)]
    sel = create_partitioner(PartitionerKind.HASH, lambda t: t[0], 3, 128).select(ObjectBatch(values))
    for ch, b in enumerate(sel):
        for v in [] if b is None else b.rows():
            assert key_to_subtask(v[0], 128, 3) == ch


def test_rebalance_spreads_evenly_across_batches() -> None:
    p = create_partitioner(PartitionerKind.REBALANCE, None, 4, 128)
    counts = [0, 0, 0, 0]
    order: list[list[int]] = [[], [], [], []]
    start = 0
    for n in (1, 3, 5, 10, 1001, 7, 1):
        for ch, ids in enumerate(ids_per_channel(p.select(make_batch(n, start)))):
            counts[ch] += len(ids)
            order[ch].extend(ids)
        start += n
    assert sum(counts) == start
    assert max(counts) - min(counts) <= 1
    # per-record round robin: consecutive ids go to consecutive channels
    first = [o[0] for o in order]
    assert sorted(first) == [0, 1, 2, 3]
    for o in order:
        assert all(b - a == 4 for a, b in zip(o, o[1:]))


def test_rebalance_starts_at_a_random_channel() -> None:
    starts = set()
    for _ in range(64):
        sel = create_partitioner(PartitionerKind.REBALANCE, None, 4, 128).select(make_batch(1))
        starts.add(next(i for i, b in enumerate(sel) if b is not None))
    assert len(starts) > 1


def test_rescale_round_robin_from_zero() -> None:
    p = create_partitioner(PartitionerKind.RESCALE, None, 3, 128)
    assert ids_per_channel(p.select(make_batch(4))) == [[0, 3], [1], [2]]
    assert ids_per_channel(p.select(make_batch(2, 4))) == [[], [4], [5]]


def test_broadcast_sends_the_batch_everywhere() -> None:
    p = create_partitioner(PartitionerKind.BROADCAST, None, 3, 128)
    b = make_batch(10)
    assert p.is_broadcast
    assert p.select(b) == [b, b, b]


@pytest.mark.parametrize("kind", [PartitionerKind.FORWARD, PartitionerKind.GLOBAL])
def test_forward_and_global_use_channel_zero(kind: PartitionerKind) -> None:
    b = make_batch(10)
    assert create_partitioner(kind, None, 1, 128).select(b) == [b]
    assert create_partitioner(kind, None, 3, 128).select(b) == [b, None, None]


def test_shuffle_keeps_every_record_once() -> None:
    p = create_partitioner(PartitionerKind.SHUFFLE, None, 5, 128)
    ids = sorted(i for ch in ids_per_channel(p.select(make_batch(10_000))) for i in ch)
    assert ids == list(range(10_000))


def test_empty_batch_and_bad_arguments() -> None:
    for kind in PartitionerKind:
        p = create_partitioner(kind, "key", 3, 128)
        assert p.select(ColumnBatch({"key": np.array([], dtype=np.int64)})) == [None, None, None]
    with pytest.raises(ValueError):
        create_partitioner(PartitionerKind.HASH, None, 2, 128)
    with pytest.raises(ValueError):
        create_partitioner(PartitionerKind.HASH, "key", 200, 128)
