"""DataStream, KeyedStream, WindowedStream, AllWindowedStream, ConnectedStreams, DataStreamSink.

Mirrors pyflink.datastream.data_stream: every method records a Transformation (runtime.graph)
whose operator factory is a picklable zero-arg callable; nothing runs until env.execute().
Sinks register their transformation with the environment (like Flink), so a pipeline without a
sink is not executed.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from runtime.api.common.time import to_millis
from runtime.api.common.typeinfo import RowTypeInfo, TupleTypeInfo
from runtime.api.common.watermark_strategy import WatermarkStrategy
from runtime.api.connectors.base import Sink
from runtime.api.connectors.collect import CloseableIterator, CollectSink, collect_rows
from runtime.api.connectors.print import PrintSink
from runtime.api.datastream import window as w
from runtime.api.datastream.aggregates import ColumnarAggregate
from runtime.api.datastream.functions import (
    AggregateFunction,
    BroadcastProcessFunction,
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    FilterFunction,
    FlatMapFunction,
    Function,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    OutputTag,
    ProcessFunction,
    ProcessWindowFunction,
    ReduceFunction,
    SinkFunction,
    WindowFunction,
)
from runtime.api.datastream.state import MapStateDescriptor
from runtime.api.datastream.window import Evictor
from runtime.api.operators.broadcast import BroadcastProcessOperator, KeyedBroadcastProcessOperator
from runtime.api.operators.co_process import KeyedCoProcessOperator
from runtime.api.operators.columnar_window import ColumnarWindowAggregateOperator
from runtime.api.operators.keyed_process import KeyedProcessOperator
from runtime.api.operators.keyed_reduce import KeyedReduceOperator
from runtime.api.operators.runtime_context import with_declared_key_type
from runtime.api.operators.simple import (
    BATCH_FORMATS,
    CoProcessOperator,
    CoStreamFlatMap,
    CoStreamMap,
    MapBatchesOperator,
    ProcessOperator,
    SinkFunctionOperator,
    StreamFilter,
    StreamFlatMap,
    StreamMap,
    TimestampsAndWatermarksOperator,
)
from runtime.api.operators.window_operator import WindowOperator
from runtime.core.errors import InvalidProgramError
from runtime.core.row import Row
from runtime.graph.job_graph import ResourceSpec
from runtime.graph.transformations import (
    ChainingStrategy,
    OneInputTransformation,
    PartitionerKind,
    PartitionerSpec,
    PartitionTransformation,
    SideOutputTransformation,
    Transformation,
    TwoInputTransformation,
    UnionTransformation,
)

if TYPE_CHECKING:
    from runtime.api.datastream.stream_execution_environment import StreamExecutionEnvironment


# -- validation helpers -----------------------------------------------------------------------------


def _type_name(x: Any) -> str:
    return type(x).__name__


def _require_function(op: str, fn: Any, cls: type, label: str, allow_callable: bool = True) -> None:
    if isinstance(fn, cls):
        return
    if allow_callable and callable(fn) and not isinstance(fn, Function):
        return
    what = f"a {label} or a callable" if allow_callable else f"a {label}"
    raise InvalidProgramError(f"{op}(): expected {what}, got {_type_name(fn)}")


def _check_parallelism(op: str, p: Any) -> int:
    if not isinstance(p, int) or isinstance(p, bool) or p < 1:
        raise InvalidProgramError(f"{op}: parallelism must be a positive int, got {p!r}")
    return p


def _row_info(type_info: Any) -> Any:

    return type_info if isinstance(type_info, (RowTypeInfo, TupleTypeInfo)) else None


def _check_field(op: str, type_info: Any, field: int | str) -> None:
    """Fail at the call site when the declared type says `field` does not exist."""

    if isinstance(type_info, RowTypeInfo):
        if isinstance(field, str):
            names = type_info.get_field_names() or []
            if type_info.field_names is not None and field not in names:
                raise InvalidProgramError(f"{op}: field {field!r} is not in {type_info} (fields: {names})")
        elif not 0 <= field < len(type_info.field_types):
            raise InvalidProgramError(f"{op}: position {field} is out of range for {type_info}")
    elif isinstance(type_info, TupleTypeInfo):
        if isinstance(field, str):
            raise InvalidProgramError(f"{op}: {type_info} has no named fields; use a position, got {field!r}")
        if not 0 <= field < len(type_info.field_types):
            raise InvalidProgramError(f"{op}: position {field} is out of range for {type_info}")


def _to_ms(value: Any) -> int:

    return to_millis(value)


# -- adapters (module-level so cloudpickle ships them by reference) ------------------------------------


class _CallableReduce(ReduceFunction):
    def __init__(self, fn: Callable[[Any, Any], Any]) -> None:
        self.fn = fn

    def reduce(self, value1: Any, value2: Any) -> Any:
        return self.fn(value1, value2)


def _as_reduce_function(fn: Any) -> ReduceFunction:
    return fn if isinstance(fn, ReduceFunction) else _CallableReduce(fn)


class _WrappingFunction(Function):
    """An adapter around the user's function `self.fn`: open/close reach it when it is a rich Function."""

    fn: Any

    def open(self, runtime_context: Any) -> None:
        if isinstance(self.fn, Function):
            self.fn.open(runtime_context)

    def close(self) -> None:
        if isinstance(self.fn, Function):
            self.fn.close()


class _KeyedAdapter(_WrappingFunction, KeyedProcessFunction):
    """PyFlink runs KeyedStream.map/flat_map/filter as a KeyedProcessFunction so the function's
    runtime context has keyed state; so does Millrace."""

    def __init__(self, fn: Any, kind: str) -> None:
        self.fn = fn
        self.kind = kind
        if kind == "map":
            self._call = fn.map if isinstance(fn, MapFunction) else fn
        elif kind == "flat_map":
            self._call = fn.flat_map if isinstance(fn, FlatMapFunction) else fn
        else:
            self._call = fn.filter if isinstance(fn, FilterFunction) else fn

    def process_element(self, value: Any, ctx: Any) -> Iterable[Any] | None:
        if self.kind == "map":
            return (self._call(value),)
        if self.kind == "flat_map":
            return self._call(value)
        return (value,) if self._call(value) else None

    def __getstate__(self) -> dict[str, Any]:
        return {"fn": self.fn, "kind": self.kind}

    def __setstate__(self, state: dict[str, Any]) -> None:
        _KeyedAdapter.__init__(self, state["fn"], state["kind"])


class _KeyedCoAdapter(_WrappingFunction, KeyedCoProcessFunction):
    """connect(...).key_by(...).map/flat_map as a KeyedCoProcessFunction (keyed state available)."""

    def __init__(self, fn: Any, kind: str) -> None:
        self.fn = fn  # a CoMapFunction / CoFlatMapFunction, so always a rich Function
        self.kind = kind

    def process_element1(self, value: Any, ctx: Any) -> Iterable[Any] | None:
        return (self.fn.map1(value),) if self.kind == "map" else self.fn.flat_map1(value)

    def process_element2(self, value: Any, ctx: Any) -> Iterable[Any] | None:
        return (self.fn.map2(value),) if self.kind == "map" else self.fn.flat_map2(value)


class _WindowFunctionAdapter(_WrappingFunction, ProcessWindowFunction):
    """WindowFunction.apply(key, window, inputs) run as a ProcessWindowFunction."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def process(self, key: Any, context: Any, elements: Iterable[Any]) -> Iterable[Any]:
        return self.fn.apply(key, context.window(), elements)


class _AllWindowAdapter(ProcessWindowFunction):
    """ProcessAllWindowFunction.process(context, elements) / AllWindowFunction.apply(window, inputs)
    behind the constant key that window_all uses."""

    def __init__(self, fn: Any, kind: str) -> None:
        self.fn = fn
        self.kind = kind

    def open(self, runtime_context: Any) -> None:
        if hasattr(self.fn, "open"):
            self.fn.open(runtime_context)

    def close(self) -> None:
        if hasattr(self.fn, "close"):
            self.fn.close()

    def process(self, key: Any, context: Any, elements: Iterable[Any]) -> Iterable[Any]:
        if self.kind == "process":
            return self.fn.process(context, elements)
        return self.fn.apply(context.window(), elements)

    def clear(self, context: Any) -> None:
        if self.kind == "process" and hasattr(self.fn, "clear"):
            self.fn.clear(context)


class _NullKeySelector(KeySelector):
    """Flink's NullByteKeySelector: every record has the same key (window_all)."""

    def get_key(self, value: Any) -> Any:
        return 0


def _get_field(value: Any, field: int | str) -> Any:
    if isinstance(value, dict):
        return value[field]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value  # PyFlink: a plain number aggregates itself
    return value[field]


def _position(value: Any, field: int | str) -> int:
    """`field` as a position in `value`, a record without field names."""
    if isinstance(field, str):
        raise TypeError(f"cannot aggregate field {field!r} of a {_type_name(value)}: it has positions, not field names")
    return field


def _set_field(value: Any, field: int | str, new: Any) -> Any:
    """A copy of `value` with `field` replaced (records are never mutated in place)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return new
    if isinstance(value, Row):
        names = value.field_names
        vals = list(value)
        idx = names.index(field) if isinstance(field, str) and names is not None else _position(value, field)
        vals[idx] = new
        return Row.of(names, vals)
    if isinstance(value, dict):
        out = dict(value)
        out[field] = new
        return out
    if isinstance(value, tuple):
        vals = list(value)
        vals[_position(value, field)] = new
        return tuple(vals)
    if isinstance(value, list):
        out_l = list(value)
        out_l[_position(value, field)] = new
        return out_l
    raise TypeError(f"cannot aggregate field {field!r} of a {_type_name(value)}")


class _SumReduce(ReduceFunction):
    """Flink's SumAggregator: the first record of the key with `field` replaced by the running sum."""

    def __init__(self, field: int | str) -> None:
        self.field = field

    def reduce(self, value1: Any, value2: Any) -> Any:
        return _set_field(value1, self.field, _get_field(value1, self.field) + _get_field(value2, self.field))


class _MinMaxReduce(ReduceFunction):
    """Flink's ComparableAggregator: min/max replace only the field; min_by/max_by keep the whole
    record that holds the extreme (first one on ties, like Flink's default `first=True`)."""

    def __init__(self, field: int | str, is_min: bool, by: bool) -> None:
        self.field = field
        self.is_min = is_min
        self.by = by

    def reduce(self, value1: Any, value2: Any) -> Any:
        a, b = _get_field(value1, self.field), _get_field(value2, self.field)
        better = b < a if self.is_min else b > a
        if self.by:
            return value2 if better else value1
        return _set_field(value1, self.field, b) if better else value1


# -- DataStream -------------------------------------------------------------------------------------


class DataStream:
    """A stream of records (PyFlink's DataStream)."""

    def __init__(
        self,
        env: StreamExecutionEnvironment,
        transformation: Transformation,
        config_transformation: Transformation | None = None,
        mirrors: list[Transformation] | None = None,
    ) -> None:
        self._env = env
        self._t = transformation  # what consumers read from
        env._note_stream(transformation)
        # what set_parallelism / name / uid configure (the source itself when a watermark
        # operator was chained after it by from_source), plus transformations mirroring parallelism
        self._ct = config_transformation or transformation
        self._mirrors = mirrors or []

    # -- introspection ---------------------------------------------------------------------------
    def get_name(self) -> str:
        return self._ct.name

    def get_type(self) -> Any:
        return self._t.output_type

    def get_execution_environment(self) -> StreamExecutionEnvironment:
        return self._env

    def get_transformation(self) -> Transformation:
        return self._t

    @property
    def transformation(self) -> Transformation:
        return self._t

    # -- operator configuration ------------------------------------------------------------------
    def _configurable(self, op: str) -> Transformation:
        if isinstance(self._ct, (PartitionTransformation, UnionTransformation)):
            raise InvalidProgramError(
                f"{op}: '{self._ct.name}' is a virtual transformation (partitioning or union), not an operator; "
                "call it on the stream of an operator (e.g. after map())"
            )
        return self._ct

    def name(self, name: str) -> DataStream:
        self._configurable("name()").name = name
        return self

    def set_description(self, description: str) -> DataStream:
        # PyFlink's API; Transformation (runtime/graph) has no field for it yet and nothing reads it
        self._configurable("set_description()").description = description  # type: ignore[attr-defined]  # see above
        return self

    def uid(self, uid: str) -> DataStream:
        t = self._configurable("uid()")
        t.uid = uid
        for m in self._mirrors:
            m.uid = f"{uid}-watermarks"  # stable id for the chained watermark operator's state
        return self

    def set_uid_hash(self, uid_hash: str) -> DataStream:
        # Flink's user-provided hash: the operator's id in checkpoints and savepoints (wins over uid)
        self._configurable("set_uid_hash()").uid_hash = uid_hash
        return self

    def set_parallelism(self, parallelism: int) -> DataStream:
        t = self._configurable("set_parallelism()")
        p = _check_parallelism(f"set_parallelism() on '{t.name}'", parallelism)
        if getattr(t, "_non_parallel", False) and p != 1:
            raise InvalidProgramError(f"set_parallelism(): '{t.name}' is a non-parallel source; its parallelism must be 1")
        for x in [t, *self._mirrors]:
            x.parallelism = p
            x.parallelism_configured = True
        return self

    def set_max_parallelism(self, max_parallelism: int) -> DataStream:
        t = self._configurable("set_max_parallelism()")
        mp = _check_parallelism(f"set_max_parallelism() on '{t.name}'", max_parallelism)
        for x in [t, *self._mirrors]:
            x.max_parallelism = mp
        return self

    def force_non_parallel(self) -> DataStream:
        self.set_parallelism(1)
        return self.set_max_parallelism(1)

    def slot_sharing_group(self, slot_sharing_group: Any) -> DataStream:
        t = self._configurable("slot_sharing_group()")
        name, resources = _slot_sharing(slot_sharing_group)
        for x in [t, *self._mirrors]:
            x.slot_sharing_group = name
            if resources is not None:
                x.resources = resources
        return self

    def disable_chaining(self) -> DataStream:
        self._configurable("disable_chaining()").chaining_strategy = ChainingStrategy.NEVER
        return self

    def start_new_chain(self) -> DataStream:
        self._configurable("start_new_chain()").chaining_strategy = ChainingStrategy.HEAD
        return self

    # -- building blocks -------------------------------------------------------------------------
    def _one_input(self, name: str, factory: Callable[[], Any], output_type: Any = None, keyed: bool = False) -> DataStream:
        if keyed:
            factory = _declaring_key_type(factory, getattr(self, "_key_type", None))
        t = OneInputTransformation(name=name, input=self._t, operator_factory=factory, output_type=output_type, keyed=keyed)
        return DataStream(self._env, t)

    # -- record-at-a-time operators --------------------------------------------------------------
    def map(self, func: Any, output_type: Any = None) -> DataStream:
        _require_function("map", func, MapFunction, "MapFunction")

        return self._one_input("Map", functools.partial(StreamMap, func), output_type)

    def flat_map(self, func: Any, output_type: Any = None) -> DataStream:
        _require_function("flat_map", func, FlatMapFunction, "FlatMapFunction")

        return self._one_input("Flat Map", functools.partial(StreamFlatMap, func), output_type)

    def filter(self, func: Any) -> DataStream:
        _require_function("filter", func, FilterFunction, "FilterFunction")

        return self._one_input("Filter", functools.partial(StreamFilter, func), self._t.output_type)

    def process(self, func: Any, output_type: Any = None) -> DataStream:
        if isinstance(func, KeyedProcessFunction):
            raise InvalidProgramError(
                f"process(): {_type_name(func)} is a KeyedProcessFunction; call key_by() first or use a ProcessFunction"
            )
        _require_function("process", func, ProcessFunction, "ProcessFunction")

        return self._one_input("Process", functools.partial(ProcessOperator, func), output_type)

    def map_batches(self, func: Any, batch_format: str = "numpy", output_type: Any = None) -> DataStream:
        """Vectorized map (Millrace extension): `func` gets a whole batch as dict[str, np.ndarray]
        ("numpy"), pyarrow.RecordBatch ("pyarrow") or pandas.DataFrame ("pandas") and returns the
        same kind. Timestamps carry over when the row count is unchanged."""
        _require_function("map_batches", func, MapFunction, "MapFunction")

        if batch_format not in BATCH_FORMATS:
            raise InvalidProgramError(f"map_batches(): batch_format must be one of {BATCH_FORMATS}, got {batch_format!r}")
        return self._one_input("Map Batches", functools.partial(MapBatchesOperator, func, batch_format), output_type)

    def assign_timestamps_and_watermarks(self, watermark_strategy: Any) -> DataStream:

        if not isinstance(watermark_strategy, WatermarkStrategy):
            raise InvalidProgramError(
                f"assign_timestamps_and_watermarks(): expected a WatermarkStrategy, got {_type_name(watermark_strategy)}"
            )
        return self._one_input(
            "Timestamps/Watermarks",
            functools.partial(TimestampsAndWatermarksOperator, watermark_strategy),
            self._t.output_type,
        )

    # -- keying, partitioning, combining ---------------------------------------------------------
    def key_by(self, key_selector: Any, key_type: Any = None) -> KeyedStream:
        if not (isinstance(key_selector, (str, KeySelector)) or (callable(key_selector) and not isinstance(key_selector, Function))):
            raise InvalidProgramError(
                f"key_by(): expected a KeySelector, a callable or a field name, got {_type_name(key_selector)}"
            )
        if key_type is not None and hasattr(key_type, "is_keyable") and not key_type.is_keyable():
            raise InvalidProgramError(
                f"key_by(): {key_type} cannot be a key type (no stable hash/equality); "
                "key by a scalar, a string or a tuple of those"
            )
        info = self._t.output_type
        if isinstance(key_selector, str):
            _check_field("key_by()", info, key_selector)
            ri = _row_info(info)
            if ri is not None and hasattr(ri, "get_field_type"):
                ft = ri.get_field_type(key_selector)
                if ft is not None and not ft.is_keyable():
                    raise InvalidProgramError(f"key_by(): field {key_selector!r} has type {ft}, which cannot be a key")
        pt = PartitionTransformation(
            name="Partition(hash)",
            input=self._t,
            partitioner=PartitionerSpec(kind=PartitionerKind.HASH, key_selector=key_selector, explicit=True),
            output_type=info,
        )
        return KeyedStream(self._env, pt, key_selector, key_type)

    def _partition(self, kind: PartitionerKind) -> DataStream:
        pt = PartitionTransformation(
            name=kind.value, input=self._t, partitioner=PartitionerSpec(kind=kind, explicit=True), output_type=self._t.output_type
        )
        return DataStream(self._env, pt)

    def rebalance(self) -> DataStream:
        return self._partition(PartitionerKind.REBALANCE)

    def rescale(self) -> DataStream:
        return self._partition(PartitionerKind.RESCALE)

    def broadcast(self, *broadcast_state_descriptors: Any) -> DataStream | BroadcastStream:
        """Every record to every subtask of the consumer. With MapStateDescriptors: a BroadcastStream
        for `other.connect(...)`, whose process function keeps those broadcast states (Flink's
        broadcast state pattern)."""
        if not broadcast_state_descriptors:
            return self._partition(PartitionerKind.BROADCAST)

        bad = [d for d in broadcast_state_descriptors if not isinstance(d, MapStateDescriptor)]
        if bad:
            raise InvalidProgramError(f"broadcast(): broadcast state is map state: pass MapStateDescriptors, got {_type_name(bad[0])}")
        names = [d.name for d in broadcast_state_descriptors]
        if len(set(names)) != len(names):
            raise InvalidProgramError(f"broadcast(): state names must be unique, got {names}")
        return BroadcastStream(self._partition(PartitionerKind.BROADCAST), list(broadcast_state_descriptors))

    def shuffle(self) -> DataStream:
        return self._partition(PartitionerKind.SHUFFLE)

    def forward(self) -> DataStream:
        return self._partition(PartitionerKind.FORWARD)

    def global_(self) -> DataStream:
        return self._partition(PartitionerKind.GLOBAL)

    def get_side_output(self, output_tag: Any) -> DataStream:
        """The records this operator's process function emitted to `output_tag` (PyFlink:
        `yield output_tag, value`; Flink: `ctx.output(output_tag, value)`), or a window's late data."""

        if not isinstance(output_tag, OutputTag):
            raise InvalidProgramError(f"get_side_output() needs an OutputTag, got {_type_name(output_tag)}")
        t = SideOutputTransformation(
            name=f"SideOutput({output_tag.tag_id})", input=self._t, output_tag=output_tag.tag_id, output_type=output_tag.type_info,
        )
        return DataStream(self._env, t)

    def union(self, *streams: DataStream) -> DataStream:
        for s in streams:
            if not isinstance(s, DataStream):
                raise InvalidProgramError(f"union(): expected DataStreams, got {_type_name(s)}")
        ut = UnionTransformation(name="Union", union_inputs=[self._t, *(s._t for s in streams)], output_type=self._t.output_type)
        return DataStream(self._env, ut)

    def connect(self, ds: DataStream | BroadcastStream) -> ConnectedStreams | BroadcastConnectedStream:
        if isinstance(ds, BroadcastStream):
            return BroadcastConnectedStream(self, ds)
        if not isinstance(ds, DataStream):
            raise InvalidProgramError(f"connect(): expected a DataStream or a BroadcastStream, got {_type_name(ds)}")
        return ConnectedStreams(self._env, self, ds)

    def window_all(self, window_assigner: Any) -> AllWindowedStream:
        return AllWindowedStream(self, window_assigner)

    def count_window_all(self, size: int, slide: int = 0) -> AllWindowedStream:
        return AllWindowedStream(self, _count_assigner(size, slide))

    # -- sinks -----------------------------------------------------------------------------------
    def _add_sink(self, name: str, factory: Callable[[], Any], coordinator_provider: Any = None) -> DataStreamSink:
        t = OneInputTransformation(
            name=name, input=self._t, operator_factory=factory, coordinator_provider=coordinator_provider, is_sink=True
        )
        self._env._add_transformation(t)
        return DataStreamSink(t)

    def sink_to(self, sink: Any) -> DataStreamSink:

        if not isinstance(sink, Sink):
            raise InvalidProgramError(f"sink_to(): expected a Sink (e.g. DeltaSink), got {_type_name(sink)}")
        return self._add_sink(sink.default_name(), sink.create_writer, sink.coordinator_provider())

    def add_sink(self, sink_func: Any) -> DataStreamSink:

        if isinstance(sink_func, Sink):
            return self.sink_to(sink_func)
        _require_function("add_sink", sink_func, SinkFunction, "SinkFunction")

        return self._add_sink("Sink: Unnamed", functools.partial(SinkFunctionOperator, sink_func))

    def print(self, sink_identifier: str | None = None) -> DataStreamSink:

        return self.sink_to(PrintSink(sink_identifier, type_info=self._t.output_type))  # PyFlink prints by type

    def execute_and_collect(self, job_execution_name: str | None = None, limit: int | None = None) -> Any:
        """Run the job and return its results: a CloseableIterator, or a list of at most `limit`
        (the job is then canceled if still running, like PyFlink)."""

        if limit is not None and (not isinstance(limit, int) or limit < 1):
            raise InvalidProgramError(f"execute_and_collect(): limit must be a positive int, got {limit!r}")
        sink = self.sink_to(CollectSink())
        client = self._env.execute_async(job_execution_name or "Collect Job")
        it = CloseableIterator(client, sink._t.id)
        if limit is None:
            return it
        try:
            return collect_rows(it, limit)
        finally:
            it.close()


def _slot_sharing(group: Any) -> tuple[str, Any]:
    if isinstance(group, str):
        return group, None
    if isinstance(group, SlotSharingGroup):
        return group.get_name(), group.to_resources()
    raise InvalidProgramError(f"slot_sharing_group(): expected a name or a SlotSharingGroup, got {_type_name(group)}")


class SlotSharingGroup:
    """PyFlink's SlotSharingGroup with fine-grained resources: `SlotSharingGroup.builder("heavy")
    .set_cpu_cores(1.0).set_task_heap_memory_mb(512).set_managed_memory_mb(256).build()`. The
    group's tasks run in a slot of exactly these resources (dynamic slots); a group without them
    gets a default slot. A memory size is MB (an int) or a size with its unit ("512 mb", "1 gb")."""

    def __init__(self, name: str, cpu_cores: float | None = None, task_heap_memory_mb: int | None = None,
                 managed_memory_mb: int | None = None, task_off_heap_memory_mb: int | None = None) -> None:
        if not isinstance(name, str) or not name.strip():
            raise InvalidProgramError(f"SlotSharingGroup: the name must be a non-empty string, got {name!r}")
        self._name = name
        self.cpu_cores = cpu_cores
        self.task_heap_memory_mb = task_heap_memory_mb
        self.managed_memory_mb = managed_memory_mb
        self.task_off_heap_memory_mb = task_off_heap_memory_mb

    def get_name(self) -> str:
        return self._name

    def get_cpu_cores(self) -> float | None:
        return self.cpu_cores

    def get_task_heap_memory(self) -> int | None:
        return self.task_heap_memory_mb

    def get_task_off_heap_memory(self) -> int | None:
        return self.task_off_heap_memory_mb

    def get_managed_memory(self) -> int | None:
        return self.managed_memory_mb

    def to_resources(self) -> Any:
        if all(v is None for v in (self.cpu_cores, self.task_heap_memory_mb, self.managed_memory_mb, self.task_off_heap_memory_mb)):
            return None
        return ResourceSpec(
            cpu_cores=self.cpu_cores, task_heap_mb=self.task_heap_memory_mb, managed_memory_mb=self.managed_memory_mb,
            task_off_heap_mb=self.task_off_heap_memory_mb,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SlotSharingGroup) and (self._name, self.to_resources()) == (other._name, other.to_resources())

    def __hash__(self) -> int:
        return hash(self._name)

    def __repr__(self) -> str:
        spec = self.to_resources()
        return f"SlotSharingGroup({self._name!r}{', ' + str(spec) if spec is not None else ''})"

    @staticmethod
    def builder(name: str) -> SlotSharingGroup.Builder:
        return SlotSharingGroup.Builder(name)

    class Builder:
        """Each setter checks its value; `build()` refuses a group with no CPU and no memory at all
        (zero everywhere: it would never need a slot)."""

        def __init__(self, name: str) -> None:
            self._g = SlotSharingGroup(name)

        def _what(self, setter: str) -> str:
            return f"SlotSharingGroup '{self._g.get_name()}': {setter}"

        def set_cpu_cores(self, cpu_cores: float) -> SlotSharingGroup.Builder:
            if isinstance(cpu_cores, bool) or not isinstance(cpu_cores, (int, float)) or not cpu_cores > 0 or cpu_cores != cpu_cores:
                raise InvalidProgramError(f"{self._what('set_cpu_cores')}({cpu_cores!r}): the CPU cores must be a number above 0")
            self._g.cpu_cores = float(cpu_cores)
            return self

        def _mb(self, setter: str, value: Any, allow_zero: bool) -> int:
            mb = _memory_mb(value, self._what(setter))
            if mb < 0 or (mb == 0 and not allow_zero):
                raise InvalidProgramError(f"{self._what(setter)}({value!r}): the size must be {'0 or more' if allow_zero else 'above 0'}")
            return mb

        def set_task_heap_memory_mb(self, mb: int | str) -> SlotSharingGroup.Builder:
            self._g.task_heap_memory_mb = self._mb("set_task_heap_memory_mb", mb, allow_zero=False)
            return self

        def set_task_heap_memory(self, size: int | str) -> SlotSharingGroup.Builder:
            return self.set_task_heap_memory_mb(size)

        def set_task_off_heap_memory_mb(self, mb: int | str) -> SlotSharingGroup.Builder:
            self._g.task_off_heap_memory_mb = self._mb("set_task_off_heap_memory_mb", mb, allow_zero=True)
            return self

        def set_task_off_heap_memory(self, size: int | str) -> SlotSharingGroup.Builder:
            return self.set_task_off_heap_memory_mb(size)

        def set_managed_memory_mb(self, mb: int | str) -> SlotSharingGroup.Builder:
            self._g.managed_memory_mb = self._mb("set_managed_memory_mb", mb, allow_zero=True)
            return self

        def set_managed_memory(self, size: int | str) -> SlotSharingGroup.Builder:
            return self.set_managed_memory_mb(size)

        def build(self) -> SlotSharingGroup:
            g = self._g
            if g.cpu_cores is None or g.task_heap_memory_mb is None:
                raise InvalidProgramError(
                    f"SlotSharingGroup '{g.get_name()}': build() needs set_cpu_cores(...) and set_task_heap_memory_mb(...) "
                    "(managed and off-heap memory are optional); a group without resources is just its name: "
                    f".slot_sharing_group('{g.get_name()}')"
                )
            return SlotSharingGroup(g.get_name(), g.cpu_cores, g.task_heap_memory_mb, g.managed_memory_mb, g.task_off_heap_memory_mb)


_MEMORY_UNITS_MB = {"": 1, "b": 1 / (1 << 20), "k": 1 / 1024, "kb": 1 / 1024, "m": 1, "mb": 1, "g": 1024, "gb": 1024, "t": 1 << 20, "tb": 1 << 20}


def _memory_mb(value: Any, what: str) -> int:
    """MB from an int (MB) or a size with a unit ('512 mb', '1.5 gb', '64 kb'); InvalidProgramError otherwise."""
    if isinstance(value, bool):
        raise InvalidProgramError(f"{what}({value!r}): a memory size is a number of MB or a size with a unit such as '512 mb'")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    import re

    m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", value) if isinstance(value, str) else None
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _MEMORY_UNITS_MB:
        raise InvalidProgramError(
            f"{what}({value!r}): not a memory size; use a number of MB or a size with one of the units "
            "b, kb, mb, gb, tb (e.g. '512 mb', '1 gb')"
        )
    mb = float(m.group(1)) * _MEMORY_UNITS_MB[unit]
    if mb > 0 and mb < 1:
        raise InvalidProgramError(f"{what}({value!r}): below 1 MB, the smallest unit a slot is sized in")
    return int(mb)


class DataStreamSink:
    """What sink_to / add_sink / print return: configure the sink operator."""

    def __init__(self, transformation: OneInputTransformation) -> None:
        self._t = transformation

    def get_transformation(self) -> Transformation:
        return self._t

    def name(self, name: str) -> DataStreamSink:
        self._t.name = name
        return self

    def uid(self, uid: str) -> DataStreamSink:
        self._t.uid = uid
        return self

    def set_uid_hash(self, uid_hash: str) -> DataStreamSink:
        self._t.uid_hash = uid_hash
        return self

    def set_description(self, description: str) -> DataStreamSink:
        # PyFlink's API; Transformation (runtime/graph) has no field for it yet and nothing reads it
        self._t.description = description  # type: ignore[attr-defined]  # see above
        return self

    def set_parallelism(self, parallelism: int) -> DataStreamSink:
        self._t.parallelism = _check_parallelism(f"set_parallelism() on '{self._t.name}'", parallelism)
        self._t.parallelism_configured = True
        return self

    def set_max_parallelism(self, max_parallelism: int) -> DataStreamSink:
        self._t.max_parallelism = _check_parallelism(f"set_max_parallelism() on '{self._t.name}'", max_parallelism)
        return self

    def slot_sharing_group(self, slot_sharing_group: Any) -> DataStreamSink:
        name, resources = _slot_sharing(slot_sharing_group)
        self._t.slot_sharing_group = name
        if resources is not None:
            self._t.resources = resources
        return self

    def disable_chaining(self) -> DataStreamSink:
        self._t.chaining_strategy = ChainingStrategy.NEVER
        return self

    def start_new_chain(self) -> DataStreamSink:
        self._t.chaining_strategy = ChainingStrategy.HEAD
        return self


# -- KeyedStream ------------------------------------------------------------------------------------


def _declaring_key_type(factory: Callable[[], Any], key_type: Any) -> Callable[[], Any]:
    """The keyed operator's factory, telling the operator the declared key type (snapshots record
    it and a restore checks it); unchanged when key_by() declared none."""
    if key_type is None:
        return factory

    return functools.partial(with_declared_key_type, factory, key_type)


class KeyedStream(DataStream):
    """A stream partitioned by key (PyFlink's KeyedStream); its operators see keyed state."""

    def __init__(self, env: StreamExecutionEnvironment, transformation: PartitionTransformation, key_selector: Any, key_type: Any = None) -> None:
        super().__init__(env, transformation)
        self._key_selector = key_selector
        self._key_type = key_type

    def get_key_selector(self) -> Any:
        return self._key_selector

    def get_key_type(self) -> Any:
        return self._key_type

    def _keyed(self, name: str, function: Any, output_type: Any) -> DataStream:

        return self._one_input(name, functools.partial(KeyedProcessOperator, self._key_selector, function), output_type, keyed=True)

    def map(self, func: Any, output_type: Any = None) -> DataStream:
        _require_function("map", func, MapFunction, "MapFunction")
        return self._keyed("Map", _KeyedAdapter(func, "map"), output_type)

    def flat_map(self, func: Any, output_type: Any = None) -> DataStream:
        _require_function("flat_map", func, FlatMapFunction, "FlatMapFunction")
        return self._keyed("Flat Map", _KeyedAdapter(func, "flat_map"), output_type)

    def filter(self, func: Any) -> DataStream:
        _require_function("filter", func, FilterFunction, "FilterFunction")
        return self._keyed("Filter", _KeyedAdapter(func, "filter"), self._t.output_type)

    def process(self, func: Any, output_type: Any = None) -> DataStream:
        if not isinstance(func, KeyedProcessFunction):
            raise InvalidProgramError(f"process(): a KeyedStream needs a KeyedProcessFunction, got {_type_name(func)}")
        return self._keyed("KeyedProcess", func, output_type)

    def reduce(self, func: Any) -> DataStream:
        _require_function("reduce", func, ReduceFunction, "ReduceFunction")
        return self._reduce("Keyed Reduce", _as_reduce_function(func))

    def _reduce(self, name: str, fn: ReduceFunction) -> DataStream:

        return self._one_input(name, functools.partial(KeyedReduceOperator, self._key_selector, fn), self._t.output_type, keyed=True)

    def _aggregation(self, op: str, field: Any, fn: ReduceFunction) -> DataStream:
        if not isinstance(field, (int, str)) or isinstance(field, bool):
            raise InvalidProgramError(f"{op}(): expected a field position (int) or name (str), got {_type_name(field)}")
        _check_field(f"{op}()", self._t.output_type, field)
        return self._reduce("Keyed Aggregation", fn)

    def sum(self, position_to_sum: int | str = 0) -> DataStream:
        return self._aggregation("sum", position_to_sum, _SumReduce(position_to_sum))

    def min(self, position_to_min: int | str = 0) -> DataStream:
        return self._aggregation("min", position_to_min, _MinMaxReduce(position_to_min, True, False))

    def max(self, position_to_max: int | str = 0) -> DataStream:
        return self._aggregation("max", position_to_max, _MinMaxReduce(position_to_max, False, False))

    def min_by(self, position_to_min_by: int | str = 0) -> DataStream:
        return self._aggregation("min_by", position_to_min_by, _MinMaxReduce(position_to_min_by, True, True))

    def max_by(self, position_to_max_by: int | str = 0) -> DataStream:
        return self._aggregation("max_by", position_to_max_by, _MinMaxReduce(position_to_max_by, False, True))

    def window(self, window_assigner: Any) -> WindowedStream:
        return WindowedStream(self, window_assigner)

    def count_window(self, size: int, slide: int = 0) -> WindowedStream:
        return WindowedStream(self, _count_assigner(size, slide))

    # a KeyedStream's partitioning is its key: no re-partitioning (PyFlink raises too)
    def _partition(self, kind: PartitionerKind) -> DataStream:
        raise InvalidProgramError(f"{kind.value}(): cannot override the partitioning of a KeyedStream")

    def connect(self, ds: DataStream | BroadcastStream) -> ConnectedStreams | BroadcastConnectedStream:
        return super().connect(ds)


def _count_assigner(size: int, slide: int | None) -> Any:

    if not isinstance(size, int) or size < 1:
        raise InvalidProgramError(f"count_window(): size must be a positive int, got {size!r}")
    if not slide:
        return w.CountTumblingWindowAssigner.of(size)
    return w.CountSlidingWindowAssigner.of(size, slide)


# -- windows ----------------------------------------------------------------------------------------


def _as_process_window_function(op: str, fn: Any) -> ProcessWindowFunction | None:
    if fn is None:
        return None
    if isinstance(fn, ProcessWindowFunction):
        return fn
    if isinstance(fn, WindowFunction):
        return _WindowFunctionAdapter(fn)
    raise InvalidProgramError(f"{op}(): window_function must be a ProcessWindowFunction or a WindowFunction, got {_type_name(fn)}")


class WindowedStream:
    """keyed_stream.window(assigner) (PyFlink's WindowedStream)."""

    def __init__(self, keyed_stream: KeyedStream, window_assigner: Any, parallelism: int | None = None) -> None:
        self._keyed_stream = keyed_stream
        self._assigner = window_assigner
        self._trigger: Any = None
        self._allowed_lateness = 0
        self._late_data_tag: str | None = None
        self._evictor: Any = None
        self._parallelism = parallelism  # window_all forces 1

    def get_execution_environment(self) -> StreamExecutionEnvironment:
        return self._keyed_stream._env

    def get_input_type(self) -> Any:
        return self._keyed_stream.get_type()

    def trigger(self, trigger: Any) -> WindowedStream:
        self._trigger = trigger
        return self

    def allowed_lateness(self, time_ms: Any) -> WindowedStream:
        ms = _to_ms(time_ms)
        if ms < 0:
            raise InvalidProgramError(f"allowed_lateness(): must not be negative, got {ms}")
        self._allowed_lateness = ms
        return self

    def evictor(self, evictor: Any) -> WindowedStream:
        """Remove elements from a pane before and/or after the window function (CountEvictor,
        TimeEvictor, DeltaEvictor or your own Evictor); the pane then keeps every element."""

        if not isinstance(evictor, Evictor):
            raise InvalidProgramError(f"evictor(): expected an Evictor (e.g. CountEvictor.of(3)), got {_type_name(evictor)}")
        self._evictor = evictor
        return self

    def side_output_late_data(self, output_tag: Any) -> WindowedStream:
        """Elements too late for any window (after the watermark passed it plus the allowed lateness)
        go to this side output instead of being dropped: `result.get_side_output(output_tag)`."""

        if not isinstance(output_tag, OutputTag):
            raise InvalidProgramError(f"side_output_late_data() needs an OutputTag, got {type(output_tag).__name__}")
        self._late_data_tag = output_tag.tag_id
        return self

    def _window_op(self, kind: str, spec: tuple, output_type: Any) -> DataStream:

        ks = self._keyed_stream
        name = f"Window({self._assigner!r}, {kind})"
        factory = functools.partial(
            WindowOperator, ks._key_selector, self._assigner, self._trigger, spec, self._allowed_lateness, self._late_data_tag,
            self._evictor,
        )
        return self._finish(ks._one_input(name, factory, output_type, keyed=True))

    def _finish(self, ds: DataStream) -> DataStream:
        if self._parallelism is not None:
            ds._t.parallelism = self._parallelism
            ds._t.parallelism_configured = True
            ds._t.max_parallelism = self._parallelism
        return ds

    def reduce(self, reduce_function: Any, window_function: Any = None, output_type: Any = None) -> DataStream:
        _require_function("reduce", reduce_function, ReduceFunction, "ReduceFunction")
        pwf = _as_process_window_function("reduce", window_function)
        otype = output_type if output_type is not None or pwf is not None else self._keyed_stream.get_type()
        return self._window_op("reduce", ("reduce", _as_reduce_function(reduce_function), pwf), otype)

    def aggregate(self, aggregate_function: Any, window_function: Any = None, accumulator_type: Any = None,
                  output_type: Any = None) -> DataStream:

        if isinstance(aggregate_function, ColumnarAggregate):
            return self._columnar_aggregate(aggregate_function, window_function, output_type)
        if not isinstance(aggregate_function, AggregateFunction):
            raise InvalidProgramError(
                f"aggregate(): expected an AggregateFunction or a ColumnarAggregate, got {_type_name(aggregate_function)}"
            )
        pwf = _as_process_window_function("aggregate", window_function)
        return self._window_op("aggregate", ("aggregate", aggregate_function, pwf), output_type)

    def _columnar_aggregate(self, agg: Any, window_function: Any, output_type: Any) -> DataStream:


        time_windows = tuple(
            getattr(w, n) for n in ("TumblingEventTimeWindows", "SlidingEventTimeWindows",
                                    "TumblingProcessingTimeWindows", "SlidingProcessingTimeWindows") if hasattr(w, n)
        )
        problems = []
        if not isinstance(self._assigner, time_windows):
            problems.append(f"a tumbling or sliding time window (got {self._assigner!r})")
        if not isinstance(self._keyed_stream._key_selector, str):
            problems.append("key_by(<field name>) (got a key selector function)")
        if self._trigger is not None:
            problems.append("no custom trigger")
        if self._allowed_lateness:
            problems.append("no allowed lateness")
        if self._late_data_tag is not None:
            problems.append("no late data side output")
        if self._evictor is not None:
            problems.append("no evictor")
        if window_function is not None:
            problems.append("no window function")
        if problems:
            raise InvalidProgramError("aggregate(): a ColumnarAggregate needs " + ", ".join(problems))
        ks = self._keyed_stream
        name = f"ColumnarWindowAggregate({self._assigner!r})"
        factory = functools.partial(ColumnarWindowAggregateOperator, ks._key_selector, self._assigner, agg)
        return self._finish(ks._one_input(name, factory, output_type, keyed=True))

    def process(self, process_window_function: Any, output_type: Any = None) -> DataStream:
        if not isinstance(process_window_function, ProcessWindowFunction):
            raise InvalidProgramError(f"process(): expected a ProcessWindowFunction, got {_type_name(process_window_function)}")
        return self._window_op("process", ("process", process_window_function), output_type)

    def apply(self, window_function: Any, output_type: Any = None) -> DataStream:
        if not isinstance(window_function, WindowFunction):
            raise InvalidProgramError(f"apply(): expected a WindowFunction, got {_type_name(window_function)}")
        return self._window_op("apply", ("process", _WindowFunctionAdapter(window_function)), output_type)


class AllWindowedStream:
    """stream.window_all(assigner): one non-parallel window operator over a constant key (as Flink)."""

    def __init__(self, stream: DataStream, window_assigner: Any) -> None:
        keyed = stream.key_by(_NullKeySelector())
        self._ws = WindowedStream(keyed, window_assigner, parallelism=1)

    def get_execution_environment(self) -> StreamExecutionEnvironment:
        return self._ws.get_execution_environment()

    def trigger(self, trigger: Any) -> AllWindowedStream:
        self._ws.trigger(trigger)
        return self

    def allowed_lateness(self, time_ms: Any) -> AllWindowedStream:
        self._ws.allowed_lateness(time_ms)
        return self

    def evictor(self, evictor: Any) -> AllWindowedStream:
        self._ws.evictor(evictor)
        return self

    def side_output_late_data(self, output_tag: Any) -> AllWindowedStream:
        self._ws.side_output_late_data(output_tag)
        return self

    def reduce(self, reduce_function: Any, window_function: Any = None, output_type: Any = None) -> DataStream:
        wf = None if window_function is None else _AllWindowAdapter(window_function, _all_kind("reduce", window_function))
        return self._ws.reduce(reduce_function, wf, output_type)

    def aggregate(self, aggregate_function: Any, window_function: Any = None, accumulator_type: Any = None,
                  output_type: Any = None) -> DataStream:
        wf = None if window_function is None else _AllWindowAdapter(window_function, _all_kind("aggregate", window_function))
        return self._ws.aggregate(aggregate_function, wf, accumulator_type, output_type)

    def process(self, process_all_window_function: Any, output_type: Any = None) -> DataStream:
        if not hasattr(process_all_window_function, "process"):
            raise InvalidProgramError(f"process(): expected a ProcessAllWindowFunction, got {_type_name(process_all_window_function)}")
        return self._ws.process(_AllWindowAdapter(process_all_window_function, "process"), output_type)

    def apply(self, all_window_function: Any, output_type: Any = None) -> DataStream:
        if not hasattr(all_window_function, "apply"):
            raise InvalidProgramError(f"apply(): expected an AllWindowFunction, got {_type_name(all_window_function)}")
        return self._ws.process(_AllWindowAdapter(all_window_function, "apply"), output_type)


def _all_kind(op: str, fn: Any) -> str:
    if hasattr(fn, "process"):
        return "process"
    if hasattr(fn, "apply"):
        return "apply"
    raise InvalidProgramError(f"{op}(): window_function must be a ProcessAllWindowFunction or AllWindowFunction, got {_type_name(fn)}")


# -- ConnectedStreams -------------------------------------------------------------------------------


class BroadcastStream:
    """`stream.broadcast(map_state_descriptor, ...)` (PyFlink's BroadcastStream): only for connect()."""

    def __init__(self, stream: DataStream, descriptors: list[Any]) -> None:
        self.stream = stream
        self.broadcast_state_descriptors = descriptors

    def get_execution_environment(self) -> StreamExecutionEnvironment:
        return self.stream._env


class BroadcastConnectedStream:
    """`stream.connect(broadcast_stream)` (PyFlink's BroadcastConnectedStream)."""

    def __init__(self, stream: DataStream, broadcast_stream: BroadcastStream) -> None:
        self.non_broadcast_stream = stream
        self.broadcast_stream = broadcast_stream

    def process(self, func: Any, output_type: Any = None) -> DataStream:

        stream, descriptors = self.non_broadcast_stream, self.broadcast_stream.broadcast_state_descriptors
        keyed = isinstance(stream, KeyedStream)
        factory: Callable[[], Any]
        if isinstance(stream, KeyedStream):
            if not isinstance(func, KeyedBroadcastProcessFunction):
                raise InvalidProgramError(
                    f"process(): a keyed stream connected to a broadcast stream needs a KeyedBroadcastProcessFunction, got {_type_name(func)}"
                )
            make_operator = functools.partial(KeyedBroadcastProcessOperator, stream._key_selector, func, descriptors)
            factory = _declaring_key_type(make_operator, stream._key_type)
        else:
            if not isinstance(func, BroadcastProcessFunction):
                hint = "; key the stream first (key_by)" if isinstance(func, KeyedBroadcastProcessFunction) else ""
                raise InvalidProgramError(f"process(): expected a BroadcastProcessFunction, got {_type_name(func)}{hint}")
            factory = functools.partial(BroadcastProcessOperator, func, descriptors)
        t = TwoInputTransformation(
            name="Co-Process-Broadcast-Keyed" if keyed else "Co-Process-Broadcast",
            input1=stream._t, input2=self.broadcast_stream.stream._t, operator_factory=factory,
            output_type=output_type, keyed=keyed,
        )
        return DataStream(stream._env, t)


class ConnectedStreams:
    """stream1.connect(stream2) (PyFlink's ConnectedStreams)."""

    def __init__(self, env: StreamExecutionEnvironment, stream1: DataStream, stream2: DataStream) -> None:
        self._env = env
        self.stream1 = stream1
        self.stream2 = stream2

    def _is_keyed(self) -> bool:
        return isinstance(self.stream1, KeyedStream) and isinstance(self.stream2, KeyedStream)

    def key_by(self, key_selector1: Any, key_selector2: Any, key_type: Any = None) -> ConnectedStreams:
        return ConnectedStreams(
            self._env, self.stream1.key_by(key_selector1, key_type), self.stream2.key_by(key_selector2, key_type)
        )

    def _two_input(self, name: str, factory: Callable[[], Any], output_type: Any, keyed: bool) -> DataStream:
        t = TwoInputTransformation(
            name=name, input1=self.stream1._t, input2=self.stream2._t, operator_factory=factory,
            output_type=output_type, keyed=keyed,
        )
        return DataStream(self._env, t)

    def _keyed_co(self, name: str, fn: Any, output_type: Any) -> DataStream:

        s1, s2 = self.stream1, self.stream2
        if not (isinstance(s1, KeyedStream) and isinstance(s2, KeyedStream)):
            raise TypeError(f"{name}: both connected streams must be keyed (the callers check _is_keyed() first)")
        factory = _declaring_key_type(functools.partial(KeyedCoProcessOperator, s1._key_selector, s2._key_selector, fn), s1._key_type)
        return self._two_input(name, factory, output_type, True)

    def _co_map(self, kind: str, func: Any, output_type: Any) -> DataStream:
        """map / flat_map: a Co(Flat)MapFunction, run as a KeyedCoProcessFunction when both inputs are keyed."""

        cls, name, operator = {
            "map": (CoMapFunction, "Co-Map", CoStreamMap),
            "flat_map": (CoFlatMapFunction, "Co-Flat Map", CoStreamFlatMap),
        }[kind]
        if not isinstance(func, cls):
            raise InvalidProgramError(f"{kind}(): expected a {cls.__name__}, got {_type_name(func)}")
        if self._is_keyed():
            return self._keyed_co(name, _KeyedCoAdapter(func, kind), output_type)
        return self._two_input(name, functools.partial(operator, func), output_type, False)

    def map(self, func: Any, output_type: Any = None) -> DataStream:
        return self._co_map("map", func, output_type)

    def flat_map(self, func: Any, output_type: Any = None) -> DataStream:
        return self._co_map("flat_map", func, output_type)

    def process(self, func: Any, output_type: Any = None) -> DataStream:
        if self._is_keyed():
            if not isinstance(func, KeyedCoProcessFunction):
                raise InvalidProgramError(f"process(): keyed connected streams need a KeyedCoProcessFunction, got {_type_name(func)}")
            return self._keyed_co("Keyed Co-Process", func, output_type)
        if not isinstance(func, CoProcessFunction):
            hint = "; key both streams first (key_by)" if isinstance(func, KeyedCoProcessFunction) else ""
            raise InvalidProgramError(f"process(): expected a CoProcessFunction, got {_type_name(func)}{hint}")

        return self._two_input("Co-Process", functools.partial(CoProcessOperator, func), output_type, False)
