"""Messages of a job that failed over and checkpointed, as the Dispatcher hands them to the REST API."""
from __future__ import annotations

from types import SimpleNamespace

from runtime.core.states import ExecutionState, JobStatus
from runtime.jobmanager.checkpoint.stats import CheckpointStatsTracker
from runtime.rpc import messages as m

POISON = m.ErrorInfo(
    type_name="ValueError", message="record 7 is poisoned\nbatch 0, row 7 (restart strategy fixed-delay (1 attempts, 100 ms) exhausted after 1 restarts)",
    traceback="Traceback (most recent call last):\n  ...\nValueError: record 7 is poisoned", task="Map (1/2)#1", operator="Map", task_manager="tm-2",
)
LOST = m.ErrorInfo(type_name="TaskManagerLostError", message="TaskManager tm-1 is gone", task="Map (2/2)#0", task_manager="tm-1")
ECHO = m.ErrorInfo(type_name="ProducerFailedError", message="the producer Source (1/1) failed", task="Sink (1/1)#0", task_manager="tm-1")


def failed_job_details(error: m.ErrorInfo | None = POISON, failure_time_ms: int = 5_000) -> m.JobDetailsMessage:
    subtask = m.SubtaskDetails(
        subtask_index=0, state=ExecutionState.FAILED, attempt_number=1, attempt_id="a1", tm_id="tm-2", host="h",
        state_timestamps_ms={"DEPLOYING": 3_500, "FAILED": 4_900}, failure=error,
    )
    vertex = m.VertexDetails(vertex_id="v1", name="Map", parallelism=1, max_parallelism=128, subtasks=[subtask])
    return m.JobDetailsMessage(
        job_id="j1", job_name="ft", status=JobStatus.FAILED if error else JobStatus.RUNNING, start_time_ms=1_000,
        end_time_ms=5_100 if error else None, vertices=[vertex], error=error, failure_time_ms=failure_time_ms if error else None,
    )


def job_exceptions_message() -> m.JobExceptionsMessage:
    """One restart after a lost TaskManager (with an echo of it), then the poisoned record exhausted the strategy.

    The scheduler lists its history newest first; here it comes oldest first: the REST API sorts.
    """
    return m.JobExceptionsMessage(
        job_id="j1", root_exception=POISON, num_restarts=1, restart_strategy="fixed-delay (1 attempts, 100 ms)",
        entries=[
            m.ExceptionHistoryEntryMessage(timestamp_ms=3_000, error=LOST, restarted_tasks=2, global_failure=True, concurrent=[ECHO]),
            m.ExceptionHistoryEntryMessage(timestamp_ms=4_900, error=POISON, restarted_tasks=0),
        ],
    )


def checkpoint_statistics_message() -> m.CheckpointStatisticsMessage:
    """#1 completed, #2 failed, #3 in progress with one of two acknowledgements; restored once from #1."""
    now = [0]
    tracker = CheckpointStatsTracker()
    tracker._now_ms = lambda: now[0]  # type: ignore[method-assign]  # the tracker has no clock to inject: the test sets its time
    tracker.report_pending(1, 1_000, 2)
    now[0] = 1_100
    tracker.report_ack(1, 1_000)
    now[0] = 1_150
    tracker.report_ack(1, 1_048)
    now[0] = 1_162  # the Delta commit took 12 ms after the last acknowledgement
    tracker.report_completed(1, SimpleNamespace(duration_ms=150, state_size=3 * 1024 * 1024), "/warehouse/_checkpoints/j1")
    tracker.report_pending(2, 2_000, 2)
    now[0] = 2_600
    tracker.report_failed(2, "checkpoint 2 expired before completing\n(timeout 600 ms)")
    tracker.report_restored(1)
    tracker.report_pending(3, 3_000, 2)
    now[0] = 3_100
    tracker.report_ack(3, 10)
    return m.CheckpointStatisticsMessage(
        job_id="j1", enabled=True, interval_ms=1_000, mode="EXACTLY_ONCE", path="/warehouse/_checkpoints/j1",
        statistics_json=tracker.snapshot().model_dump_json(),
    )
