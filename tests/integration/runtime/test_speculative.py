"""Speculative execution in batch: a slow TaskManager's tasks get attempts elsewhere; the first to finish wins."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.deploy.local_provider import LocalProcessProvider
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig
from runtime.taskmanager.runner import TaskManagerConfig
from tests.integration.runtime.test_batch import batch_env, run_windowed_sum
from tests.waiting import job_details, wait_until

pytestmark = pytest.mark.integration

SLOW_S = 60.0  # every task on the slow TaskManager waits this long before it starts working


# speculation as soon as a subtask runs 1 s and twice as long as half of its siblings took
SPECULATIVE = {
    "execution.batch.speculative.enabled": "true",
    "slow-task-detector.check-interval": "100 ms",
    "slow-task-detector.execution-time.baseline-lower-bound": "1 s",
    "slow-task-detector.execution-time.baseline-ratio": "0.5",
}


def cluster_with_one_slow_task_manager() -> tuple[MiniCluster, LocalProcessProvider, list[str]]:
    """Two local TaskManagers (1 slot each), the first one slow, both up before any job (else a fast
    first TaskManager may run both sources one after the other before the slow one registered);
    the cluster, its provider and the ids of the TaskManagers it started."""
    provider = LocalProcessProvider(log_level="WARNING")
    started: list[str] = []

    def configure(cfg: TaskManagerConfig) -> TaskManagerConfig:
        started.append(cfg.tm_id)
        return cfg.model_copy(update={"testing_task_delay_s": SLOW_S}) if len(started) == 1 else cfg

    provider.configure = configure
    cluster = MiniCluster(MiniClusterConfig(slots_per_task_manager=1, initial_task_managers=2), provider=provider).start()
    cluster.wait_for_task_managers(2)
    return cluster, provider, started


@pytest.mark.parametrize("block", ["1 min", "0 s"], ids=["slow-node-blocked", "not-blocked"])
def test_a_slow_task_manager_gets_speculative_attempts_and_the_output_is_exactly_once(tmp_path: Path, block: str) -> None:
    cluster, _provider, started = cluster_with_one_slow_task_manager()
    try:
        env = batch_env(tmp_path, 2, **SPECULATIVE, **{
            "execution.batch.speculative.block-slow-node-duration": block,
            # the window stage at parallelism 2 as well (adaptive batch would give this small input 1)
            "execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task": "1 kb",
        })
        # equal to the reference row for row: every window once, none lost, none doubled
        details = run_windowed_sum(cluster, env, 40_000, str(tmp_path / "out"))
        slow_tm = started[0]
        # the job never waited for a slow attempt: it ended before any of them would have begun its work
        slow = [a for v in details.vertices for s in v.subtasks for a in [s, *s.other_concurrent_attempts] if a.tm_id == slow_tm]
        running_since = [a.state_timestamps_ms["RUNNING"] for a in slow if "RUNNING" in a.state_timestamps_ms]
        assert running_since and details.end_time_ms < min(running_since) + SLOW_S * 1000, (details.end_time_ms, running_since)
        source, window = details.vertices
        speculated = [s for s in source.subtasks if s.other_concurrent_attempts]
        assert len(speculated) == 1, [s.model_dump() for s in source.subtasks]
        winner, (loser,) = speculated[0], speculated[0].other_concurrent_attempts
        assert winner.state.name == "FINISHED" and winner.tm_id != slow_tm and winner.attempt_number == 1
        assert loser.state.name == "CANCELED" and loser.tm_id == slow_tm and loser.attempt_number == 0
        on_slow_tm = [s for s in window.subtasks for a in [s, *s.other_concurrent_attempts] if a.tm_id == slow_tm]
        if block == "1 min":  # blocked: the window stage never went to the slow TaskManager
            assert not on_slow_tm
            assert all(not s.other_concurrent_attempts and s.attempt_number == 0 for s in window.subtasks)
        else:  # not blocked: a window subtask went there and was speculated too (the Delta sink kept one attempt's files)
            assert on_slow_tm and all(s.tm_id != slow_tm and s.state.name == "FINISHED" for s in on_slow_tm)
        # REST: the losing attempts under other-concurrent-attempts, all on the slow TaskManager, cancelled
        from runtime.rest.models import job_details as rest_job_details

        rest = rest_job_details(details, 0).model_dump(by_alias=True, mode="json")
        others = [a for v in rest["vertices"] for st in v["subtasks"] for a in st["other-concurrent-attempts"]]
        assert len(others) == (1 if block == "1 min" else 2), others
        assert all(a["taskmanager-id"] == slow_tm and a["status"] == "CANCELED" for a in others), others
        # the losing attempts' files were removed: the table holds exactly the committed files
        from deltalake import DeltaTable

        committed = {os.path.basename(f) for f in DeltaTable(str(tmp_path / "out")).file_uris()}
        written = {f for f in os.listdir(tmp_path / "out") if f.endswith(".parquet")}
        assert written == committed
    finally:
        cluster.close()


def test_losing_the_slow_task_manager_during_speculation_fails_nothing_over(tmp_path: Path) -> None:
    """SIGKILL the slow TaskManager once its subtask has a speculative attempt: the lost attempt is
    dropped (another attempt carries the subtask), nothing restarts, the output is exactly once."""
    import signal

    from pipelines.jobs import windowed_sum
    from runtime.core.states import JobStatus
    from runtime.rpc import messages as m
    from tests.integration.runtime.test_batch import read_windowed_sum

    cluster, provider, started = cluster_with_one_slow_task_manager()
    try:
        # a failover would be allowed: it must not happen
        env = batch_env(tmp_path, 2, **SPECULATIVE, **{"restart-strategy.type": "fixed-delay"})
        n, out = 40_000, str(tmp_path / "out")
        windowed_sum.build(env, n, out)
        client = cluster.submit(env.get_job_graph("windowed_sum"))
        wait_until(lambda: any(s.other_concurrent_attempts for v in job_details(cluster, client.job_id).vertices for s in v.subtasks),
                   timeout=60, what="a speculative attempt", interval=0.05)
        os.kill(provider.pid_of(started[0]), signal.SIGKILL)
        result = client.get_job_execution_result(timeout=120)
        assert result.status is JobStatus.FINISHED
        assert read_windowed_sum(out) == windowed_sum.reference(n)
        exceptions = cluster.dispatcher_gateway().call_sync("request_job_exceptions", m.JobIdMessage(job_id=client.job_id), timeout=10)
        assert exceptions.num_restarts == 0 and not exceptions.entries
    finally:
        cluster.close()
