"""The job's failure cause is the task that failed first-hand, not a consumer echoing its producer."""
from __future__ import annotations

import asyncio

import pytest

from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.states import ExecutionState, JobStatus
from runtime.graph.execution_graph import ExecutionVertex
from runtime.jobmanager.job_master import JobMaster
from runtime.rpc import messages as m
from runtime.rpc.service import RpcService


@pytest.fixture
def running_job_master():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.from_collection(list(range(10))).rebalance().map(lambda x: x).print()  # two vertices: producer -> consumer
    rpc = RpcService("secret", "jm-test", listen=False)  # never started: the test drives the JobMaster by hand
    jm = JobMaster(rpc, env.get_job_graph("echo"), on_terminal=lambda _: None)
    jm.status.transition(JobStatus.RUNNING)
    for ev in jm.eg.all_vertices():
        for state in (ExecutionState.SCHEDULED, ExecutionState.DEPLOYING, ExecutionState.RUNNING):
            ev.current_execution.transition_state(state)
    yield jm
    pending = list(jm._tasks)  # slot declarations spawned on failing: cancel them on the idle loop
    for task in pending:
        task.cancel()
    jm.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    jm.loop.close()


def _vertices(jm: JobMaster) -> tuple[ExecutionVertex, ExecutionVertex]:
    producer, consumer = sorted(jm.eg.all_vertices(), key=lambda ev: "Map" in ev.task_name_with_subtask)
    return producer, consumer


ROOT = m.ErrorInfo(type_name="ValueError", message="record 7 is poisoned", traceback="Traceback ...")
# what a consumer's ProducerFailedError becomes (ErrorInfo.from_exception): typed as an echo, whatever its name
ECHO = m.ErrorInfo(type_name="ProducerFailedError", message="producer of partition p failed: ValueError('record 7 is poisoned')", consequence=True)


def test_a_producer_failure_is_typed_as_an_echo_when_it_crosses_the_wire() -> None:
    from runtime.taskmanager.network.errors import BlockingPartitionMissingError, ProducerFailedError

    assert m.ErrorInfo.from_exception(ProducerFailedError("producer failed", "p")).consequence
    missing = m.ErrorInfo.from_exception(BlockingPartitionMissingError("gone", "p-1"))
    assert (missing.consequence, missing.partition_id, missing.throwable_type.value) == (False, "p-1", "PartitionDataMissingError")


def test_a_producers_late_report_replaces_its_consumers_echo(running_job_master: JobMaster) -> None:
    producer, consumer = _vertices(running_job_master)
    running_job_master.scheduler.on_task_failed(consumer, ECHO)
    assert running_job_master.status.state is JobStatus.FAILING
    running_job_master.scheduler.on_task_failed(producer, ROOT)
    assert running_job_master.scheduler.failure == ROOT


def test_the_first_first_hand_failure_stays_the_cause(running_job_master: JobMaster) -> None:
    producer, consumer = _vertices(running_job_master)
    running_job_master.scheduler.on_task_failed(producer, ROOT)
    running_job_master.scheduler.on_task_failed(consumer, ECHO)
    later = m.ErrorInfo(type_name="RuntimeError", message="another failure while failing")
    running_job_master.scheduler.on_task_failed(consumer, later)
    assert running_job_master.scheduler.failure == ROOT
