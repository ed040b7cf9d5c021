"""Type information, mirroring pyflink.common.typeinfo.Types.

In Millrace records are plain Python values; a TypeInformation is a *declaration* the API uses
for validation (is this type usable as a key? does this field exist?) and for the vectorized path
(an Arrow schema lets sources emit ColumnBatches and sinks write Parquet without guessing).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class TypeInformation:
    """Base of all type infos. Subclasses override what differs."""

    def is_keyable(self) -> bool:
        """Can values of this type be a key (stable hash + equality)?"""
        return True

    def to_arrow_type(self) -> Any:
        """The pyarrow DataType for this type, or None if there is none."""
        return None

    def to_arrow_schema(self) -> Any:
        """A pyarrow Schema (only for named rows), else None."""
        return None

    def to_numpy_dtype(self) -> Any:
        """The numpy dtype of a column of this type, or None (object column)."""
        return None

    def get_field_names(self) -> list[str] | None:
        return None

    def get_field_types(self) -> list[TypeInformation] | None:
        return None

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self)))


class BasicTypeInfo(TypeInformation):
    """A scalar type: INT, LONG, STRING, ... (name, Arrow type name, numpy dtype)."""

    def __init__(self, name: str, arrow: str | None, dtype: str | None) -> None:
        self.name = name
        self._arrow = arrow
        self._dtype = dtype

    def to_arrow_type(self) -> Any:
        if self._arrow is None:
            return None
        import pyarrow as pa

        if self._arrow == "timestamp_ms":
            return pa.timestamp("ms")
        if self._arrow == "time64":  # time64 needs a unit
            return pa.time64("us")
        return getattr(pa, self._arrow)()

    def to_numpy_dtype(self) -> Any:
        import numpy as np

        return None if self._dtype is None else np.dtype(self._dtype)

    def __repr__(self) -> str:
        return self.name


class PickledBytesTypeInfo(TypeInformation):
    """PyFlink's PICKLED_BYTE_ARRAY: an arbitrary Python object, no schema.

    Accepted as a key type (PyFlink's default); whether each actual key value has a stable hash
    (int, str, bytes, float, bool, None, tuples/Rows of those) is checked when it is routed.
    """

    def is_keyable(self) -> bool:
        return True

    def __repr__(self) -> str:
        return "PICKLED_BYTE_ARRAY"


class _FieldsTypeInfo(TypeInformation):
    """What ROW and TUPLE share: an ordered list of field types."""

    def __init__(self, field_types: Sequence[TypeInformation]) -> None:
        self.field_types = list(field_types)

    def get_field_types(self) -> list[TypeInformation]:
        return list(self.field_types)

    def is_keyable(self) -> bool:
        return all(t.is_keyable() for t in self.field_types)

    def _arrow_fields(self, names: Sequence[str]) -> list[Any] | None:
        """pyarrow fields named `names`, or None when a field type has no Arrow type."""
        import pyarrow as pa

        types = [t.to_arrow_type() for t in self.field_types]
        if any(t is None for t in types):
            return None
        return [pa.field(n, t) for n, t in zip(names, types)]


class RowTypeInfo(_FieldsTypeInfo):
    def __init__(self, field_types: Sequence[TypeInformation], field_names: Sequence[str] | None = None) -> None:
        super().__init__(field_types)
        self.field_names = None if field_names is None else list(field_names)
        if self.field_names is not None and len(self.field_names) != len(self.field_types):
            raise ValueError(f"ROW_NAMED: {len(self.field_names)} names for {len(self.field_types)} types")

    def get_field_names(self) -> list[str] | None:
        # PyFlink gives unnamed rows f0, f1, ...
        return self.field_names if self.field_names is not None else [f"f{i}" for i in range(len(self.field_types))]

    def get_field_type(self, name_or_index: str | int) -> TypeInformation | None:
        if isinstance(name_or_index, int):
            return self.field_types[name_or_index] if 0 <= name_or_index < len(self.field_types) else None
        names = self.get_field_names() or []
        return self.field_types[names.index(name_or_index)] if name_or_index in names else None

    def to_arrow_type(self) -> Any:
        import pyarrow as pa

        fields = self._arrow_fields(self.get_field_names() or [])
        return None if fields is None else pa.struct(fields)

    def to_arrow_schema(self) -> Any:
        if self.field_names is None:
            return None
        import pyarrow as pa

        fields = self._arrow_fields(self.field_names)
        return None if fields is None else pa.schema(fields)

    def __repr__(self) -> str:
        if self.field_names is None:
            return f"ROW({self.field_types})"
        return "ROW_NAMED(" + ", ".join(f"{n}: {t}" for n, t in zip(self.field_names, self.field_types)) + ")"


class TupleTypeInfo(_FieldsTypeInfo):
    def to_arrow_type(self) -> Any:
        import pyarrow as pa

        fields = self._arrow_fields([f"f{i}" for i in range(len(self.field_types))])
        return None if fields is None else pa.struct(fields)

    def __repr__(self) -> str:
        return f"TUPLE({self.field_types})"


class ListTypeInfo(TypeInformation):
    def __init__(self, element_type: TypeInformation) -> None:
        self.element_type = element_type

    def is_keyable(self) -> bool:
        return False  # Python lists are mutable and unhashable

    def to_arrow_type(self) -> Any:
        import pyarrow as pa

        t = self.element_type.to_arrow_type()
        return None if t is None else pa.list_(t)

    def __repr__(self) -> str:
        return f"LIST({self.element_type})"


class PrimitiveArrayTypeInfo(ListTypeInfo):
    def __repr__(self) -> str:
        return f"PRIMITIVE_ARRAY({self.element_type})"


class BasicArrayTypeInfo(ListTypeInfo):
    def __repr__(self) -> str:
        return f"BASIC_ARRAY({self.element_type})"


class MapTypeInfo(TypeInformation):
    def __init__(self, key_type: TypeInformation, value_type: TypeInformation) -> None:
        self.key_type = key_type
        self.value_type = value_type

    def is_keyable(self) -> bool:
        return False  # dicts are unhashable

    def to_arrow_type(self) -> Any:
        import pyarrow as pa

        k, v = self.key_type.to_arrow_type(), self.value_type.to_arrow_type()
        return None if k is None or v is None else pa.map_(k, v)

    def __repr__(self) -> str:
        return f"MAP({self.key_type}, {self.value_type})"


_STRING = BasicTypeInfo("STRING", "string", None)
_BYTE = BasicTypeInfo("BYTE", "int8", "int8")
_BOOLEAN = BasicTypeInfo("BOOLEAN", "bool_", "bool")
_SHORT = BasicTypeInfo("SHORT", "int16", "int16")
_INT = BasicTypeInfo("INT", "int32", "int32")
_LONG = BasicTypeInfo("LONG", "int64", "int64")
_FLOAT = BasicTypeInfo("FLOAT", "float32", "float32")
_DOUBLE = BasicTypeInfo("DOUBLE", "float64", "float64")
_CHAR = BasicTypeInfo("CHAR", "string", None)
_BIG_INT = BasicTypeInfo("BIG_INT", None, None)
_BIG_DEC = BasicTypeInfo("BIG_DEC", None, None)
_SQL_TIMESTAMP = BasicTypeInfo("SQL_TIMESTAMP", "timestamp_ms", "datetime64[ms]")
_SQL_DATE = BasicTypeInfo("SQL_DATE", "date32", None)
_SQL_TIME = BasicTypeInfo("SQL_TIME", "time64", None)
_INSTANT = BasicTypeInfo("INSTANT", "timestamp_ms", "datetime64[ms]")
_PICKLED = PickledBytesTypeInfo()


class Types:
    """Factory of type infos with PyFlink's names (`Types.INT()`, `Types.ROW_NAMED([...], [...])`)."""

    @staticmethod
    def STRING() -> TypeInformation:
        return _STRING

    @staticmethod
    def BYTE() -> TypeInformation:
        return _BYTE

    @staticmethod
    def BOOLEAN() -> TypeInformation:
        return _BOOLEAN

    @staticmethod
    def SHORT() -> TypeInformation:
        return _SHORT

    @staticmethod
    def INT() -> TypeInformation:
        return _INT

    @staticmethod
    def LONG() -> TypeInformation:
        return _LONG

    @staticmethod
    def FLOAT() -> TypeInformation:
        return _FLOAT

    @staticmethod
    def DOUBLE() -> TypeInformation:
        return _DOUBLE

    @staticmethod
    def CHAR() -> TypeInformation:
        return _CHAR

    @staticmethod
    def BIG_INT() -> TypeInformation:
        return _BIG_INT

    @staticmethod
    def BIG_DEC() -> TypeInformation:
        return _BIG_DEC

    @staticmethod
    def SQL_DATE() -> TypeInformation:
        return _SQL_DATE

    @staticmethod
    def SQL_TIME() -> TypeInformation:
        return _SQL_TIME

    @staticmethod
    def SQL_TIMESTAMP() -> TypeInformation:
        return _SQL_TIMESTAMP

    @staticmethod
    def INSTANT() -> TypeInformation:
        return _INSTANT

    @staticmethod
    def PICKLED_BYTE_ARRAY() -> TypeInformation:
        return _PICKLED

    @staticmethod
    def ROW(field_types: Sequence[TypeInformation]) -> RowTypeInfo:
        return RowTypeInfo(field_types)

    @staticmethod
    def ROW_NAMED(field_names: Sequence[str], field_types: Sequence[TypeInformation]) -> RowTypeInfo:
        return RowTypeInfo(field_types, field_names)

    @staticmethod
    def TUPLE(field_types: Sequence[TypeInformation]) -> TupleTypeInfo:
        return TupleTypeInfo(field_types)

    @staticmethod
    def PRIMITIVE_ARRAY(element_type: TypeInformation) -> PrimitiveArrayTypeInfo:
        return PrimitiveArrayTypeInfo(element_type)

    @staticmethod
    def BASIC_ARRAY(element_type: TypeInformation) -> BasicArrayTypeInfo:
        return BasicArrayTypeInfo(element_type)

    @staticmethod
    def LIST(element_type_info: TypeInformation) -> ListTypeInfo:
        return ListTypeInfo(element_type_info)

    @staticmethod
    def MAP(key_type_info: TypeInformation, value_type_info: TypeInformation) -> MapTypeInfo:
        return MapTypeInfo(key_type_info, value_type_info)
