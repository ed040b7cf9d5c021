"""A tiny in-test harness that drives operators directly (no TaskManager, no network)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from runtime.api.operators.base import InputStatus, OperatorContext, SourceOperator, StreamOperator
from runtime.core.keygroups import compute_key_group_range_for_operator_index
from runtime.core.records import ObjectBatch, RecordBatch, Watermark


@dataclass
class CollectingOutput:
    elements: list[Any] = field(default_factory=list)  # batches and watermarks, in order

    def emit(self, batch: RecordBatch) -> None:
        self.elements.append(batch)

    def emit_watermark(self, watermark: Watermark) -> None:
        self.elements.append(watermark)

    @property
    def batches(self) -> list[RecordBatch]:
        return [e for e in self.elements if not isinstance(e, Watermark)]

    @property
    def watermarks(self) -> list[int]:
        return [e.timestamp for e in self.elements if isinstance(e, Watermark)]

    def records(self) -> list[Any]:
        return [r for b in self.batches for r in b.rows()]

    def timestamps(self) -> list[int | None]:
        return [t for b in self.batches for _, t in b.records_with_timestamps()]


class FakeProcessingTimeService:
    def __init__(self, now: int = 0) -> None:
        self.now = now
        self.timers: list[tuple[int, Callable[[int], None]]] = []

    def current_processing_time(self) -> int:
        return self.now

    def register_timer(self, timestamp_ms: int, callback: Callable[[int], None]) -> Any:
        self.timers.append((timestamp_ms, callback))
        return len(self.timers)


@dataclass
class FakeEventGateway:
    events: list[Any] = field(default_factory=list)
    coordinator: Any = None
    subtask: int = 0
    attempt: int = 0

    def send_event_to_coordinator(self, event: Any) -> None:
        self.events.append(event)
        if self.coordinator is not None:
            self.coordinator.handle_event_from_operator(self.subtask, self.attempt, event)


def make_context(
    output: CollectingOutput | None = None,
    subtask: int = 0,
    parallelism: int = 1,
    max_parallelism: int = 128,
    attempt: int = 0,
    gateway: FakeEventGateway | None = None,
    name: str = "op",
) -> OperatorContext:
    return OperatorContext(
        job_id="job-1",
        job_name="test job",
        task_name=name,
        operator_name=name,
        node_id=1,
        uid=None,
        subtask_index=subtask,
        parallelism=parallelism,
        max_parallelism=max_parallelism,
        attempt_number=attempt,
        key_group_range=compute_key_group_range_for_operator_index(max_parallelism, parallelism, subtask),
        output=output or CollectingOutput(),
        processing_time_service=FakeProcessingTimeService(),
        event_gateway=gateway or FakeEventGateway(subtask=subtask, attempt=attempt),
    )


def open_operator(op: StreamOperator, **ctx_kwargs: Any) -> CollectingOutput:
    out = CollectingOutput()
    op.setup(make_context(out, **ctx_kwargs))
    op.open()
    return out


def run_one_input(op: StreamOperator, batches: list[RecordBatch], **ctx_kwargs: Any) -> CollectingOutput:
    out = open_operator(op, **ctx_kwargs)
    for b in batches:
        op.process_batch(b)
    op.end_input()
    op.finish()
    op.close()
    return out


def run_source(op: SourceOperator, **ctx_kwargs: Any) -> CollectingOutput:
    out = open_operator(op, **ctx_kwargs)
    for _ in range(100_000):
        if op.emit_next() is InputStatus.END_OF_INPUT:
            break
    op.finish()
    op.close()
    return out


def obj(values: list[Any], ts: list[int] | None = None) -> ObjectBatch:
    return ObjectBatch(values, None if ts is None else np.asarray(ts, dtype=np.int64))
