"""Sink V2: the interfaces (`api`), the writer operator and the committer coordinator that carry
the two-phase commit for every such sink."""
from runtime.api.connectors.sink.api import (
    WRITER_STATE,
    Committer,
    CommitterContext,
    DeliveryGuarantee,
    FinalCommittables,
    SinkTailEvent,
    SinkWriter,
    SinkWriterContext,
    TwoPhaseCommittingSink,
)
from runtime.api.connectors.sink.committer import CommitterCoordinator, CommitterCoordinatorProvider
from runtime.api.connectors.sink.writer_operator import SinkWriterOperator

__all__ = [
    "WRITER_STATE", "Committer", "CommitterContext", "CommitterCoordinator", "CommitterCoordinatorProvider", "DeliveryGuarantee", "FinalCommittables",
    "SinkTailEvent", "SinkWriter", "SinkWriterContext", "SinkWriterOperator", "TwoPhaseCommittingSink",
]
