"""FLIP-27 sources: the interfaces (`api`), the operator that hosts a reader, the coordinator that
hosts an enumerator, and test harnesses for connector authors (`testing`)."""
from runtime.api.connectors.source.api import (
    AddSplitEvent,
    Boundedness,
    NoMoreSplitsEvent,
    ReaderInfo,
    ReaderOutput,
    ReaderRegistrationEvent,
    RequestSplitEvent,
    SourceEventWrapper,
    SourceReader,
    SourceReaderBase,
    SourceReaderContext,
    SourceSplit,
    SplitEnumerator,
    SplitEnumeratorContext,
)
from runtime.api.connectors.source.coordinator import SourceCoordinator, SourceCoordinatorProvider, SplitAssignmentTracker
from runtime.api.connectors.source.reader_operator import SourceReaderOperator

__all__ = [
    "AddSplitEvent", "Boundedness", "NoMoreSplitsEvent", "ReaderInfo", "ReaderOutput", "ReaderRegistrationEvent",
    "RequestSplitEvent", "SourceCoordinator", "SourceCoordinatorProvider", "SourceEventWrapper", "SourceReader",
    "SourceReaderBase", "SourceReaderContext", "SourceReaderOperator", "SourceSplit", "SplitAssignmentTracker",
    "SplitEnumerator", "SplitEnumeratorContext",
]
