"""What PyFlink 2.3.0's print() writes for a record, by the stream's type (golden outputs from the
real thing: tests/golden/pyflink_print).

PyFlink turns records into text in one of two places (DataStream._align_output_type):
- a ROW or ROW_NAMED stream, in Python: `'+I[' + ','.join(str(field)) + ']'`, each field as Python
  shows the value PyFlink's coders hand back: nested rows as `Row(f0=1, f1='x')` (the type's field
  names), FLOAT fields widened from 32 bits (`0.10000000149011612`), maps in Java HashMap order;
- an untyped stream (pickled objects), in Python: `str(value)` (a Row without names `<Row(1, 'a')>`);
- every other type (TUPLE, BOOLEAN, DOUBLE, FLOAT, STRING, MAP, ...), in Java, the record's
  `toString()`: Tuple `(1,a,true)`, Boolean `true`, `Double.toString` `1.0E20`, a nested Row
  `+I[1, x]`, Map `{k=v}`, null `null`.

Millrace's records are the Python values themselves, so both are emulated here from the declared type.
"""
from __future__ import annotations

import datetime
import math
import struct
from collections.abc import Callable, Sequence
from typing import Any

from runtime.api.common.typeinfo import (
    BasicTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    PickledBytesTypeInfo,
    RowTypeInfo,
    TupleTypeInfo,
    TypeInformation,
)
from runtime.core.row import Row

Formatter = Callable[[Any], str]


def formatter_for(type_info: TypeInformation | None) -> Formatter:
    """How print() shows each record of a stream of `type_info` (None: untyped)."""
    if type_info is None or isinstance(type_info, PickledBytesTypeInfo):
        return _python_str
    if isinstance(type_info, RowTypeInfo):
        return lambda v: _python_row_text(v, type_info)
    return lambda v: java_string(v, type_info)


def _python_str(v: Any) -> str:
    return v if isinstance(v, str) else str(v)


def _python_row_text(v: Any, t: RowTypeInfo) -> str:
    """PyFlink's `'{}[{}]'.format(row.get_row_kind(), ','.join(str(item) ...))`; every Millrace Row is an insert."""
    if not isinstance(v, (Row, tuple, list)):
        return str(v)
    fields = [_as_python(x, ft) for x, ft in zip(v, _field_types(t, len(v)))]
    return "+I[" + ",".join(str(x) for x in fields) + "]"


def _field_types(t: RowTypeInfo | TupleTypeInfo, n: int) -> Sequence[TypeInformation | None]:
    types: list[TypeInformation | None] = list(t.field_types)
    return types + [None] * (n - len(types))


# -- the Python side: the value PyFlink's coder gives back for a declared type ---------------------

def _as_python(v: Any, t: TypeInformation | None) -> Any:
    if v is None or t is None:
        return v
    if isinstance(t, RowTypeInfo) and isinstance(v, (Row, tuple, list)):
        names = t.get_field_names() or []
        return Row.of(tuple(names[: len(v)]), [_as_python(x, ft) for x, ft in zip(v, _field_types(t, len(v)))])
    if isinstance(t, TupleTypeInfo) and isinstance(v, (Row, tuple, list)):
        return tuple(_as_python(x, ft) for x, ft in zip(v, _field_types(t, len(v))))
    if isinstance(t, MapTypeInfo) and isinstance(v, dict):
        items = [(_as_python(k, t.key_type), _as_python(x, t.value_type)) for k, x in v.items()]
        return dict(java_hash_map_order(items, t.key_type))
    if isinstance(t, ListTypeInfo) and isinstance(v, (list, tuple)):
        return [_as_python(x, t.element_type) for x in v]
    if isinstance(t, BasicTypeInfo) and _is_number(v):
        if t.name == "FLOAT":
            return _to_float32(float(v))
        if t.name == "DOUBLE":
            return float(v)
    return v


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _to_float32(v: float) -> float:
    """The nearest 32-bit float (Java's (float) cast): beyond its range, an infinity."""
    try:
        return struct.unpack("<f", struct.pack("<f", v))[0]
    except OverflowError:
        return math.copysign(math.inf, v)


# -- the Java side: toString() of the Java object a value becomes ---------------------------------

def java_string(v: Any, t: TypeInformation | None = None) -> str:
    """`String.valueOf` of the Java object `v` is as a `t` (untyped parts: guessed from the value)."""
    if v is None:
        return "null"
    if isinstance(t, RowTypeInfo) or (t is None and isinstance(v, Row)):
        if isinstance(v, (Row, tuple, list)):  # Flink's Row.toString (RowUtils.deepToStringRow)
            types = _field_types(t, len(v)) if t is not None else [None] * len(v)
            return "+I[" + ", ".join(java_string(x, ft) for x, ft in zip(v, types)) + "]"
    if isinstance(t, TupleTypeInfo) and isinstance(v, (Row, tuple, list)):  # Tuple.toString: no spaces
        return "(" + ",".join(java_string(x, ft) for x, ft in zip(v, _field_types(t, len(v)))) + ")"
    if isinstance(t, MapTypeInfo) and isinstance(v, dict):  # AbstractMap.toString, HashMap's order
        items = java_hash_map_order(list(v.items()), t.key_type)
        return "{" + ", ".join(f"{java_string(k, t.key_type)}={java_string(x, t.value_type)}" for k, x in items) + "}"
    if isinstance(t, ListTypeInfo) and isinstance(v, (list, tuple)):  # List.toString / Arrays.toString
        return "[" + ", ".join(java_string(x, t.element_type) for x in v) + "]"
    if isinstance(t, BasicTypeInfo):
        return _java_basic(v, t.name)
    return _java_untyped(v)


def _java_basic(v: Any, name: str) -> str:
    if name == "BOOLEAN" and isinstance(v, bool):
        return "true" if v else "false"
    if name == "DOUBLE" and _is_number(v):
        return java_double(float(v))
    if name == "FLOAT" and _is_number(v):
        return java_float(float(v))
    if name == "SQL_TIMESTAMP" and isinstance(v, datetime.datetime):  # java.sql.Timestamp.toString
        nanos = f"{v.microsecond * 1000:09d}".rstrip("0") or "0"
        return f"{v:%Y-%m-%d %H:%M:%S}.{nanos}"
    if name == "SQL_TIME" and isinstance(v, (datetime.time, datetime.datetime)):  # java.sql.Time: seconds
        return f"{v:%H:%M:%S}"
    if name == "SQL_DATE" and isinstance(v, datetime.date):
        return f"{v:%Y-%m-%d}"
    return _java_untyped(v)


def _java_untyped(v: Any) -> str:
    """A value without a declared type, as Java would show the object it is closest to."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return java_double(v)
    if isinstance(v, Row):
        return java_string(v, None)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_java_untyped(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_java_untyped(k)}={_java_untyped(x)}" for k, x in v.items()) + "}"
    return str(v)


# -- Double.toString and Float.toString of Java 17 (jdk.internal.math.FloatingDecimal) -------------
# Java 17 (PyFlink 2.3.0's) does not always print the shortest digits: Double.toString(1e23) is
# "9.999999999999999E22", Float.toString(2^53) "9.0071993E15". Java 19 changed the algorithm
# (Raffaello Giulietti's Ryu-like one), so this follows FloatingDecimal.BinaryToASCIIBuffer.dtoa.

_EXP_SHIFT = 52  # bits of a double's fraction
_FLOAT_EXP_SHIFT = 23
# FloatingDecimal.insignificantDigitsNumber: decimal digits an integral value's low binary digits cannot tell
_INSIGNIFICANT_DIGITS = (
    0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 8, 8, 8, 9, 9, 9, 9,
    10, 10, 10, 11, 11, 11, 12, 12, 12, 12, 13, 13, 13, 14, 14, 14, 15, 15, 15, 15, 16, 16, 16, 17, 17, 17,
    18, 18, 18, 19,
)
# FloatingDecimal.N_5_BITS: about ceil(log2(5^i)) for the 27 powers of 5 a long holds
_N_5_BITS = (0, 3, 5, 7, 10, 12, 14, 17, 19, 21, 24, 26, 28, 31, 33, 35, 38, 40, 42, 45, 47, 49, 52, 54, 56, 59, 61)


def java_double(v: float) -> str:
    """Double.toString: '1.0', '0.001', '1.0E7', '1.0E-5', 'NaN', '-Infinity', '4.9E-324'."""
    special = _java_special(v)
    if special is not None:
        return special
    bits = struct.unpack("<Q", struct.pack("<d", v))[0]
    fract, bin_exp = bits & ((1 << _EXP_SHIFT) - 1), (bits >> _EXP_SHIFT) & 0x7FF
    if bin_exp == 0:  # subnormal: normalize, fewer significant bits
        shift = _EXP_SHIFT + 1 - fract.bit_length()
        fract, bin_exp, significant = fract << shift, 1 - shift, fract.bit_length()
    else:
        fract, significant = fract | (1 << _EXP_SHIFT), _EXP_SHIFT + 1
    return _java_notation(v < 0, *_dtoa(bin_exp - 1023, fract, significant))


def java_float(v: float) -> str:
    """Float.toString of the nearest 32-bit float: '0.1', '1.0E20', '1.23456792E8'."""
    f = _to_float32(v)
    special = _java_special(f)
    if special is not None:
        return special
    bits = struct.unpack("<I", struct.pack("<f", f))[0]
    fract, bin_exp = bits & ((1 << _FLOAT_EXP_SHIFT) - 1), (bits >> _FLOAT_EXP_SHIFT) & 0xFF
    if bin_exp == 0:
        shift = _FLOAT_EXP_SHIFT + 1 - fract.bit_length()
        fract, bin_exp, significant = fract << shift, 1 - shift, fract.bit_length()
    else:
        fract, significant = fract | (1 << _FLOAT_EXP_SHIFT), _FLOAT_EXP_SHIFT + 1
    return _java_notation(f < 0, *_dtoa(bin_exp - 127, fract << (_EXP_SHIFT - _FLOAT_EXP_SHIFT), significant))


def _java_special(v: float) -> str | None:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0:
        return "-0.0" if math.copysign(1.0, v) < 0 else "0.0"
    return None


def _wrap(v: int, bits: int) -> int:
    """Java's int (32) or long (64) arithmetic: two's complement overflow."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _dtoa(bin_exp: int, fract_bits: int, n_significant_bits: int) -> tuple[str, int]:
    """FloatingDecimal.BinaryToASCIIBuffer.dtoa: the digits and decimal exponent (0.DIGITS x 10^exp) of
    fract_bits x 2^(bin_exp - 52), fract_bits with its high bit at 2^52 (Java 17, compatible format)."""
    tail_zeros = (fract_bits & -fract_bits).bit_length() - 1
    n_fract_bits = _EXP_SHIFT + 1 - tail_zeros
    n_tiny_bits = max(0, n_fract_bits - bin_exp - 1)  # significant bits right of the point
    if -21 <= bin_exp <= 62 and n_tiny_bits == 0 and n_fract_bits < 64:
        # the easy case: an integral value in a long prints its digits, less the insignificant ones
        p2 = bin_exp - n_significant_bits - 1
        insignificant = _INSIGNIFICANT_DIGITS[p2] if bin_exp > n_significant_bits and 1 < p2 < len(_INSIGNIFICANT_DIGITS) else 0
        value = fract_bits << (bin_exp - _EXP_SHIFT) if bin_exp >= _EXP_SHIFT else fract_bits >> (_EXP_SHIFT - bin_exp)
        dec_exp = 0
        if insignificant:
            pow10 = 10 ** insignificant
            value, residue = divmod(value, pow10)
            dec_exp = insignificant
            if residue >= pow10 >> 1:
                value += 1
        value_digits = str(value)
        return value_digits.rstrip("0"), dec_exp + len(value_digits)
    dec_exp = _estimate_dec_exp(fract_bits, bin_exp)
    b5 = max(0, -dec_exp)
    b2 = b5 + n_tiny_bits + bin_exp
    s5 = max(0, dec_exp)
    s2 = s5 + n_tiny_bits
    m5, m2 = b5, b2 - n_significant_bits
    fract_bits >>= tail_zeros
    b2 -= n_fract_bits - 1
    common = min(b2, s2)
    b2, s2, m2 = b2 - common, s2 - common, m2 - common
    if n_fract_bits == 1:  # an exact power of two: the next smaller value is half as far
        m2 -= 1
    if m2 < 0:
        b2, s2, m2 = b2 - m2, s2 - m2, 0
    b_bits = n_fract_bits + b2 + (_N_5_BITS[b5] if b5 < len(_N_5_BITS) else b5 * 3)
    ten_s_bits = s2 + 1 + (_N_5_BITS[s5 + 1] if s5 + 1 < len(_N_5_BITS) else (s5 + 1) * 3)
    digits: list[int] = []
    if b_bits < 64 and ten_s_bits < 64:  # Java's int or long arithmetic, overflow included
        width = 32 if b_bits < 32 and ten_s_bits < 32 else 64
        b, s, m = (fract_bits * 5 ** b5) << b2, 5 ** s5 << s2, 5 ** m5 << m2
        tens = s * 10
        q, b = divmod(b, s)
        b *= 10
        m = _wrap(m * 10, width)
        low, high = b < m, _wrap(b + m, width) > tens
        if q == 0 and not high:
            dec_exp -= 1  # the estimate was one too high
        else:
            digits.append(q)
        if dec_exp < -3 or dec_exp >= 8:  # E-form needs a digit after the point: go on
            low = high = False
        while not low and not high:
            q, b = divmod(b, s)
            b *= 10
            m = _wrap(m * 10, width)
            if m > 0:
                low, high = b < m, _wrap(b + m, width) > tens
            else:  # m overflowed: certainly past b
                low = high = True
            digits.append(q)
        low_digit_difference = _wrap((b << 1) - tens, width)
    else:  # FDBigInteger arithmetic: note high is B + M >= 10S here, > in the branches above
        big_b, big_s = (fract_bits * 5 ** b5) << b2, 5 ** s5 << s2
        big_m, ten_s = 5 ** (m5 + 1) << (m2 + 1), 5 ** (s5 + 1) << (s2 + 1)
        q, big_b = divmod(big_b, big_s)
        big_b *= 10
        low, high = big_b < big_m, ten_s <= big_b + big_m
        if q == 0 and not high:
            dec_exp -= 1
        else:
            digits.append(q)
        if dec_exp < -3 or dec_exp >= 8:
            low = high = False
        while not low and not high:
            q, big_b = divmod(big_b, big_s)
            big_b *= 10
            big_m *= 10
            low, high = big_b < big_m, ten_s <= big_b + big_m
            digits.append(q)
        low_digit_difference = ((big_b << 1) > ten_s) - ((big_b << 1) < ten_s) if high and low else 0
    dec_exponent = dec_exp + 1
    if high and (not low or low_digit_difference > 0 or (low_digit_difference == 0 and digits[-1] & 1)):
        dec_exponent += _round_up(digits)
    return "".join(map(str, digits)), dec_exponent


def _round_up(digits: list[int]) -> int:
    """FloatingDecimal.roundup: add one to the last digit; 1 when it carried out of the first."""
    i = len(digits) - 1
    while digits[i] == 9 and i > 0:
        digits[i] = 0
        i -= 1
    if digits[i] == 9:
        digits[0] = 1
        return 1
    digits[i] += 1
    return 0


def _estimate_dec_exp(fract_bits: int, bin_exp: int) -> int:
    """FloatingDecimal.estimateDecExp: floor(log10) from the mantissa, in the same double arithmetic."""
    d2 = struct.unpack("<d", struct.pack("<Q", (1023 << _EXP_SHIFT) | (fract_bits & ((1 << _EXP_SHIFT) - 1))))[0]
    d = (d2 - 1.5) * 0.289529654 + 0.176091259 + float(bin_exp) * 0.301029995663981
    return math.floor(d)


def _java_notation(negative: bool, digits: str, dec_exp: int) -> str:
    """FloatingDecimal.getChars for the value 0.DIGITS x 10^dec_exp."""
    sign = "-" if negative else ""
    if 0 < dec_exp < 8:  # plain: 1234.5, 1.0, 1000000.0
        whole = digits[:dec_exp].ljust(dec_exp, "0")
        return f"{sign}{whole}.{digits[dec_exp:] or '0'}"
    if -3 < dec_exp <= 0:  # 0.001 .. 0.999
        return f"{sign}0.{'0' * -dec_exp}{digits}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{dec_exp - 1}"


# -- java.util.HashMap's iteration order -----------------------------------------------------------

def java_hash_map_order(items: list[tuple[Any, Any]], key_type: TypeInformation | None) -> list[tuple[Any, Any]]:
    """The entries in the order a java.util.HashMap built from them iterates: by bucket of the key's
    spread hashCode, ties in insertion order. PyFlink's maps are built from the Python dict in reverse
    (Pyrolite's SETITEMS), so equal buckets come out last key first, as measured against PyFlink.
    Keys without a known Java hashCode keep the dict's order."""
    maybe_hashes = [_java_hash_code(k, key_type) for k, _ in items]
    hashes = [h for h in maybe_hashes if h is not None]
    if len(hashes) != len(maybe_hashes):
        return items
    inserted = list(reversed(range(len(items))))
    capacity = 16  # HashMap's default table, doubled past the 0.75 load factor
    while len(items) > capacity * 0.75:
        capacity *= 2

    def bucket(i: int) -> int:
        h = hashes[i] & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    position = {i: n for n, i in enumerate(inserted)}
    return [items[i] for i in sorted(inserted, key=lambda i: (bucket(i), position[i]))]


def _java_hash_code(k: Any, t: TypeInformation | None) -> int | None:
    name = t.name if isinstance(t, BasicTypeInfo) else None
    if isinstance(k, bool):
        return 1231 if k else 1237  # Boolean.hashCode
    if isinstance(k, str):  # String.hashCode over UTF-16 code units
        h = 0
        data = k.encode("utf-16-be")
        for i in range(0, len(data), 2):
            h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
        return h
    if isinstance(k, int):
        if name == "LONG" or not -(2 ** 31) <= k < 2 ** 31:  # Long.hashCode: (int)(v ^ (v >>> 32))
            bits = k & 0xFFFFFFFFFFFFFFFF
            return (bits ^ (bits >> 32)) & 0xFFFFFFFF
        return k & 0xFFFFFFFF  # Integer, Short, Byte: the value
    if isinstance(k, float):
        if name == "FLOAT":  # Float.hashCode: floatToIntBits
            return struct.unpack("<I", struct.pack("<f", _to_float32(k) if not math.isnan(k) else math.nan))[0]
        bits = struct.unpack("<Q", struct.pack("<d", k if not math.isnan(k) else math.nan))[0]
        return (bits ^ (bits >> 32)) & 0xFFFFFFFF  # Double.hashCode
    return None
