"""Typed configuration options (Flink's ConfigOption and ConfigOptions builder).

Every configuration key Millrace reads is declared once, as a `ConfigOption[T]` in one of the
family modules of runtime.core.options (Flink's *Options classes): its key, its type (the one
parser of its values), its default, the deprecated keys read when it is absent, and what it does.
Code reads a value with `OPTION.get(config)`, never with `config.get("some.key")` and a parser of
its own, so a value means the same everywhere and a bad one fails the same way everywhere: a
ConfigurationError naming the key, the value and what is allowed.

    CHECKPOINTING_TIMEOUT = (
        ConfigOptions.key("execution.checkpointing.timeout").duration_type()
        .default_value(600_000).with_description("...")
    )
    timeout_ms = CHECKPOINTING_TIMEOUT.get(job_config)

A configuration is Flink's: a string -> string map (a JobGraph's config, a TaskDeploymentDescriptor's,
a PyFlink Configuration's contents). A value that is empty or only blanks counts as unset, as it
always did here. Values that are already of the option's type (an int, a bool) are accepted too:
a StreamGraph's config may hold them before they are written out as strings.
"""
from __future__ import annotations

import dataclasses
import enum
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from runtime.core.durations import format_duration_ms, parse_duration_ms
from runtime.core.errors import ConfigurationError

T = TypeVar("T")
U = TypeVar("U")
E = TypeVar("E", bound=enum.Enum)


class _BadValue(Exception):
    """A parser's complaint about a value; ConfigOption turns it into a ConfigurationError naming the key."""


# -- types: one parser (and one formatter, for the docs and for writing values) per kind ------------
@dataclass(frozen=True)
class OptionType(Generic[T]):
    """How an option's values are read from and written to a string configuration."""

    name: str  # for the reference docs: "Integer", "Duration", "Enum", ...
    parse: Callable[[Any], T]  # raises _BadValue with what is wrong and what is allowed
    format: Callable[[Any], str] = str
    allowed: str = ""  # what the docs say is accepted, when the name alone does not


def _text(raw: Any) -> str:
    return str(raw).strip()


def _parse_int(raw: Any) -> int:
    if isinstance(raw, bool):
        raise _BadValue(f"{raw!r} is not an integer")
    if isinstance(raw, int):
        return raw
    try:
        return int(_text(raw))
    except ValueError:
        raise _BadValue(f"{raw!r} is not an integer") from None


def _parse_float(raw: Any) -> float:
    if isinstance(raw, bool):
        raise _BadValue(f"{raw!r} is not a number")
    if isinstance(raw, (int, float)):
        return float(raw)
    try:
        value = float(_text(raw))
    except ValueError:
        raise _BadValue(f"{raw!r} is not a number") from None
    if not math.isfinite(value):
        raise _BadValue(f"{raw!r} is not a finite number")
    return value


# Flink reads only true/false; the spellings below were accepted by some of the readers this
# module replaced (env.log.propagate, state.changelog.enabled), so they stay accepted everywhere
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def _parse_bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = _text(raw).lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise _BadValue(f"expected true or false, got {raw!r}")


def _format_bool(value: Any) -> str:
    return "true" if value else "false"


def _parse_str(raw: Any) -> str:
    return _text(raw)


def _parse_duration(raw: Any, minus_one: bool) -> int:
    if minus_one and (raw == -1 or (isinstance(raw, str) and raw.strip() == "-1")):
        return -1
    try:
        return parse_duration_ms(raw if isinstance(raw, (int, float)) and not isinstance(raw, bool) else _text(raw))
    except ConfigurationError as e:
        raise _BadValue(str(e)) from None


def _format_duration(value: Any) -> str:
    return "-1" if value == -1 else format_duration_ms(int(value))


# Flink's MemorySize units (MemorySize.MemoryUnit); sizes are bytes
_MEMORY_UNITS: dict[str, int] = {}
for _names, _size in (
    (("", "b", "bytes"), 1),
    (("k", "kb", "kibibytes"), 1 << 10),
    (("m", "mb", "mebibytes"), 1 << 20),
    (("g", "gb", "gibibytes"), 1 << 30),
    (("t", "tb", "tebibytes"), 1 << 40),
):
    for _n in _names:
        _MEMORY_UNITS[_n] = _size
_MEMORY_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*([a-z]*)$")


def _parse_memory(raw: Any) -> int:
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    m = _MEMORY_RE.match(_text(raw).lower())
    if m is None or m.group(2) not in _MEMORY_UNITS:
        raise _BadValue(f"{raw!r} is not a memory size (e.g. '16 mb', '512 kb', '1 gb' or a number of bytes)")
    return int(float(m.group(1)) * _MEMORY_UNITS[m.group(2)])


def _format_memory(value: Any) -> str:
    for unit, size in (("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10)):
        if value and value % size == 0:
            return f"{value // size} {unit}"
    return f"{value} bytes"


def _norm(text: str) -> str:
    # enum spellings compare without case, '-' and '_' alike: AT_LEAST_ONCE, at-least-once
    return text.strip().lower().replace("_", "-")


def _enum_type(
    values: Sequence[str], convert: Callable[[str], Any], aliases: Mapping[str, str], what: str, format_value: Callable[[Any], str]
) -> OptionType[Any]:
    lookup = {_norm(v): v for v in values}
    lookup.update({_norm(a): v for a, v in aliases.items()})
    listed = ", ".join(values)
    allowed = listed + (f" (also accepted: {', '.join(aliases)})" if aliases else "")

    def parse(raw: Any) -> Any:
        if isinstance(raw, enum.Enum):
            raw = raw.value
        value = lookup.get(_norm(str(raw)))
        if value is None:
            raise _BadValue(f"unknown {what} {raw!r}; use one of {listed}")
        return convert(value)

    return OptionType("Enum", parse, format_value, allowed)


def _list_type(item: OptionType[U]) -> OptionType[list[U]]:
    def parse(raw: Any) -> list[U]:
        parts = list(raw) if isinstance(raw, (list, tuple)) else [p for p in _text(raw).split(";") if p.strip()]
        return [item.parse(p) for p in parts]

    def format_value(value: Any) -> str:
        return ";".join(item.format(v) for v in value)

    return OptionType(f"List<{item.name}>", parse, format_value, f"values separated by ';' ({item.allowed or item.name})")


# -- the option ------------------------------------------------------------------------------
@dataclass(frozen=True)
class ConfigOption(Generic[T]):
    """One configuration option (Flink's ConfigOption): key, type, default, deprecated keys, description.

    Immutable: `with_deprecated_keys`, `with_description` and `check` return a new option, as
    Flink's builder methods do. Declare options as module constants in a runtime.core.options
    family module; the registry (runtime.core.options.all_options) and the reference docs read them
    from there.
    """

    key: str
    type: OptionType[Any]
    default: T
    has_default: bool = True
    deprecated_keys: tuple[str, ...] = ()
    description: str = ""
    # rules a value must satisfy: (predicate, what it must be), checked by get() and validate()
    checks: tuple[tuple[Callable[[Any], bool], str], ...] = ()

    # building ----------------------------------------------------------------------------------
    def with_deprecated_keys(self, *keys: str) -> ConfigOption[T]:
        """Older keys, read (in this order) when `key` is absent (Flink: withDeprecatedKeys)."""
        return dataclasses.replace(self, deprecated_keys=self.deprecated_keys + tuple(keys))

    def with_description(self, description: str) -> ConfigOption[T]:
        return dataclasses.replace(self, description=" ".join(description.split()))

    def check(self, predicate: Callable[[Any], bool], must_be: str) -> ConfigOption[T]:
        """A rule every value must satisfy; a value that breaks it is rejected as
        "<key>: <value> is not allowed; it must be <must_be>"."""
        return dataclasses.replace(self, checks=self.checks + ((predicate, must_be),))

    # reading -----------------------------------------------------------------------------------
    def find(self, config: Mapping[str, Any]) -> tuple[str, Any] | None:
        """(the key it was found under, its raw value), or None when neither the key nor a
        deprecated key is set (blank values count as unset)."""
        for k in (self.key, *self.deprecated_keys):
            raw = config.get(k)
            if raw is None or (isinstance(raw, str) and not raw.strip()):
                continue
            return k, raw
        return None

    def is_set(self, config: Mapping[str, Any]) -> bool:
        return self.find(config) is not None

    def get(self, config: Mapping[str, Any]) -> T:
        """The value `config` sets (under the key or a deprecated one), else the default.

        Raises ConfigurationError naming the key, the bad value and what is allowed."""
        found = self.find(config)
        if found is None:
            return self.default
        return self.parse(found[1], found[0])

    def get_optional(self, config: Mapping[str, Any]) -> T | None:
        """The value `config` sets, or None when it sets none (the default is not applied)."""
        found = self.find(config)
        return None if found is None else self.parse(found[1], found[0])

    def parse(self, raw: Any, key: str | None = None) -> T:
        """One raw value of this option, parsed and checked (`key`: the key it was found under)."""
        name = key or self.key
        try:
            value = self.type.parse(raw)
        except _BadValue as e:
            raise ConfigurationError(f"{name}: {e}") from None
        return self.validate(value, name)

    def validate(self, value: Any, key: str | None = None) -> Any:
        """`value` if it satisfies every check of this option; ConfigurationError otherwise (also
        for values that come from code rather than a configuration, e.g. a settings model's field)."""
        for predicate, must_be in self.checks:
            ok = False
            try:
                ok = bool(predicate(value))
            except TypeError:  # e.g. a str compared with an int: not allowed either
                ok = False
            if not ok:
                raise ConfigurationError(f"{key or self.key}: {value!r} is not allowed; it must be {must_be}")
        return value

    # writing -----------------------------------------------------------------------------------
    def to_string(self, value: T) -> str:
        """`value` as this option's string form in a configuration (what get() reads back)."""
        return self.type.format(value)

    def default_string(self) -> str | None:
        """The default as the docs show it; None when the option has none."""
        return self.type.format(self.default) if self.has_default and self.default is not None else None


class TypedOptionBuilder(Generic[T]):
    """The second step of ConfigOptions.key(...): a type is chosen; a default (or none) ends it."""

    def __init__(self, key: str, option_type: OptionType[T]) -> None:
        self._key = key
        self._type = option_type

    def default_value(self, value: T) -> ConfigOption[T]:
        return ConfigOption(self._key, self._type, value)

    def no_default_value(self) -> ConfigOption[T | None]:
        return ConfigOption(self._key, self._type, None, has_default=False)

    def as_list(self) -> TypedOptionBuilder[list[T]]:
        """A list of values of this type, separated by ';' (Flink's ListConfigOption)."""
        return TypedOptionBuilder(self._key, _list_type(self._type))


class OptionBuilder:
    """The first step of ConfigOptions.key(...): pick the type (Flink's ConfigOptions.OptionBuilder)."""

    def __init__(self, key: str) -> None:
        if not key or key != key.strip():
            raise ValueError(f"an option key must be non-empty without surrounding blanks, got {key!r}")
        self._key = key

    def int_type(self) -> TypedOptionBuilder[int]:
        return TypedOptionBuilder(self._key, OptionType("Integer", _parse_int))

    def float_type(self) -> TypedOptionBuilder[float]:
        return TypedOptionBuilder(self._key, OptionType("Float", _parse_float, repr))

    def boolean_type(self) -> TypedOptionBuilder[bool]:
        return TypedOptionBuilder(self._key, OptionType("Boolean", _parse_bool, _format_bool, "true, false"))

    def string_type(self) -> TypedOptionBuilder[str]:
        return TypedOptionBuilder(self._key, OptionType("String", _parse_str))

    def duration_type(self, minus_one: bool = False) -> TypedOptionBuilder[int]:
        """A duration in milliseconds, in Flink's notation ("500 ms", "10 s", "1 min") or a bare
        number of milliseconds. `minus_one`: "-1" is also accepted (a switch-off the option documents)."""
        allowed = "'500 ms', '10 s', '1 min', '2 h' or milliseconds" + (", or -1" if minus_one else "")
        return TypedOptionBuilder(self._key, OptionType("Duration", lambda raw: _parse_duration(raw, minus_one), _format_duration, allowed))

    def memory_type(self) -> TypedOptionBuilder[int]:
        """A size in bytes, in Flink's notation ("64 mb", "512kb", "1 gb") or a bare number of bytes."""
        return TypedOptionBuilder(self._key, OptionType("MemorySize", _parse_memory, _format_memory, "'64 mb', '512 kb', '1 gb' or bytes"))

    def enum_type(self, values: Sequence[str], what: str = "value", aliases: Mapping[str, str] | None = None) -> TypedOptionBuilder[str]:
        """One of `values` (compared without case; '-' and '_' alike); `aliases` maps other
        accepted spellings to a value. `what` names the kind in errors ("unknown <what> 'x'")."""
        return TypedOptionBuilder(self._key, _enum_type(values, lambda v: v, aliases or {}, what, str))

    def enum_class(self, enum_cls: type[E], what: str = "value", aliases: Mapping[str, str] | None = None) -> TypedOptionBuilder[E]:
        """A member of `enum_cls`, spelled as its value (Flink's enumType)."""
        values = [str(m.value) for m in enum_cls]
        return TypedOptionBuilder(
            self._key, _enum_type(values, enum_cls, aliases or {}, what, lambda v: str(getattr(v, "value", v)))
        )


class ConfigOptions:
    """Flink's ConfigOptions: `ConfigOptions.key("a.b").int_type().default_value(1)`."""

    @staticmethod
    def key(key: str) -> OptionBuilder:
        return OptionBuilder(key)


__all__ = ["ConfigOption", "ConfigOptions", "OptionBuilder", "OptionType", "TypedOptionBuilder"]
