from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from runtime.core.records import END_OF_PARTITION, ColumnBatch, EndOfPartition, ObjectBatch, Watermark
from runtime.core.row import Row
from runtime.taskmanager.network.serialization import decode, encode, register_event_type

pytestmark = pytest.mark.unit


def assert_column_batches_equal(a: ColumnBatch, b: ColumnBatch) -> None:
    assert list(a.columns) == list(b.columns)
    for k in a.columns:
        assert a.columns[k].dtype == b.columns[k].dtype
        np.testing.assert_array_equal(a.columns[k], b.columns[k])
    if a.timestamps is None:
        assert b.timestamps is None
    else:
        assert b.timestamps is not None and b.timestamps.dtype == a.timestamps.dtype
        np.testing.assert_array_equal(a.timestamps, b.timestamps)


def test_column_batch_with_timestamps_round_trips() -> None:
    n = 10_000
    batch = ColumnBatch(
        {
            "id": np.arange(n, dtype=np.int64),
            "x": np.linspace(0, 1, n),
            "flag": np.arange(n) % 2 == 0,
            "name": np.array([f"n{i}" for i in range(n)], dtype=object),
            "small": np.arange(n, dtype=np.int8),
        },
        np.arange(n, dtype=np.int64) * 1000,
    )
    out = decode(encode(batch))
    assert isinstance(out, ColumnBatch)
    assert_column_batches_equal(batch, out)
    # decoded columns are ordinary writable arrays, independent of the payload
    out.columns["id"][0] = -1
    assert batch.columns["id"][0] == 0


def test_column_batch_without_timestamps_and_empty() -> None:
    b = ColumnBatch({"a": np.array([1, 2, 3], dtype=np.int32)})
    assert_column_batches_equal(b, decode(encode(b)))
    empty = ColumnBatch({"a": np.array([], dtype=np.float32)})
    assert_column_batches_equal(empty, decode(encode(empty)))
    noncontig = ColumnBatch({"a": np.arange(20, dtype=np.int64)[::2]})
    assert_column_batches_equal(noncontig, decode(encode(noncontig)))


def test_object_batch_round_trips_rows_tuples_none() -> None:
    values = [Row(id=1, name="a"), (1, "x", 2.5), None, Row(3, None), "s", {"k": [1, 2]}, b"\x00"]
    b = ObjectBatch(values, np.array([5, 6, 7, 8, 9, 10, 11], dtype=np.int64))
    out = decode(encode(b))
    assert isinstance(out, ObjectBatch)
    assert out.values == values
    assert out.values[0].field_names == ("id", "name")
    np.testing.assert_array_equal(out.timestamps, b.timestamps)
    assert decode(encode(ObjectBatch([None, (None,)]))).timestamps is None


def test_a_batch_of_named_rows_travels_as_field_names_and_value_lists() -> None:
    rows = [Row(id=i, name=f"n{i}", score=i / 2, tags=[i]) for i in range(1000)]
    b = ObjectBatch(rows, np.arange(1000, dtype=np.int64))
    payload = encode(b)
    assert payload[0] == 5 and payload.count(b"score") == 1  # the names once, not per row
    out = decode(payload)
    assert out.values == rows and [r.name for r in out.values[:3]] == ["n0", "n1", "n2"]
    assert out.values[7].tags == [7] and out.values[7].tags is not rows[7].tags
    np.testing.assert_array_equal(out.timestamps, b.timestamps)
    mixed = [Row(id=1), Row(other=2)]  # two sets of names: the general encoding
    assert encode(ObjectBatch(mixed))[0] == 2 and decode(encode(ObjectBatch(mixed))).values == mixed


def test_object_batch_falls_back_to_cloudpickle() -> None:
    offset = 7
    fn = lambda x: x + offset  # noqa: E731 -- plain pickle cannot do lambdas
    out = decode(encode(ObjectBatch([fn])))
    assert out.values[0](1) == 8


def test_events_round_trip() -> None:
    for ts in (0, -5, 1_700_000_000_000, -(1 << 63), (1 << 63) - 1):
        assert decode(encode(Watermark(ts))) == Watermark(ts)
    assert isinstance(decode(encode(END_OF_PARTITION)), EndOfPartition)


@dataclass(frozen=True)
class _Barrier:
    checkpoint_id: int
    timestamp: int


def test_registered_event_type() -> None:
    register_event_type(_Barrier, 200)
    register_event_type(_Barrier, 200)  # idempotent
    assert decode(encode(_Barrier(3, 99))) == _Barrier(3, 99)
    with pytest.raises(ValueError):
        register_event_type(_Barrier, 201)
    with pytest.raises(ValueError):
        register_event_type(int, 200)
    with pytest.raises(ValueError):
        register_event_type(float, 3)


def test_unknown_types_are_rejected() -> None:
    with pytest.raises(TypeError):
        encode(object())
    with pytest.raises(ValueError):
        decode(bytes([99]))
