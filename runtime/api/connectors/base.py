"""What `env.from_source(...)` and `ds.sink_to(...)` need from a connector (Flink's Source / Sink).

A Source builds one SourceOperator per subtask; a Sink builds one writer operator per subtask and,
optionally, an OperatorCoordinator provider (global commit on the JobMaster). Both objects are
cloudpickled into the JobGraph, so they must hold configuration only, never open resources.
"""
from __future__ import annotations

import abc
from typing import Any

from runtime.api.operators.base import OperatorCoordinatorProvider, SourceOperator, StreamOperator


class Source(abc.ABC):
    @abc.abstractmethod
    def create_operator(self) -> SourceOperator:
        """A fresh reader for one subtask (it learns its index/parallelism at setup)."""

    def is_bounded(self) -> bool:
        return True

    def max_parallelism(self) -> int | None:
        """An upper bound on this source's parallelism (1 for non-parallel sources), or None."""
        return None

    def get_type_info(self) -> Any:
        return None


class Sink(abc.ABC):
    @abc.abstractmethod
    def create_writer(self) -> StreamOperator:
        """A fresh writer operator for one subtask."""

    def coordinator_provider(self) -> OperatorCoordinatorProvider | None:
        return None

    def default_name(self) -> str:
        return type(self).__name__
