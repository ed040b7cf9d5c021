"""The Dispatcher never reads a JobMaster's live state from its own thread: when the JobMaster does
not answer (not serving yet, busy, stopping), it answers from the views the JobMaster published."""
from __future__ import annotations

import asyncio
import time

import pytest

from runtime.api.datastream import StreamExecutionEnvironment
from runtime.jobmanager.dispatcher import Dispatcher, JobEntry
from runtime.jobmanager.job_master import JobMaster
from runtime.rpc import messages as m
from runtime.rpc.service import RpcService


def _live_read(*_args: object) -> None:
    raise AssertionError("the Dispatcher read the JobMaster's live state from its own thread")


@pytest.fixture
def dispatcher_with_silent_job_master():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.from_collection(list(range(10))).map(lambda x: x).print()
    rpc = RpcService("secret", "jm-test", listen=False)  # never started: the JobMaster's endpoint answers nothing
    job_graph = env.get_job_graph("silent")
    jm = JobMaster(rpc, job_graph, on_terminal=lambda _: None)
    dispatcher = Dispatcher(rpc)
    dispatcher.jobs[job_graph.job_id] = JobEntry(job_graph, jm, time.time())
    # from here on, its live views may only be computed on its own main thread
    jm.scheduler.job_details = _live_read  # type: ignore[method-assign]  # a read that must not run off the main thread
    jm.scheduler.exceptions = _live_read  # type: ignore[method-assign]  # a read that must not run off the main thread
    jm.scheduler.checkpoint_statistics = _live_read  # type: ignore[method-assign]  # a read that must not run off the main thread
    yield dispatcher, job_graph
    jm.loop.close()
    dispatcher.loop.close()


def test_a_silent_job_master_is_answered_for_by_its_published_views(dispatcher_with_silent_job_master) -> None:
    dispatcher, job_graph = dispatcher_with_silent_job_master
    arg = m.JobIdMessage(job_id=job_graph.job_id)
    details = asyncio.run(dispatcher.request_job_details(arg))
    assert [v.parallelism for v in details.vertices] == [1, 2]  # the collection source, then the map and print
    assert all(s.state.name == "CREATED" for v in details.vertices for s in v.subtasks)
    assert asyncio.run(dispatcher.request_job_exceptions(arg)).entries == []
    assert asyncio.run(dispatcher.request_checkpoint_statistics(arg)).job_id == job_graph.job_id
