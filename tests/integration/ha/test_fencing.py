"""Fencing tokens: with high availability a JobMaster's fencing token is the leader session it runs
under (Flink's JobMasterId). Its TaskManagers' calls carry it (slot offers, task updates,
checkpoint acknowledgements: a job runs only if they do), and a call with another token, or none,
is refused. The Dispatcher serves only while it leads."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.api.common import Configuration, WatermarkStrategy
from runtime.api.connectors.generator import DataGeneratorSource, RateLimiterStrategy
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.errors import FencingTokenError, NotLeaderError
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig
from runtime.ha.services import DispatcherHaServices
from runtime.rpc import gateways as gw
from runtime.rpc import messages as m
from runtime.storage.ha_stores import JobGraphStore, JobResultStore
from tests.waiting import wait_until


def test_task_managers_carry_the_job_masters_token_and_other_tokens_are_refused(tmp_path: Path) -> None:
    ha = DispatcherHaServices(
        JobGraphStore(str(tmp_path / "ha"), "fencing"), JobResultStore(str(tmp_path / "ha"), "fencing"),
        confirm_leadership=lambda session: True, leader_url=lambda: None,
    )
    with MiniCluster(MiniClusterConfig(provider="local", initial_task_managers=1, slots_per_task_manager=2), ha=ha) as cluster:
        assert cluster.dispatcher is not None
        with pytest.raises(NotLeaderError, match="standby"):  # not elected yet
            cluster.dispatcher_gateway().call_sync("request_job_status", m.JobIdMessage(job_id="x"))
        cluster.dispatcher.grant_leadership("session-1")
        conf = Configuration()
        conf.set_string("state.checkpoints.dir", str(tmp_path / "checkpoints"))
        env = StreamExecutionEnvironment.get_execution_environment(conf)
        env.set_parallelism(2)
        env.enable_checkpointing(200)
        source = DataGeneratorSource(lambda i: i, 100_000_000, rate_limiter_strategy=RateLimiterStrategy.per_second(2_000))
        env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").key_by(lambda x: x % 7).reduce(lambda a, b: a + b).print()
        client = cluster.submit(env.get_job_graph("fenced"))
        jm = cluster.dispatcher.jobs[client.job_id].job_master
        assert jm.fencing_token == "session-1"
        # the TaskManagers' offers, updates and acknowledgements carried the token: the job runs and checkpoints
        def completed() -> int:
            msg = cluster.dispatcher_gateway().call_sync("request_checkpoint_statistics", m.JobIdMessage(job_id=client.job_id))
            return int(json.loads(msg.statistics_json)["counts"]["completed"])

        wait_until(lambda: completed() >= 1, timeout=60, what="a checkpoint completed")
        assert cluster.rpc is not None
        for token in ("session-0", None):
            stale = cluster.rpc.gateway(gw.JobMasterGateway, jm.endpoint_id, token=token)
            with pytest.raises(FencingTokenError, match="fencing token"):
                stale.call_sync("trigger_checkpoint", m.Empty())
        fresh = cluster.rpc.gateway(gw.JobMasterGateway, jm.endpoint_id, token="session-1")
        assert fresh.call_sync("request_resource_requirements", m.Empty()).job_id == client.job_id
        client.cancel()
