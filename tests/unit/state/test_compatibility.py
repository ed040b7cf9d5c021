"""State and key type compatibility on restore (runtime.state.compatibility; Flink's
TypeSerializerSchemaCompatibility: compatible as is / after migration / incompatible)."""
from __future__ import annotations

import decimal
import pickle

import pytest

from runtime.api.common.typeinfo import Types
from runtime.api.datastream.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from runtime.core.row import Row
from runtime.state.compatibility import KeyTypes, resolve_key_compatibility, resolve_schema_compatibility
from runtime.state.type_descriptions import (
    PICKLED,
    describe_key,
    describe_state,
    describe_type_info,
    format_type,
    key_vocabulary,
    observed_key_types,
)

pytestmark = pytest.mark.unit

d = describe_type_info
ROW_AB = d(Types.ROW_NAMED(["a", "b"], [Types.LONG(), Types.STRING()]))


# --- descriptions --------------------------------------------------------------------------------
def test_descriptions_are_json_and_read_like_pyflink() -> None:
    assert d(Types.LONG()) == "LONG" and d(None) is None and d(Types.PICKLED_BYTE_ARRAY()) == PICKLED
    assert ROW_AB == {"row": ["LONG", "STRING"], "names": ["a", "b"]}
    assert format_type(ROW_AB) == "ROW_NAMED(a: LONG, b: STRING)"
    assert format_type(d(Types.ROW([Types.INT()]))) == "ROW(INT)"
    assert format_type(d(Types.MAP(Types.STRING(), Types.LIST(Types.DOUBLE())))) == "MAP(STRING, LIST(DOUBLE))"
    assert format_type(d(Types.TUPLE([Types.INT(), Types.STRING()]))) == "TUPLE(INT, STRING)"
    assert describe_state(ValueStateDescriptor("v", Types.LONG())) == "LONG"
    assert describe_state(ListStateDescriptor("l", Types.LONG())) == "LONG"  # the element
    assert describe_state(MapStateDescriptor("m", Types.STRING(), Types.LONG())) == {"map": ["STRING", "LONG"]}
    assert describe_state(ValueStateDescriptor("untyped")) is None


def test_keys_are_described_as_python_types() -> None:
    assert [describe_key(k) for k in (1, "a", 1.5, True, None, b"x")] == ["int", "str", "float", "bool", "None", "bytes"]
    assert describe_key((1, "a")) == "tuple[int, str]"
    assert describe_key(Row(user="u", day=3)) == "Row(user: str, day: int)" and describe_key(Row(1, 2)) == "Row(int, int)"
    assert observed_key_types([1, 2, 3]) == {"int"}
    assert observed_key_types([1, "a", (1, "b"), (2, "c"), (3, (4, 5))]) == {"int", "str", "tuple[int, str]", "tuple[int, tuple[int, int]]"}
    assert key_vocabulary("LONG") == key_vocabulary("INT") == "int" and key_vocabulary("STRING") == "str"
    assert key_vocabulary(d(Types.TUPLE([Types.LONG(), Types.STRING()]))) == "tuple[int, str]"
    assert key_vocabulary(PICKLED) is None and key_vocabulary(None) is None


# --- compatible as is ------------------------------------------------------------------------------
@pytest.mark.parametrize("old,new", [
    ("LONG", "LONG"), (ROW_AB, ROW_AB),
    (None, "LONG"), ("LONG", None),  # snapshots without a record, states without a type: never refused
    (PICKLED, "STRING"), ("LONG", PICKLED),
    ({"row": ["LONG"], "names": ["a"]}, {"row": ["LONG"], "names": None}),  # the rows keep their names
    ({"list": None}, {"list": "LONG"}),  # an unknown part restores as is
])
def test_compatible_as_is(old, new) -> None:
    c = resolve_schema_compatibility(old, new)
    assert c.is_compatible_as_is and c.migrate is None


# --- compatible after migration ------------------------------------------------------------------
@pytest.mark.parametrize("old,new,value,migrated", [
    ("INT", "LONG", 7, 7),
    ("BYTE", "BIG_INT", 7, 7),
    ("LONG", "DOUBLE", 7, 7.0),
    ("INT", "FLOAT", 7, 7.0),
    ("FLOAT", "DOUBLE", 1.5, 1.5),
    ("LONG", "BIG_DEC", 7, decimal.Decimal(7)),
    ("CHAR", "STRING", "x", "x"),
    ({"list": "INT"}, {"list": "DOUBLE"}, [1, 2], [1.0, 2.0]),
    ({"map": ["STRING", "INT"]}, {"map": ["STRING", "LONG"]}, {"a": 1}, {"a": 1}),
    ({"tuple": ["INT", "STRING"]}, {"tuple": ["DOUBLE", "STRING"]}, (1, "a"), (1.0, "a")),
])
def test_widened_types_migrate(old, new, value, migrated) -> None:
    c = resolve_schema_compatibility(old, new)
    assert c.is_compatible_after_migration
    out = c.migrate(value)
    assert out == migrated and type(out) is type(migrated)
    assert c.migrate(None) is None


def test_a_row_that_gained_nullable_fields_at_the_end_migrates() -> None:
    new = d(Types.ROW_NAMED(["a", "b", "c"], [Types.DOUBLE(), Types.STRING(), Types.LONG()]))
    c = resolve_schema_compatibility(ROW_AB, new)
    assert c.is_compatible_after_migration
    out = c.migrate(Row(a=1, b="x"))
    assert out == Row(a=1.0, b="x", c=None) and out.c is None and type(out.a) is float
    assert c.migrate((1, "x")) == (1.0, "x", None)  # a tuple stored for a row stays a tuple
    assert pickle.loads(pickle.dumps(c.migrate))(Row(a=2, b="y")) == Row(a=2.0, b="y", c=None)
    # an unnamed row gets the names the program declares now
    unnamed = resolve_schema_compatibility(d(Types.ROW([Types.LONG()])), d(Types.ROW_NAMED(["a", "b"], [Types.LONG(), Types.STRING()])))
    assert unnamed.migrate(Row(5)) == Row(a=5, b=None)


# --- incompatible --------------------------------------------------------------------------------
@pytest.mark.parametrize("old,new,words", [
    ("LONG", "STRING", "LONG values cannot be read as STRING"),
    ("LONG", "INT", "LONG values cannot be read as INT"),  # narrowing
    ("DOUBLE", "LONG", "DOUBLE values cannot be read as LONG"),
    ("STRING", "LONG", "STRING"),
    ("BOOLEAN", "INT", "BOOLEAN"),
    ("LONG", ROW_AB, "LONG values cannot be read as ROW_NAMED(a: LONG, b: STRING)"),
    (ROW_AB, {"row": ["LONG"], "names": ["a"]}, "lost field(s) 'b'"),
    (ROW_AB, {"row": ["LONG", "STRING"], "names": ["a", "c"]}, "field 1 was 'b' and is now 'c'"),
    (ROW_AB, {"row": ["STRING", "STRING"], "names": ["a", "b"]}, "field 0 ('a'): LONG values cannot be read as STRING"),
    ({"tuple": ["INT"]}, {"tuple": ["INT", "INT"]}, "a tuple of 1 fields"),
    ({"list": "LONG"}, {"list": "STRING"}, "list elements"),
    ({"map": ["STRING", "LONG"]}, {"map": ["LONG", "LONG"]}, "map keys"),
])
def test_incompatible_says_why(old, new, words) -> None:
    c = resolve_schema_compatibility(old, new)
    assert c.is_incompatible and c.migrate is None
    assert words in c.reason


# --- keys ----------------------------------------------------------------------------------------
def test_keys_of_another_type_are_incompatible() -> None:
    ints, strs = KeyTypes(observed=frozenset({"int"})), KeyTypes(observed=frozenset({"str"}))
    c = resolve_key_compatibility(ints, strs)
    assert c.is_incompatible and "Python int" in c.reason and "Python str" in c.reason
    assert resolve_key_compatibility(ints, KeyTypes(declared="STRING")).is_incompatible
    declared = resolve_key_compatibility(KeyTypes(declared="LONG", observed=frozenset({"int"})), KeyTypes(declared="STRING"))
    assert declared.is_incompatible and "declared LONG" in declared.reason and "declared STRING" in declared.reason


def test_keys_that_can_find_their_state_are_compatible() -> None:
    ints = KeyTypes(observed=frozenset({"int"}))
    assert resolve_key_compatibility(ints, ints).is_compatible_as_is
    assert resolve_key_compatibility(KeyTypes(declared="INT"), KeyTypes(declared="LONG")).is_compatible_as_is
    assert resolve_key_compatibility(ints, KeyTypes(declared="LONG")).is_compatible_as_is
    assert resolve_key_compatibility(KeyTypes(observed=frozenset({"int", "str"})), KeyTypes(observed=frozenset({"str"}))).is_compatible_as_is
    # unknown on either side: no record (older snapshots), PICKLED, or no key seen yet
    assert resolve_key_compatibility(KeyTypes(), KeyTypes(observed=frozenset({"str"}))).is_compatible_as_is
    assert resolve_key_compatibility(ints, KeyTypes(declared=PICKLED)).is_compatible_as_is
    assert resolve_key_compatibility(ints, KeyTypes(observed=frozenset())).is_compatible_as_is
    assert KeyTypes.from_record(KeyTypes(declared="LONG", observed=frozenset({"int"})).to_record()) == KeyTypes("LONG", frozenset({"int"}))
