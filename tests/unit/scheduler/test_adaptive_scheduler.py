"""The adaptive scheduler against a fake SchedulerHost: its states, the parallelism it picks from the
slots it holds, rescales when slots come and go, and the resource wait timeout."""
from __future__ import annotations

from typing import Any

import pytest

from runtime.core.states import ExecutionState, JobStatus
from runtime.jobmanager.scheduler.adaptive.parallelism import VertexParallelismBounds
from runtime.jobmanager.scheduler.adaptive.scheduler import AdaptiveScheduler, validate_requirements
from runtime.jobmanager.scheduler.ng import create_scheduler
from runtime.jobmanager.slot_pool import PhysicalSlot
from runtime.rpc import messages as m
from runtime.rpc.deployment import DataAddress
from tests.unit.scheduler.test_default_scheduler import FakeHost, _graph, offer_slots, report

pytestmark = pytest.mark.unit

FAST = {
    "jobmanager.scheduler": "adaptive",
    "jobmanager.adaptive-scheduler.resource-stabilization-timeout": "0 ms",
    "jobmanager.adaptive-scheduler.scaling-interval.min": "0 ms",
}


@pytest.fixture
def host() -> Any:
    h = FakeHost("job")
    yield h
    h.close()


def adaptive(host: FakeHost, **config: str) -> AdaptiveScheduler:
    s = create_scheduler(host, _graph(**{**FAST, **config}).model_copy(update={"vertices": [
        v.model_copy(update={"parallelism": 4}) for v in _graph().vertices
    ]}))
    assert isinstance(s, AdaptiveScheduler)
    host.loop.run_until_complete(s.start())
    return s


def run_all(host: FakeHost, s: AdaptiveScheduler) -> list[Any]:
    """Report every submitted task of the current execution RUNNING; returns those tasks."""
    assert s.execution is not None
    mine = [t for t in host.submitted if s.execution.by_attempt.get(t.execution_attempt_id) is not None]
    for tdd in mine:
        report(s.execution, tdd, ExecutionState.RUNNING)
    return mine


def test_it_waits_for_slots_runs_at_what_it_has_and_scales_up_when_slots_appear(host: FakeHost) -> None:
    s = adaptive(host)
    assert (s.state.name, s.status.state) == ("WaitingForResources", JobStatus.CREATED)
    assert s.wants_slots()
    offer_slots(host, 2)
    s.on_slots_offered()
    host.settle()
    assert s.state.name == "Executing" and s.parallelism == {"A": 2, "B": 2}
    assert s.status.state is JobStatus.RUNNING
    run_all(host, s)
    # two more slots: a rescale to 4 (cooldown 0), the old execution cancelled, a new one deployed
    for i in (2, 3):
        host.slot_pool.offer(PhysicalSlot(f"alloc-{i}", f"tm-{i}", 0, DataAddress(tm_id=f"tm-{i}", host="127.0.0.1", port=1)))
    s.on_slots_offered()
    host.settle()
    assert s.parallelism == {"A": 4, "B": 4} and s.state.name == "Executing"
    assert len(host.cancelled) == 4  # every task of the p=2 execution
    run_all(host, s)
    host.settle()
    details = s.job_details()
    assert (details.scheduler, details.scheduler_state) == ("adaptive", "Executing")
    assert [v.parallelism for v in details.vertices] == [4, 4]
    assert [(r.from_parallelism, r.to_parallelism) for r in details.rescales] == [({"A": 2, "B": 2}, {"A": 4, "B": 4})]
    assert details.rescales[0].downtime_ms is not None
    assert not s.wants_slots()


def test_a_lost_task_manager_scales_the_job_down_instead_of_waiting(host: FakeHost) -> None:
    s = adaptive(host, **{"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "3",
                          "restart-strategy.fixed-delay.delay": "0 ms"})
    offer_slots(host, 4)  # tm-0 and tm-1, two slots each
    s.on_slots_offered()
    host.settle()
    assert s.parallelism == {"A": 4, "B": 4}
    run_all(host, s)
    s.task_manager_lost("tm-1", "TaskManager tm-1 lost (heartbeat timeout)")
    host.settle()
    assert s.state.name == "Executing" and s.parallelism == {"A": 2, "B": 2}
    assert s.status.state is JobStatus.RUNNING and s.num_restarts == 1
    assert s.exceptions().entries[0].error.type_name == "TaskManagerLostError"


def test_a_job_that_never_gets_its_minimum_fails_naming_what_it_needed(host: FakeHost) -> None:
    s = adaptive(host, **{"jobmanager.adaptive-scheduler.resource-wait-timeout": "50 ms"})
    host.settle()
    assert s.status.state is JobStatus.FAILED
    assert "needs 1 slot(s) and has 0" in s.failure.message and "resource-wait-timeout" in s.failure.message
    assert [r.status for r in host.results] == [JobStatus.FAILED]


def test_new_resource_requirements_rescale_the_running_job(host: FakeHost) -> None:
    s = adaptive(host)
    offer_slots(host, 4)
    s.on_slots_offered()
    host.settle()
    run_all(host, s)
    assert s.parallelism == {"A": 4, "B": 4}
    bounds = {"A": VertexParallelismBounds(lower_bound=1, upper_bound=2), "B": VertexParallelismBounds(lower_bound=1, upper_bound=2)}
    assert validate_requirements(s.job_graph, bounds) == []
    s.update_resource_requirements(bounds)
    host.settle()
    assert s.parallelism == {"A": 2, "B": 2}
    assert validate_requirements(s.job_graph, {"C": VertexParallelismBounds(upper_bound=1)})[0].startswith("unknown vertex 'C'")
    assert "above its max parallelism 128" in validate_requirements(s.job_graph, {"A": VertexParallelismBounds(upper_bound=129)})[0]


def test_cancel_ends_the_job_canceled_and_a_finished_execution_finishes_it(host: FakeHost) -> None:
    s = adaptive(host)
    offer_slots(host, 2)
    s.on_slots_offered()
    host.settle()
    tasks = run_all(host, s)
    assert s.cancel().ok
    host.settle()
    assert s.status.state is JobStatus.CANCELED and [r.status for r in host.results] == [JobStatus.CANCELED]
    assert tasks

    other = FakeHost("job2")
    try:
        s2 = adaptive(other)
        offer_slots(other, 2)
        s2.on_slots_offered()
        other.settle()
        for tdd in run_all(other, s2):
            report(s2.execution, tdd, ExecutionState.FINISHED)
        other.settle()
        assert s2.status.state is JobStatus.FINISHED
        assert isinstance(other.results[0], m.JobResultMessage) and other.results[0].status is JobStatus.FINISHED
    finally:
        other.close()


def test_a_cancel_between_two_executions_ends_the_job_at_once(host: FakeHost) -> None:
    s = adaptive(host, **{"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "3",
                          "restart-strategy.fixed-delay.delay": "1 min"})
    offer_slots(host, 2)
    s.on_slots_offered()
    host.settle()
    run_all(host, s)
    s.task_manager_lost("tm-1", "TaskManager tm-1 lost")
    host.settle()
    assert s.state.name == "Restarting" and s.execution is not None and s.execution.status.state is JobStatus.FAILED
    assert s.cancel().ok
    assert s.status.state is JobStatus.CANCELED and [r.status for r in host.results] == [JobStatus.CANCELED]


def test_slots_arriving_for_raised_requirements_do_not_wait_for_the_cooldown(host: FakeHost) -> None:
    s = adaptive(host, **{"jobmanager.adaptive-scheduler.scaling-interval.min": "10 min"})
    s.update_resource_requirements({v: VertexParallelismBounds(lower_bound=1, upper_bound=2) for v in ("A", "B")})
    offer_slots(host, 2)
    s.on_slots_offered()
    host.settle()
    run_all(host, s)
    assert s.parallelism == {"A": 2, "B": 2}
    s.update_resource_requirements({v: VertexParallelismBounds(lower_bound=1, upper_bound=4) for v in ("A", "B")})
    host.settle()
    assert s.parallelism == {"A": 2, "B": 2}  # no slots for more yet
    for i in (2, 3):
        host.slot_pool.offer(PhysicalSlot(f"alloc-{i}", f"tm-{i}", 0, DataAddress(tm_id=f"tm-{i}", host="127.0.0.1", port=1)))
    s.on_slots_offered()
    host.settle()
    assert s.parallelism == {"A": 4, "B": 4}, "the cooldown (10 min) held back a rescale the new requirements asked for"
    run_all(host, s)
    # an ordinary scale-up later does wait for the cooldown
    assert s.rescales_manager.decide({"A": 4}, {"A": 5}).retry_at is not None
