"""The stream operator contract (Flink's StreamOperator and what it is given): defined in
`runtime.core.operators`, low in the layers, so the state backends and the TaskManager use them
without loading the API; re-exported here at PyFlink's path."""
from runtime.core.operators import (  # re-exported
    InputStatus,
    OperatorContext,
    OperatorCoordinator,
    OperatorCoordinatorProvider,
    OperatorEventGateway,
    Output,
    ProcessingTimeService,
    SourceOperator,
    StreamOperator,
    TaskMetrics,
)

__all__ = [
    "Output",
    "ProcessingTimeService",
    "OperatorEventGateway",
    "TaskMetrics",
    "OperatorContext",
    "StreamOperator",
    "InputStatus",
    "SourceOperator",
    "OperatorCoordinator",
    "OperatorCoordinatorProvider",
]
