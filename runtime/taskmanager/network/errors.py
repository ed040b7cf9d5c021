"""Errors of the data plane (result partitions, input channels, the data server).

Flink: PartitionException / PartitionNotFoundException / ProducerFailedException /
RemoteTransportException. Every message names the partition (and producer attempt) so a task
failure tells the JobMaster which producer to look at.
"""
from __future__ import annotations

from runtime.core.errors import MillraceError, ThrowableType


class PartitionError(MillraceError):
    """A result partition could not be produced to or consumed from."""

    def __init__(self, message: str, partition_id: str | None = None) -> None:
        super().__init__(message)
        self.partition_id = partition_id


class PartitionNotFoundError(PartitionError):
    """No producer registered the requested partition within the request timeout."""

    throwable_type = ThrowableType.PARTITION_DATA_MISSING_ERROR


class BlockingPartitionMissingError(PartitionError):
    """A committed blocking partition's files cannot be read (deleted, or lost with their disk): its
    producer must run again (Flink: PartitionNotFoundException -> PartitionDataMissingError)."""

    throwable_type = ThrowableType.PARTITION_DATA_MISSING_ERROR


class ProducerFailedError(PartitionError):
    """The producing task failed; the partition's data is incomplete."""

    consequence = True


class PartitionReleasedError(PartitionError):
    """The partition was released (producer canceled, or released by the JobMaster)."""

    consequence = True


class PartitionConnectionError(PartitionError):
    """The TCP connection to the producer's TaskManager failed or was lost."""

    consequence = True
