"""PyFlink's pyflink.common.serialization: Encoder (what a row-format FileSink writes per record),
and the record formats of Kafka's connectors (SimpleStringSchema, JSON rows)."""
from __future__ import annotations

import json
from typing import Any

import numpy as np

from runtime.core.errors import InvalidProgramError
from runtime.core.records import ColumnBatch, ObjectBatch, RecordBatch


class Encoder:
    """`Encoder.simple_string_encoder()` writes str(record) and a newline (Flink's SimpleStringEncoder)."""

    def __init__(self, charset: str = "utf-8") -> None:
        self.charset = charset

    @staticmethod
    def simple_string_encoder(charset_name: str = "UTF-8") -> Encoder:
        return Encoder(charset_name.lower())

    def encode(self, value: Any) -> bytes:
        return (str(value) + "\n").encode(self.charset)


# --- Kafka's record formats (PyFlink: pyflink.common.serialization.SimpleStringSchema,
# pyflink.datastream.formats.json.JsonRow(De)SerializationSchema). A schema works on whole batches:
# a source deserializes a poll's values at once, a sink serializes a batch at once.


ONE_PASS_MIN_VALUES = 128  # JsonRowDeserializationSchema reads a batch this big in one pyarrow pass


class DeserializationError(ValueError):
    """A value that cannot be read; `index` is its position in the batch given."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index


class DeserializationSchema:
    def deserialize_batch(self, values: list[bytes | None]) -> RecordBatch:
        raise NotImplementedError

    def get_produced_type(self) -> Any:
        return None


class SerializationSchema:
    def serialize_batch(self, batch: RecordBatch) -> list[bytes | None]:
        raise NotImplementedError


class SimpleStringSchema(DeserializationSchema, SerializationSchema):
    """Values as strings (UTF-8 by default); a null value reads as None."""

    def __init__(self, charset: str = "UTF-8") -> None:
        self.charset = charset.lower()

    def deserialize_batch(self, values: list[bytes | None]) -> RecordBatch:
        out: list[Any] = []
        for i, v in enumerate(values):
            try:
                out.append(None if v is None else v.decode(self.charset))
            except UnicodeDecodeError as e:
                raise DeserializationError(i, f"not {self.charset} text: {e}") from None
        return ObjectBatch(out)

    def serialize_batch(self, batch: RecordBatch) -> list[bytes | None]:
        cs = self.charset
        return [None if v is None else str(v).encode(cs) for v in batch.rows()]

    def get_produced_type(self) -> Any:
        from runtime.api.common.typeinfo import Types

        return Types.STRING()


def _row_fields(type_info: Any, who: str) -> tuple[list[str], dict[str, Any]]:
    from runtime.api.common.typeinfo import BasicTypeInfo, RowTypeInfo

    if not isinstance(type_info, RowTypeInfo) or type_info.field_names is None:
        raise InvalidProgramError(f"{who}: with_type_info() needs Types.ROW_NAMED([...], [...]), got {type_info!r}")
    dtypes: dict[str, Any] = {}
    for name, t in zip(type_info.field_names, type_info.field_types):
        dt = t.to_numpy_dtype() if isinstance(t, BasicTypeInfo) else None
        dtypes[name] = dt if dt is not None else np.dtype(object)
    return list(type_info.field_names), dtypes


class JsonRowDeserializationSchema(DeserializationSchema):
    """JSON objects as rows of a ROW_NAMED type: `JsonRowDeserializationSchema.builder()
    .type_info(Types.ROW_NAMED(["user", "ts"], [Types.LONG(), Types.LONG()])).build()`. Numeric
    fields become numpy columns (a ColumnBatch); a missing field or null in a numeric column is an
    error unless `ignore_parse_errors()` (then the record is skipped)."""

    def __init__(self, type_info: Any, ignore_parse_errors: bool = False) -> None:
        self.type_info = type_info
        self.names, self.dtypes = _row_fields(type_info, "JsonRowDeserializationSchema")
        self.ignore_parse_errors = ignore_parse_errors
        self._arrow_schema = _arrow_row_schema(type_info)

    @staticmethod
    def builder() -> JsonRowDeserializationSchemaBuilder:
        return JsonRowDeserializationSchemaBuilder()

    def deserialize_batch(self, values: list[bytes | None]) -> RecordBatch:
        # a read costs ~100 µs however small the batch: worth it from about a hundred values on
        fast = self._read_columns(values) if self._arrow_schema is not None and len(values) >= ONE_PASS_MIN_VALUES else None
        return fast if fast is not None else self._read_rows(values)

    def _read_columns(self, values: list[bytes | None]) -> ColumnBatch | None:
        """The whole batch in one pyarrow JSON read (~0.5 µs a record against ~4 µs through json.loads),
        or None when the batch is not plainly one object per value with every field present and typed
        as declared; the per-record reader then decides each value (and names the one it refuses)."""
        if not values or not all(v is not None and v[:1] == b"{" for v in values):
            return None
        joined = b"\n".join(values)  # type: ignore[arg-type]  # None was ruled out just above
        if joined.count(b"\n") != len(values) - 1:  # a value with a newline: lines are not values
            return None
        import pyarrow as pa
        import pyarrow.json as pa_json

        try:
            table = pa_json.read_json(
                pa.BufferReader(joined), read_options=pa_json.ReadOptions(use_threads=False, block_size=max(1 << 20, len(joined) + 1)),
                parse_options=pa_json.ParseOptions(explicit_schema=self._arrow_schema, unexpected_field_behavior="ignore"),
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # not JSON, another type, out of range: the slow path names it
            return None
        # one row per value (a value holding two objects would make more), no field missing or null
        if table.num_rows != len(values) or any(c.null_count for c in table.columns):
            return None
        return ColumnBatch({n: _column_array(table.column(n), self.dtypes[n]) for n in self.names})

    def _read_rows(self, values: list[bytes | None]) -> RecordBatch:
        cols: dict[str, list[Any]] = {n: [] for n in self.names}
        at: list[int] = []  # each row's position in values
        loads = json.loads
        for i, v in enumerate(values):
            try:
                obj = loads(v) if v is not None else None
                if not isinstance(obj, dict):
                    raise ValueError(f"not a JSON object: {v[:80]!r}" if v is not None else "a null value")
                row = [obj[n] for n in self.names]
            except (ValueError, KeyError, TypeError) as e:
                if self.ignore_parse_errors:
                    continue
                what = f"missing field {e}" if isinstance(e, KeyError) else str(e)
                raise DeserializationError(i, f"not a JSON row of {self.names}: {what}") from None
            for n, x in zip(self.names, row):
                cols[n].append(x)
            at.append(i)
        try:
            return ColumnBatch({n: np.asarray(cols[n], dtype=self.dtypes[n]) for n in self.names})
        except (TypeError, ValueError) as e:
            unfit = [j for j in range(len(at)) if not _fits(cols, self.dtypes, j)]
            if not self.ignore_parse_errors:
                raise DeserializationError(at[unfit[0]] if unfit else 0, f"a value does not fit the row type {self.type_info!r}: {e}") from None
        skip = set(unfit)  # ignore_parse_errors: the records whose values do not fit are left out
        return ColumnBatch({n: np.asarray([x for j, x in enumerate(c) if j not in skip], dtype=self.dtypes[n]) for n, c in cols.items()})

    def get_produced_type(self) -> Any:
        return self.type_info


def _arrow_row_schema(type_info: Any) -> Any:
    """The Arrow schema a JSON reader can fill for this row type: numbers, booleans and strings
    only (None for any other field type: those rows are read one by one)."""
    import pyarrow as pa

    from runtime.api.common.typeinfo import BasicTypeInfo, Types

    fields = []
    for name, t in zip(type_info.field_names, type_info.field_types):
        dt = t.to_numpy_dtype() if isinstance(t, BasicTypeInfo) else None
        if t == Types.STRING():
            fields.append(pa.field(name, pa.string()))
        elif dt is not None and dt.kind in "iufb":
            fields.append(pa.field(name, pa.from_numpy_dtype(dt)))
        else:
            return None
    return pa.schema(fields)


def _column_array(column: Any, dtype: Any) -> np.ndarray:
    """A writable numpy column (operators may change a batch's columns in place)."""
    if dtype == np.dtype(object):
        return np.asarray(column.to_pylist(), dtype=object)
    return column.to_numpy().astype(dtype)  # astype copies: Arrow's buffers are read-only


def _fits(cols: dict[str, list[Any]], dtypes: dict[str, Any], i: int) -> bool:
    try:
        for n, dt in dtypes.items():
            np.asarray([cols[n][i]], dtype=dt)
        return True
    except (TypeError, ValueError, IndexError):
        return False


class JsonRowDeserializationSchemaBuilder:
    def __init__(self) -> None:
        self._type_info: Any = None
        self._ignore = False

    def type_info(self, type_info: Any) -> JsonRowDeserializationSchemaBuilder:
        self._type_info = type_info
        return self

    def ignore_parse_errors(self) -> JsonRowDeserializationSchemaBuilder:
        self._ignore = True
        return self

    def build(self) -> JsonRowDeserializationSchema:
        return JsonRowDeserializationSchema(self._type_info, self._ignore)


class JsonRowSerializationSchema(SerializationSchema):
    """Rows as JSON objects: `JsonRowSerializationSchema.builder().with_type_info(Types.ROW_NAMED(...)).build()`."""

    def __init__(self, type_info: Any) -> None:
        self.type_info = type_info
        self.names, _ = _row_fields(type_info, "JsonRowSerializationSchema")
        # one encoder (json.dumps with options builds one per call: ~40 % of its cost)
        self._encode = json.JSONEncoder(separators=(",", ":")).encode
        # all-integer rows: one bytes template per record, '{"a":%d,"b":%d}' (~0.4 µs against ~3)
        self._int_template = b"{" + b",".join(json.dumps(n).encode() + b":%d" for n in self.names) + b"}"

    @staticmethod
    def builder() -> JsonRowSerializationSchemaBuilder:
        return JsonRowSerializationSchemaBuilder()

    def serialize_batch(self, batch: RecordBatch) -> list[bytes | None]:
        names, encode = self.names, self._encode
        if isinstance(batch, ColumnBatch):
            arrays = [batch.columns[n] for n in names]
            cols = [a.tolist() for a in arrays]
            if all(a.dtype.kind in "iu" for a in arrays):  # exactly what json writes for an int
                template = self._int_template
                return [template % vals for vals in zip(*cols)]
            return [encode(dict(zip(names, vals))).encode() for vals in zip(*cols)]
        out: list[bytes | None] = []
        for r in batch.rows():
            out.append(encode({n: r[n] for n in names}).encode())
        return out


class JsonRowSerializationSchemaBuilder:
    def __init__(self) -> None:
        self._type_info: Any = None

    def with_type_info(self, type_info: Any) -> JsonRowSerializationSchemaBuilder:
        self._type_info = type_info
        return self

    def build(self) -> JsonRowSerializationSchema:
        return JsonRowSerializationSchema(self._type_info)
