"""The one operator that hosts any Sink V2 writer (Flink's SinkWriterOperator with the committer's
pre-commit half).

At a checkpoint it hands the writer's new committables to the checkpoint together with every
earlier one no completed checkpoint covers yet (an aborted checkpoint's go again with the next:
committers are idempotent), and the writer's own state as operator list state. At the end of
input it sends the same uncommitted ones plus the last as the tail. An attempt that ends without
sending its tail aborts its writer (what it wrote and never handed over goes).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime.api.connectors.sink.api import WRITER_STATE, SinkTailEvent, SinkWriter
from runtime.core.checkpoint import OperatorSnapshot, StateInitializationContext
from runtime.core.operators import StreamOperator
from runtime.core.records import RecordBatch


@dataclass
class _WriterContext:
    job_id: str
    subtask_index: int
    parallelism: int
    attempt_number: int
    restored_state: list[Any] = field(default_factory=list)
    config: Mapping[str, str] = field(default_factory=dict)
    restored_checkpoint_id: int | None = None


class SinkWriterOperator(StreamOperator):
    def __init__(self, sink: Any) -> None:
        super().__init__()
        self.sink = sink
        self.writer: SinkWriter[Any] | None = None
        self._restored_state: list[Any] = []
        self._restored_checkpoint_id: int | None = None
        # checkpoint id -> committables handed to it whose completion this subtask has not heard of
        self._pending: dict[int, list[Any]] = {}
        self._reported = False

    def initialize_state(self, context: StateInitializationContext) -> None:
        self._restored_state = list(context.operator_lists.get(WRITER_STATE, [])) if context.is_restored else []
        self._restored_checkpoint_id = context.restored_checkpoint_id

    def open(self) -> None:
        assert self.ctx is not None
        c = self.ctx
        context = _WriterContext(
            c.job_id, c.subtask_index, c.parallelism, c.attempt_number, self._restored_state, dict(c.config), self._restored_checkpoint_id,
        )
        self.writer = self.sink.create_sink_writer(context)

    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        if len(batch):
            assert self.writer is not None
            self.writer.write(batch)

    def _uncommitted(self) -> list[Any]:
        return [c for _, cs in sorted(self._pending.items()) for c in cs]

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot:
        assert self.writer is not None
        self.writer.flush(False)
        self._pending[checkpoint_id] = list(self.writer.prepare_commit())
        return OperatorSnapshot(committables=self._uncommitted(), operator_lists={WRITER_STATE: list(self.writer.snapshot_state(checkpoint_id))})

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        for cid in [c for c in self._pending if c <= checkpoint_id]:
            del self._pending[cid]

    def _report(self) -> None:
        if self._reported:
            return
        assert self.writer is not None and self.ctx is not None
        self.writer.flush(True)
        tail = self._uncommitted() + list(self.writer.prepare_commit())
        self.ctx.event_gateway.send_event_to_coordinator(SinkTailEvent(tail))
        self._reported = True

    def end_input(self, input_index: int = 0) -> None:
        self._report()

    def finish(self) -> None:
        self._report()

    def close(self) -> None:
        if self.writer is None:
            return
        try:
            if not self._reported:
                self.writer.abort()  # nobody commits what was never handed over; handed-over files are the committer's
        finally:
            self.writer.close()
