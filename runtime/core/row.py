"""Row: PyFlink's Row, a tuple-like record with optional field names."""
from __future__ import annotations

from typing import Any, Iterable

_INDEX: dict[tuple[str, ...], dict[str, int]] = {}


def _index_of(fields: tuple[str, ...]) -> dict[str, int]:
    """name -> position, shared by every Row with the same field names (attribute access is hot)."""
    idx = _INDEX.get(fields)
    if idx is None:
        if len(_INDEX) > 10000:  # bound the cache for programs that invent field names
            _INDEX.clear()
        idx = _INDEX[fields] = {n: i for i, n in enumerate(fields)}
    return idx


class Row:
    """`Row(1, "a")` or `Row(id=1, name="a")`; fields by index, by name, or as attributes."""

    __slots__ = ("_values", "_fields")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and kwargs:
            raise ValueError("Row takes positional or named fields, not both")
        if kwargs:
            self._fields: tuple[str, ...] | None = tuple(kwargs)
            self._values = list(kwargs.values())
        else:
            self._fields = None
            self._values = list(args)

    @classmethod
    def of(cls, fields: tuple[str, ...] | None, values: Iterable[Any]) -> "Row":
        row = cls.__new__(cls)
        row._fields = fields
        row._values = list(values)
        return row

    def __call__(self, *values: Any) -> "Row":
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
        if self._fields is None:
            return "Row(" + ", ".join(repr(v) for v in self._values) + ")"
        return "Row(" + ", ".join(f"{f}={v!r}" for f, v in zip(self._fields, self._values)) + ")"

    def __reduce__(self):
        return (Row.of, (self._fields, self._values))
