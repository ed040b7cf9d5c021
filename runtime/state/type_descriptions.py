"""What a state's or a key's type was, as a snapshot records it (Flink: the serializer snapshots in
StateMetaInfoSnapshot and the key serializer in KeyedBackendSerializationProxy).

A *type description* is JSON-able, so it goes into a state file as it is:

    "LONG", "STRING", ...                    a basic type (Types.LONG() ...): its PyFlink name
    "PICKLED_BYTE_ARRAY"                     Types.PICKLED_BYTE_ARRAY(): any Python object
    {"row": [d, ...], "names": [..] | None}  Types.ROW / ROW_NAMED
    {"tuple": [d, ...]}                      Types.TUPLE
    {"list": d}                              Types.LIST / PRIMITIVE_ARRAY / BASIC_ARRAY
    {"map": [k, v]}                          Types.MAP, and a MapStateDescriptor's (key, value)
    None                                     not known: no type given (values are pickled), or a
                                             TypeInformation this module does not know

Keys are described in the vocabulary of Python values ("int", "str", "tuple[int, str]",
"Row(a: int, b: str)"), because a key's *Python* type is what decides its key group and whether
it finds its state again (1 and "1" are different keys, INT and LONG keys are both ints). A
declared key type (key_by(..., key_type=...)) maps into the same vocabulary (`key_vocabulary`).

Pure: no I/O.
"""
from __future__ import annotations

import datetime
import decimal
import functools
import numbers
from collections.abc import Iterable
from typing import Any

from runtime.core.row import Row
from runtime.core.typeinfo import (
    BasicTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    PickledBytesTypeInfo,
    RowTypeInfo,
    TupleTypeInfo,
)

TypeDescription = str | dict[str, Any]

PICKLED = "PICKLED_BYTE_ARRAY"
UNKNOWN_TEXT = "an unknown type (pickled values)"

INTEGER_TYPES = ("BYTE", "SHORT", "INT", "LONG", "BIG_INT")  # narrow to wide
FLOAT_TYPES = ("FLOAT", "DOUBLE")

# a declared basic key type -> the Python type its keys have
_KEY_VOCABULARY: dict[str, str] = {
    **{t: "int" for t in INTEGER_TYPES},
    **{t: "float" for t in FLOAT_TYPES},
    "STRING": "str",
    "CHAR": "str",
    "BOOLEAN": "bool",
    "BIG_DEC": "Decimal",
    "SQL_TIMESTAMP": "datetime",
    "INSTANT": "datetime",
    "SQL_DATE": "date",
    "SQL_TIME": "time",
}

# Python key types with a fixed name (no fields to look into)
SCALAR_KEY_TYPES: dict[type, str] = {
    int: "int",
    bool: "bool",
    float: "float",
    str: "str",
    bytes: "bytes",
    type(None): "None",
    decimal.Decimal: "Decimal",
    datetime.datetime: "datetime",
    datetime.date: "date",
    datetime.time: "time",
}


# --- states ------------------------------------------------------------------------------------
def describe_type_info(type_info: Any) -> TypeDescription | None:
    """The description of a PyFlink TypeInformation (None: no type, or one not known here)."""
    if type_info is None:
        return None
    if isinstance(type_info, PickledBytesTypeInfo):
        return PICKLED
    if isinstance(type_info, BasicTypeInfo):
        return type_info.name
    if isinstance(type_info, RowTypeInfo):
        names = None if type_info.field_names is None else list(type_info.field_names)
        return {"row": [describe_type_info(t) for t in type_info.field_types], "names": names}
    if isinstance(type_info, TupleTypeInfo):
        return {"tuple": [describe_type_info(t) for t in type_info.field_types]}
    if isinstance(type_info, ListTypeInfo):  # also the primitive and basic arrays: Python lists
        return {"list": describe_type_info(type_info.element_type)}
    if isinstance(type_info, MapTypeInfo):
        return {"map": [describe_type_info(type_info.key_type), describe_type_info(type_info.value_type)]}
    return None


def describe_state(descriptor: Any) -> TypeDescription | None:
    """The type a state descriptor declares for its values: the value (value, reducing), the
    element (list), the accumulator (aggregating), or {"map": [user key, value]} (map)."""
    if hasattr(descriptor, "key_type_info") and hasattr(descriptor, "value_type_info"):  # MapStateDescriptor
        k, v = describe_type_info(descriptor.key_type_info), describe_type_info(descriptor.value_type_info)
        return None if k is None and v is None else {"map": [k, v]}
    return describe_type_info(getattr(descriptor, "type_info", None))


def is_known(desc: TypeDescription | None) -> bool:
    """Whether a description says anything about the values (None and PICKLED do not)."""
    return desc is not None and desc != PICKLED


def format_type(desc: TypeDescription | None) -> str:
    """A description in PyFlink's words, for messages: LONG, ROW_NAMED(a: LONG), TUPLE(INT, STRING)."""
    if desc is None:
        return UNKNOWN_TEXT
    if isinstance(desc, str):
        return desc
    if "row" in desc:
        fields = [format_type(t) for t in desc["row"]]
        names = desc.get("names")
        if names is None:
            return f"ROW({', '.join(fields)})"
        return f"ROW_NAMED({', '.join(f'{n}: {t}' for n, t in zip(names, fields))})"
    if "tuple" in desc:
        return f"TUPLE({', '.join(format_type(t) for t in desc['tuple'])})"
    if "list" in desc:
        return f"LIST({format_type(desc['list'])})"
    if "map" in desc:
        k, v = desc["map"]
        return f"MAP({format_type(k)}, {format_type(v)})"
    return str(desc)


# --- keys --------------------------------------------------------------------------------------
def key_vocabulary(desc: TypeDescription | None) -> str | None:
    """The Python type of the keys a declared key type gives (None: not known, e.g. PICKLED)."""
    if desc is None or desc == PICKLED:
        return None
    if isinstance(desc, str):
        return _KEY_VOCABULARY.get(desc)
    if "tuple" in desc or "row" in desc:
        vocabulary = [key_vocabulary(t) for t in (desc["tuple"] if "tuple" in desc else desc["row"])]
        fields = [f for f in vocabulary if f is not None]
        if len(fields) < len(vocabulary):
            return None
        if "tuple" in desc:
            return f"tuple[{', '.join(fields)}]"
        names = desc.get("names")
        inner = ", ".join(fields) if names is None else ", ".join(f"{n}: {f}" for n, f in zip(names, fields))
        return f"Row({inner})"
    return None  # lists and maps are not keys


def describe_key(key: Any) -> str:
    """The Python type of one key: "int", "str", "tuple[int, str]", "Row(user: str, day: int)"."""
    t = type(key)
    name = SCALAR_KEY_TYPES.get(t)
    if name is not None:
        return name
    if isinstance(key, Row):
        fields = [describe_key(v) for v in key]
        names = key.field_names
        inner = ", ".join(fields) if names is None else ", ".join(f"{n}: {f}" for n, f in zip(names, fields))
        return f"Row({inner})"
    if isinstance(key, tuple):
        return f"tuple[{', '.join(describe_key(v) for v in key)}]"
    if isinstance(key, str):  # numpy.str_ and other str subclasses
        return "str"
    if isinstance(key, numbers.Integral):  # numpy integers
        return "bool" if isinstance(key, bool) else "int"
    if isinstance(key, numbers.Real):
        return "float"
    return f"{t.__module__}.{t.__qualname__}" if t.__module__ not in ("builtins", "__main__") else t.__qualname__


def observed_key_types(keys: Iterable[Any]) -> set[str]:
    """The Python types of `keys` (each described once: scalars by their class, composite keys
    one by one, since their fields decide)."""
    ks = keys if isinstance(keys, (list, tuple)) else list(keys)
    classes = set(map(type, ks))  # C speed: most keys are ints or strings
    out = {SCALAR_KEY_TYPES[c] for c in classes if c in SCALAR_KEY_TYPES}
    rest = classes.difference(SCALAR_KEY_TYPES)
    if rest:
        if rest == {tuple}:  # tuples of scalars: their field classes, deduplicated at C speed first
            tuples = ks if len(classes) == 1 else [k for k in ks if type(k) is tuple]
            signatures = set(map(tuple, map(_field_classes, tuples)))
            if all(c in SCALAR_KEY_TYPES for sig in signatures for c in sig):
                out.update(f"tuple[{', '.join(SCALAR_KEY_TYPES[c] for c in sig)}]" for sig in signatures)
                return out
        out.update(describe_key(k) for k in ks if type(k) in rest)
    return out


_field_classes = functools.partial(map, type)


class KeyTypeTracker:
    """The Python types of keys as they are written one by one (a backend whose snapshots do not
    go through every key: RocksDB's native checkpoints). Cheap per key: a class seen before costs
    one set lookup; composite keys are described each time (their fields decide)."""

    __slots__ = ("_classes", "types")

    def __init__(self) -> None:
        self._classes: set[type] = set()
        self.types: set[str] = set()

    def add(self, key: Any) -> None:
        t = type(key)
        if t in self._classes:
            return
        name = SCALAR_KEY_TYPES.get(t)
        if name is None:
            self.types.add(describe_key(key))
            return
        self._classes.add(t)
        self.types.add(name)


__all__ = [
    "KeyTypeTracker",
    "PICKLED",
    "TypeDescription",
    "describe_key",
    "describe_state",
    "describe_type_info",
    "format_type",
    "is_known",
    "key_vocabulary",
    "observed_key_types",
]
