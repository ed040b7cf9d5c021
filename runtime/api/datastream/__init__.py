"""runtime.api.datastream: PyFlink's pyflink.datastream names.

Names from modules written alongside this package (state descriptors, window assigners,
aggregates) resolve lazily through __getattr__, so importing this package never fails because
one of those modules is missing or itself imports this package.
"""
from __future__ import annotations

import importlib
from typing import Any

from runtime.api.common.configuration import RuntimeExecutionMode
from runtime.api.datastream import functions
from runtime.api.datastream.checkpoint_config import (
    CheckpointConfig,
    CheckpointStorage,
    EmbeddedRocksDBStateBackend,
    ExternalizedCheckpointCleanup,
    ExternalizedCheckpointRetention,
    FileSystemCheckpointStorage,
    HashMapStateBackend,
    StateBackend,
)
from runtime.api.datastream.data_stream import (
    AllWindowedStream,
    BroadcastConnectedStream,
    BroadcastStream,
    ConnectedStreams,
    DataStream,
    DataStreamSink,
    KeyedStream,
    SlotSharingGroup,
    WindowedStream,
)
from runtime.api.datastream.functions import (
    AggregateFunction,
    BroadcastProcessFunction,
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    FilterFunction,
    FlatMapFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    OutputTag,
    ProcessFunction,
    ProcessWindowFunction,
    ReduceFunction,
    RuntimeContext,
    SinkFunction,
    TimeDomain,
    TimerService,
    WindowFunction,
)
from runtime.api.datastream.stream_execution_environment import ExecutionConfig, StreamExecutionEnvironment
from runtime.core.checkpoint import CheckpointingMode

# name -> module that defines it (imported on first access)
_LAZY: dict[str, str] = {
    # state descriptors
    "ValueStateDescriptor": "runtime.api.datastream.state",
    "ListStateDescriptor": "runtime.api.datastream.state",
    "MapStateDescriptor": "runtime.api.datastream.state",
    "ReducingStateDescriptor": "runtime.api.datastream.state",
    "AggregatingStateDescriptor": "runtime.api.datastream.state",
    "StateTtlConfig": "runtime.api.datastream.state",
    "ValueState": "runtime.api.datastream.state",
    "ListState": "runtime.api.datastream.state",
    "MapState": "runtime.api.datastream.state",
    "ReducingState": "runtime.api.datastream.state",
    "AggregatingState": "runtime.api.datastream.state",
    # windows
    "TumblingEventTimeWindows": "runtime.api.datastream.window",
    "SlidingEventTimeWindows": "runtime.api.datastream.window",
    "TumblingProcessingTimeWindows": "runtime.api.datastream.window",
    "SlidingProcessingTimeWindows": "runtime.api.datastream.window",
    "EventTimeSessionWindows": "runtime.api.datastream.window",
    "ProcessingTimeSessionWindows": "runtime.api.datastream.window",
    "SessionWindowTimeGapExtractor": "runtime.api.datastream.window",
    "Evictor": "runtime.api.datastream.window",
    "CountEvictor": "runtime.api.datastream.window",
    "TimeEvictor": "runtime.api.datastream.window",
    "DeltaEvictor": "runtime.api.datastream.window",
    "TimestampedValue": "runtime.api.datastream.window",
    "DynamicEventTimeSessionWindows": "runtime.api.datastream.window",
    "DynamicProcessingTimeSessionWindows": "runtime.api.datastream.window",
    "CountTumblingWindowAssigner": "runtime.api.datastream.window",
    "CountSlidingWindowAssigner": "runtime.api.datastream.window",
    "GlobalWindows": "runtime.api.datastream.window",
    "WindowAssigner": "runtime.api.datastream.window",
    "MergingWindowAssigner": "runtime.api.datastream.window",
    "Window": "runtime.api.datastream.window",
    "Trigger": "runtime.api.datastream.window",
    "TriggerResult": "runtime.api.datastream.window",
    "EventTimeTrigger": "runtime.api.datastream.window",
    "ProcessingTimeTrigger": "runtime.api.datastream.window",
    "CountTrigger": "runtime.api.datastream.window",
    "PurgingTrigger": "runtime.api.datastream.window",
    "TimeWindow": "runtime.api.datastream.window",
    "CountWindow": "runtime.api.datastream.window",
    "GlobalWindow": "runtime.api.datastream.window",
    # vectorized aggregates
    "ColumnarAggregate": "runtime.api.datastream.aggregates",
    "Aggregates": "runtime.api.datastream.aggregates",
    "Count": "runtime.api.datastream.aggregates",
    "Sum": "runtime.api.datastream.aggregates",
    "Min": "runtime.api.datastream.aggregates",
    "Max": "runtime.api.datastream.aggregates",
    # connectors
    "Source": "runtime.api.connectors.base",
    "Sink": "runtime.api.connectors.base",
    "CollectionSource": "runtime.api.connectors.collection",
    "DataGeneratorSource": "runtime.api.connectors.generator",
    "NumberSequenceSource": "runtime.api.connectors.generator",
    "DeltaSink": "runtime.api.connectors.delta",
    "PrintSink": "runtime.api.connectors.print",
    "CloseableIterator": "runtime.api.connectors.collect",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'runtime.api.datastream' has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(mod), name)
    except (ImportError, AttributeError) as e:
        raise AttributeError(f"runtime.api.datastream.{name} is not available ({mod}: {e})") from e
    globals()[name] = value  # cache
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "AllWindowedStream",
    "BroadcastConnectedStream",
    "BroadcastProcessFunction",
    "BroadcastStream",
    "KeyedBroadcastProcessFunction",
    "CheckpointConfig",
    "CheckpointStorage",
    "CheckpointingMode",
    "ConnectedStreams",
    "DataStream",
    "DataStreamSink",
    "EmbeddedRocksDBStateBackend",
    "ExecutionConfig",
    "ExternalizedCheckpointCleanup",
    "ExternalizedCheckpointRetention",
    "FileSystemCheckpointStorage",
    "HashMapStateBackend",
    "KeyedStream",
    "RuntimeExecutionMode",
    "SlotSharingGroup",
    "StateBackend",
    "StreamExecutionEnvironment",
    "WindowedStream",
    "functions",
    "AggregateFunction",
    "CoFlatMapFunction",
    "CoMapFunction",
    "CoProcessFunction",
    "FilterFunction",
    "FlatMapFunction",
    "KeyedCoProcessFunction",
    "KeyedProcessFunction",
    "KeySelector",
    "MapFunction",
    "OutputTag",
    "ProcessFunction",
    "ProcessWindowFunction",
    "ReduceFunction",
    "RuntimeContext",
    "SinkFunction",
    "TimeDomain",
    "TimerService",
    "WindowFunction",
]
