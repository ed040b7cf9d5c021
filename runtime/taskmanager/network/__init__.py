"""The TaskManager's data plane: result partitions, record writers, input gates, partitioners,
credit-based flow control over TCP (see environment.py for the threading model)."""
from runtime.taskmanager.network.environment import NetworkConfig, NetworkEnvironment
from runtime.taskmanager.network.errors import (
    PartitionConnectionError,
    PartitionError,
    PartitionNotFoundError,
    PartitionReleasedError,
    ProducerFailedError,
)
from runtime.taskmanager.network.input import InputGate
from runtime.taskmanager.network.partition import ResultPartition, ResultPartitionID, ResultPartitionManager
from runtime.taskmanager.network.partitioners import StreamPartitioner, create_partitioner
from runtime.taskmanager.network.valve import StatusWatermarkValve
from runtime.taskmanager.network.writer import OutputFlusher, RecordWriter

__all__ = [
    "InputGate",
    "NetworkConfig",
    "NetworkEnvironment",
    "OutputFlusher",
    "PartitionConnectionError",
    "PartitionError",
    "PartitionNotFoundError",
    "PartitionReleasedError",
    "ProducerFailedError",
    "RecordWriter",
    "ResultPartition",
    "ResultPartitionID",
    "ResultPartitionManager",
    "StatusWatermarkValve",
    "StreamPartitioner",
    "create_partitioner",
]
