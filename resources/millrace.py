"""MillraceClusterResource: where the Millrace jobs of Dagster runs execute (Dagster's integration
style, as dagster-databricks: a thin, configurable resource whose `get_client()` returns the client).

Two modes (Flink's deployment targets seen from a client), see resources/millrace_client.py:
- `embedded` -> EmbeddedMillraceClient: the Dagster run's process is the JobManager; TaskManagers
  on the executors of the run's SparkSession (provider "spark", via SparkResource) or as local
  processes ("local"). The cluster lives as long as the job: attached only.
- `session` -> SessionMillraceClient: a long-running session cluster (`millrace cluster start`)
  over its REST API; URL and token from the environment (EnvVar("MILLRACE_URL") /
  EnvVar("MILLRACE_TOKEN")) or from its cluster file (`$MILLRACE_HOME/cluster.json`). Attached or
  detached jobs, savepoints, checkpoints.

`run`, `submit`, `wait`, `status`, `cancel`, ... on the resource are shorthands for the same calls
on `get_client()`.
"""
from typing import Any, Literal

from dagster import ConfigurableResource
from pydantic import Field, PrivateAttr

from resources.millrace_client import (  # noqa: F401 - re-exported: the resource's public names
    FAILURE_CAUSE,
    FAILURE_JOB_ID,
    FAILURE_JOB_NAME,
    FAILURE_STATUS,
    EmbeddedMillraceClient,
    MillraceClient,
    MillraceRun,
    SessionMillraceClient,
    SubmittedJob,
    VertexRecords,
    summarize_run,
    vertex_records_from_details,
)
from resources.spark import SparkResource
from runtime.core.states import JobStatus
from runtime.graph.job_graph import JobGraph


class MillraceClusterResource(ConfigurableResource):
    """Where Millrace jobs of Dagster runs execute, and the client that follows them."""

    mode: Literal["embedded", "session"] = Field(
        default="embedded",
        description="'embedded': a per-job cluster inside the run process; 'session': a running session cluster (REST)",
    )
    provider: Literal["spark", "local"] = Field(
        default="spark",
        description="embedded mode: TaskManagers on the run's Spark executors ('spark') or as local processes ('local')",
    )
    url: str | None = Field(
        default=None,
        description="session mode: REST URL of the cluster, e.g. EnvVar('MILLRACE_URL'); unset: read the cluster file",
    )
    token: str | None = Field(
        default=None, description="session mode: the cluster's access token, e.g. EnvVar('MILLRACE_TOKEN')"
    )
    cluster_file: str | None = Field(
        default=None,
        description="session mode without url: a cluster.json or the folder holding one (default: $MILLRACE_HOME/cluster.json)",
    )
    zookeeper_quorum: str | None = Field(
        default=None,
        description="session mode, an HA cluster: find its leader in this ZooKeeper (host:port,...) instead of url/cluster_file; "
        "the resource then follows the leader through failovers (a cluster file of an HA cluster does the same)",
    )
    ha_cluster_id: str = Field(default="default", description="with zookeeper_quorum: the cluster's high-availability.cluster-id")
    ha_path_root: str = Field(default="/millrace", description="with zookeeper_quorum: high-availability.zookeeper.path.root")
    progress_interval_s: float = Field(default=10.0, description="seconds between progress lines (records per vertex) in the run log")
    cancel_timeout_s: float = Field(default=60.0, description="how long to wait for a cancelled job to reach CANCELED")
    tm_log_level: str = Field(default="WARNING", description="embedded mode: log level of the TaskManager processes")
    spark: SparkResource = Field(description="the Spark session of embedded mode with provider 'spark'")

    _client: MillraceClient | None = PrivateAttr(default=None)

    # --- where jobs go ----------------------------------------------------------------------

    def get_client(self) -> MillraceClient:
        """The client for this resource's mode (one per resource instance: it tracks its attached jobs)."""
        if self._client is None:
            settings = {"progress_interval_s": self.progress_interval_s, "cancel_timeout_s": self.cancel_timeout_s}
            if self.mode == "session":
                self._client = SessionMillraceClient(self.endpoint(), **settings)
            else:
                self._client = EmbeddedMillraceClient(self.provider, lambda: self.spark.spark_session, self.tm_log_level, **settings)
        return self._client

    def endpoint(self) -> Any:
        """The session cluster's ClusterEndpoint (URL and token)."""
        from runtime.deploy.cluster_file import ClusterEndpoint, HaClientSettings, read_cluster_file, resolve_cluster

        if self.zookeeper_quorum:
            from runtime.core.errors import ConfigurationError
            from runtime.ha.leader import retrieve_leader

            if not self.token:
                raise ConfigurationError("zookeeper_quorum needs the cluster's token (token: EnvVar('MILLRACE_TOKEN'))")
            ha = HaClientSettings(quorum=self.zookeeper_quorum, cluster_path=f"{self.ha_path_root}/{self.ha_cluster_id}")
            leader = retrieve_leader(ha.quorum, ha.cluster_path)
            return ClusterEndpoint(url=leader.rest_url, token=self.token, pid=0, ha=ha)
        if self.url:
            return resolve_cluster(self.url, self.token, self.cluster_file)
        return read_cluster_file(self.cluster_file)  # None: $MILLRACE_HOME/cluster.json

    def rest(self) -> Any:
        """A RestClusterClient for the session cluster."""
        client = self.get_client()
        if not isinstance(client, SessionMillraceClient):
            raise client._needs_session("talking to a cluster's REST API")
        return client.rest()

    # --- shorthands for get_client() -------------------------------------------------------
    def submit(self, job_graph: JobGraph, *, detached: bool = False, context: Any = None) -> SubmittedJob:
        return self.get_client().submit(job_graph, detached=detached, context=context)

    def run(self, job_graph: JobGraph, context: Any = None, timeout_s: float | None = None) -> MillraceRun:
        return self.get_client().run(job_graph, context=context, timeout_s=timeout_s)

    def wait(self, job: SubmittedJob, context: Any = None, timeout_s: float | None = None) -> MillraceRun:
        return self.get_client().wait(job, context=context, timeout_s=timeout_s)

    def status(self, job_id: str) -> JobStatus:
        return self.get_client().status(job_id)

    def list_jobs(self) -> list[dict[str, Any]]:
        return self.get_client().list_jobs()

    def cancel(self, job_id: str, context: Any = None, wait: bool = True) -> JobStatus:
        return self.get_client().cancel(job_id, context=context, wait=wait)

    def running_jobs(self, name: str) -> list[str]:
        return self.get_client().running_jobs(name)

    def cancel_by_name(self, name: str, context: Any = None, wait: bool = True) -> dict[str, str]:
        return self.get_client().cancel_by_name(name, context=context, wait=wait)
