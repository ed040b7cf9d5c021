"""The autoscaling sensor scales a job up when its source rate rises and down when it falls (issue 26).

A MiniCluster of four one-slot TaskManagers with the REST API in front; a streaming job under the
adaptive scheduler, submitted at parallelism 1: a source whose rate (records per second over all
its subtasks) follows a file the test rewrites, then, after a rebalance, a 'work' operator that
spends a fixed time per record. Its busy time follows the rate: saturated at the high rate on one
subtask, a few percent at the low rate on two. The sensor is evaluated with build_sensor_context
against the REST URL, and the run it asks for (`apply_millrace_rescale`) executes in process.

The work is a blocking wait of WORK_S per record, not a CPU spin: busy time counts any time the
task thread is neither waiting for input nor blocked on a full output (as Flink's
busyTimeMsPerSecond), so the figures are the same, and the test does not depend on free cores.
"""
from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dagster import DagsterInstance, RunRequest, SkipReason, build_sensor_context

from pipelines.autoscaling_sensor import MillraceAutoscalerResource, apply_millrace_rescale, millrace_autoscaling_sensor
from resources import MillraceClusterResource, SparkResource
from runtime.api.common import WatermarkStrategy
from runtime.api.connectors.base import RateLimiter, Source
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.operators.base import InputStatus, SourceOperator
from runtime.core.records import ColumnBatch
from runtime.core.states import JobStatus
from runtime.deploy.minicluster import MiniClusterConfig
from tests.integration.rest.conftest import TOKEN, RestCluster, start_rest_cluster
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

ADAPTIVE = {
    "jobmanager.scheduler": "adaptive",
    "jobmanager.adaptive-scheduler.resource-stabilization-timeout": "500 ms",
    "jobmanager.adaptive-scheduler.scaling-interval.min": "0 ms",
}
WORK_S = 0.002  # per record: 'work' keeps up with 500 records/s per subtask
HIGH_RATE = 800  # > 500: one subtask is saturated
LOW_RATE = 25  # 12.5 per subtask at p=2: about 2.5% busy
COOLDOWN_S = 3.0
WORK = "work -> discard"  # the vertex: 'work' and its sink, chained


class RateFileSource(Source):
    """Unbounded ids at the rate (records/s over all subtasks) written in `rate_file`, read every 0.2 s."""

    def __init__(self, rate_file: str) -> None:
        self.rate_file = rate_file

    def is_bounded(self) -> bool:
        return False

    def create_operator(self) -> SourceOperator:
        return _RateFileReader(self.rate_file)


class _RateFileReader(SourceOperator):
    def __init__(self, rate_file: str) -> None:
        super().__init__()
        self.rate_file = rate_file
        self._rate = 0.0
        self._limiter: RateLimiter | None = None
        self._read_at = 0.0
        self._next = 0

    def emit_next(self) -> InputStatus:
        assert self.ctx is not None and self.output is not None
        now = time.monotonic()
        if now >= self._read_at:
            self._read_at = now + 0.2
            rate = float(Path(self.rate_file).read_text())
            if rate != self._rate:
                self._rate, self._limiter = rate, RateLimiter(rate / self.ctx.parallelism)
        limiter = self._limiter
        if limiter is None or not limiter.try_acquire(limiter.batch_size):
            return InputStatus.NOTHING_AVAILABLE  # ahead of the rate: the task idles briefly
        ids = np.arange(self._next, self._next + limiter.batch_size, dtype=np.int64)
        self._next += limiter.batch_size
        self.output.emit(ColumnBatch({"id": ids}))
        return InputStatus.MORE_AVAILABLE


class Work:
    """WORK_S of blocking work per record (the task thread is busy all along)."""

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        time.sleep(len(batch["id"]) * WORK_S)
        return batch


def _discard(_: Any) -> None:
    return None


@pytest.fixture(scope="module")
def four_slots() -> Iterator[RestCluster]:
    yield from start_rest_cluster(MiniClusterConfig(
        provider="local", initial_task_managers=4, min_task_managers=4, max_task_managers=4, slots_per_tm=1,
        heartbeat_timeout_ms=5000, tm_log_level=os.environ.get("MILLRACE_TM_LOG_LEVEL", "WARNING"),
    ))


def test_the_sensor_scales_a_job_up_when_its_rate_rises_and_down_when_it_falls(four_slots: RestCluster, tmp_path: Path) -> None:
    client = four_slots.client()
    rate_file = tmp_path / "rate"
    rate_file.write_text(str(HIGH_RATE))
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)  # the upper bound: 1 until the sensor raises it
    env.configure(ADAPTIVE)
    rated = env.from_source(RateFileSource(str(rate_file)), WatermarkStrategy.no_watermarks(), "rated")
    rated.rebalance().map_batches(Work()).name("work").add_sink(_discard).name("discard")
    job_id = client.submit_job(env.get_job_graph("autoscaled"))

    def autoscaler(cooldown_s: float) -> MillraceAutoscalerResource:
        return MillraceAutoscalerResource(target_utilization=0.5, utilization_boundary=0.2, min_parallelism=1, max_parallelism=4, cooldown_s=cooldown_s)

    session = MillraceClusterResource(mode="session", url=four_slots.url, token=TOKEN, spark=SparkResource())
    resources = {"millrace_session": session, "millrace_autoscaler": autoscaler(COOLDOWN_S)}
    instance = DagsterInstance.ephemeral()
    cursor: dict[str, str | None] = {"value": None}

    def parallelism() -> dict[str, int] | None:
        d = client.job_details(job_id)
        if d.scheduler_state != "Executing" or any(v.tasks.get("RUNNING") != v.parallelism for v in d.vertices):
            return None
        return {v.name: v.parallelism for v in d.vertices}

    def work_busy_below(share: float) -> list[float]:
        busy = next(v.busy_time_ms_per_second / 1000 for v in client.job_details(job_id).vertices if v.name == WORK)
        return [busy] if busy < share else []

    def at(p: int) -> bool:
        now = parallelism()
        return now is not None and set(now.values()) == {p}

    def sensor_decides() -> RunRequest | None:
        with build_sensor_context(instance=instance, resources=resources, cursor=cursor["value"]) as ctx:
            out = millrace_autoscaling_sensor(ctx)
            cursor["value"] = ctx.cursor
        if isinstance(out, SkipReason):  # its reasons are in the sensor's log
            return None
        assert isinstance(out, list) and len(out) == 1 and isinstance(out[0], RunRequest), out
        return out[0]

    def apply(request: RunRequest) -> list[str]:
        result = apply_millrace_rescale.execute_in_process(
            run_config=request.run_config, resources={"millrace_session": session}, instance=instance, tags=request.tags
        )
        assert result.success
        return [e.user_message for e in instance.all_logs(result.run_id) if e.user_message]

    try:
        wait_until(lambda: at(1), timeout=60, what="the job running at p=1", interval=0.1)

        # high rate: 'work' saturated at p=1 -> the sensor asks for more
        up = wait_until(sensor_decides, timeout=30, what="the sensor to scale the job up", interval=0.5)
        config = up.run_config["ops"]["rescale_millrace_job"]["config"]
        assert set(config["previous"].values()) == {1} and min(config["parallelism"].values()) >= 2, config
        assert f"'{WORK}' busy" in config["reason"] and up.tags["millrace/autoscale"] == "up"
        assert json.loads(cursor["value"] or "{}")["last_change"][job_id] > 0
        log = apply(up)
        assert any(f"autoscaling Millrace job {job_id}" in line and f"'{WORK}' 1 -> " in line and "busy" in line for line in log), log
        scaled_up = wait_until(lambda: (p := parallelism()) is not None and min(p.values()) >= 2 and p, timeout=60,
                               what="the job rescaled up", interval=0.1)
        print(f"scale-up: {config['reason']} -> {scaled_up}")

        # the cooldown holds it (a long one, with the sensor's own cursor)
        with build_sensor_context(instance=instance, cursor=cursor["value"], resources={**resources, "millrace_autoscaler": autoscaler(3600.0)}) as ctx:
            held = millrace_autoscaling_sensor(ctx)
        assert isinstance(held, SkipReason) and re.search(r"cooling down \(3\d{3}s left\)", held.skip_message or ""), held

        # low rate: once 'work' is nearly idle (its queue drained), the sensor scales it back down to the minimum
        rate_file.write_text(str(LOW_RATE))
        idle = wait_until(lambda: work_busy_below(0.2), timeout=30, what=f"'{WORK}' busy below 20% at the low rate", interval=0.5)[0]
        down = wait_until(sensor_decides, timeout=30, what="the sensor to scale the job down", interval=0.5)
        config = down.run_config["ops"]["rescale_millrace_job"]["config"]
        assert set(config["parallelism"].values()) == {1} and down.tags["millrace/autoscale"] == "down", config
        log = apply(down)
        assert any(f"autoscaling Millrace job {job_id}" in line and f"'{WORK}' {scaled_up[WORK]} -> 1" in line for line in log), log
        wait_until(lambda: at(1), timeout=60, what="the job rescaled down to p=1", interval=0.1)
        print(f"scale-down: {config['reason']} (seen at {idle:.0%} busy before)")

        rescales = client.job_details(job_id).rescales  # the runtime's history: up, then down
        assert [r.to_parallelism for r in rescales][-1] == {"rated": 1, WORK: 1}, rescales
        assert any(r.to_parallelism == scaled_up for r in rescales), rescales
        print("rescales:", [(r.from_parallelism, r.to_parallelism, r.cause, r.downtime) for r in rescales])
    finally:
        client.cancel_job(job_id)
        wait_until(lambda: JobStatus(client.job_details(job_id).state).is_globally_terminal, timeout=60, what="the job cancelled")
