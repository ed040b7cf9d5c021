"""runtime.api.common: PyFlink's pyflink.common (Types, Row, Time, WatermarkStrategy, ...)."""
from runtime.api.common.configuration import Configuration, RuntimeExecutionMode
from runtime.api.common.serialization import Encoder
from runtime.api.common.restart_strategy import RestartStrategies, RestartStrategyConfiguration
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
from runtime.core.checkpoint import CheckpointingMode
from runtime.core.row import Row

__all__ = [
    "BasicTypeInfo",
    "CheckpointingMode",
    "Configuration",
    "Duration",
    "Encoder",
    "FieldTimestampAssigner",
    "ListTypeInfo",
    "MapTypeInfo",
    "PickledBytesTypeInfo",
    "RestartStrategies",
    "RestartStrategyConfiguration",
    "Row",
    "RowTypeInfo",
    "RuntimeExecutionMode",
    "Time",
    "TimestampAssigner",
    "TupleTypeInfo",
    "TypeInformation",
    "Types",
    "WatermarkStrategy",
]
