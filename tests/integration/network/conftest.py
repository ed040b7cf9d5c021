from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from runtime.graph.job_graph import PartitionerDescriptor
from runtime.graph.transformations import PartitionerKind
from runtime.rpc.auth import new_cluster_secret
from runtime.rpc.deployment import (
    DataAddress,
    InputChannelDeploymentDescriptor,
    InputGateDeploymentDescriptor,
    ResultPartitionDeploymentDescriptor,
)
from runtime.taskmanager.network import NetworkConfig, NetworkEnvironment

EnvFactory = Callable[..., NetworkEnvironment]


@pytest.fixture
def secret() -> str:
    return new_cluster_secret()


@pytest.fixture
def make_env(secret: str) -> Iterator[EnvFactory]:
    """Started NetworkEnvironments on 127.0.0.1, always shut down (no thread or port left)."""
    envs: list[NetworkEnvironment] = []

    def factory(tm_id: str, config: NetworkConfig | None = None, env_secret: str | None = None) -> NetworkEnvironment:
        env = NetworkEnvironment(env_secret or secret, tm_id, config=config)
        envs.append(env)
        env.start()
        return env

    yield factory
    for env in reversed(envs):
        env.shutdown()


def rpdd(partition_id: str, num_subpartitions: int, kind: PartitionerKind = PartitionerKind.FORWARD,
         max_parallelism: int = 128) -> ResultPartitionDeploymentDescriptor:
    return ResultPartitionDeploymentDescriptor(
        partition_id=partition_id,
        dataset_id=partition_id.split(":")[0],
        producer_node_id=1,
        num_subpartitions=num_subpartitions,
        partitioner=PartitionerDescriptor(kind=kind),
        consumer_max_parallelism=max_parallelism,
    )


def igdd(channels: list[tuple[str, str, int, DataAddress]]) -> InputGateDeploymentDescriptor:
    """channels: (partition id, producer attempt id, subpartition, producer address)."""
    return InputGateDeploymentDescriptor(
        dataset_id=channels[0][0].split(":")[0],
        target_node_id=2,
        channels=[
            InputChannelDeploymentDescriptor(
                partition_id=p, producer_attempt_id=a, subpartition_index=s, producer=addr
            )
            for p, a, s, addr in channels
        ],
    )
