"""Stable, decodable byte encodings of keys and namespaces, and value (de)serialization.

RocksDB orders and finds entries by their key bytes, so equal keys must always encode to equal
bytes (pickle does not promise that for every type: it memoizes, and 1 and True differ) and the
encoding must be self-delimiting so (key, namespace, user key) can be concatenated and split.
Common key types get a compact tagged encoding; anything else (e.g. window namespaces, which are
frozen dataclasses of ints) falls back to pickle, which is deterministic for such values.
"""
from __future__ import annotations

import io
import pickle
import struct
from collections.abc import Callable
from typing import Any, ClassVar

from runtime.core.row import Row, is_plain_row

_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")
_U32 = struct.Struct(">I")


def _enc(obj: Any, out: bytearray) -> None:
    if obj is None:
        out += b"N"
    elif obj is True:
        out += b"T"
    elif obj is False:
        out += b"F"
    elif type(obj) is int:
        if -(1 << 63) <= obj < (1 << 63):
            out += b"i"
            out += _I64.pack(obj)
        else:
            s = str(obj).encode()
            out += b"I"
            out += _U32.pack(len(s))
            out += s
    elif type(obj) is str:
        b = obj.encode("utf-8")
        out += b"s"
        out += _U32.pack(len(b))
        out += b
    elif type(obj) is float:
        out += b"f"
        out += _F64.pack(obj)
    elif type(obj) is bytes:
        out += b"b"
        out += _U32.pack(len(obj))
        out += obj
    elif type(obj) is tuple:
        out += b"t"
        out += _U32.pack(len(obj))
        for v in obj:
            _enc(v, out)
    elif is_plain_row(obj):
        out += b"R"
        _enc(obj.field_names, out)
        _enc(tuple(obj._values), out)
    else:
        p = pickle.dumps(obj, protocol=4)
        out += b"p"
        out += _U32.pack(len(p))
        out += p


def _dec(buf: bytes, pos: int) -> tuple[Any, int]:
    tag = buf[pos : pos + 1]
    pos += 1
    if tag == b"N":
        return None, pos
    if tag == b"T":
        return True, pos
    if tag == b"F":
        return False, pos
    if tag == b"i":
        return _I64.unpack_from(buf, pos)[0], pos + 8
    if tag == b"f":
        return _F64.unpack_from(buf, pos)[0], pos + 8
    if tag in (b"s", b"b", b"I", b"p"):
        (n,) = _U32.unpack_from(buf, pos)
        pos += 4
        raw = buf[pos : pos + n]
        pos += n
        if tag == b"s":
            return raw.decode("utf-8"), pos
        if tag == b"b":
            return bytes(raw), pos
        if tag == b"I":
            return int(raw), pos
        return loads_state(raw), pos
    if tag == b"t":
        (n,) = _U32.unpack_from(buf, pos)
        pos += 4
        items = []
        for _ in range(n):
            v, pos = _dec(buf, pos)
            items.append(v)
        return tuple(items), pos
    if tag == b"R":
        fields, pos = _dec(buf, pos)
        values, pos = _dec(buf, pos)
        return Row.of(fields, values), pos
    raise ValueError(f"corrupt state key encoding: unknown tag {tag!r} at {pos - 1}")


def encode_key(obj: Any) -> bytes:
    """Self-delimiting, deterministic encoding of a key, namespace or map key."""
    out = bytearray()
    _enc(obj, out)
    return bytes(out)


def decode_key(buf: bytes, pos: int = 0) -> tuple[Any, int]:
    """Decode one value encoded by `encode_key` starting at `pos`; returns (value, next pos)."""
    return _dec(buf, pos)


def dumps_value(value: Any) -> bytes:
    """Values are pickled; cloudpickle covers user objects plain pickle refuses (lambdas...)."""
    try:
        return pickle.dumps(value, protocol=5)
    except (pickle.PicklingError, AttributeError, TypeError):
        import cloudpickle

        return cloudpickle.dumps(value, protocol=5)


def loads_value(data: bytes) -> Any:
    return loads_state(data)


# --------------------------------------------------------------------------- older state formats
class _LegacyTimeWindow:
    """What an old pickle of TimeWindow builds first: until d8b5750 TimeWindow was a frozen slots
    dataclass, pickled as "create without arguments, then __setstate__([start, end])", which the
    tuple-based TimeWindow cannot take. Replaced by a real TimeWindow as soon as it is built."""

    __slots__ = ("start", "end")

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):  # (dict, slots)
            state = [state[1]["start"], state[1]["end"]]
        self.start, self.end = state


# the pure-Python unpickler's handler of BUILD (its load_build, which typeshed does not declare)
_LOAD_BUILD: Callable[[Any], None] = pickle._Unpickler.dispatch[pickle.BUILD[0]]


class _CompatUnpickler(pickle._Unpickler):
    """The pure-Python unpickler with old TimeWindows turned into new ones (only used when the fast
    one fails on such a pickle: checkpoints and savepoints written by earlier versions)."""

    # the pure-Python unpickler's own attributes, which typeshed does not declare
    stack: list[Any]
    memo: dict[int, Any]
    # typeshed types the handlers as taking the C Unpickler; they take this (pure-Python) one
    dispatch: ClassVar[dict[int, Callable[[Any], None]]] = dict(pickle._Unpickler.dispatch)

    def find_class(self, module: str, name: str) -> Any:
        if module == "runtime.api.datastream.window" and name == "TimeWindow":
            return _LegacyTimeWindow
        return super().find_class(module, name)

    def _load_build(self) -> None:
        _LOAD_BUILD(self)
        built = self.stack[-1]
        if type(built) is _LegacyTimeWindow:
            from runtime.core.windows import TimeWindow

            window = TimeWindow(built.start, built.end)
            self.stack[-1] = window
            for k, v in list(self.memo.items()):  # later references to the same object
                if v is built:
                    self.memo[k] = window

    dispatch[pickle.BUILD[0]] = _load_build


def loads_state(data: bytes) -> Any:
    """pickle.loads for state (keys, namespaces, values, timers), also of state written by earlier
    versions whose pickles no longer load as they are (see _LegacyTimeWindow)."""
    try:
        return pickle.loads(data)
    except TypeError as e:
        if "TimeWindow.__new__" not in str(e):
            raise
        return _CompatUnpickler(io.BytesIO(data)).load()
