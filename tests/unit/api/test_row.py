from __future__ import annotations

import pickle

import cloudpickle
import pytest

from runtime.core.records import ObjectBatch
from runtime.core.row import Row, is_plain_row, named_row_columns
from runtime.state.serialization import encode_key
from runtime.taskmanager.network.serialization import decode, encode

pytestmark = pytest.mark.unit


def test_named_rows_have_attributes_and_stay_rows() -> None:
    r = Row(user_id=7, ts_ms=2, value=3)
    assert (r.user_id, r["ts_ms"], r[2], len(r), list(r)) == (7, 2, 3, 3, [7, 2, 3])
    assert isinstance(r, Row) and is_plain_row(r) and repr(r) == "Row(user_id=7, ts_ms=2, value=3)"
    assert r == Row(user_id=7, ts_ms=2, value=3) and r != Row(7, 2, 3) and hash(r) == hash(Row(user_id=7, ts_ms=2, value=3))
    assert Row(count=1).count == 1 and Row(as_dict=1).as_dict() == {"as_dict": 1}  # Row's methods win, as in PyFlink
    for copy in (pickle.loads(pickle.dumps(r)), cloudpickle.loads(cloudpickle.dumps(r))):
        assert copy == r and copy.value == 3
    assert encode_key(r) == encode_key(Row.of(("user_id", "ts_ms", "value"), [7, 2, 3]))  # state keys as before


def test_constructing_from_a_named_rows_class_follows_the_values_given() -> None:
    """type(row)(...) and type(row).of(...) build Rows for their own names: a batch never mixes a
    Row's class with other field names (the batch paths take the first row's names for all)."""
    a = Row(a=1, b=2)
    positional, other = type(a)(3, 4), type(a)(x=5, y=6)
    assert positional.field_names is None and other.x == 5 and type(a).of(("q",), [1]).q == 1
    assert decode(encode(ObjectBatch([a, positional]))).values == [a, positional]
    assert decode(encode(ObjectBatch([a, other]))).values == [a, other]
    assert named_row_columns([a, other]) is None
    assert Row.of(["a", "b"], [1, 2]) == a  # names as a list


def test_a_subclass_may_call_super_init() -> None:
    class Point(Row):
        def __init__(self, x: int, y: int) -> None:
            super().__init__(x, y)

    p = Point(1, 2)
    assert list(p) == [1, 2] and isinstance(p, Point)
