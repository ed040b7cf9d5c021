"""Configuration and RuntimeExecutionMode, mirroring PyFlink (pyflink.common.Configuration)."""
from __future__ import annotations

import builtins
from typing import Any, TypeVar

from runtime.core.config_options import ConfigOption
from runtime.core.execution_modes import RuntimeExecutionMode  # noqa: F401 - PyFlink's name lives here

T = TypeVar("T")


class Configuration:
    """String key/value configuration. Values are stored as strings like Flink's Configuration.

    Besides PyFlink's string-keyed getters, `get(option)` / `set(option, value)` read and write a
    typed ConfigOption the way Flink's Java Configuration does (one parser: the option's).
    """

    def __init__(self, other: Configuration | dict[str, Any] | None = None) -> None:
        self._data: dict[str, str] = {}
        if other is not None:
            self.add_all(other)

    def get_string(self, key: str, default_value: str | None = None) -> str | None:
        return self._data.get(key, default_value)

    def set_string(self, key: str, value: str) -> Configuration:
        self._data[key] = str(value)
        return self

    def get_integer(self, key: str, default_value: int | None = None) -> int | None:
        v = self._data.get(key)
        return default_value if v is None else int(v)

    def set_integer(self, key: str, value: int) -> Configuration:
        self._data[key] = str(int(value))
        return self

    def get_float(self, key: str, default_value: float | None = None) -> float | None:
        v = self._data.get(key)
        return default_value if v is None else float(v)

    def set_float(self, key: str, value: float) -> Configuration:
        self._data[key] = str(float(value))
        return self

    def get_boolean(self, key: str, default_value: bool | None = None) -> bool | None:
        v = self._data.get(key)
        return default_value if v is None else v.strip().lower() == "true"

    def set_boolean(self, key: str, value: bool) -> Configuration:
        self._data[key] = "true" if value else "false"
        return self

    def get(self, option: ConfigOption[T]) -> T:
        """The option's value (under its key or a deprecated one), else its default; ConfigurationError
        naming the key when the stored value is malformed."""
        return option.get(self._data)

    def set(self, option: ConfigOption[T], value: T) -> Configuration:
        """Store `value` under the option's key, in the option's string form."""
        self._data[option.key] = option.to_string(value)
        return self

    def key_set(self) -> builtins.set[str]:  # builtins: `set` in this class body is the method above
        return set(self._data)

    def contains_key(self, key: str) -> bool:
        return key in self._data

    def remove_config(self, key: str) -> bool:
        return self._data.pop(key, None) is not None

    def add_all(self, other: Configuration | dict[str, Any]) -> Configuration:
        items = other.to_dict() if isinstance(other, Configuration) else other
        for k, v in items.items():
            self._data[k] = ("true" if v else "false") if isinstance(v, bool) else str(v)
        return self

    def to_dict(self) -> dict[str, str]:
        return dict(self._data)

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Configuration) and other._data == self._data

    def __repr__(self) -> str:
        return f"Configuration({self._data})"
