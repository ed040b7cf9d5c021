"""Keyed state: descriptors and the state interfaces user functions see (pyflink.datastream.state).

A descriptor names a state and says what kind it is; `RuntimeContext.get_state(descriptor)` (and
friends) return a state object bound to the current key of a keyed stream. The backends in
`runtime.state` implement these interfaces.
"""
from __future__ import annotations

import abc
from typing import Any, Callable, Generic, Iterable, Iterator, TypeVar

from runtime.api.datastream.functions import AggregateFunction, ReduceFunction

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

    def enable_time_to_live(self, ttl_config: Any) -> None:
        # Accepted for PyFlink parity; Millrace does not expire state yet (see module report).
        self.ttl_config = ttl_config

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


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


__all__ = [
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
