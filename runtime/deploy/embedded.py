"""The embedded default: this process is the JobManager and the Spark driver; Spark runs local[N].

One job per executor call (like Flink's per-job mini cluster): the cluster starts for the job
and is torn down when the job's client closes or its result has been fetched.

`execution.target: embedded` (the default) finds EmbeddedExecutorFactory through the
`millrace.executors` entry point group (see runtime.api.execution).
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from runtime.api.execution import FailureListener, JobExecutionResult, StatusListener
from runtime.core.options import deployment as deployment_options
from runtime.deploy.client_logging import ensure_client_logging
from runtime.deploy.job_client import DispatcherJobClient
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig
from runtime.graph.job_graph import JobGraph

log = logging.getLogger(__name__)

# the option keys under their old names (declared in runtime.core.options.deployment)
PROVIDER_KEY = deployment_options.TASK_MANAGER_PROVIDER.key  # "spark" (default) or "local"
SPARK_MASTER_KEY = deployment_options.SPARK_MASTER.key


class _OwningJobClient(DispatcherJobClient):
    """Tears the per-job cluster down once the job's result is known."""

    def get_job_execution_result(self, timeout: float | None = None) -> JobExecutionResult:
        try:
            return super().get_job_execution_result(timeout)
        finally:
            self.close()


class EmbeddedExecutor:
    def __init__(
        self,
        provider: str = "spark",
        spark_master: str | None = None,
        spark: Any = None,
        tm_log_level: str = "WARNING",
        cluster: MiniClusterConfig | None = None,
    ) -> None:
        """`cluster`: the per-job cluster's settings, whole; without it, `provider` and
        `tm_log_level` (the CLI's flags, the Dagster resource's fields) make them."""
        self.cluster_config = cluster or MiniClusterConfig.model_validate({"provider": provider, "tm_log_level": tm_log_level})
        # what tasks print goes to the client's stdout: the job runs "in" this process
        self.cluster_config = self.cluster_config.model_copy(update={"echo_task_manager_stdout": True})
        self.spark_master = spark_master
        self.spark = spark

    @property
    def provider(self) -> str:
        return self.cluster_config.provider

    @property
    def tm_log_level(self) -> str:
        return self.cluster_config.tm_log_level

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> EmbeddedExecutor:
        return cls(deployment_options.TASK_MANAGER_PROVIDER.get(config), deployment_options.SPARK_MASTER.get(config))

    def execute(
        self, job_graph: JobGraph, status_listener: StatusListener | None = None, failure_listener: FailureListener | None = None
    ) -> DispatcherJobClient:
        # the JobManager runs in the program's process: its logs go to the client's log file, not
        # to the program's handlers (PyFlink's framework logs on the Java side)
        ensure_client_logging(job_graph.config or {})
        slots = job_graph.slots_required()
        spark = self.spark
        if self.provider == "spark" and spark is None:
            from runtime.deploy.spark_session import SparkSessionConfig, build_spark_session

            master = self.spark_master or f"local[{max(2, slots)}]"
            # Spark's own start-up output only when asked for everything (--log-level DEBUG)
            spark = build_spark_session(SparkSessionConfig(master=master, quiet=self.tm_log_level != "DEBUG"))
        cluster = MiniCluster(self.cluster_config, spark=spark).start()
        try:
            job_id = cluster.submit_job(job_graph)
        except BaseException:
            cluster.close()
            raise
        return _OwningJobClient(cluster.dispatcher_gateway(), job_id, status_listener, failure_listener, on_close=cluster.close)


class EmbeddedExecutorFactory:
    """`execution.target: embedded` (Flink's PipelineExecutorFactory for its embedded/local target)."""

    name = "embedded"

    def get_executor(self, config: Mapping[str, str]) -> EmbeddedExecutor:
        return EmbeddedExecutor.from_config(config)
