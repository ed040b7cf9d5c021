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
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from runtime.api.execution import FailureListener, StatusListener
from runtime.deploy.job_client import DispatcherJobClient
from runtime.graph.job_graph import JobGraph
from runtime.ha.services import DispatcherHaServices
from runtime.jobmanager.dispatcher import Dispatcher
from runtime.jobmanager.resource_manager import ResourceManager, ResourceManagerConfig
from runtime.jobmanager.slot_manager import Clock
from runtime.rpc import gateways as gw
from runtime.rpc import messages as m
from runtime.rpc.auth import new_cluster_secret
from runtime.rpc.service import RpcService
from runtime.taskmanager.memory import TaskManagerMemoryConfig

log = logging.getLogger(__name__)


# the flat names MiniClusterConfig took before its ResourceManager settings were one nested model
# (tests, benchmarks and callers still pass them): flat name -> ResourceManagerConfig field
FLAT_RESOURCE_MANAGER_FIELDS = {
    "slots_per_task_manager": "slots_per_tm",
    "slots_per_tm": "slots_per_tm",
    "max_task_managers": "max_task_managers",
    "initial_task_managers": "initial_task_managers",
    "min_task_managers": "min_task_managers",
    "idle_timeout_s": "idle_timeout_s",
    "task_manager_profile": "task_manager_profile",
    "max_task_manager_profile": "max_task_manager_profile",
    "start_retry_interval_s": "start_retry_interval_s",
    "max_start_retry_interval_s": "max_start_retry_interval_s",
    "heartbeat_interval_ms": "heartbeat_interval_ms",
    "heartbeat_timeout_ms": "heartbeat_timeout_ms",
    "dynamic_slots": "dynamic_slots",
    "evenly_spread_out_slots": "evenly_spread_out_slots",
    "max_total_cpu": "max_total_cpu",
    "max_total_memory_mb": "max_total_memory_mb",
}


def nest_flat_fields(data: Any, nested: str, names: Mapping[str, str], defaults: Mapping[str, Any] | None = None) -> Any:
    """A model's input with the flat `names` (flat name -> field of the nested model) moved into
    its `nested` field, over `defaults` for that field and over a nested value given as well.
    Other inputs (a model instance, JSON already nested) pass through."""
    if not isinstance(data, dict):
        return data
    flat = {names[k]: v for k, v in data.items() if k in names}
    if not flat and defaults is None:
        return data
    out = {k: v for k, v in data.items() if k not in names}
    given = out.get(nested)
    if isinstance(given, BaseModel):
        given = given.model_dump()
    out[nested] = {**(defaults or {}), **(given or {}), **flat}
    return out


class MiniClusterConfig(BaseModel):
    """A JobManager in this process and the TaskManagers it starts. The ResourceManager's settings
    are one nested model, handed to the ResourceManager whole (the flat names of
    FLAT_RESOURCE_MANAGER_FIELDS are still accepted)."""

    # a misspelt setting (slots_per_tm for slots_per_task_manager) is an error, not silently the default
    model_config = ConfigDict(extra="forbid")

    provider: Literal["spark", "local"] = Field("local", description="where TaskManagers run")
    host: str = Field("127.0.0.1", description="JobManager bind address")
    port: int = Field(0, description="JobManager RPC port (0 = any free port)")
    tm_log_level: str = "INFO"
    task_manager_memory: TaskManagerMemoryConfig = Field(
        default_factory=TaskManagerMemoryConfig, description="each TaskManager's memory budget (its profile's task heap + "
        "managed memory + framework overhead) and how it is enforced (docs/memory.md)"
    )
    echo_task_manager_stdout: bool = Field(
        False, description="write what tasks print to this process's stdout (an embedded run: the client's); "
        "always kept per TaskManager for REST /taskmanagers/{id}/stdout"
    )
    resource_manager: ResourceManagerConfig = Field(
        default_factory=ResourceManagerConfig,
        description="how many TaskManagers of which size, when they start and are released, heartbeats; "
        "max_task_manager_profile None: this machine's CPU count, half its memory as heap, a quarter as managed",
    )

    @model_validator(mode="before")
    @classmethod
    def _nest_flat_resource_manager_fields(cls, data: Any) -> Any:
        return nest_flat_fields(data, "resource_manager", FLAT_RESOURCE_MANAGER_FIELDS)

    def with_task_managers_on_demand(self) -> MiniClusterConfig:
        """This cluster with no TaskManager started up front or kept while idle: a per-job or
        application cluster asks for them as its job needs them and lets them go with it."""
        rm = self.resource_manager.model_copy(update={"initial_task_managers": 0, "min_task_managers": 0, "idle_timeout_s": None})
        return self.model_copy(update={"resource_manager": rm})


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
    def __init__(
        self, config: MiniClusterConfig | None = None, spark: Any = None, provider: Any = None, clock: Clock = time.monotonic,
        ha: DispatcherHaServices | None = None,
    ) -> None:
        """`clock`: the ResourceManager's (heartbeat and idle timeouts, start backoff); tests inject one they move.
        `ha`: the Dispatcher's HA stores and fence (it then serves only once elected)."""
        self.config = config or MiniClusterConfig()
        self.ha = ha
        self.spark = spark
        self.clock = clock
        self.secret = new_cluster_secret()
        self.rpc: RpcService | None = None
        self.provider = provider
        self.resource_manager: ResourceManager | None = None
        self.dispatcher: Dispatcher | None = None

    def start(self) -> MiniCluster:
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
        self.dispatcher = Dispatcher(self.rpc, ha=self.ha)
        self.dispatcher.start()
        log.info("MiniCluster up: JobManager at %s:%d, TaskManagers on %s", *self.rpc.address, self.provider.name)
        return self

    def resource_manager_config(self) -> ResourceManagerConfig:
        """The nested ResourceManager settings, whole; an unset largest TaskManager is this machine's."""
        rm = self.config.resource_manager
        if rm.max_task_manager_profile is not None:
            return rm
        return rm.model_copy(update={"max_task_manager_profile": machine_task_manager_profile().max_with(rm.default_task_manager_profile)})

    def _running_rpc(self) -> RpcService:
        if self.rpc is None:
            raise RuntimeError("the MiniCluster is not running: start() it first (or it was closed)")
        return self.rpc

    @property
    def address(self) -> tuple[str, int]:
        return self._running_rpc().address

    def dispatcher_gateway(self) -> gw.DispatcherGateway:
        return self._running_rpc().gateway(gw.DispatcherGateway, gw.DISPATCHER)

    def resource_manager_gateway(self) -> gw.ResourceManagerGateway:
        return self._running_rpc().gateway(gw.ResourceManagerGateway, gw.RESOURCE_MANAGER)

    def submit_job(self, job_graph: JobGraph) -> str:
        resp: m.JobIdMessage = self.dispatcher_gateway().call_sync("submit_job", m.SubmitJob(job_graph_json=job_graph.model_dump_json()))
        return resp.job_id

    def submit(
        self, job_graph: JobGraph, status_listener: StatusListener | None = None, failure_listener: FailureListener | None = None
    ) -> DispatcherJobClient:
        return DispatcherJobClient(self.dispatcher_gateway(), self.submit_job(job_graph), status_listener, failure_listener)

    def task_managers(self) -> list[m.TaskManagerInfo]:
        return self.resource_manager_gateway().call_sync("list_task_managers", m.Empty()).task_managers

    def wait_for_task_managers(self, n: int, timeout: float = 60.0) -> list[m.TaskManagerInfo]:
        deadline = time.monotonic() + timeout
        while True:
            tms = self.task_managers()
            if len(tms) >= n:
                return tms
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {len(tms)} of {n} TaskManagers registered within {timeout}s")
            time.sleep(0.05)

    def executor(self) -> MiniClusterExecutor:
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

    def __enter__(self) -> MiniCluster:
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
