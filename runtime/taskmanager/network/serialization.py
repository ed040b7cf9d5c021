"""Encode one StreamElement into a frame payload and back (only for cross-process exchange).

Flink: the role of RecordSerializer / EventSerializer. Payload layout:

    [code: u8] [body...]

Record batches (codes 1 and 2) use pickle protocol 5 with out-of-band buffers so numpy column
data is never copied into the pickle stream:

    [code u8][n_buffers u32][meta_len u64][buffer_len u64 * n_buffers][meta][buffer 0][buffer 1]...

ObjectBatch falls back to cloudpickle when plain pickle fails (lambdas, local classes).
Watermark: code 3 + int64. EndOfPartition: code 4, no body. An ObjectBatch of named Rows with the
same field names travels as code 5: the field names once and each row's value list. Further event types register a code
in [16, 255] with `register_event_type`; CheckpointBarrier is registered here with code 16 and a
compact body (Flink: EventSerializer's CheckpointBarrier layout, minus the options we do not have):

    [16 u8][checkpoint_id i64][timestamp i64][mode u8: 0 EXACTLY_ONCE, 1 AT_LEAST_ONCE][target location utf-8]

The target location (a savepoint's table) is empty for a checkpoint. The mode byte's high bit
marks a stop-with-savepoint's (synchronous) barrier.

Security: decoding unpickles. Only call `decode` on payloads from a peer that passed the
cluster-secret handshake (runtime.rpc.auth); the data server never decodes anything.
"""
from __future__ import annotations

import operator
import pickle
import struct
from collections.abc import Callable
from typing import Any

from runtime.core.checkpoint import CheckpointBarrier, CheckpointingMode
from runtime.core.records import (
    ACTIVE,
    END_OF_PARTITION,
    IDLE,
    ColumnBatch,
    EndOfPartition,
    ObjectBatch,
    RecordBatch,
    Watermark,
    WatermarkStatus,
)
from runtime.core.row import named_row_class, named_rows

_values_of = operator.attrgetter("_values")

CODE_COLUMN_BATCH = 1
CODE_OBJECT_BATCH = 2
CODE_WATERMARK = 3
CODE_END_OF_PARTITION = 4
CODE_ROW_BATCH = 5  # an ObjectBatch of named Rows with the same field names: (fields, value lists, ts)
FIRST_USER_EVENT_CODE = 16
CODE_CHECKPOINT_BARRIER = 16  # the first registered event type (see the bottom of this module)
CODE_WATERMARK_STATUS = 17

_BATCH_HEAD = struct.Struct("<BIQ")  # code, n_buffers, meta_len
_WATERMARK = struct.Struct("<Bq")

Parts = list[bytes | memoryview]


class _EventType:
    __slots__ = ("cls", "code", "encode", "decode")

    def __init__(self, cls: type, code: int, encode: Callable[[Any], bytes], decode: Callable[[bytes], Any]) -> None:
        self.cls = cls
        self.code = code
        self.encode = encode
        self.decode = decode


_events_by_type: dict[type, _EventType] = {}
_events_by_code: dict[int, _EventType] = {}


def register_event_type(
    cls: type,
    code: int,
    encode: Callable[[Any], bytes] | None = None,
    decode: Callable[[bytes], Any] | None = None,
) -> None:
    """Make events of `cls` travel in-band. Default body encoding is pickle of the event.

    `code` must be in [16, 255] and the same in every process (register at import time of the
    module that defines the event). Re-registering the same class with the same code is a no-op.
    """
    if not FIRST_USER_EVENT_CODE <= code <= 255:
        raise ValueError(f"event code must be in [{FIRST_USER_EVENT_CODE}, 255], got {code}")
    existing = _events_by_code.get(code)
    if existing is not None and existing.cls is not cls:
        raise ValueError(f"event code {code} is already used by {existing.cls.__qualname__}")
    if cls in _events_by_type and _events_by_type[cls].code != code:
        raise ValueError(f"{cls.__qualname__} is already registered with code {_events_by_type[cls].code}")
    et = _EventType(
        cls,
        code,
        encode or (lambda e: pickle.dumps(e, protocol=5)),
        decode or pickle.loads,
    )
    _events_by_type[cls] = et
    _events_by_code[code] = et


def _dumps_oob(obj: Any, allow_cloudpickle: bool) -> tuple[bytes, list[pickle.PickleBuffer]]:
    bufs: list[pickle.PickleBuffer] = []
    try:
        return pickle.dumps(obj, protocol=5, buffer_callback=bufs.append), bufs
    except (pickle.PicklingError, TypeError, AttributeError):
        if not allow_cloudpickle:
            raise
        import cloudpickle  # why: lazily, only user objects pickle cannot handle need it

        bufs = []
        return cloudpickle.dumps(obj, protocol=5, buffer_callback=bufs.append), bufs


def _batch_parts(code: int, obj: Any, allow_cloudpickle: bool) -> Parts:
    meta, pbufs = _dumps_oob(obj, allow_cloudpickle)
    raws = [b.raw() for b in pbufs]
    head = _BATCH_HEAD.pack(code, len(raws), len(meta))
    lens = struct.pack(f"<{len(raws)}Q", *(r.nbytes for r in raws)) if raws else b""
    return [head, lens, meta, *raws]


def encode_parts(element: Any) -> Parts:
    """Encode without joining: the header/meta bytes plus raw memoryviews of numpy buffers."""
    t = type(element)
    if t is ColumnBatch:
        return _batch_parts(CODE_COLUMN_BATCH, (element.columns, element.timestamps), False)
    if t is ObjectBatch:
        values = element.values
        if named_row_class(values) is not None:  # field names once, no reduce/rebuild call per row
            return _batch_parts(CODE_ROW_BATCH, (values[0]._fields, list(map(_values_of, values)), element.timestamps), True)
        return _batch_parts(CODE_OBJECT_BATCH, (values, element.timestamps), True)
    if t is Watermark:
        return [_WATERMARK.pack(CODE_WATERMARK, element.timestamp)]
    if t is EndOfPartition:
        return [bytes((CODE_END_OF_PARTITION,))]
    et = _events_by_type.get(t)
    if et is None:
        raise TypeError(
            f"cannot send a {t.__qualname__} over the network: not a record batch, Watermark, "
            "EndOfPartition or an event registered with register_event_type"
        )
    return [bytes((et.code,)), et.encode(element)]


def encode(element: Any) -> bytes:
    """One StreamElement -> one frame payload."""
    return b"".join(encode_parts(element))


def _decode_batch(mv: memoryview) -> Any:
    _, n, meta_len = _BATCH_HEAD.unpack_from(mv, 0)
    pos = _BATCH_HEAD.size
    lens = struct.unpack_from(f"<{n}Q", mv, pos) if n else ()
    pos += 8 * n
    meta = mv[pos : pos + meta_len]
    pos += meta_len
    buffers: list[Any] = []
    copy = mv.readonly  # why: arrays over read-only memory would be read-only for operators
    for ln in lens:
        b = mv[pos : pos + ln]
        buffers.append(bytearray(b) if copy else b)
        pos += ln
    if pos != len(mv):
        raise ValueError(f"corrupt batch payload: {len(mv) - pos} trailing bytes")
    return pickle.loads(meta, buffers=buffers)


def decode(payload: bytes | bytearray | memoryview) -> Any:
    """One frame payload -> one StreamElement (exactly what `encode` was given)."""
    mv = memoryview(payload).cast("B") if not isinstance(payload, memoryview) else payload.cast("B")
    if len(mv) == 0:
        raise ValueError("empty payload")
    code = mv[0]
    if code == CODE_COLUMN_BATCH:
        columns, ts = _decode_batch(mv)
        return ColumnBatch(columns, ts)
    if code == CODE_OBJECT_BATCH:
        values, ts = _decode_batch(mv)
        return ObjectBatch(values, ts)
    if code == CODE_ROW_BATCH:
        fields, value_lists, ts = _decode_batch(mv)
        return ObjectBatch(named_rows(fields, value_lists), ts)
    if code == CODE_WATERMARK:
        return Watermark(_WATERMARK.unpack_from(mv, 0)[1])
    if code == CODE_END_OF_PARTITION:
        return END_OF_PARTITION
    et = _events_by_code.get(code)
    if et is None:
        raise ValueError(f"unknown stream element code {code}: register the event type in this process too")
    return et.decode(bytes(mv[1:]))


def is_data(element: Any) -> bool:
    """True for record batches (they take a buffer/credit); events do not."""
    return isinstance(element, RecordBatch)


# ---- checkpoint barriers ---------------------------------------------------------------------
_BARRIER = struct.Struct("<qqB")  # checkpoint id, timestamp, mode
_MODE_CODES = {CheckpointingMode.EXACTLY_ONCE: 0, CheckpointingMode.AT_LEAST_ONCE: 1}
_MODES = {v: k for k, v in _MODE_CODES.items()}
_SYNCHRONOUS = 0x80  # in the mode byte: a stop-with-savepoint's barrier


def _encode_barrier(b: CheckpointBarrier) -> bytes:
    mode = _MODE_CODES[CheckpointingMode(b.mode)] | (_SYNCHRONOUS if b.synchronous else 0)
    head = _BARRIER.pack(b.checkpoint_id, b.timestamp, mode)
    return head + b.target_location.encode() if b.target_location is not None else head


def _decode_barrier(body: bytes) -> CheckpointBarrier:
    if len(body) < _BARRIER.size:
        raise ValueError(f"corrupt checkpoint barrier: {len(body)} body bytes, expected at least {_BARRIER.size}")
    checkpoint_id, timestamp, mode = _BARRIER.unpack_from(body)
    try:
        target = body[_BARRIER.size:].decode() or None
        return CheckpointBarrier(checkpoint_id, timestamp, _MODES[mode & ~_SYNCHRONOUS], target, bool(mode & _SYNCHRONOUS))
    except KeyError:
        raise ValueError(f"corrupt checkpoint barrier: unknown checkpointing mode code {mode}") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"corrupt checkpoint barrier: target location is not UTF-8 ({e})") from None


register_event_type(CheckpointBarrier, CODE_CHECKPOINT_BARRIER, _encode_barrier, _decode_barrier)


def _decode_status(body: bytes) -> WatermarkStatus:
    if body not in (b"\x00", b"\x01"):
        raise ValueError(f"corrupt watermark status: {body!r}")
    return IDLE if body == b"\x01" else ACTIVE


register_event_type(WatermarkStatus, CODE_WATERMARK_STATUS, lambda s: b"\x01" if s.idle else b"\x00", _decode_status)
