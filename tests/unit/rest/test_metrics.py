"""/metrics' rendering (runtime.rest.metrics): Flink's names and labels in Prometheus's text format,
rates between scrapes per attempt, and no figures for ended jobs' vanished attempts."""
from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from runtime.core.states import ExecutionState, JobStatus
from runtime.rest import metrics
from runtime.rpc import messages as m

pytestmark = pytest.mark.unit


def _details(records_in: int, attempt: str = "a-0") -> m.JobDetailsMessage:
    sub = m.SubtaskDetails(
        subtask_index=0, state=ExecutionState.RUNNING, attempt_number=0, attempt_id=attempt, tm_id="tm-1", host="h",
        metrics=m.TaskMetricsSnapshot(records_in=records_in, records_out=2 * records_in), busy_ratio=0.25, backpressure_ratio=0.5,
    )
    return m.JobDetailsMessage(
        job_id="j1", job_name="sums", status=JobStatus.RUNNING, start_time_ms=0, status_timestamps_ms={"RUNNING": 1},
        vertices=[m.VertexDetails(vertex_id="v1", name="Map", parallelism=1, max_parallelism=128, subtasks=[sub])],
    )


def _values(text: bytes) -> dict[str, dict[tuple, float]]:
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(text.decode()):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_subtask_job_and_task_manager_metrics_under_flinks_names() -> None:
    tm = m.TaskManagerInfo(tm_id="tm-1", host="h", pid=1, data_port=1, slots_total=4, slots_free=3, heartbeat_age_ms=0,
                           rss_mb=200.0, memory_budget_mb=896)
    sample = metrics.ClusterSample(jobs=[metrics.JobSample(_details(100), completed_checkpoints=3, failed_checkpoints=1,
                                                           last_checkpoint_duration_ms=40, last_checkpoint_size=7000, restarts=2)],
                                   task_managers=[tm])
    values = _values(metrics.render(sample, metrics.RateTracker()))
    labels = (("job_id", "j1"), ("job_name", "sums"), ("subtask_index", "0"), ("vertex", "Map"))
    assert values["millrace_taskmanager_job_task_numRecordsIn"][labels] == 100
    assert values["millrace_taskmanager_job_task_numRecordsOut"][labels] == 200
    assert values["millrace_taskmanager_job_task_busyTimeMsPerSecond"][labels] == 250
    assert values["millrace_taskmanager_job_task_backPressuredTimeMsPerSecond"][labels] == 500
    job = (("job_id", "j1"), ("job_name", "sums"))
    assert [values[f"millrace_jobmanager_job_{n}"][job] for n in (
        "numberOfCompletedCheckpoints", "numberOfFailedCheckpoints", "lastCheckpointDuration", "lastCheckpointSize", "numRestarts")] == [3, 1, 40, 7000, 2]
    assert values["millrace_jobmanager_job_uptime"][job] > 0
    assert values["millrace_taskmanager_Status_Process_Memory_RSS"][(("tm_id", "tm-1"),)] == 200 * (1 << 20)
    assert values["millrace_taskmanager_Status_Slots_Free"][(("tm_id", "tm-1"),)] == 3


def test_rates_are_per_attempt_between_scrapes_and_start_at_zero_for_a_new_attempt() -> None:
    rates = metrics.RateTracker()
    assert rates.rates("a-0", 10.0, 100, 0) == (0.0, 0.0)
    assert rates.rates("a-0", 12.0, 300, 50) == (100.0, 25.0)
    assert rates.rates("a-1", 13.0, 5, 0) == (0.0, 0.0)  # a restarted attempt's counters begin again
    rates.forget_except({"a-1"})
    assert rates.rates("a-0", 14.0, 400, 0) == (0.0, 0.0)
