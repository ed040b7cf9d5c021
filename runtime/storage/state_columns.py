"""How Python state values become typed columns of a state file, and back.

One logical column (keys, namespaces or values) is stored as a group of physical columns
`<prefix>_<suffix>`, and each row sets exactly one of them (or none for None):

- `long`: an `int` within int64;  `double` (values only): a `float`;  `string`: a UTF-8 `str`;
- `tuple` (keys and values): a plain `tuple`, as a list of items that are each stored the same
  way one level down (struct<long, double, string, bytes>); Flink's Tuple / ROW state, composite
  keys and accumulators like `(count, sum)` are the common case, so Spark SQL reads them as
  `value_tuple[0].long` and no row is pickled;
- `bytes`: anything else, pickled (protocol 5).

The tests are `type(x) is ...`, so subclasses (bool, IntEnum, numpy scalars, namedtuples, Row)
are pickled and come back with their type. Conversion is whole-column where the column is of one
kind (pyarrow converts in C); only mixed columns take a per-row path.
"""
from __future__ import annotations

import itertools
import operator
import pickle
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from runtime.state.serialization import loads_state

LONG, DOUBLE, STRING, BYTES, TUPLE = "long", "double", "string", "bytes", "tuple"
_TYPES: dict[str, pa.DataType] = {LONG: pa.int64(), DOUBLE: pa.float64(), STRING: pa.string(), BYTES: pa.binary()}
TUPLE_ITEM_TYPE = pa.struct([pa.field(s, t) for s, t in _TYPES.items()])
_TYPES[TUPLE] = pa.list_(TUPLE_ITEM_TYPE)
SUFFIXES = tuple(_TYPES)

_I64_MIN = -(1 << 63)
_I64_MAX = (1 << 63) - 1
_I32_MAX = (1 << 31) - 1
_NONE_TYPE = type(None)
_SIMPLE_TYPES = frozenset({int, float, str})  # may go to a typed column (ints only within int64)
_ONE_KIND = {int: LONG, float: DOUBLE, str: STRING}


def suffixes(with_double: bool, with_tuple: bool) -> list[str]:
    return [LONG, *([DOUBLE] if with_double else []), STRING, BYTES, *([TUPLE] if with_tuple else [])]


def fields(prefix: str, with_double: bool, with_tuple: bool) -> list[pa.Field]:
    """The physical columns of one logical column, in schema order."""
    return [pa.field(f"{prefix}_{s}", _TYPES[s]) for s in suffixes(with_double, with_tuple)]


class UnpicklableError(Exception):
    """A value that is none of the typed kinds could not be pickled; `index` is its row."""

    def __init__(self, index: int, value: Any, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.index, self.value, self.cause = index, value, cause


# --- encoding --------------------------------------------------------------------------------
def encode(values: list[Any], with_double: bool, with_tuple: bool) -> dict[str, pa.Array]:
    """The physical columns (by suffix) that hold any row of `values`; absent suffixes are all null."""
    types = set(map(type, values))
    if types <= {_NONE_TYPE}:  # e.g. the VOID namespace
        return {}
    if with_tuple and tuple in types and types <= {tuple, _NONE_TYPE}:
        tuples = _encode_tuples(values, _NONE_TYPE in types)
        if tuples is not None:
            return {TUPLE: tuples}
    # fast paths: one simple type (plus None) covers the whole column, pyarrow converts in C
    try:
        if types <= {int, _NONE_TYPE}:
            return {LONG: pa.array(values, type=_TYPES[LONG])}
        if types <= {str, _NONE_TYPE}:
            return {STRING: pa.array(values, type=_TYPES[STRING])}
        if with_double and types <= {float, _NONE_TYPE}:
            return {DOUBLE: pa.array(values, type=_TYPES[DOUBLE])}
    except (OverflowError, pa.ArrowInvalid, UnicodeEncodeError):
        pass  # an int beyond int64 or a string that is not UTF-8: those are pickled below
    if not types & _SIMPLE_TYPES:  # nothing typed: every row is pickled
        return {BYTES: pa.array(_dumps_all(values, None), type=_TYPES[BYTES])}
    try:
        return _encode_mixed(values, types, with_double, strict_str=False)
    except UnicodeEncodeError:
        return _encode_mixed(values, types, with_double, strict_str=True)


def encode_pairs(pairs: list[tuple[Any, Any]]) -> tuple[dict[str, pa.Array], dict[str, pa.Array]]:
    """The key and namespace columns of (key, namespace) pairs (keys may be tuples, namespaces not)."""
    types = set(map(type, itertools.chain.from_iterable(pairs)))
    suffix = _ONE_KIND.get(next(iter(types - {_NONE_TYPE}))) if len(types - {_NONE_TYPE}) == 1 else None
    if suffix in (LONG, STRING):  # e.g. int keys in the VOID namespace: one C pass for both columns
        try:
            both = pa.array(pairs, type=pa.struct([("key", _TYPES[suffix]), ("namespace", pa.null())]))
        except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError, UnicodeEncodeError):
            pass  # a namespace that is not None, an int beyond int64, a string that is not UTF-8
        else:
            key = both.field("key")
            return ({suffix: key} if key.null_count < len(key) else {}), {}
    return (
        encode(list(map(operator.itemgetter(0), pairs)), with_double=False, with_tuple=True),
        encode(list(map(operator.itemgetter(1), pairs)), with_double=False, with_tuple=False),
    )


def _encode_mixed(values: list[Any], types: set[type], with_double: bool, strict_str: bool) -> dict[str, pa.Array]:
    def is_str(x: Any) -> bool:
        return type(x) is str and (not strict_str or _utf8_ok(x))

    def simple(x: Any) -> bool:
        t = type(x)
        return x is None or (t is int and _I64_MIN <= x <= _I64_MAX) or (with_double and t is float) or is_str(x)

    out: dict[str, pa.Array] = {}
    if int in types:
        out[LONG] = pa.array([x if type(x) is int and _I64_MIN <= x <= _I64_MAX else None for x in values], type=_TYPES[LONG])
    if str in types:
        out[STRING] = pa.array([x if is_str(x) else None for x in values], type=_TYPES[STRING])
    if with_double and float in types:
        out[DOUBLE] = pa.array([x if type(x) is float else None for x in values], type=_TYPES[DOUBLE])
    out[BYTES] = pa.array(_dumps_all(values, simple), type=_TYPES[BYTES])
    return out


def _encode_tuples(values: list[Any], has_none: bool) -> pa.Array | None:
    """A list<struct> column for a column of tuples (and None); None when it would not fit int32 offsets."""
    rows = [() if v is None else v for v in values] if has_none else values
    item_types = set(map(type, itertools.chain.from_iterable(rows)))
    if len(item_types) == 1 and (suffix := _ONE_KIND.get(item_types.pop())) is not None:
        try:  # every item of one typed kind (e.g. all ints): pyarrow builds offsets and items in one C pass
            lists = pa.array(values, type=pa.list_(_TYPES[suffix]))
        except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError, UnicodeEncodeError):
            pass  # an int beyond int64 or a string that is not UTF-8: per position below
        else:
            if len(lists.values) <= _I32_MAX:
                items = {k: lists.values if k == suffix else pa.nulls(len(lists.values), _TYPES[k]) for k in suffixes(True, False)}
                struct = pa.StructArray.from_arrays([items[k] for k in suffixes(True, False)], fields=list(TUPLE_ITEM_TYPE))
                return pa.ListArray.from_arrays(lists.offsets, struct, mask=lists.is_null() if has_none else None)
    arities = set(map(len, rows))
    if len(arities) == 1:  # one arity (the usual case): encode position by position, then interleave
        width = arities.pop()
        if len(rows) * width > _I32_MAX:
            return None
        offsets = np.arange(len(rows) + 1, dtype=np.int64) * width
        try:
            positions = [encode(list(map(operator.itemgetter(j), rows)), with_double=True, with_tuple=False) for j in range(width)]
        except UnpicklableError as e:  # its index is the row already
            raise UnpicklableError(e.index, values[e.index], e.cause) from e.cause
        items = _interleave(positions, len(rows), width)
    else:
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        if offsets[-1] > _I32_MAX:
            return None
        items = _encode_flat(list(itertools.chain.from_iterable(rows)), offsets, values)
    struct = pa.StructArray.from_arrays([items[s] for s in suffixes(True, False)], fields=list(TUPLE_ITEM_TYPE))
    mask = pa.array([v is None for v in values], type=pa.bool_()) if has_none else None
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), struct, mask=mask)


def _encode_flat(flat: list[Any], offsets: np.ndarray, values: list[Any]) -> dict[str, pa.Array]:
    try:
        items = encode(flat, with_double=True, with_tuple=False)
    except UnpicklableError as e:
        row = int(np.searchsorted(offsets, e.index, side="right")) - 1
        raise UnpicklableError(row, values[row], e.cause) from e.cause
    return {s: items[s] if s in items else pa.nulls(len(flat), _TYPES[s]) for s in suffixes(True, False)}


def _interleave(positions: list[dict[str, pa.Array]], n: int, width: int) -> dict[str, pa.Array]:
    """Item columns in row-major order (row 0's items, then row 1's...) from one encoding per position."""
    order = pa.array(np.arange(n * width, dtype=np.int64).reshape(width, n).T.ravel()) if width > 1 else None
    out: dict[str, pa.Array] = {}
    for s in suffixes(True, False):
        if not any(s in p for p in positions):  # no item of this kind: no reordering needed
            out[s] = pa.nulls(n * width, _TYPES[s])
            continue
        joined = pa.concat_arrays([p[s] if s in p else pa.nulls(n, _TYPES[s]) for p in positions])
        out[s] = joined.take(order) if order is not None else joined
    return out


def _dumps_all(values: list[Any], simple: Callable[[Any], bool] | None) -> list[bytes | None]:
    """Pickle every value `simple` does not cover (None for those it does; no `simple`: every value);
    names the failing row."""
    dumps = pickle.dumps
    try:
        if simple is None:
            return [dumps(x, protocol=5) for x in values]
        return [None if simple(x) else dumps(x, protocol=5) for x in values]
    except Exception:  # find which one, slowly, only on failure
        for i, x in enumerate(values):
            if simple is None or not simple(x):
                try:
                    pickle.dumps(x, protocol=5)
                except Exception as e:
                    raise UnpicklableError(i, x, e) from e
        raise


def _utf8_ok(x: str) -> bool:
    try:
        x.encode("utf-8")
        return True
    except UnicodeEncodeError:  # lone surrogates: not valid in a Parquet string, pickled instead
        return False


# --- decoding --------------------------------------------------------------------------------
Column: TypeAlias = pa.Array | pa.ChunkedArray


def columns_of(table: pa.Table, prefix: str) -> dict[str, Column]:
    """The physical columns of logical column `prefix` that `table` has, by suffix."""
    names = set(table.column_names)
    return {s: table.column(f"{prefix}_{s}") for s in SUFFIXES if f"{prefix}_{s}" in names}


def decode(cols: Mapping[str, Column], n: int) -> list[Any]:
    """Invert `encode`: the Python objects of one logical column of `n` rows, types preserved."""
    present = [(s, c) for s, c in cols.items() if c.null_count < n]
    if not present:
        return [None] * n
    if len(present) == 1 and present[0][1].null_count == 0:  # the whole column is of one kind
        return _convert(*present[0])
    values: list[Any] = [None] * n
    for suffix, col in present:
        idx = np.flatnonzero(np.asarray(col.is_valid())).tolist()
        for i, v in zip(idx, _convert(suffix, col.drop_null())):
            values[i] = v
    return values


def _convert(suffix: str, col: Column) -> list[Any]:
    """The Python objects of a column of one kind without nulls."""
    if suffix == BYTES:
        return list(map(loads_state, col.to_pylist()))
    if suffix == TUPLE:
        return _decode_tuples(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
    return col.to_pylist()


def _decode_tuples(arr: pa.ListArray) -> list[tuple[Any, ...]]:
    lengths = pc.list_value_length(arr).to_numpy(zero_copy_only=False)
    items = arr.flatten()  # respects offsets and slicing
    flat = decode({f.name: items.field(f.name) for f in TUPLE_ITEM_TYPE}, len(items))
    n = len(lengths)
    if n and (lengths == lengths[0]).all():  # one arity (the usual case): grouped in C
        width = int(lengths[0])
        return list(zip(*[iter(flat)] * width)) if width else [()] * n
    bounds = np.concatenate(([0], np.cumsum(lengths))).tolist()
    return [tuple(flat[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
