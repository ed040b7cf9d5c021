"""Keyed state: descriptors and the state interfaces user functions see (pyflink.datastream.state).

A descriptor names a state and says what kind it is; `RuntimeContext.get_state(descriptor)` (and
friends) return a state object bound to the current key of a keyed stream. The backends in
`runtime.state` implement these interfaces.
"""
from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from runtime.core.errors import InvalidProgramError
from runtime.core.functions import AggregateFunction, ReduceFunction
from runtime.core.time import to_millis

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")
IN = TypeVar("IN")
OUT = TypeVar("OUT")


# --------------------------------------------------------------------------- state interfaces
class State(abc.ABC):
    """Flink: org.apache.flink.api.common.state.State."""

    @abc.abstractmethod
    def clear(self) -> None:
        """Remove the value of the current key (and namespace)."""


class ValueState(State, Generic[T]):
    @abc.abstractmethod
    def value(self) -> T | None: ...

    @abc.abstractmethod
    def update(self, value: T) -> None: ...


class AppendingState(State, Generic[IN, OUT]):
    @abc.abstractmethod
    def get(self) -> OUT: ...

    @abc.abstractmethod
    def add(self, value: IN) -> None: ...


class MergingState(AppendingState[IN, OUT]):
    """An appending state whose namespaces can be merged (session windows)."""


class ListState(MergingState[T, Iterable[T]]):
    @abc.abstractmethod
    def update(self, values: list[T]) -> None: ...

    @abc.abstractmethod
    def add_all(self, values: list[T]) -> None: ...

    def __iter__(self) -> Iterator[T]:
        return iter(self.get())


class ReducingState(MergingState[T, T]):
    pass


class AggregatingState(MergingState[IN, OUT]):
    pass


class MapState(State, Generic[K, V]):
    @abc.abstractmethod
    def get(self, key: K) -> V | None: ...

    @abc.abstractmethod
    def put(self, key: K, value: V) -> None: ...

    @abc.abstractmethod
    def put_all(self, dict_value: dict[K, V]) -> None: ...

    @abc.abstractmethod
    def remove(self, key: K) -> None: ...

    @abc.abstractmethod
    def contains(self, key: K) -> bool: ...

    @abc.abstractmethod
    def items(self) -> Iterable[tuple[K, V]]: ...

    @abc.abstractmethod
    def keys(self) -> Iterable[K]: ...

    @abc.abstractmethod
    def values(self) -> Iterable[V]: ...

    @abc.abstractmethod
    def is_empty(self) -> bool: ...

    def __getitem__(self, key: K) -> V | None:
        return self.get(key)

    def __setitem__(self, key: K, value: V) -> None:
        self.put(key, value)

    def __delitem__(self, key: K) -> None:
        self.remove(key)

    def __contains__(self, key: K) -> bool:
        return self.contains(key)

    def __iter__(self) -> Iterator[K]:
        return iter(self.keys())


# --------------------------------------------------------------------------- descriptors
class StateKind:
    VALUE = "value"
    LIST = "list"
    MAP = "map"
    REDUCING = "reducing"
    AGGREGATING = "aggregating"


class StateDescriptor(abc.ABC):
    """Flink: StateDescriptor. `type_info` is kept for API parity; values are pickled."""

    kind: str = ""

    def __init__(self, name: str, type_info: Any = None) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("a state descriptor needs a non-empty name")
        self.name = name
        self.type_info = type_info
        self.ttl_config: Any = None

    def get_name(self) -> str:
        return self.name

    def enable_time_to_live(self, ttl_config: StateTtlConfig) -> None:
        """Entries of this state expire (Flink: StateDescriptor.enableTimeToLive)."""
        if not isinstance(ttl_config, StateTtlConfig):
            raise TypeError(f"enable_time_to_live() needs a StateTtlConfig, got {type(ttl_config).__name__}")
        self.ttl_config = ttl_config if ttl_config.is_enabled() else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class StateTtlConfig:
    """Flink's StateTtlConfig: keyed state entries expire `ttl` after their last update (or access).

    `StateTtlConfig.new_builder(Time.seconds(1)).set_update_type(...).set_state_visibility(...).build()`,
    then `descriptor.enable_time_to_live(config)`. Time is processing time (Flink's only TTL time).
    Value, reducing and aggregating states expire as a whole, every list element and map entry on
    its own. An expired entry is removed when it is read (runtime.state.ttl).
    """

    class UpdateType:
        Disabled = "Disabled"
        OnCreateAndWrite = "OnCreateAndWrite"
        OnReadAndWrite = "OnReadAndWrite"

    class StateVisibility:
        ReturnExpiredIfNotCleanedUp = "ReturnExpiredIfNotCleanedUp"
        NeverReturnExpired = "NeverReturnExpired"

    class TtlTimeCharacteristic:
        ProcessingTime = "ProcessingTime"

    def __init__(self, ttl_ms: int, update_type: str, visibility: str, cleanup_full_snapshot: bool = False) -> None:
        self.ttl_ms = ttl_ms
        self.update_type = update_type
        self.state_visibility = visibility
        self.cleanup_full_snapshot = cleanup_full_snapshot

    @staticmethod
    def new_builder(ttl: Any) -> StateTtlConfig.Builder:
        return StateTtlConfig.Builder(ttl)

    def is_enabled(self) -> bool:
        return self.update_type != StateTtlConfig.UpdateType.Disabled

    def get_ttl(self) -> int:
        return self.ttl_ms

    def get_update_type(self) -> str:
        return self.update_type

    def get_state_visibility(self) -> str:
        return self.state_visibility

    def __repr__(self) -> str:
        return f"StateTtlConfig(ttl={self.ttl_ms} ms, {self.update_type}, {self.state_visibility})"

    class Builder:
        def __init__(self, ttl: Any) -> None:

            ms = to_millis(ttl)
            if ms <= 0:
                raise ValueError(f"StateTtlConfig: the time to live must be positive, got {ttl!r}")
            self._ttl_ms = ms
            self._update = StateTtlConfig.UpdateType.OnCreateAndWrite  # Flink's defaults
            self._visibility = StateTtlConfig.StateVisibility.NeverReturnExpired
            self._full_snapshot = False

        def set_update_type(self, update_type: str) -> StateTtlConfig.Builder:
            if update_type not in vars(StateTtlConfig.UpdateType).values():
                raise ValueError(f"StateTtlConfig: unknown update type {update_type!r}")
            self._update = update_type
            return self

        def update_ttl_on_create_and_write(self) -> StateTtlConfig.Builder:
            return self.set_update_type(StateTtlConfig.UpdateType.OnCreateAndWrite)

        def update_ttl_on_read_and_write(self) -> StateTtlConfig.Builder:
            return self.set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)

        def set_state_visibility(self, visibility: str) -> StateTtlConfig.Builder:
            if visibility not in vars(StateTtlConfig.StateVisibility).values():
                raise ValueError(f"StateTtlConfig: unknown state visibility {visibility!r}")
            self._visibility = visibility
            return self

        def return_expired_if_not_cleaned_up(self) -> StateTtlConfig.Builder:
            return self.set_state_visibility(StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)

        def never_return_expired(self) -> StateTtlConfig.Builder:
            return self.set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired)

        def set_ttl_time_characteristic(self, characteristic: str) -> StateTtlConfig.Builder:
            if characteristic != StateTtlConfig.TtlTimeCharacteristic.ProcessingTime:
                raise ValueError(f"StateTtlConfig: only processing time is supported, got {characteristic!r}")
            return self

        def use_processing_time(self) -> StateTtlConfig.Builder:
            return self

        def cleanup_full_snapshot(self) -> StateTtlConfig.Builder:
            self._full_snapshot = True
            return self

        # background clean-up strategies: expired entries are removed on access here in any case
        def cleanup_incrementally(self, cleanup_size: int = 5, run_cleanup_for_every_record: bool = False) -> StateTtlConfig.Builder:
            return self

        def cleanup_in_rocksdb_compact_filter(self, query_time_after_num_entries: int = 1000, periodic_compaction_time: Any = None) -> StateTtlConfig.Builder:
            return self

        def disable_cleanup_in_background(self) -> StateTtlConfig.Builder:
            return self

        def set_ttl(self, ttl: Any) -> StateTtlConfig.Builder:

            self._ttl_ms = to_millis(ttl)
            return self

        def build(self) -> StateTtlConfig:
            return StateTtlConfig(self._ttl_ms, self._update, self._visibility, self._full_snapshot)


class ValueStateDescriptor(StateDescriptor):
    kind = StateKind.VALUE

    def __init__(self, name: str, value_type_info: Any = None) -> None:
        super().__init__(name, value_type_info)


class ListStateDescriptor(StateDescriptor):
    kind = StateKind.LIST

    def __init__(self, name: str, elem_type_info: Any = None) -> None:
        super().__init__(name, elem_type_info)


class MapStateDescriptor(StateDescriptor):
    kind = StateKind.MAP

    def __init__(self, name: str, key_type_info: Any = None, value_type_info: Any = None) -> None:
        super().__init__(name, (key_type_info, value_type_info))
        self.key_type_info = key_type_info
        self.value_type_info = value_type_info


def _as_reduce_callable(fn: Any) -> Callable[[Any, Any], Any]:
    if isinstance(fn, ReduceFunction) or (hasattr(fn, "reduce") and callable(fn.reduce)):
        return fn.reduce
    if callable(fn):
        return fn
    raise TypeError(f"reduce_function must be a ReduceFunction or a callable, not {type(fn).__name__}")


class ReducingStateDescriptor(StateDescriptor):
    kind = StateKind.REDUCING

    def __init__(self, name: str, reduce_function: Any, type_info: Any = None) -> None:
        super().__init__(name, type_info)
        self.reduce_function = reduce_function
        self.reduce: Callable[[Any, Any], Any] = _as_reduce_callable(reduce_function)

    def get_reduce_function(self) -> Any:
        return self.reduce_function


class AggregatingStateDescriptor(StateDescriptor):
    kind = StateKind.AGGREGATING

    def __init__(self, name: str, agg_function: AggregateFunction, state_type_info: Any = None) -> None:
        super().__init__(name, state_type_info)
        for m in ("create_accumulator", "add", "get_result"):
            if not callable(getattr(agg_function, m, None)):
                raise TypeError(f"aggregate function {agg_function!r} lacks {m}()")
        self.agg_function = agg_function

    def get_agg_function(self) -> AggregateFunction:
        return self.agg_function


# -- broadcast state (the broadcast state pattern: runtime.api.operators.broadcast) ---------------


class ReadOnlyBroadcastState:
    """PyFlink's ReadOnlyBroadcastState: a map to read."""

    __slots__ = ("_name", "_d")

    def __init__(self, name: str, d: dict[Any, Any]) -> None:
        self._name, self._d = name, d

    def get(self, key: Any) -> Any:
        return self._d.get(key)

    def contains(self, key: Any) -> bool:
        return key in self._d

    def items(self) -> list[tuple[Any, Any]]:
        return list(self._d.items())

    def keys(self) -> list[Any]:
        return list(self._d)

    def values(self) -> list[Any]:
        return list(self._d.values())

    def is_empty(self) -> bool:
        return not self._d

    def __getitem__(self, key: Any) -> Any:
        return self._d[key]

    def __contains__(self, key: Any) -> bool:
        return key in self._d

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._d))

    def _refuse(self, *_: Any) -> None:
        raise InvalidProgramError(
            f"broadcast state {self._name!r} is read-only in process_element: only process_broadcast_element "
            "may change it (every parallel instance must keep the same broadcast state)"
        )

    put = put_all = remove = clear = __setitem__ = __delitem__ = _refuse


class BroadcastState(ReadOnlyBroadcastState):
    """PyFlink's BroadcastState: the writable view on the broadcast side."""

    __slots__ = ()

    def put(self, key: Any, value: Any) -> None:
        self._d[key] = value

    def put_all(self, dict_value: dict[Any, Any]) -> None:
        self._d.update(dict_value)

    def remove(self, key: Any) -> None:
        self._d.pop(key, None)

    def clear(self) -> None:
        self._d.clear()

    def __setitem__(self, key: Any, value: Any) -> None:
        self._d[key] = value

    def __delitem__(self, key: Any) -> None:
        del self._d[key]



__all__ = [
    "BroadcastState",
    "ReadOnlyBroadcastState",
    "State",
    "ValueState",
    "AppendingState",
    "MergingState",
    "ListState",
    "ReducingState",
    "AggregatingState",
    "MapState",
    "StateKind",
    "StateDescriptor",
    "ValueStateDescriptor",
    "ListStateDescriptor",
    "MapStateDescriptor",
    "ReducingStateDescriptor",
    "AggregatingStateDescriptor",
]
