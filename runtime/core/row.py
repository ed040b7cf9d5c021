"""Row: PyFlink's Row, a tuple-like record with optional field names."""
from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any, ClassVar

_INDEX: dict[tuple[str, ...], dict[str, int]] = {}


def _index_of(fields: tuple[str, ...]) -> dict[str, int]:
    """name -> position, shared by every Row with the same field names (attribute access is hot)."""
    idx = _INDEX.get(fields)
    if idx is None:
        if len(_INDEX) > 10000:  # bound the cache for programs that invent field names
            _INDEX.clear()
        idx = _INDEX[fields] = {n: i for i, n in enumerate(fields)}
    return idx


_NAMED: dict[tuple[str, ...], type[Row]] = {}
_values_of = operator.attrgetter("_values")


def _field_getter(i: int) -> Any:
    def get(self: Row) -> Any:
        return self._values[i]

    return get


def _new_via_row(cls: type, *args: Any, **kwargs: Any) -> Row:
    """type(row)(...) on a named Row: a Row for the values given (positional or with their own names)."""
    return Row.__new__(Row, *args, **kwargs)


def _named_class(fields: tuple[str, ...]) -> type[Row]:
    """A Row subclass for one tuple of field names, with a property per field.

    Attribute access (`row.user_id`) is the per-record path's hottest operation; a property is one
    call, where `__getattr__` runs only after the normal lookup has failed. Names that are Row's
    own attributes (methods win, as in PyFlink) or private stay with `__getattr__`/`row["name"]`.
    """
    cls = _NAMED.get(fields)
    if cls is None:
        if len(_NAMED) > 10000:  # bound the cache for programs that invent field names
            _NAMED.clear()
        props = {n: property(_field_getter(i)) for i, n in enumerate(fields) if not n.startswith("_") and not hasattr(Row, n)}
        namespace = {"__slots__": (), "__module__": Row.__module__, "__qualname__": "Row", "_named_row": True, "_row_fields": fields,
                     "__new__": _new_via_row, "__init__": object.__init__, **props}
        cls = _NAMED[fields] = type("Row", (Row,), namespace)
    return cls


def is_plain_row(obj: Any) -> bool:
    """A Row and not a user's subclass of it (named Rows are instances of per-field-names subclasses)."""
    t = type(obj)
    return t is Row or t.__dict__.get("_named_row", False)


def named_row_class(rows: list[Any]) -> type | None:
    """The class of `rows` when they are all named Rows with the same field names, else None."""
    if len(rows) == 0:
        return None
    types = set(map(type, rows))
    if len(types) != 1:
        return None
    t = types.pop()
    return t if t.__dict__.get("_named_row", False) else None


def named_rows(fields: tuple[str, ...], value_lists: list[list[Any]]) -> list[Row]:
    """Rows with these field names, one per value list (the lists are taken, not copied)."""
    cls, new = _named_class(fields), object.__new__
    out = []
    for values in value_lists:
        row: Row = new(cls)
        row._fields = fields
        row._values = values
        out.append(row)
    return out


def _same_named_values(rows: list[Any]) -> tuple[tuple[str, ...], list[list[Any]]] | None:
    """(field names, each row's values) when `rows` are named Rows with the same field names and
    as many values as names (Row.of takes any values: a ragged row is never truncated), else None."""
    if named_row_class(rows) is None:
        return None
    fields = rows[0]._fields
    values = list(map(_values_of, rows))
    if set(map(len, values)) != {len(fields)}:
        return None
    return fields, values


def named_row_field(rows: list[Any], name: str) -> list[Any] | None:
    """Field `name` of every row when `rows` are same-named Rows (in C), else None."""
    same = _same_named_values(rows)
    if same is None or name not in same[0]:
        return None
    return list(map(operator.itemgetter(same[0].index(name)), same[1]))


def named_row_columns(rows: list[Any]) -> dict[str, list[Any]] | None:
    """{field name: column} when `rows` are same-named Rows (transposed in C), else None."""
    same = _same_named_values(rows)
    if same is None:
        return None
    return dict(zip(same[0], map(list, zip(*same[1]))))


class Row:
    """`Row(1, "a")` or `Row(id=1, name="a")`; fields by index, by name, or as attributes."""

    __slots__ = ("_values", "_fields")
    _values: list[Any]
    _fields: tuple[str, ...] | None
    # only on the per-field-names subclasses `_named_class` makes
    _row_fields: ClassVar[tuple[str, ...]]

    def __new__(cls, *args: Any, **kwargs: Any) -> Row:
        if kwargs:
            if args:
                raise ValueError("Row takes positional or named fields, not both")
            fields = tuple(kwargs)
            if cls is Row:
                cls = _NAMED.get(fields) or _named_class(fields)
                fields = cls._row_fields  # one tuple of names shared by all rows of the class
            row = object.__new__(cls)
            row._fields = fields
            row._values = list(kwargs.values())
        else:
            row = object.__new__(cls)
            row._fields = None
            row._values = list(args)
        return row

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Everything happens in __new__; a user's subclass may still call super().__init__(...)."""

    @classmethod
    def of(cls, fields: tuple[str, ...] | None, values: Iterable[Any]) -> Row:
        if cls.__dict__.get("_named_row", False):
            cls = Row  # type(row).of(...): the class follows the names given, not the row's
        if fields is not None:
            fields = tuple(fields)
        row = object.__new__(_named_class(fields) if fields is not None and cls is Row else cls)
        row._fields = fields
        row._values = list(values)
        return row

    def __call__(self, *values: Any) -> Row:
        """PyFlink idiom: `Point = Row("x", "y"); Point(1, 2)`."""
        return Row.of(tuple(self._values), values)

    def as_dict(self, recursive: bool = False) -> dict[str, Any]:
        if self._fields is None:
            raise TypeError("cannot convert a Row without field names to a dict")
        return dict(zip(self._fields, self._values))

    def get_fields_by_names(self, names: Iterable[str]) -> list[Any]:
        d = self.as_dict()
        return [d[n] for n in names]

    @property
    def field_names(self) -> tuple[str, ...] | None:
        return self._fields

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        fields = object.__getattribute__(self, "_fields")
        if fields is not None:
            i = _index_of(fields).get(name)
            if i is not None:
                return self._values[i]
        raise AttributeError(f"Row has no field {name!r}")

    def __getitem__(self, item: int | str | slice) -> Any:
        if item.__class__ is int:
            return self._values[item]
        if isinstance(item, str):
            i = None if self._fields is None else _index_of(self._fields).get(item)
            if i is None:
                raise KeyError(item)
            return self._values[i]
        return self._values[item]

    def __setitem__(self, item: int, value: Any) -> None:
        self._values[item] = value

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self):
        return iter(self._values)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Row):
            return NotImplemented
        return self._fields == other._fields and self._values == other._values

    def __hash__(self) -> int:  # same-process use only (sets, dicts); routing uses stable_hash
        return hash((self._fields, tuple(self._values)))

    def __repr__(self) -> str:
        if self._fields is None:  # PyFlink's Row.__repr__ for a row without field names
            return "<Row(" + ", ".join(repr(v) for v in self._values) + ")>"
        return "Row(" + ", ".join(f"{f}={v!r}" for f, v in zip(self._fields, self._values)) + ")"

    def __reduce__(self):
        return (Row.of, (self._fields, self._values))
