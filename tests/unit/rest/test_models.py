"""Mapping the runtime's messages to Flink-shaped REST bodies (pure)."""
from __future__ import annotations

import pytest

from runtime.core.states import ExecutionState, JobStatus, SlotState
from runtime.rest import models as rm
from runtime.rpc import messages as m
from tests.unit.rest._fault_tolerance import ECHO, LOST, POISON, failed_job_details

E = ExecutionState


@pytest.mark.parametrize(
    ("ratio", "level"),
    [(0.0, "ok"), (0.10, "ok"), (0.1001, "low"), (0.5, "low"), (0.5001, "high"), (1.0, "high")],
)
def test_backpressure_level_follows_flinks_thresholds(ratio: float, level: str) -> None:
    assert rm.backpressure_level(ratio) == level


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ([E.RUNNING, E.RUNNING], E.RUNNING),
        ([E.FINISHED, E.FINISHED], E.FINISHED),
        ([E.FINISHED, E.DEPLOYING], E.RUNNING),
        ([E.RUNNING, E.FAILED, E.CANCELING], E.FAILED),
        ([E.RUNNING, E.CANCELING], E.CANCELING),
        ([E.CANCELED, E.FINISHED], E.CANCELED),
        ([E.SCHEDULED, E.DEPLOYING], E.DEPLOYING),
        ([E.CREATED, E.SCHEDULED], E.SCHEDULED),
        ([], E.CREATED),
    ],
)
def test_vertex_state_aggregates_its_subtasks(states: list[ExecutionState], expected: ExecutionState) -> None:
    assert rm.aggregate_vertex_state(states) is expected


def _subtask(i: int, state: ExecutionState, ts: dict[str, int], records_out: int, ratio: float, tm: str | None = "tm-1") -> m.SubtaskDetails:
    return m.SubtaskDetails(
        subtask_index=i, state=state, attempt_number=0, attempt_id=f"a{i}", tm_id=tm, host="h" if tm else None,
        state_timestamps_ms=ts, metrics=m.TaskMetricsSnapshot(records_in=10 * i, records_out=records_out, bytes_in=7, bytes_out=3),
        backpressured_ms=100 * i, backpressure_ratio=ratio,
    )


def _running_job() -> m.JobDetailsMessage:
    src = m.VertexDetails(
        vertex_id="v1", name="Source", parallelism=2, max_parallelism=128,
        subtasks=[
            _subtask(0, E.RUNNING, {"DEPLOYING": 1_000, "RUNNING": 1_100}, 5, 0.05),
            _subtask(1, E.RUNNING, {"DEPLOYING": 1_050, "RUNNING": 1_150}, 7, 0.7),
        ],
    )
    sink = m.VertexDetails(
        vertex_id="v2", name="Sink", parallelism=1, max_parallelism=128,
        subtasks=[_subtask(0, E.SCHEDULED, {"CREATED": 900}, 0, 0.0, tm=None)],
    )
    return m.JobDetailsMessage(
        job_id="j1", job_name="job", status=JobStatus.RUNNING, start_time_ms=900,
        status_timestamps_ms={"CREATED": 900, "RUNNING": 950}, vertices=[src, sink],
    )


def test_running_job_details_have_flinks_shape_and_sums() -> None:
    d = rm.job_details(_running_job(), now_ms=2_000).model_dump(mode="json")
    assert (d["jid"], d["state"], d["start-time"], d["end-time"], d["duration"], d["now"]) == ("j1", "RUNNING", 900, -1, 1_100, 2_000)
    assert d["timestamps"]["RUNNING"] == 950 and d["timestamps"]["FINISHED"] == 0
    assert d["status-counts"]["RUNNING"] == 2 and d["status-counts"]["SCHEDULED"] == 1
    src, sink = d["vertices"]
    assert src["status"] == "RUNNING" and src["tasks"]["RUNNING"] == 2
    assert src["start-time"] == 1_000 and src["end-time"] == -1 and src["duration"] == 1_000
    assert src["metrics"] == {"read-bytes": 14, "write-bytes": 6, "read-records": 10, "write-records": 12, "accumulated-backpressured-time": 100}
    # the vertex shows its worst subtask
    assert src["backpressure-ratio"] == 0.7 and src["backpressure-level"] == "high"
    assert [s["backpressure-level"] for s in src["subtasks"]] == ["ok", "high"]
    assert src["subtasks"][1]["taskmanager-id"] == "tm-1" and src["subtasks"][1]["attempt"] == 0
    assert sink["status"] == "SCHEDULED" and sink["start-time"] == -1 and sink["duration"] == -1
    assert sink["subtasks"][0]["taskmanager-id"] is None
    assert d["root-exception"] is None


def test_failed_job_details_name_the_root_cause_and_where() -> None:
    msg = _running_job()
    err = m.ErrorInfo(
        type_name="ValueError", message="record 7 is poisoned", traceback="Traceback ...", task="Map (1/2)#0", operator="Map", task_manager="tm-9"
    )
    failed = msg.model_copy(update={"status": JobStatus.FAILED, "end_time_ms": 3_000, "error": err, "failure_time_ms": 2_500})
    d = rm.job_details(failed, now_ms=4_000).model_dump(mode="json")
    assert (d["end-time"], d["duration"]) == (3_000, 2_100)
    root = d["root-exception"]
    assert root["exceptionName"] == "ValueError" and root["message"] == "record 7 is poisoned"
    assert (root["taskName"], root["operator"], root["taskManagerId"], root["timestamp"]) == ("Map (1/2)#0", "Map", "tm-9", 2_500)
    exc = rm.job_exceptions(failed).model_dump(mode="json")
    assert exc["root-exception"].startswith("ValueError: record 7 is poisoned") and "tm-9" in exc["root-exception"]
    assert len(exc["exceptionHistory"]["entries"]) == 1


def test_finished_subtask_reports_no_backpressure() -> None:
    st = _subtask(0, E.FINISHED, {"DEPLOYING": 10, "FINISHED": 30}, 1, 0.9)
    info = rm.subtask_info(st, now_ms=100)
    assert (info.start_time, info.end_time, info.duration) == (10, 30, 20)
    assert info.backpressure_level == "ok" and info.metrics.accumulated_backpressured_time == 0


def test_job_overview_end_time_is_minus_one_while_running() -> None:
    running = rm.job_overview(m.JobOverview(job_id="a", job_name="n", status=JobStatus.RUNNING, start_time_ms=1_000, duration_ms=5), now_ms=1_500)
    assert running.model_dump(by_alias=True)["end-time"] == -1 and running.duration == 500
    done = rm.job_overview(m.JobOverview(job_id="a", job_name="n", status=JobStatus.FINISHED, start_time_ms=1_000, duration_ms=200), now_ms=9_000)
    assert done.model_dump(by_alias=True)["end-time"] == 1_200 and done.duration == 200


def test_task_manager_details_free_resources_are_the_free_slots_share() -> None:
    info = m.TaskManagerInfo(
        tm_id="tm-1", host="h", pid=42, data_port=5000, slots_total=4, slots_free=1, heartbeat_age_ms=300,
        resource_profile=m.ResourceProfile(cpu_cores=4, task_heap_mb=2048, managed_memory_mb=512),
    )
    d = rm.task_manager_details(info).model_dump(mode="json")
    assert (d["id"], d["slotsNumber"], d["freeSlots"], d["timeSinceLastHeartbeat"], d["pid"]) == ("tm-1", 4, 1, 300, 42)
    assert d["totalResource"] == {"cpuCores": 4.0, "taskHeapMemory": 2048, "taskOffHeapMemory": 0, "managedMemory": 512}
    assert d["freeResource"] == {"cpuCores": 1.0, "taskHeapMemory": 512, "taskOffHeapMemory": 0, "managedMemory": 128}


def test_task_manager_details_with_dynamic_slots_show_the_slots_and_the_free_remainder() -> None:
    heavy = m.ResourceProfile(cpu_cores=2, task_heap_mb=1024, managed_memory_mb=256)
    info = m.TaskManagerInfo(
        tm_id="tm-1", host="h", pid=42, data_port=5000, slots_total=3, slots_free=1, heartbeat_age_ms=300,
        resource_profile=m.ResourceProfile(cpu_cores=4, task_heap_mb=2048, managed_memory_mb=512),
        free_resources=m.ResourceProfile(cpu_cores=1.5, task_heap_mb=768, managed_memory_mb=192),
        allocated_resources=m.ResourceProfile(cpu_cores=2.5, task_heap_mb=1280, managed_memory_mb=320),
        default_slot=m.ResourceProfile(), dynamic_slots=True,
        slots=[m.SlotStatus(slot_index=0, state=SlotState.ACTIVE, allocation_id="x", job_id="j", resource_profile=heavy)],
    )
    d = rm.task_manager_details(info).model_dump(mode="json")
    assert d["freeResource"]["cpuCores"] == 1.5 and d["allocatedResource"]["taskHeapMemory"] == 1280 and d["dynamicSlots"]
    assert d["allocatedSlots"] == [{
        "index": 0, "jobId": "j", "allocationId": "x", "state": "ACTIVE",
        "resource": {"cpuCores": 2.0, "taskHeapMemory": 1024, "taskOffHeapMemory": 0, "managedMemory": 256},
    }]


def test_models_parse_their_own_json_by_alias() -> None:
    ov = rm.Overview(taskmanagers=1, slots_total=2, slots_available=1, jobs_running=1, jobs_finished=0, jobs_cancelled=0, jobs_failed=0, millrace_version="1")
    dumped = ov.model_dump_json()
    assert '"slots-total":2' in dumped
    assert rm.Overview.model_validate_json(dumped) == ov


def test_exception_history_is_newest_first_and_truncated_at_flinks_default() -> None:
    history = m.JobExceptionsMessage(
        job_id="j1", num_restarts=20, restart_strategy="fixed-delay (30 attempts, 0 ms)",
        entries=[m.ExceptionHistoryEntryMessage(timestamp_ms=1_000 + i, error=LOST, restarted_tasks=1) for i in range(20)],
    )
    exc = rm.job_exceptions(failed_job_details(error=None), history)
    assert [e.timestamp for e in exc.exception_history.entries] == [1_019 - i for i in range(rm.EXCEPTION_HISTORY_SIZE)]
    assert exc.exception_history.truncated and exc.restarts == 20


def test_a_root_cause_the_scheduler_did_not_record_gets_its_own_entry_with_the_other_failures() -> None:
    # e.g. the job failed while not running, or its commit at the end failed: only the job details know the cause
    details = failed_job_details(error=POISON, failure_time_ms=6_000)
    details.vertices[0].subtasks.append(details.vertices[0].subtasks[0].model_copy(update={"subtask_index": 1, "failure": ECHO}))
    history = m.JobExceptionsMessage(
        job_id="j1", num_restarts=1, restart_strategy="fixed-delay (1 attempts, 100 ms)",
        entries=[m.ExceptionHistoryEntryMessage(timestamp_ms=3_000, error=LOST, restarted_tasks=2)],
    )
    entries = rm.job_exceptions(details, history).model_dump(mode="json")["exceptionHistory"]["entries"]
    assert [(e["exceptionName"], e["timestamp"]) for e in entries] == [("ValueError", 6_000), ("TaskManagerLostError", 3_000)]
    assert [c["exceptionName"] for c in entries[0]["concurrentExceptions"]] == ["ProducerFailedError"]
