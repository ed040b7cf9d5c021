"""Test harnesses for Sink V2 connector authors (Flink's TestSinkV2 and TestingSinkWriterContext).

`SinkHarness(sink, parallelism)` runs the generic wrapper in-process: one `SinkWriterOperator` per
subtask and the `CommitterCoordinator` with the sink's committer, wired as the runtime wires them
(tails reach the coordinator as events). `checkpoint(n)` snapshots every writer and returns the
committables per subtask as a checkpoint holds them; `complete(n, held)` commits them and tells the
writers; `fail(subtask)` ends an attempt without its tail (the writer aborts) and the scheduler
gives up on it; `restart(n, held)` restores every subtask from a checkpoint as new attempts;
`finish()` ends the input and commits the tails.
"""
from __future__ import annotations

from typing import Any

from runtime.api.connectors.sink.api import WRITER_STATE
from runtime.api.connectors.sink.committer import CommitterCoordinator
from runtime.api.connectors.sink.writer_operator import SinkWriterOperator
from runtime.core.checkpoint import StateInitializationContext
from runtime.core.keygroups import KeyGroupRange
from runtime.core.operators import FixedCoordinatorContext, OperatorContext
from runtime.core.records import RecordBatch, Watermark, WatermarkStatus


class _Gateway:
    def __init__(self, coordinator: CommitterCoordinator, subtask: int, attempt: int) -> None:
        self.coordinator, self.subtask, self.attempt = coordinator, subtask, attempt

    def send_event_to_coordinator(self, event: Any) -> None:
        self.coordinator.handle_event_from_operator(self.subtask, self.attempt, event)


class _NoOutput:
    def emit(self, batch: RecordBatch) -> None: ...

    def emit_watermark(self, watermark: Watermark) -> None: ...

    def emit_side(self, tag: str, batch: RecordBatch) -> None: ...

    def emit_watermark_status(self, status: WatermarkStatus) -> None: ...


class _NoTimers:
    def current_processing_time(self) -> int:
        return 0

    def register_timer(self, timestamp_ms: int, callback: Any) -> Any:
        return None


class SinkHarness:
    __test__ = False

    def __init__(self, sink: Any, parallelism: int = 1, job_id: str = "job") -> None:
        self.sink, self.parallelism, self.job_id = sink, parallelism, job_id
        self.coordinator: CommitterCoordinator = sink.coordinator_provider().create(FixedCoordinatorContext(job_id, sink.default_name(), parallelism))
        self.coordinator.start()
        self.attempts = [0] * parallelism
        self.writers = [self._open(i, None) for i in range(parallelism)]

    def _open(self, subtask: int, restored: tuple[int, list[Any]] | None) -> SinkWriterOperator:
        op = self.sink.create_writer()
        ctx = OperatorContext(
            job_id=self.job_id, job_name="test", task_name="sink", operator_name="sink", node_id=1, uid=None,
            subtask_index=subtask, parallelism=self.parallelism, max_parallelism=128, attempt_number=self.attempts[subtask],
            key_group_range=KeyGroupRange(0, 127), output=_NoOutput(), processing_time_service=_NoTimers(),
            event_gateway=_Gateway(self.coordinator, subtask, self.attempts[subtask]),
        )
        op.setup(ctx)
        if restored is None:
            op.initialize_state(StateInitializationContext())
        else:
            op.initialize_state(StateInitializationContext(restored_checkpoint_id=restored[0], operator_lists={WRITER_STATE: restored[1]}))
        op.open()
        return op

    def write(self, subtask: int, batch: RecordBatch) -> None:
        self.writers[subtask].process_batch(batch)

    def checkpoint(self, checkpoint_id: int) -> list[list[Any]]:
        snaps = [w.snapshot_state(checkpoint_id) for w in self.writers]
        self._states = {i: list(s.operator_lists.get(WRITER_STATE, [])) for i, s in enumerate(snaps)}
        return [list(s.committables or []) for s in snaps]

    def complete(self, checkpoint_id: int, held: list[list[Any]]) -> None:
        self.coordinator.notify_checkpoint_complete(checkpoint_id, held)
        for w in self.writers:
            w.notify_checkpoint_complete(checkpoint_id)

    def fail(self, subtask: int) -> None:
        self.writers[subtask].close()  # no tail: the writer aborts
        self.coordinator.execution_attempt_failed(subtask, self.attempts[subtask])

    def restart(self, checkpoint_id: int | None, held: list[list[Any]]) -> None:
        """Every subtask restarts from `checkpoint_id` (None: from scratch) as a new attempt."""
        for i, w in enumerate(self.writers):
            w.close()
            self.attempts[i] += 1
        self.coordinator.reset_to_checkpoint(checkpoint_id, held, None)
        states = getattr(self, "_states", {}) if checkpoint_id is not None else {}
        self.writers = [self._open(i, (checkpoint_id, states.get(i, [])) if checkpoint_id is not None else None) for i in range(self.parallelism)]

    def finish(self) -> dict[str, Any]:
        for w in self.writers:
            w.end_input()
        result = self.coordinator.on_job_finished()
        for w in self.writers:
            w.close()
        self.coordinator.close()
        return result

    def cancel(self) -> None:
        for w in self.writers:
            w.close()
        self.coordinator.close()
