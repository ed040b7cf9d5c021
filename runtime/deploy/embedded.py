"""The embedded default: this process is the JobManager and the Spark driver; Spark runs local[N].

One job per executor call (like Flink's per-job mini cluster): the cluster starts for the job
and is torn down when the job's client closes or its result has been fetched.

`execution.target: embedded` (the default) finds EmbeddedExecutorFactory through the
`millrace.executors` entry point group (see runtime.api.execution).
"""
from __future__ import annotations

import logging
from typing import Any, Mapping

from runtime.api.execution import FailureListener, JobExecutionResult, StatusListener
from runtime.deploy.client_logging import ensure_client_logging
from runtime.deploy.job_client import DispatcherJobClient
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig
from runtime.graph.job_graph import JobGraph

log = logging.getLogger(__name__)

PROVIDER_KEY = "execution.taskmanager.provider"  # "spark" (default) or "local"
SPARK_MASTER_KEY = "spark.master"


class _OwningJobClient(DispatcherJobClient):
    """Tears the per-job cluster down once the job's result is known."""

    def get_job_execution_result(self, timeout: float | None = None) -> JobExecutionResult:
        try:
            return super().get_job_execution_result(timeout)
        finally:
            self.close()


class EmbeddedExecutor:
    def __init__(self, provider: str = "spark", spark_master: str | None = None, spark: Any = None, tm_log_level: str = "WARNING") -> None:
        self.provider = provider
        self.tm_log_level = tm_log_level
        self.spark_master = spark_master
        self.spark = spark

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> "EmbeddedExecutor":
        return cls(config.get(PROVIDER_KEY, "spark"), config.get(SPARK_MASTER_KEY))

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
        cluster = MiniCluster(MiniClusterConfig(provider=self.provider, tm_log_level=self.tm_log_level, echo_task_manager_stdout=True), spark=spark).start()
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
