"""The seam between the JobMaster and its scheduler (Flink: SchedulerNG and what the JobMaster hands it).

A JobMaster is an RPC endpoint: it owns the slot pool and the connections, answers calls on its
main thread, and forwards everything about the job to a SchedulerNG. A scheduler sees the JobMaster
only as a SchedulerHost: its main-thread loop, the gateways, the listeners for the job's status
and end. `create_scheduler` picks the implementation from `jobmanager.scheduler`: the default scheduler
(fixed parallelism, region failover, batch with adaptive parallelism and speculative execution)
or the adaptive scheduler (`adaptive/`: parallelism follows the slots; `scheduler-mode: reactive`:
every slot of the cluster). Batch jobs always get the default scheduler (Flink: the adaptive
scheduler is streaming only).
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from runtime.core.state_machine import StateMachine
from runtime.core.states import JobStatus
from runtime.graph.execution_graph import ExecutionGraph
from runtime.graph.job_graph import JobGraph
from runtime.jobmanager.checkpoint.coordinator import CheckpointCoordinator
from runtime.jobmanager.scheduler.coordinators import OperatorCoordinators
from runtime.jobmanager.slot_pool import SlotPool
from runtime.rpc import gateways as gw
from runtime.rpc import messages as m


class SchedulerHost(Protocol):
    """What the JobMaster offers its scheduler. Everything is called on the JobMaster's main thread."""

    endpoint_id: str
    slot_pool: SlotPool

    @property
    def fencing_token(self) -> str | None:
        """The JobMaster's fencing token (the leader session id with HA; None without): every call to
        it carries it, so a call meant for an earlier leader's JobMaster of this job is refused."""
        ...

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The main thread's loop (Flink: ComponentMainThreadExecutor): timers and callbacks."""
        ...

    @property
    def rm(self) -> gw.ResourceManagerGateway: ...

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Future[Any]:
        """Run `coro` on the main thread; its failure is logged, never lost."""
        ...

    def task_executor(self, tm_id: str) -> gw.TaskExecutorGateway: ...

    def status_changed(self, status: JobStatus, cause: str | None) -> None: ...

    def job_reached_terminal(self, result: m.JobResultMessage) -> None: ...

    async def release_resources(self) -> None: ...

    @property
    def recovered(self) -> bool:
        """The job was recovered by a new leader (high availability): it starts from its own latest
        completed checkpoint, if it has one, before the savepoint it was submitted with."""
        ...

    def confirm_leadership(self) -> bool:
        """Does this JobManager still lead? Blocking (a ZooKeeper round trip with HA): call it on an
        I/O thread, right before a commit. Without HA always True."""
        ...


class SchedulerNG(Protocol):
    """What a JobMaster asks of its scheduler (Flink: SchedulerNG)."""

    name: str  # "default", "adaptive"
    status: StateMachine[JobStatus]
    archived: m.JobDetailsMessage | None  # the final view, once the job ended

    @property
    def checkpoints(self) -> CheckpointCoordinator | None: ...

    @property
    def coordinators(self) -> OperatorCoordinators: ...

    @property
    def eg(self) -> ExecutionGraph: ...

    async def start(self) -> None: ...

    def cancel(self) -> m.Ack: ...

    def suspend(self, cause: str) -> None:
        """Leadership lost (Flink: SchedulerNG suspend): cancel the tasks, commit nothing more, delete
        nothing a new leader restores from, and end SUSPENDED at once."""
        ...

    # resources
    def wants_slots(self) -> bool: ...

    def on_slots_offered(self) -> None: ...

    def task_manager_lost(self, tm_id: str, cause: str) -> None: ...

    async def declare_slots(self, slots: int) -> None:
        """Declare the job's slot requirement at the ResourceManager (0 clears it)."""
        ...

    # tasks
    def update_task_execution_state(self, msg: m.TaskExecutionStateUpdate) -> m.Ack: ...

    def source_reached_end_of_input(self, attempt_id: str) -> m.Ack: ...

    # checkpoints and savepoints
    async def trigger_checkpoint(self) -> int | None: ...

    async def acknowledge_checkpoint(self, msg: m.AcknowledgeCheckpoint) -> m.Ack: ...

    async def decline_checkpoint(self, msg: m.DeclineCheckpoint) -> m.Ack: ...

    async def trigger_savepoint(self, target_directory: str | None, stop: bool, drain: bool) -> m.SavepointLocation: ...

    # operator coordinators
    def deliver_operator_event(self, node_id: int, subtask: int, attempt: int, event: Any) -> m.Ack: ...

    def deliver_coordination_request(self, node_id: int, request: Any) -> Any: ...

    # views (immutable messages, built on the main thread)
    def job_details(self) -> m.JobDetailsMessage: ...

    def exceptions(self) -> m.JobExceptionsMessage: ...

    def checkpoint_statistics(self) -> m.CheckpointStatisticsMessage: ...

    def result(self) -> m.JobResultMessage: ...

    def job_resource_requirements(self) -> dict[str, m.VertexParallelismBounds]:
        """Each job vertex's parallelism bounds (the default scheduler: its fixed parallelism as both)."""
        ...

    async def refresh_task_metrics(self, timeout_s: float = 2.0) -> None:
        """Ask the TaskExecutors running the job's tasks for their metrics (REST's job details)."""
        ...


def adaptive_scheduling(job_graph: JobGraph) -> tuple[bool, bool] | None:
    """(adaptive, reactive) if `job_graph` runs under the adaptive scheduler, else None."""
    from runtime.core.options import jobmanager as jobmanager_options
    from runtime.graph.job_graph import JobType

    reactive = jobmanager_options.SCHEDULER_MODE.get(job_graph.config) == "reactive"
    if (jobmanager_options.SCHEDULER.get(job_graph.config) == "adaptive" or reactive) and job_graph.job_type is JobType.STREAMING:
        return True, reactive
    return None


def create_scheduler(host: SchedulerHost, job_graph: JobGraph, clock: Callable[[], float] = time.time) -> SchedulerNG:
    """The scheduler `jobmanager.scheduler` names (Flink: DefaultSlotPoolServiceSchedulerFactory)."""
    adaptive = adaptive_scheduling(job_graph)
    if adaptive is not None:
        from runtime.jobmanager.scheduler.adaptive.scheduler import AdaptiveScheduler

        return AdaptiveScheduler(host, job_graph, clock, reactive=adaptive[1])
    from runtime.jobmanager.scheduler.default import DefaultScheduler

    return DefaultScheduler(host, job_graph, clock)
