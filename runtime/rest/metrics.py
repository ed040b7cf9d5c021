"""Prometheus metrics at the JobManager's `/metrics` (Prometheus text format, prometheus_client).

Flink's metric names where Flink has them, reported as Flink's Prometheus reporter does (gauges,
names prefixed by their scope): per subtask `millrace_taskmanager_job_task_numRecordsIn`,
`..._numRecordsOut`, `..._numRecordsInPerSecond`, `..._numRecordsOutPerSecond`,
`..._busyTimeMsPerSecond`, `..._backPressuredTimeMsPerSecond`, labelled job_id, job_name, vertex,
subtask_index; per job `millrace_jobmanager_job_lastCheckpointDuration`, `..._lastCheckpointSize`,
`..._numberOfCompletedCheckpoints`, `..._numberOfFailedCheckpoints`, `..._numRestarts`,
`..._uptime`; per TaskManager `millrace_taskmanager_Status_Process_Memory_RSS` (bytes) and
`..._Budget`, `millrace_taskmanager_Status_Slots_Total` and `..._Free`, labelled tm_id.

Everything is read at scrape time from the Dispatcher and the ResourceManager (the TaskManagers'
figures reach them through the JobMasters' metric requests and the heartbeats: no port per
TaskManager). Records per second are the difference between this scrape and the previous one of
the same attempt (`RateTracker`), 0 at an attempt's first scrape.
"""
from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from runtime.core.states import ExecutionState
from runtime.rpc import messages as m

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
TASK_LABELS = ["job_id", "job_name", "vertex", "subtask_index"]
JOB_LABELS = ["job_id", "job_name"]


@dataclass
class JobSample:
    details: m.JobDetailsMessage
    completed_checkpoints: int = 0
    failed_checkpoints: int = 0
    last_checkpoint_duration_ms: int = 0
    last_checkpoint_size: int = 0
    restarts: int = 0


@dataclass
class ClusterSample:
    jobs: list[JobSample] = field(default_factory=list)
    task_managers: list[m.TaskManagerInfo] = field(default_factory=list)
    taken_at: float = field(default_factory=time.monotonic)


class RateTracker:
    """Records per second per attempt between two scrapes (counters restart with a new attempt)."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[float, int, int]] = {}

    def rates(self, attempt_id: str, now: float, records_in: int, records_out: int) -> tuple[float, float]:
        prev = self._last.get(attempt_id)
        self._last[attempt_id] = (now, records_in, records_out)
        if prev is None or now <= prev[0]:
            return 0.0, 0.0
        dt = now - prev[0]
        return max(0.0, (records_in - prev[1]) / dt), max(0.0, (records_out - prev[2]) / dt)

    def forget_except(self, attempt_ids: set[str]) -> None:
        for a in list(self._last):
            if a not in attempt_ids:
                del self._last[a]


class _Snapshot(Collector):
    def __init__(self, sample: ClusterSample, rates: RateTracker) -> None:
        self.sample, self.rates = sample, rates

    def collect(self) -> Iterable[Metric]:
        task = {name: GaugeMetricFamily(f"millrace_taskmanager_job_task_{name}", doc, labels=TASK_LABELS) for name, doc in (
            ("numRecordsIn", "records the subtask read"),
            ("numRecordsOut", "records the subtask emitted"),
            ("numRecordsInPerSecond", "records read per second since the previous scrape"),
            ("numRecordsOutPerSecond", "records emitted per second since the previous scrape"),
            ("busyTimeMsPerSecond", "ms per second neither idle nor backpressured"),
            ("backPressuredTimeMsPerSecond", "ms per second waiting for room in the output"),
        )}
        job = {name: GaugeMetricFamily(f"millrace_jobmanager_job_{name}", doc, labels=JOB_LABELS) for name, doc in (
            ("lastCheckpointDuration", "ms from trigger to completion of the latest completed checkpoint"),
            ("lastCheckpointSize", "bytes of state of the latest completed checkpoint"),
            ("numberOfCompletedCheckpoints", "completed checkpoints"),
            ("numberOfFailedCheckpoints", "failed checkpoints"),
            ("numRestarts", "restarts of the job"),
            ("uptime", "ms the job has been running (0 when not running)"),
        )}
        now, seen = time.monotonic(), set()
        now_ms = int(time.time() * 1000)
        for js in self.sample.jobs:
            d = js.details
            jl = [d.job_id, d.job_name]
            running_since = d.status_timestamps_ms.get("RUNNING")
            uptime = max(0, now_ms - running_since) if d.status.value == "RUNNING" and running_since else 0
            for name, value in (
                ("lastCheckpointDuration", js.last_checkpoint_duration_ms), ("lastCheckpointSize", js.last_checkpoint_size),
                ("numberOfCompletedCheckpoints", js.completed_checkpoints), ("numberOfFailedCheckpoints", js.failed_checkpoints),
                ("numRestarts", js.restarts), ("uptime", uptime),
            ):
                job[name].add_metric(jl, value)
            for v in d.vertices:
                for st in v.subtasks:
                    labels = [d.job_id, d.job_name, v.name, str(st.subtask_index)]
                    seen.add(st.attempt_id)
                    rin, rout = self.rates.rates(st.attempt_id, now, st.metrics.records_in, st.metrics.records_out)
                    running = st.state is ExecutionState.RUNNING
                    task["numRecordsIn"].add_metric(labels, st.metrics.records_in)
                    task["numRecordsOut"].add_metric(labels, st.metrics.records_out)
                    task["numRecordsInPerSecond"].add_metric(labels, rin)
                    task["numRecordsOutPerSecond"].add_metric(labels, rout)
                    task["busyTimeMsPerSecond"].add_metric(labels, round(st.busy_ratio * 1000) if running else 0)
                    task["backPressuredTimeMsPerSecond"].add_metric(labels, round(st.backpressure_ratio * 1000) if running else 0)
        self.rates.forget_except(seen)
        tm = {name: GaugeMetricFamily(f"millrace_taskmanager_Status_{name}", doc, labels=["tm_id"]) for name, doc in (
            ("Process_Memory_RSS", "bytes resident (the TaskManager process, from its last heartbeat)"),
            ("Process_Memory_Budget", "bytes the TaskManager may use (task heap + managed + framework overhead)"),
            ("Slots_Total", "slots of the TaskManager"),
            ("Slots_Free", "free slots"),
        )}
        for t in self.sample.task_managers:
            tm["Slots_Total"].add_metric([t.tm_id], t.slots_total)
            tm["Slots_Free"].add_metric([t.tm_id], t.slots_free)
            if t.rss_mb is not None:
                tm["Process_Memory_RSS"].add_metric([t.tm_id], int(t.rss_mb * (1 << 20)))
            if t.memory_budget_mb is not None:
                tm["Process_Memory_Budget"].add_metric([t.tm_id], t.memory_budget_mb * (1 << 20))
        yield from task.values()
        yield from job.values()
        yield from tm.values()


def render(sample: ClusterSample, rates: RateTracker) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(sample, rates))
    return generate_latest(registry)


__all__ = ["CONTENT_TYPE", "ClusterSample", "JobSample", "RateTracker", "render"]
