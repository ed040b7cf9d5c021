"""State columns: Python values to typed columns and back, one logical column at a time."""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from runtime.core.row import Row
from runtime.storage import state_columns as c

pytestmark = pytest.mark.unit


def round_trip(values: list[Any], with_double: bool = True, with_tuple: bool = True) -> tuple[dict[str, pa.Array], list[Any]]:
    enc = c.encode(values, with_double=with_double, with_tuple=with_tuple)
    assert all(len(a) == len(values) for a in enc.values())
    # a table as the reader sees it: every physical column, absent ones all null, in several chunks
    cols = {s: enc.get(s, pa.nulls(len(values), f.type)) for s, f in zip(c.suffixes(with_double, with_tuple), c.fields("v", with_double, with_tuple))}
    half = len(values) // 2
    chunked = {s: pa.chunked_array([a[:half], a[half:]], type=a.type) for s, a in cols.items()}
    return enc, c.decode(chunked, len(values))


@pytest.mark.parametrize(
    "values",
    [
        [(1, 2), (3, 4), (5, 6)],  # one arity, ints
        [(1, "a", 2.5, None), (2, "b", -0.0, None)],  # mixed item kinds
        [(1,), None, (2, 3), (), None],  # None rows and several arities
        [((1, 2), 3), (Row(1, "x"), b"raw"), (True, 1 << 70)],  # items that are pickled keep their type
        [("bad \ud800", 1)],  # a string that is not UTF-8 inside a tuple
    ],
)
def test_tuple_columns_round_trip_with_item_types(values: list[Any]) -> None:
    enc, got = round_trip(values)
    assert set(enc) == {c.TUPLE}
    assert got == values
    for a, b in zip(got, values):
        assert type(a) is type(b)
        if b is not None:
            assert [type(x) for x in a] == [type(x) for x in b]


def test_tuple_items_are_typed_columns_spark_sql_can_read() -> None:
    enc, _ = round_trip([(7, "x", 1.5), (8, "y", 2.5)])
    rows = enc[c.TUPLE].to_pylist()
    assert rows[0] == [
        {"long": 7, "double": None, "string": None, "bytes": None},
        {"long": None, "double": None, "string": "x", "bytes": None},
        {"long": None, "double": 1.5, "string": None, "bytes": None},
    ]


def test_tuple_subclasses_and_mixed_columns_are_pickled() -> None:
    values: list[Any] = [Row(1, "a"), (1, 2), 3]
    enc, got = round_trip(values)
    assert c.TUPLE not in enc and got == values and type(got[0]) is Row
    enc, got = round_trip([(1, 2), (3, 4)], with_tuple=False)  # namespaces: no tuple column
    assert set(enc) == {c.BYTES} and got == [(1, 2), (3, 4)]


@pytest.mark.parametrize(
    "values",
    [[1, 2, None], ["a", None], [1.5, None], [None, None], [1 << 70, 1], [1, "a", 2.5, None, b"b", np.int64(3)]],
)
def test_scalar_columns_round_trip(values: list[Any]) -> None:
    _, got = round_trip(values)
    assert got == values and [type(x) for x in got] == [type(x) for x in values]


def test_floats_without_a_double_column_are_pickled() -> None:
    enc, got = round_trip([1.5, 2.5], with_double=False)
    assert set(enc) == {c.BYTES} and got == [1.5, 2.5]


def test_an_unpicklable_tuple_item_names_its_row() -> None:
    with pytest.raises(c.UnpicklableError) as e:
        c.encode([(1, 2), (3, lambda: 0)], with_double=True, with_tuple=True)
    assert e.value.index == 1 and e.value.value[0] == 3
