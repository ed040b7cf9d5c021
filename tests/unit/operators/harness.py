"""A small in-test harness that drives one operator directly (Flink: OneInputStreamOperatorTestHarness).

Test doubles, not mocks: a fake Output that records batches and watermarks in order, and a fake
ProcessingTimeService whose clock the test advances (timer callbacks run synchronously, like on
the task thread).
"""
from __future__ import annotations

import heapq
import itertools
from typing import Any, Callable, Iterable

import numpy as np

from runtime.api.operators.base import OperatorContext, StreamOperator
from runtime.core.keygroups import KeyGroupRange
from runtime.core.records import ColumnBatch, ObjectBatch, RecordBatch, Watermark


class CollectingOutput:
    def __init__(self) -> None:
        self.events: list[RecordBatch | Watermark] = []

    def emit(self, batch: RecordBatch) -> None:
        self.events.append(batch)

    def emit_watermark(self, watermark: Watermark) -> None:
        self.events.append(watermark)

    @property
    def batches(self) -> list[RecordBatch]:
        return [e for e in self.events if isinstance(e, RecordBatch)]

    @property
    def watermarks(self) -> list[int]:
        return [e.timestamp for e in self.events if isinstance(e, Watermark)]

    def records(self) -> list[tuple[Any, int | None]]:
        out: list[tuple[Any, int | None]] = []
        for b in self.batches:
            out.extend(b.records_with_timestamps())
        return out

    def values(self) -> list[Any]:
        return [v for v, _ in self.records()]

    def clear(self) -> None:
        self.events.clear()


class FakeProcessingTimeService:
    def __init__(self, now: int = 0) -> None:
        self.now = now
        self._timers: list[tuple[int, int, Callable[[int], None]]] = []
        self._seq = itertools.count()
        self.registered: list[int] = []

    def current_processing_time(self) -> int:
        return self.now

    def register_timer(self, timestamp_ms: int, callback: Callable[[int], None]) -> Any:
        self.registered.append(timestamp_ms)
        heapq.heappush(self._timers, (timestamp_ms, next(self._seq), callback))
        return timestamp_ms

    def advance_to(self, t: int) -> None:
        self.now = t
        while self._timers and self._timers[0][0] <= t:
            ts, _, cb = heapq.heappop(self._timers)
            cb(ts)

    @property
    def pending(self) -> int:
        return len(self._timers)


class _NoGateway:
    def send_event_to_coordinator(self, event: Any) -> None:
        pass


def make_context(
    output: CollectingOutput,
    pts: FakeProcessingTimeService,
    key_group_range: KeyGroupRange = KeyGroupRange(0, 127),
    max_parallelism: int = 128,
    config: dict[str, str] | None = None,
    subtask_index: int = 0,
    parallelism: int = 1,
) -> OperatorContext:
    return OperatorContext(
        job_id="job-test",
        job_name="test job",
        task_name="test task",
        operator_name="op",
        node_id=1,
        uid=None,
        subtask_index=subtask_index,
        parallelism=parallelism,
        max_parallelism=max_parallelism,
        attempt_number=0,
        key_group_range=key_group_range,
        output=output,
        processing_time_service=pts,
        event_gateway=_NoGateway(),
        config=dict(config or {}),
    )


class Harness:
    def __init__(
        self,
        operator: StreamOperator,
        key_group_range: KeyGroupRange = KeyGroupRange(0, 127),
        max_parallelism: int = 128,
        backend: str = "hashmap",
        now: int = 0,
        restore: dict[int, bytes] | None = None,
    ) -> None:
        self.op = operator
        self.output = CollectingOutput()
        self.pts = FakeProcessingTimeService(now)
        self.ctx = make_context(self.output, self.pts, key_group_range, max_parallelism, {"state.backend.type": backend})
        operator.setup(self.ctx)
        if restore is not None:
            operator.restore_state(restore)  # type: ignore[attr-defined]
        operator.open()

    def process(self, values: Iterable[Any], timestamps: Iterable[int] | None = None, input_index: int = 0) -> None:
        vals = list(values)
        ts = None if timestamps is None else np.asarray(list(timestamps), dtype=np.int64)
        self.op.process_batch(ObjectBatch(vals, ts), input_index)

    def process_columns(self, columns: dict[str, np.ndarray], timestamps: np.ndarray | None = None) -> None:
        self.op.process_batch(ColumnBatch(columns, timestamps))

    def watermark(self, ts: int, input_index: int = 0) -> None:
        self.op.process_watermark(Watermark(ts), input_index)

    def advance_processing_time(self, t: int) -> None:
        self.pts.advance_to(t)

    def close(self) -> None:
        self.op.finish()
        self.op.close()
