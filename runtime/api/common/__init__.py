"""runtime.api.common: PyFlink's pyflink.common (Types, Row, Time, WatermarkStrategy, ...)."""
from runtime.api.common.configuration import Configuration, RuntimeExecutionMode
from runtime.api.common.execution_config import ExecutionConfig
from runtime.api.common.restart_strategy import RestartStrategies, RestartStrategyConfiguration
from runtime.api.common.serialization import DeserializationSchema, Encoder, SerializationSchema, SimpleStringSchema
from runtime.api.common.time import Duration, Time
from runtime.api.common.typeinfo import (
    BasicTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    PickledBytesTypeInfo,
    RowTypeInfo,
    TupleTypeInfo,
    TypeInformation,
    Types,
)
from runtime.api.common.watermark_strategy import FieldTimestampAssigner, TimestampAssigner, WatermarkStrategy
from runtime.api.execution import JobClient, JobExecutionResult
from runtime.core.checkpoint import CheckpointingMode
from runtime.core.row import Row
from runtime.core.states import JobStatus

__all__ = [
    "BasicTypeInfo",
    "CheckpointingMode",
    "Configuration",
    "DeserializationSchema",
    "Duration",
    "Encoder",
    "ExecutionConfig",
    "FieldTimestampAssigner",
    "JobClient",
    "JobExecutionResult",
    "JobStatus",
    "ListTypeInfo",
    "MapTypeInfo",
    "PickledBytesTypeInfo",
    "RestartStrategies",
    "RestartStrategyConfiguration",
    "Row",
    "RowTypeInfo",
    "SerializationSchema",
    "SimpleStringSchema",
    "RuntimeExecutionMode",
    "Time",
    "TimestampAssigner",
    "TupleTypeInfo",
    "TypeInformation",
    "Types",
    "WatermarkStrategy",
]
