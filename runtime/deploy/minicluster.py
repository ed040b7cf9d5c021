"""MiniCluster: a JobManager (Dispatcher, ResourceManager) in this process plus TaskManagers.

TaskManagers come from a provider: Spark executors (the embedded default) or local processes.
Used by the embedded executor (one job, then torn down) and by tests (many jobs).
"""
from __future__ import annotations

import logging
import os
import sys
import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, Field

from runtime.api.execution import FailureListener, StatusListener
from runtime.deploy.job_client import DispatcherJobClient
from runtime.graph.job_graph import JobGraph
from runtime.jobmanager.dispatcher import Dispatcher
from runtime.jobmanager.resource_manager import ResourceManager, ResourceManagerConfig
from runtime.jobmanager.slot_manager import Clock
from runtime.rpc import gateways as gw
from runtime.rpc import messages as m
from runtime.rpc.auth import new_cluster_secret
from runtime.rpc.service import RpcService
from runtime.taskmanager.memory import TaskManagerMemoryConfig

log = logging.getLogger(__name__)


class MiniClusterConfig(BaseModel):
    provider: Literal["spark", "local"] = Field("local", description="where TaskManagers run")
    slots_per_task_manager: int = Field(1, ge=1, description="a Python process is one core (GIL): 1 by default")
    max_task_managers: int | None = Field(None, description="cap on TaskManagers the ResourceManager may request")
    initial_task_managers: int = Field(0, ge=0, description="default TaskManagers started with the cluster (session mode); 0: on demand")
    min_task_managers: int = Field(0, ge=0, description="never release below this many; a lost one is replaced")
    idle_timeout_s: float | None = Field(
        None, gt=0, description="release a TaskManager whose slots were all free this long, down to min_task_managers; "
        "None: never (Flink: resourcemanager.taskmanager-timeout, 30 s in a session cluster)"
    )
    task_manager_profile: m.ResourceProfile | None = Field(
        None, description="total resources of a default TaskManager, divided among its slots; "
        "None: slots_per_task_manager x (1 CPU, 512 MB task heap, 128 MB managed memory)"
    )
    max_task_manager_profile: m.ResourceProfile | None = Field(
        None, description="the largest TaskManager started for a slot sharing group's declared resources; a group "
        "asking for more fails its job. None: this machine's CPU count, half its memory as heap, a quarter as managed"
    )
    task_manager_memory: TaskManagerMemoryConfig = Field(
        default_factory=TaskManagerMemoryConfig, description="each TaskManager's memory budget (its profile's task heap + "
        "managed memory + framework overhead) and how it is enforced (docs/memory.md)"
    )
    start_retry_interval_s: float = Field(
        3.0, gt=0, description="wait after a TaskManager failed to start, doubled per failure in a row (Flink: resourcemanager.start-worker.retry-interval)"
    )
    max_start_retry_interval_s: float = Field(60.0, gt=0, description="the longest wait between failing TaskManager starts")
    host: str = Field("127.0.0.1", description="JobManager bind address")
    port: int = Field(0, description="JobManager RPC port (0 = any free port)")
    heartbeat_interval_ms: int = 1000
    heartbeat_timeout_ms: int = 10000
    tm_log_level: str = "INFO"
    echo_task_manager_stdout: bool = Field(
        False, description="write what tasks print to this process's stdout (an embedded run: the client's); "
        "always kept per TaskManager for REST /taskmanagers/{id}/stdout"
    )


def _echo_stdout(tm_id: str, text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def machine_task_manager_profile() -> m.ResourceProfile:
    """The largest TaskManager this machine could host: all its CPUs, half its memory as heap, a quarter managed."""
    try:
        memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    except (ValueError, OSError, AttributeError):  # not POSIX: assume a small machine
        memory_mb = 4096
    return m.ResourceProfile(cpu_cores=float(os.cpu_count() or 1), task_heap_mb=memory_mb // 2, managed_memory_mb=memory_mb // 4)


class MiniCluster:
    def __init__(self, config: MiniClusterConfig | None = None, spark: Any = None, provider: Any = None, clock: Clock = time.monotonic) -> None:
        """`clock`: the ResourceManager's (heartbeat and idle timeouts, start backoff); tests inject one they move."""
        self.config = config or MiniClusterConfig()
        self.spark = spark
        self.clock = clock
        self.secret = new_cluster_secret()
        self.rpc: RpcService | None = None
        self.provider = provider
        self.resource_manager: ResourceManager | None = None
        self.dispatcher: Dispatcher | None = None

    def start(self) -> "MiniCluster":
        cfg = self.config
        if self.provider is None:
            if cfg.provider == "spark":
                from runtime.deploy.spark_provider import SparkProvider

                if self.spark is None:
                    raise ValueError("the Spark provider needs a SparkSession")
                self.provider = SparkProvider(self.spark, log_level=cfg.tm_log_level, memory=cfg.task_manager_memory)
            else:
                from runtime.deploy.local_provider import LocalProcessProvider

                self.provider = LocalProcessProvider(log_level=cfg.tm_log_level, memory=cfg.task_manager_memory)
        self.rpc = RpcService(self.secret, f"jobmanager-{uuid.uuid4().hex[:8]}", host=cfg.host, port=cfg.port).start()
        self.resource_manager = ResourceManager(
            self.rpc,
            self.provider,
            self.resource_manager_config(),
            clock=self.clock,
        )
        if cfg.echo_task_manager_stdout:
            self.resource_manager.on_task_manager_stdout = _echo_stdout
        self.resource_manager.start()
        self.dispatcher = Dispatcher(self.rpc)
        self.dispatcher.start()
        log.info("MiniCluster up: JobManager at %s:%d, TaskManagers on %s", *self.rpc.address, self.provider.name)
        return self

    def resource_manager_config(self) -> ResourceManagerConfig:
        cfg = self.config
        default_tm = cfg.task_manager_profile or m.ResourceProfile().multiply(cfg.slots_per_task_manager)
        return ResourceManagerConfig(
            slots_per_tm=cfg.slots_per_task_manager,
            heartbeat_interval_ms=cfg.heartbeat_interval_ms,
            heartbeat_timeout_ms=cfg.heartbeat_timeout_ms,
            max_task_managers=cfg.max_task_managers,
            initial_task_managers=cfg.initial_task_managers,
            min_task_managers=cfg.min_task_managers,
            idle_timeout_s=cfg.idle_timeout_s,
            start_retry_interval_s=cfg.start_retry_interval_s,
            max_start_retry_interval_s=cfg.max_start_retry_interval_s,
            task_manager_profile=default_tm,
            max_task_manager_profile=cfg.max_task_manager_profile or machine_task_manager_profile().max_with(default_tm),
        )

    @property
    def address(self) -> tuple[str, int]:
        assert self.rpc is not None
        return self.rpc.address

    def dispatcher_gateway(self) -> gw.DispatcherGateway:
        assert self.rpc is not None
        return self.rpc.gateway(gw.DispatcherGateway, gw.DISPATCHER)

    def submit_job(self, job_graph: JobGraph) -> str:
        resp: m.JobIdMessage = self.dispatcher_gateway().call_sync("submit_job", m.SubmitJob(job_graph_json=job_graph.model_dump_json()))
        return resp.job_id

    def submit(
        self, job_graph: JobGraph, status_listener: StatusListener | None = None, failure_listener: FailureListener | None = None
    ) -> DispatcherJobClient:
        return DispatcherJobClient(self.dispatcher_gateway(), self.submit_job(job_graph), status_listener, failure_listener)

    def task_managers(self) -> list[m.TaskManagerInfo]:
        assert self.rpc is not None
        return self.rpc.gateway(gw.ResourceManagerGateway, gw.RESOURCE_MANAGER).call_sync("list_task_managers", m.Empty()).task_managers

    def wait_for_task_managers(self, n: int, timeout: float = 60.0) -> list[m.TaskManagerInfo]:
        deadline = time.monotonic() + timeout
        while True:
            tms = self.task_managers()
            if len(tms) >= n:
                return tms
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {len(tms)} of {n} TaskManagers registered within {timeout}s")
            time.sleep(0.05)

    def executor(self) -> "MiniClusterExecutor":
        return MiniClusterExecutor(self)

    def close(self) -> None:
        if self.dispatcher is not None:
            self.dispatcher.stop()
        if self.resource_manager is not None:
            self.resource_manager.stop()
        if self.provider is not None:
            self.provider.close()
        if self.rpc is not None:
            self.rpc.stop()
        self.dispatcher = self.resource_manager = None
        self.rpc = None

    def __enter__(self) -> "MiniCluster":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()


class MiniClusterExecutor:
    """PipelineExecutor that submits to a running MiniCluster."""

    def __init__(self, cluster: MiniCluster) -> None:
        self.cluster = cluster

    def execute(
        self, job_graph: JobGraph, status_listener: StatusListener | None = None, failure_listener: FailureListener | None = None
    ) -> DispatcherJobClient:
        return self.cluster.submit(job_graph, status_listener, failure_listener)
