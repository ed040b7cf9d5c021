"""What `env.from_source(...)` and `ds.sink_to(...)` need from a connector (Flink's Source / Sink).

A Source is a FLIP-27 source (`runtime.api.connectors.source`): it creates a SplitEnumerator, run
on the JobMaster by the source's operator coordinator, and a SourceReader per subtask, hosted by
the one generic SourceReaderOperator. A source written before FLIP-27 overrides
`create_operator()` instead and has no enumerator (its splits are dealt out by the runtime).
A Sink builds one writer operator per subtask and, optionally, an OperatorCoordinator provider
(global commit on the JobMaster). Both objects are cloudpickled into the JobGraph, so they must
hold configuration only, never open resources.

A source's position is state (Flink's SourceReader.snapshotState, Bytewax's resume state): a
reader holds a list of splits, each a small plain value that says what is left to read and from
where. Its checkpoint is that list as operator list state `"splits"`, and the enumerator's
checkpoint what it has not handed out; on restore the runtime deals the lists of all old subtasks
out to the new ones (with an unchanged parallelism each subtask gets back exactly its own), so
every record after the checkpoint is emitted exactly once, at any new parallelism.

`RateLimiterStrategy` / `RateLimiter` (Flink's org.apache.flink.api.connector.source.util.ratelimit)
throttle a source without ever blocking the task thread: a limiter only answers whether a batch may
go now, and a source that may not returns InputStatus.NOTHING_AVAILABLE.
"""
from __future__ import annotations

import abc
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runtime.api.connectors.source.api import SPLITS_STATE, Boundedness, SourceReader, SourceReaderContext, SplitEnumerator, SplitEnumeratorContext
from runtime.api.connectors.source.coordinator import SourceCoordinatorProvider
from runtime.api.connectors.source.reader_operator import SourceReaderOperator
from runtime.api.operators.base import OperatorCoordinatorProvider, SourceOperator, StreamOperator
from runtime.core.errors import InvalidProgramError


class Source(abc.ABC):
    """Flink's Source (FLIP-27): `create_enumerator`, `restore_enumerator`, `create_reader`,
    `get_boundedness`. A pre-FLIP-27 source overrides `create_operator` and nothing of those."""

    def get_boundedness(self) -> Boundedness:
        return Boundedness.BOUNDED

    def create_reader(self, context: SourceReaderContext) -> SourceReader[Any]:
        raise NotImplementedError(f"{type(self).__name__} is not a FLIP-27 source (it has no create_reader)")

    def create_enumerator(self, context: SplitEnumeratorContext[Any]) -> SplitEnumerator[Any, Any]:
        raise NotImplementedError(f"{type(self).__name__} is not a FLIP-27 source (it has no create_enumerator)")

    def restore_enumerator(self, context: SplitEnumeratorContext[Any], checkpoint: Any) -> SplitEnumerator[Any, Any]:
        raise NotImplementedError(f"{type(self).__name__} is not a FLIP-27 source (it has no restore_enumerator)")

    @property
    def is_split_source(self) -> bool:
        """A FLIP-27 source: its enumerator runs on the JobMaster; else it builds its own operator."""
        return type(self).create_operator is Source.create_operator

    def create_operator(self) -> SourceOperator:
        """The operator of one subtask: for a FLIP-27 source, the generic reader operator
        (`env.from_source` gives it the watermark strategy: watermarks per split)."""
        return SourceReaderOperator(self)

    def coordinator_provider(self) -> OperatorCoordinatorProvider | None:
        return SourceCoordinatorProvider(self) if self.is_split_source else None

    def is_bounded(self) -> bool:
        return self.get_boundedness() is Boundedness.BOUNDED

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


# --- rate limiting -------------------------------------------------------------------------------

DEFAULT_BATCH_SECONDS = 0.01  # a throttled source emits about 10 ms worth of records per batch (its records wait for their batch: latency)
DEFAULT_BURST_SECONDS = 1.0  # after a stall it catches up by at most 1 s worth (Guava's SmoothBursty)


class RateLimiter:
    """A non-blocking token bucket: `try_acquire(n)` takes n permits if they are there, else False.

    Permits accrue at `permits_per_second` on `clock` (seconds, monotonic), up to `burst_seconds`
    worth; the bucket starts with one batch, so the first batch goes at once. Callers ask for at
    most `batch_size` permits at a time (about `batch_seconds` worth): output is then smooth.
    """

    def __init__(
        self,
        permits_per_second: float,
        clock: Callable[[], float] | None = None,
        batch_seconds: float = DEFAULT_BATCH_SECONDS,
        burst_seconds: float = DEFAULT_BURST_SECONDS,
    ) -> None:
        if not permits_per_second > 0:
            raise InvalidProgramError(f"RateLimiter: permits_per_second must be > 0, got {permits_per_second}")
        if not batch_seconds > 0 or burst_seconds < 0:
            raise InvalidProgramError(f"RateLimiter: need batch_seconds > 0 and burst_seconds >= 0 (got {batch_seconds}, {burst_seconds})")
        self.permits_per_second = float(permits_per_second)
        self.clock = clock or time.monotonic
        self.batch_size = max(1, int(self.permits_per_second * batch_seconds))
        self._capacity = max(float(self.batch_size), self.permits_per_second * burst_seconds)
        self._tokens = float(self.batch_size)
        self._last: float | None = None

    def _refill(self) -> None:
        now = self.clock()
        if self._last is not None and now > self._last:
            self._tokens = min(self._capacity, self._tokens + (now - self._last) * self.permits_per_second)
        if self._last is None or now > self._last:
            self._last = now

    def try_acquire(self, permits: int) -> bool:
        """Take `permits` (1..batch_size) now if available; never waits."""
        if permits > self._capacity:
            raise ValueError(f"RateLimiter: asked for {permits} permits at once, more than it can ever hold ({self._capacity:g})")
        self._refill()
        if permits <= self._tokens + 1e-9:
            self._tokens -= permits
            return True
        return False

    def seconds_until_available(self, permits: int) -> float:
        """How long until `permits` could be taken (0 if now)."""
        self._refill()
        return max(0.0, (permits - self._tokens) / self.permits_per_second)


@dataclass(frozen=True)
class RateLimiterStrategy:
    """How fast a source may emit, over all its subtasks (Flink's RateLimiterStrategy).

    `RateLimiterStrategy.per_second(r)`: every subtask gets a limiter of r / parallelism records
    per second. `clock` (seconds, monotonic; default time.monotonic) and `batch_seconds` (how much
    a batch holds) are for tests and for sources that want coarser batches.
    """

    records_per_second: float | None = None
    clock: Callable[[], float] | None = None
    batch_seconds: float = DEFAULT_BATCH_SECONDS

    @staticmethod
    def per_second(
        records_per_second: float, *, clock: Callable[[], float] | None = None, batch_seconds: float = DEFAULT_BATCH_SECONDS
    ) -> RateLimiterStrategy:
        if not records_per_second > 0:
            raise InvalidProgramError(f"RateLimiterStrategy.per_second: records_per_second must be > 0, got {records_per_second}")
        if not batch_seconds > 0:
            raise InvalidProgramError(f"RateLimiterStrategy.per_second: batch_seconds must be > 0, got {batch_seconds}")
        return RateLimiterStrategy(float(records_per_second), clock, float(batch_seconds))

    @staticmethod
    def no_op() -> RateLimiterStrategy:
        return RateLimiterStrategy(None)

    def create_rate_limiter(self, parallelism: int) -> RateLimiter | None:
        """The limiter of one subtask; None: unthrottled."""
        if self.records_per_second is None:
            return None
        return RateLimiter(self.records_per_second / max(1, parallelism), self.clock, self.batch_seconds)


__all__ = [
    "DEFAULT_BATCH_SECONDS", "RateLimiter", "RateLimiterStrategy", "SPLITS_STATE", "Sink", "Source",
]
