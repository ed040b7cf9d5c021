"""User function protocols, mirroring pyflink.datastream.functions.

Plain callables are accepted wherever PyFlink accepts them; the API wraps them in these classes.
"""
from __future__ import annotations

import abc
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

IN = TypeVar("IN")
OUT = TypeVar("OUT")
KEY = TypeVar("KEY")
ACC = TypeVar("ACC")
W = TypeVar("W")
# the window type of ProcessWindowFunction.Context: a class nested in a generic class needs a
# type variable of its own (the outer class's W is already bound inside its body)
CW = TypeVar("CW")


class RuntimeContext(abc.ABC):
    """What a rich function sees at open(): subtask info and (on keyed streams) keyed state."""

    @abc.abstractmethod
    def get_task_name(self) -> str: ...

    @abc.abstractmethod
    def get_number_of_parallel_subtasks(self) -> int: ...

    @abc.abstractmethod
    def get_max_number_of_parallel_subtasks(self) -> int: ...

    @abc.abstractmethod
    def get_index_of_this_subtask(self) -> int: ...

    @abc.abstractmethod
    def get_attempt_number(self) -> int: ...

    @abc.abstractmethod
    def get_task_name_with_subtasks(self) -> str: ...

    @abc.abstractmethod
    def get_job_parameter(self, key: str, default_value: str | None = None) -> str | None: ...

    @abc.abstractmethod
    def get_state(self, state_descriptor: Any) -> Any: ...

    @abc.abstractmethod
    def get_list_state(self, state_descriptor: Any) -> Any: ...

    @abc.abstractmethod
    def get_map_state(self, state_descriptor: Any) -> Any: ...

    @abc.abstractmethod
    def get_reducing_state(self, state_descriptor: Any) -> Any: ...

    @abc.abstractmethod
    def get_aggregating_state(self, state_descriptor: Any) -> Any: ...


class Function(abc.ABC):
    def open(self, runtime_context: RuntimeContext) -> None:
        pass

    def close(self) -> None:
        pass


class MapFunction(Function, Generic[IN, OUT]):
    @abc.abstractmethod
    def map(self, value: IN) -> OUT: ...


class FlatMapFunction(Function, Generic[IN, OUT]):
    @abc.abstractmethod
    def flat_map(self, value: IN) -> Iterable[OUT]: ...


class FilterFunction(Function, Generic[IN]):
    @abc.abstractmethod
    def filter(self, value: IN) -> bool: ...


class ReduceFunction(Function, Generic[IN]):
    @abc.abstractmethod
    def reduce(self, value1: IN, value2: IN) -> IN: ...


class AggregateFunction(Function, Generic[IN, ACC, OUT]):
    @abc.abstractmethod
    def create_accumulator(self) -> ACC: ...

    @abc.abstractmethod
    def add(self, value: IN, accumulator: ACC) -> ACC: ...

    @abc.abstractmethod
    def get_result(self, accumulator: ACC) -> OUT: ...

    def merge(self, acc_a: ACC, acc_b: ACC) -> ACC:
        raise NotImplementedError(f"{type(self).__name__}.merge is needed for merging (session) windows")


class KeySelector(Function, Generic[IN, KEY]):
    @abc.abstractmethod
    def get_key(self, value: IN) -> KEY: ...


class TimerService(abc.ABC):
    @abc.abstractmethod
    def current_processing_time(self) -> int: ...

    @abc.abstractmethod
    def current_watermark(self) -> int: ...

    @abc.abstractmethod
    def register_processing_time_timer(self, timestamp: int) -> None: ...

    @abc.abstractmethod
    def register_event_time_timer(self, timestamp: int) -> None: ...

    @abc.abstractmethod
    def delete_processing_time_timer(self, timestamp: int) -> None: ...

    @abc.abstractmethod
    def delete_event_time_timer(self, timestamp: int) -> None: ...


class TimeDomain:
    EVENT_TIME = 0
    PROCESSING_TIME = 1


class OutputTag:
    """A side output (PyFlink's OutputTag): a process function yields `(tag, value)` (PyFlink) or calls
    `ctx.output(tag, value)` (Flink's Java API); `stream.get_side_output(tag)` is the stream of them."""

    def __init__(self, tag_id: str, type_info: Any = None) -> None:
        if not isinstance(tag_id, str) or not tag_id:
            raise ValueError(f"OutputTag needs a non-empty string id, got {tag_id!r}")
        self.tag_id = tag_id
        self.type_info = type_info

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OutputTag) and other.tag_id == self.tag_id

    def __hash__(self) -> int:
        return hash(("OutputTag", self.tag_id))

    def __repr__(self) -> str:
        return f"OutputTag({self.tag_id!r})"


def side_output_of(item: Any) -> tuple[str, Any] | None:
    """(tag id, value) if a process function yielded `(OutputTag, value)`, else None."""
    if type(item) is tuple and len(item) == 2 and isinstance(item[0], OutputTag):
        return item[0].tag_id, item[1]
    return None


class BaseContext(abc.ABC):
    @abc.abstractmethod
    def timestamp(self) -> int | None: ...

    @abc.abstractmethod
    def timer_service(self) -> TimerService: ...

    def output(self, output_tag: OutputTag, value: Any) -> None:
        """Emit `value` to the side output `output_tag` (Flink: Context.output)."""
        raise NotImplementedError(f"{type(self).__name__} has no side outputs")


class ProcessFunction(Function, Generic[IN, OUT]):
    class Context(BaseContext):
        pass

    @abc.abstractmethod
    def process_element(self, value: IN, ctx: ProcessFunction.Context) -> Iterable[OUT] | None: ...


class KeyedProcessFunction(Function, Generic[KEY, IN, OUT]):
    class Context(BaseContext):
        @abc.abstractmethod
        def get_current_key(self) -> Any: ...

    class OnTimerContext(Context):
        @abc.abstractmethod
        def time_domain(self) -> int: ...

    @abc.abstractmethod
    def process_element(self, value: IN, ctx: KeyedProcessFunction.Context) -> Iterable[OUT] | None: ...

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterable[OUT] | None:
        return None


class CoMapFunction(Function, Generic[IN, OUT]):
    @abc.abstractmethod
    def map1(self, value: Any) -> OUT: ...

    @abc.abstractmethod
    def map2(self, value: Any) -> OUT: ...


class CoFlatMapFunction(Function, Generic[IN, OUT]):
    @abc.abstractmethod
    def flat_map1(self, value: Any) -> Iterable[OUT]: ...

    @abc.abstractmethod
    def flat_map2(self, value: Any) -> Iterable[OUT]: ...


class CoProcessFunction(Function):
    class Context(BaseContext):
        pass

    @abc.abstractmethod
    def process_element1(self, value: Any, ctx: CoProcessFunction.Context) -> Iterable[Any] | None: ...

    @abc.abstractmethod
    def process_element2(self, value: Any, ctx: CoProcessFunction.Context) -> Iterable[Any] | None: ...


class KeyedCoProcessFunction(Function):
    class Context(BaseContext):
        @abc.abstractmethod
        def get_current_key(self) -> Any: ...

    class OnTimerContext(Context):
        @abc.abstractmethod
        def time_domain(self) -> int: ...

    @abc.abstractmethod
    def process_element1(self, value: Any, ctx: KeyedCoProcessFunction.Context) -> Iterable[Any] | None: ...

    @abc.abstractmethod
    def process_element2(self, value: Any, ctx: KeyedCoProcessFunction.Context) -> Iterable[Any] | None: ...

    def on_timer(self, timestamp: int, ctx: KeyedCoProcessFunction.OnTimerContext) -> Iterable[Any] | None:
        return None


class ProcessWindowFunction(Function, Generic[IN, OUT, KEY, W]):
    class Context(abc.ABC, Generic[CW]):
        @abc.abstractmethod
        def window(self) -> CW: ...

        @abc.abstractmethod
        def current_processing_time(self) -> int: ...

        @abc.abstractmethod
        def current_watermark(self) -> int: ...

        @abc.abstractmethod
        def window_state(self) -> Any: ...

        @abc.abstractmethod
        def global_state(self) -> Any: ...

        def output(self, output_tag: OutputTag, value: Any) -> None:
            """Emit `value` to the side output `output_tag` (Flink: ProcessWindowFunction.Context.output)."""
            raise NotImplementedError(f"{type(self).__name__} has no side outputs")

    @abc.abstractmethod
    def process(self, key: KEY, context: ProcessWindowFunction.Context, elements: Iterable[IN]) -> Iterable[OUT]: ...

    def clear(self, context: ProcessWindowFunction.Context) -> None:
        pass


class BaseBroadcastProcessFunction(Function):
    """What the broadcast process functions share (PyFlink: BaseBroadcastProcessFunction)."""

    class BaseContext(abc.ABC):
        @abc.abstractmethod
        def timestamp(self) -> int | None: ...

        @abc.abstractmethod
        def current_processing_time(self) -> int: ...

        @abc.abstractmethod
        def current_watermark(self) -> int: ...

        def output(self, output_tag: OutputTag, value: Any) -> None:
            raise NotImplementedError(f"{type(self).__name__} has no side outputs")

    class Context(BaseContext):
        """On the broadcast side: the broadcast state is writable."""

        @abc.abstractmethod
        def get_broadcast_state(self, state_descriptor: Any) -> Any: ...

    class ReadOnlyContext(BaseContext):
        """On the element side: the broadcast state is read-only (every subtask must keep the same)."""

        @abc.abstractmethod
        def get_broadcast_state(self, state_descriptor: Any) -> Any: ...


class BroadcastProcessFunction(BaseBroadcastProcessFunction):
    """`stream.connect(broadcast_stream).process(...)`: elements with the broadcast state read-only,
    broadcast elements with it writable (PyFlink: BroadcastProcessFunction)."""

    class Context(BaseBroadcastProcessFunction.Context):
        pass

    class ReadOnlyContext(BaseBroadcastProcessFunction.ReadOnlyContext):
        pass

    @abc.abstractmethod
    def process_element(self, value: Any, ctx: BroadcastProcessFunction.ReadOnlyContext) -> Iterable[Any] | None: ...

    @abc.abstractmethod
    def process_broadcast_element(self, value: Any, ctx: BroadcastProcessFunction.Context) -> Iterable[Any] | None: ...


class KeyedBroadcastProcessFunction(BaseBroadcastProcessFunction):
    """`keyed_stream.connect(broadcast_stream).process(...)`: as BroadcastProcessFunction, plus keyed
    state and timers on the element side and `apply_to_keyed_state` on the broadcast side."""

    class Context(BaseBroadcastProcessFunction.Context):
        @abc.abstractmethod
        def apply_to_keyed_state(self, state_descriptor: Any, function: Callable[[Any, Any], None]) -> None: ...

    class ReadOnlyContext(BaseBroadcastProcessFunction.ReadOnlyContext):
        @abc.abstractmethod
        def timer_service(self) -> TimerService: ...

        @abc.abstractmethod
        def get_current_key(self) -> Any: ...

    class OnTimerContext(ReadOnlyContext):
        @abc.abstractmethod
        def time_domain(self) -> int: ...

    @abc.abstractmethod
    def process_element(self, value: Any, ctx: KeyedBroadcastProcessFunction.ReadOnlyContext) -> Iterable[Any] | None: ...

    @abc.abstractmethod
    def process_broadcast_element(self, value: Any, ctx: KeyedBroadcastProcessFunction.Context) -> Iterable[Any] | None: ...

    def on_timer(self, timestamp: int, ctx: KeyedBroadcastProcessFunction.OnTimerContext) -> Iterable[Any] | None:
        return None


class WindowFunction(Function, Generic[IN, OUT, KEY, W]):
    @abc.abstractmethod
    def apply(self, key: KEY, window: W, inputs: Iterable[IN]) -> Iterable[OUT]: ...


class AllWindowFunction(Function, Generic[IN, OUT, W]):
    """`window_all(...).apply(f)`: all of a window's elements of a non-keyed stream (PyFlink's AllWindowFunction)."""

    @abc.abstractmethod
    def apply(self, window: W, inputs: Iterable[IN]) -> Iterable[OUT]: ...


class ProcessAllWindowFunction(Function, Generic[IN, OUT, W]):
    """`window_all(...).process(f)` (PyFlink's ProcessAllWindowFunction). Its context is a window
    context as ProcessWindowFunction's: window(), times, window and global state, side outputs."""

    Context = ProcessWindowFunction.Context

    @abc.abstractmethod
    def process(self, context: ProcessWindowFunction.Context, elements: Iterable[IN]) -> Iterable[OUT]: ...

    def clear(self, context: ProcessWindowFunction.Context) -> None:
        pass


class SinkFunction(Function):
    """Marker base for legacy-style sinks (invoke per record)."""

    def invoke(self, value: Any, context: Any = None) -> None:
        raise NotImplementedError
