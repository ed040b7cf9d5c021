"""Whether restored state can be read as the program now declares it (Flink:
TypeSerializerSchemaCompatibility, resolved by TypeSerializerSnapshot.resolveSchemaCompatibility).

Decided from two type descriptions (runtime.state.type_descriptions): the one the snapshot
recorded and the one the program declares now. Three outcomes, as in Flink:

- compatible as is: the restored values are used unchanged;
- compatible after migration: the restored values are converted once, by `migrate` (Flink reads
  them with the old serializer and writes them with the new one);
- incompatible: the restore fails, saying why.

Rules (Millrace's values are Python objects, so "reading with the new type" means converting):
- a side that is unknown (no record: a snapshot written before types were recorded, or a state
  without a type) or PICKLED_BYTE_ARRAY restores as is: nothing can be checked, nothing refused;
- the same type: as is;
- a widened number: BYTE < SHORT < INT < LONG < BIG_INT, any of them -> FLOAT or DOUBLE,
  FLOAT -> DOUBLE, an integer -> BIG_DEC; CHAR -> STRING (Java's widening conversions);
- ROW: the old fields, in order (names equal where both rows are named), each compatible, and
  maybe more fields at the end: they are None in the restored rows (every field is nullable);
- TUPLE: the same arity, each field compatible; LIST: the element; MAP: user key and value;
- anything else (narrowing, a number to a string, a scalar to a row, fields removed, renamed or
  reordered): incompatible.

Keys are checked by `resolve_key_compatibility`: keys are never migrated (a key's type decides its
key group), so keys are compatible as is or not at all (Flink: the key serializer must be
compatible as is).

Pure: no I/O, no state backend.
"""
from __future__ import annotations

import decimal
import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runtime.core.row import Row
from runtime.state.type_descriptions import (
    FLOAT_TYPES,
    INTEGER_TYPES,
    PICKLED,
    TypeDescription,
    format_type,
    is_known,
    key_vocabulary,
)

Migration = Callable[[Any], Any]


class CompatibilityType(enum.Enum):
    """Flink: TypeSerializerSchemaCompatibility.Type."""

    COMPATIBLE_AS_IS = "compatible as is"
    COMPATIBLE_AFTER_MIGRATION = "compatible after migration"
    INCOMPATIBLE = "incompatible"


@dataclass(frozen=True)
class SchemaCompatibility:
    """Flink: TypeSerializerSchemaCompatibility; `migrate` converts one restored value (after
    migration), `reason` says what does not fit (incompatible)."""

    type: CompatibilityType
    migrate: Migration | None = None
    reason: str = ""

    @classmethod
    def compatible_as_is(cls) -> SchemaCompatibility:
        return _AS_IS

    @classmethod
    def compatible_after_migration(cls, migrate: Migration) -> SchemaCompatibility:
        return cls(CompatibilityType.COMPATIBLE_AFTER_MIGRATION, migrate)

    @classmethod
    def incompatible(cls, reason: str) -> SchemaCompatibility:
        return cls(CompatibilityType.INCOMPATIBLE, None, reason)

    @property
    def is_compatible_as_is(self) -> bool:
        return self.type is CompatibilityType.COMPATIBLE_AS_IS

    @property
    def is_compatible_after_migration(self) -> bool:
        return self.type is CompatibilityType.COMPATIBLE_AFTER_MIGRATION

    @property
    def is_incompatible(self) -> bool:
        return self.type is CompatibilityType.INCOMPATIBLE


_AS_IS = SchemaCompatibility(CompatibilityType.COMPATIBLE_AS_IS)


# --- values ------------------------------------------------------------------------------------
def _to_int(v: Any) -> Any:
    return None if v is None else int(v)


def _to_float(v: Any) -> Any:
    return None if v is None else float(v)


def _to_decimal(v: Any) -> Any:
    return None if v is None else decimal.Decimal(int(v))


def _to_str(v: Any) -> Any:
    return None if v is None else str(v)


def _basic(old: str, new: str) -> SchemaCompatibility:
    if old == new:
        return _AS_IS
    if old in INTEGER_TYPES and new in INTEGER_TYPES and INTEGER_TYPES.index(old) < INTEGER_TYPES.index(new):
        return SchemaCompatibility.compatible_after_migration(_to_int)
    if (old in INTEGER_TYPES and new in FLOAT_TYPES) or (old, new) == ("FLOAT", "DOUBLE"):
        return SchemaCompatibility.compatible_after_migration(_to_float)
    if old in INTEGER_TYPES and new == "BIG_DEC":
        return SchemaCompatibility.compatible_after_migration(_to_decimal)
    if (old, new) == ("CHAR", "STRING"):
        return SchemaCompatibility.compatible_after_migration(_to_str)
    return SchemaCompatibility.incompatible(f"{old} values cannot be read as {new}")


def _shape(desc: TypeDescription) -> str:
    return desc if isinstance(desc, str) else next(iter(k for k in ("row", "tuple", "list", "map") if k in desc), "?")


def _fields(
    olds: Sequence[TypeDescription | None], news: Sequence[TypeDescription | None], label: Callable[[int], str]
) -> tuple[list[Migration | None], str | None]:
    """Per-field migrations of the common fields (None: as is), or the first field's reason."""
    out: list[Migration | None] = []
    for i, (o, n) in enumerate(zip(olds, news)):
        c = resolve_schema_compatibility(o, n)
        if c.is_incompatible:
            return [], f"{label(i)}: {c.reason}"
        out.append(c.migrate)
    return out, None


def _row(old: Mapping[str, Any], new: Mapping[str, Any]) -> SchemaCompatibility:
    o_types, n_types = old["row"], new["row"]
    o_names, n_names = old.get("names"), new.get("names")

    def label(i: int) -> str:
        name = (n_names or o_names or [None] * (i + 1))[i]
        return f"field {i} ({name!r})" if name is not None else f"field {i}"

    if len(n_types) < len(o_types):
        gone = (o_names or [f"f{i}" for i in range(len(o_types))])[len(n_types):]
        return SchemaCompatibility.incompatible(
            f"the row lost field(s) {', '.join(map(repr, gone))}; rows may only gain nullable fields at the end"
        )
    if o_names is not None and n_names is not None:
        for i, (a, b) in enumerate(zip(o_names, n_names)):
            if a != b:
                return SchemaCompatibility.incompatible(
                    f"field {i} was {a!r} and is now {b!r}; fields may not be renamed or reordered, only added at the end"
                )
    migrations, reason = _fields(o_types, n_types, label)
    if reason is not None:
        return SchemaCompatibility.incompatible(reason)
    added = len(n_types) - len(o_types)
    renamed = n_names is not None and o_names is None  # old rows without names get the declared ones
    if not added and not renamed and all(m is None for m in migrations):
        return _AS_IS
    return SchemaCompatibility.compatible_after_migration(_RowMigration(tuple(migrations), added, None if n_names is None else tuple(n_names)))


class _RowMigration:
    """A restored row (a Row, or a tuple/list standing for one) with its fields converted and
    `added` None fields at the end. A class, not a closure: state migrations may be pickled."""

    def __init__(self, fields: tuple[Migration | None, ...], added: int, names: tuple[str, ...] | None) -> None:
        self.fields, self.added, self.names = fields, added, names

    def __call__(self, value: Any) -> Any:
        if value is None:
            return None
        values = list(value)
        if len(values) != len(self.fields):
            raise ValueError(f"a restored row has {len(values)} fields, its recorded type {len(self.fields)}")
        out = [v if m is None else m(v) for m, v in zip(self.fields, values)] + [None] * self.added
        if isinstance(value, Row):
            names = self.names
            if names is None and value.field_names is not None:  # keep the row's own names, extended
                names = (*value.field_names, *(f"f{i}" for i in range(len(value.field_names), len(out))))
            return Row.of(names, out)
        return tuple(out) if isinstance(value, tuple) else out


class _TupleMigration:
    def __init__(self, fields: tuple[Migration | None, ...]) -> None:
        self.fields = fields

    def __call__(self, value: Any) -> Any:
        if value is None:
            return None
        if len(value) != len(self.fields):
            raise ValueError(f"a restored tuple has {len(value)} fields, its recorded type {len(self.fields)}")
        out = [v if m is None else m(v) for m, v in zip(self.fields, value)]
        return Row.of(value.field_names, out) if isinstance(value, Row) else tuple(out)


class _ListMigration:
    def __init__(self, element: Migration) -> None:
        self.element = element

    def __call__(self, value: Any) -> Any:
        return None if value is None else [self.element(v) for v in value]


class _MapMigration:
    def __init__(self, key: Migration | None, value: Migration | None) -> None:
        self.key, self.value = key, value

    def __call__(self, d: Any) -> Any:
        if d is None:
            return None
        k, v = self.key or _same, self.value or _same
        return {k(a): v(b) for a, b in d.items()}


def _same(v: Any) -> Any:
    return v


def resolve_schema_compatibility(old: TypeDescription | None, new: TypeDescription | None) -> SchemaCompatibility:
    """Can values written as `old` be read as `new`? (See the module doc for the rules.)"""
    if not is_known(old) or not is_known(new) or old == new:
        return _AS_IS
    assert old is not None and new is not None
    if isinstance(old, str) and isinstance(new, str):
        return _basic(old, new)
    if _shape(old) != _shape(new):
        return SchemaCompatibility.incompatible(f"{format_type(old)} values cannot be read as {format_type(new)}")
    assert isinstance(old, dict) and isinstance(new, dict)
    if "row" in old:
        return _row(old, new)
    if "tuple" in old:
        o, n = old["tuple"], new["tuple"]
        if len(o) != len(n):
            return SchemaCompatibility.incompatible(f"a tuple of {len(o)} fields cannot be read as a tuple of {len(n)}")
        migrations, reason = _fields(o, n, lambda i: f"field {i}")
        if reason is not None:
            return SchemaCompatibility.incompatible(reason)
        if all(m is None for m in migrations):
            return _AS_IS
        return SchemaCompatibility.compatible_after_migration(_TupleMigration(tuple(migrations)))
    if "list" in old:
        c = resolve_schema_compatibility(old["list"], new["list"])
        if c.is_incompatible:
            return SchemaCompatibility.incompatible(f"list elements: {c.reason}")
        return c if c.migrate is None else SchemaCompatibility.compatible_after_migration(_ListMigration(c.migrate))
    ok, nk = old["map"], new["map"]
    ck, cv = resolve_schema_compatibility(ok[0], nk[0]), resolve_schema_compatibility(ok[1], nk[1])
    for what, c in (("map keys", ck), ("map values", cv)):
        if c.is_incompatible:
            return SchemaCompatibility.incompatible(f"{what}: {c.reason}")
    if ck.migrate is None and cv.migrate is None:
        return _AS_IS
    return SchemaCompatibility.compatible_after_migration(_MapMigration(ck.migrate, cv.migrate))


# --- keys --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KeyTypes:
    """What is known of an operator's key type: the declared type (key_by(..., key_type=...)) and
    the Python types of the keys seen. Recorded as {"declared": description, "observed": [...]}."""

    declared: TypeDescription | None = None
    observed: frozenset[str] | None = None

    @classmethod
    def from_record(cls, record: Mapping[str, Any] | None) -> KeyTypes:
        if not record:
            return cls()
        observed = record.get("observed")
        return cls(record.get("declared"), None if observed is None else frozenset(observed))

    def to_record(self) -> dict[str, Any]:
        return {"declared": self.declared, "observed": None if self.observed is None else sorted(self.observed)}

    def python_types(self) -> frozenset[str] | None:
        """The Python types the keys have: the declared type's if there is one, else those seen;
        None when nothing is known (no record, PICKLED, or no key seen)."""
        if is_known(self.declared):
            v = key_vocabulary(self.declared)
            if v is not None:
                return frozenset({v})
        return self.observed or None

    def describe(self) -> str:
        declared = f"declared {format_type(self.declared)}" if is_known(self.declared) else None
        seen = f"Python {' | '.join(sorted(self.observed))}" if self.observed else None
        if declared and seen:
            return f"{declared} ({seen})"
        return declared or seen or "unknown"


def resolve_key_compatibility(old: KeyTypes, new: KeyTypes) -> SchemaCompatibility:
    """Compatible as is, or incompatible: keys of the new program must be able to find the keys
    of the snapshot. Refused only when both sides are known and share no Python type (int keys
    restored by a program keying by str); an unknown side restores as is."""
    if is_known(old.declared) and is_known(new.declared) and old.declared != new.declared:
        o, n = key_vocabulary(old.declared), key_vocabulary(new.declared)
        if o is not None and o == n:
            return _AS_IS  # e.g. INT -> LONG: both are Python ints, the same keys
    o_types, n_types = old.python_types(), new.python_types()
    if o_types is None or n_types is None or o_types & n_types:
        return _AS_IS
    return SchemaCompatibility.incompatible(
        f"the keys were {old.describe()} and are now {new.describe()}; a key of another type never finds the "
        "state written under the old keys"
    )


__all__ = [
    "CompatibilityType",
    "KeyTypes",
    "Migration",
    "PICKLED",
    "SchemaCompatibility",
    "resolve_key_compatibility",
    "resolve_schema_compatibility",
]
