"""The JSON row formats of Kafka's connectors (runtime.api.common.serialization): a batch is read
in one pyarrow JSON pass when every value is plainly one object of the declared types, and one
record at a time otherwise; both must give the same rows, and a bad value is named either way."""
from __future__ import annotations

import json

import numpy as np
import pytest

from runtime.api.common.serialization import ONE_PASS_MIN_VALUES, DeserializationError, JsonRowDeserializationSchema, JsonRowSerializationSchema
from runtime.api.common.typeinfo import Types
from runtime.core.records import ColumnBatch

pytestmark = pytest.mark.unit

ROW = Types.ROW_NAMED(["user", "amount", "ok", "name"], [Types.LONG(), Types.DOUBLE(), Types.BOOLEAN(), Types.STRING()])


def _schema(row=ROW, ignore: bool = False) -> JsonRowDeserializationSchema:
    b = JsonRowDeserializationSchema.builder().type_info(row)
    return (b.ignore_parse_errors() if ignore else b).build()


def _columns(batch) -> dict[str, list]:
    assert isinstance(batch, ColumnBatch)
    return {n: batch.columns[n].tolist() for n in batch.columns}


def test_the_one_pass_reader_gives_what_the_per_record_reader_gives() -> None:
    values = [json.dumps({"user": i, "amount": i / 4, "ok": i % 2 == 0, "name": f"u{i}é", "extra": [i]}).encode() for i in range(500)]
    values[7] = b'{"name": "x", "ok": false, "amount": 3, "user": -2}'  # any order, an int for a double
    schema = _schema()
    fast = schema._read_columns(values)
    assert fast is not None  # every value qualifies: the one pass read it
    assert _columns(fast) == _columns(schema._read_rows(values))
    assert {n: a.dtype for n, a in fast.columns.items()} == {"user": np.int64, "amount": np.float64, "ok": np.bool_, "name": object}
    fast.columns["user"] += 1  # writable: operators change columns in place


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (b'{"user": 1, "amount": 1.0, "ok": true}', "missing field 'name'"),
        (b'{"user": "one", "amount": 1.0, "ok": true, "name": "a"}', "does not fit the row type"),
        (b'{"user": null, "amount": 1.0, "ok": true, "name": "a"}', "does not fit the row type"),
        (b"[1, 2]", "not a JSON object"),
        (b"", "Expecting value"),
        (b'{"user": 1, "amount": 1.0, "ok": true, "name": "a"}{"user": 2, "amount": 1.0, "ok": true, "name": "b"}', "Extra data"),
        (b'{"user": 1, "amount": 1.0,\n "ok": true, "name": "a"', "Expecting"),
    ],
)
def test_a_value_the_one_pass_cannot_take_is_decided_and_named_by_the_per_record_reader(bad: bytes, why: str) -> None:
    good = [json.dumps({"user": i, "amount": 1.5, "ok": True, "name": "n"}).encode() for i in range(ONE_PASS_MIN_VALUES)]
    values = [*good[:2], bad, *good[2:]]
    schema = _schema()
    assert schema._read_columns(values) is None
    with pytest.raises(DeserializationError, match=why) as e:
        schema.deserialize_batch(values)
    assert e.value.index == 2  # the source names the record's offset from this
    kept = _schema(ignore=True).deserialize_batch(values)  # ignore_parse_errors: the bad record skipped
    assert _columns(kept)["user"] == list(range(ONE_PASS_MIN_VALUES))


def test_a_value_spread_over_lines_is_read_whole() -> None:
    values = [b'{"user": 1,\n "amount": 2.0, "ok": false, "name": "a"}', b'{"user": 2, "amount": 3.0, "ok": true, "name": "b"}']
    assert _columns(_schema().deserialize_batch(values))["user"] == [1, 2]


def test_rows_with_other_field_types_are_read_one_by_one() -> None:
    row = Types.ROW_NAMED(["user", "tags"], [Types.LONG(), Types.LIST(Types.STRING())])
    schema = _schema(row)
    assert schema._arrow_schema is None
    assert _columns(schema.deserialize_batch([b'{"user": 1, "tags": ["a"]}']))["tags"] == [["a"]]


@pytest.mark.parametrize(
    "columns",
    [
        {"k": np.array([0, -1, 2**62], dtype=np.int64), "v": np.array([1, 2, 3], dtype=np.int32)},  # the integer template
        {"k": np.array([1, 2, 3]), "x": np.array([0.5, float("nan"), 1e300]), "s": np.array(['a"\\', "é", ""], dtype=object)},
    ],
)
def test_serialized_rows_are_what_json_dumps_writes(columns: dict) -> None:
    names = list(columns)
    types = [Types.LONG() if a.dtype.kind == "i" else Types.DOUBLE() if a.dtype.kind == "f" else Types.STRING() for a in columns.values()]
    out = JsonRowSerializationSchema.builder().with_type_info(Types.ROW_NAMED(names, types)).build().serialize_batch(ColumnBatch(columns))
    expected = [json.dumps(dict(zip(names, vals)), separators=(",", ":")).encode() for vals in zip(*(a.tolist() for a in columns.values()))]
    assert out == expected
