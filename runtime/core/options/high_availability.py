"""JobManager high availability (Flink's HighAvailabilityOptions): whether a cluster elects a
leader among several JobManagers through ZooKeeper, where the HA stores live, and the ZooKeeper
client's timeouts. Read by the cluster entrypoint (the JobManager process), not by jobs.

The session timeout is the trade-off of HA: a JobManager that stops answering (killed, paused,
cut off) loses leadership only when ZooKeeper expires its session, so a standby takes over after
about that long; a shorter one also expires sessions of a leader that pauses briefly (a long GC,
a loaded machine). Flink's default is 60 s; Millrace's 10 s keeps a failover under the 10 s the
benchmarks aim at on one machine, where ZooKeeper and the JobManagers never cross a network.
"""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from runtime.core.config_options import ConfigOptions

TITLE = "High availability"

HA_TYPE = (
    ConfigOptions.key("high-availability.type").enum_type(("none", "zookeeper"), what="high-availability type")
    .default_value("none")
    .with_deprecated_keys("high-availability")
    .with_description(
        "none: one JobManager, its jobs end with it (the embedded default). zookeeper: several JobManagers of one "
        "cluster id elect a leader through ZooKeeper; the others stand by and take over the jobs (recovered from "
        "the HA stores and their latest checkpoints) when the leader is lost."
    )
)

ZOOKEEPER_QUORUM = (
    ConfigOptions.key("high-availability.zookeeper.quorum").string_type().no_default_value()
    .with_description("The ZooKeeper servers, host:port separated by commas (required with high-availability.type: zookeeper).")
)

ZOOKEEPER_ROOT = (
    ConfigOptions.key("high-availability.zookeeper.path.root").string_type().default_value("/millrace")
    .check(lambda p: p.startswith("/") and not p.endswith("/") and "//" not in p, "an absolute ZooKeeper path like /millrace")
    .with_description("The root ZooKeeper node under which every cluster keeps its leader election and counters.")
)

CLUSTER_ID = (
    ConfigOptions.key("high-availability.cluster-id").string_type().default_value("default")
    .check(lambda c: bool(c) and "/" not in c, "a name without '/'")
    .with_description(
        "The cluster's name under the root node and in the storage dir: JobManagers with the same id are "
        "contenders for one leadership and share its jobs; clusters with different ids never meet."
    )
)

STORAGE_DIR = (
    ConfigOptions.key("high-availability.storageDir").string_type().no_default_value()
    .with_description(
        "Where the HA stores live (Delta tables: the submitted jobs' graphs and the job results). Default: "
        "<warehouse>/_ha, the warehouse being the cluster's home."
    )
)

SESSION_TIMEOUT = (
    ConfigOptions.key("high-availability.zookeeper.client.session-timeout").duration_type().default_value(10_000)
    .check(lambda ms: 1_000 <= ms <= 60_000, "between 1 s and 60 s (the ZooKeeper server's min/max session timeout)")
    .with_description(
        "How long ZooKeeper keeps a silent JobManager's session, i.e. how long after a leader is lost a standby "
        "takes over; a leader cut off from ZooKeeper for this long suspends its jobs. Flink's default is 60 s."
    )
)

CONNECTION_TIMEOUT = (
    ConfigOptions.key("high-availability.zookeeper.client.connection-timeout").duration_type().default_value(15_000)
    .check(lambda ms: ms > 0, "a positive duration")
    .with_description("How long a JobManager or client waits to reach ZooKeeper at start before it gives up with an error naming the quorum.")
)


class HighAvailabilitySettings(BaseModel):
    """The high-availability.* family, parsed once (the cluster entrypoint's and the clients' view)."""

    model_config = ConfigDict(frozen=True)

    type: str = "none"
    quorum: str | None = None
    root: str = "/millrace"
    cluster_id: str = "default"
    storage_dir: str | None = Field(None, description="None: <warehouse>/_ha")
    session_timeout_ms: int = 10_000
    connection_timeout_ms: int = 15_000

    @property
    def enabled(self) -> bool:
        return self.type == "zookeeper"

    @property
    def cluster_path(self) -> str:
        """The cluster's ZooKeeper node: <root>/<cluster id>."""
        return f"{self.root}/{self.cluster_id}"

    @classmethod
    def from_config(cls, config: dict[str, str]) -> HighAvailabilitySettings:
        from runtime.core.errors import ConfigurationError

        settings = cls(
            type=HA_TYPE.get(config), quorum=ZOOKEEPER_QUORUM.get(config), root=ZOOKEEPER_ROOT.get(config),
            cluster_id=CLUSTER_ID.get(config), storage_dir=STORAGE_DIR.get(config),
            session_timeout_ms=SESSION_TIMEOUT.get(config), connection_timeout_ms=CONNECTION_TIMEOUT.get(config),
        )
        if settings.enabled and not settings.quorum:
            raise ConfigurationError(
                f"{HA_TYPE.key}: zookeeper needs {ZOOKEEPER_QUORUM.key} (the ZooKeeper servers, e.g. 127.0.0.1:2181)"
            )
        return settings

    def to_config(self) -> dict[str, str]:
        out = {HA_TYPE.key: self.type, ZOOKEEPER_ROOT.key: self.root, CLUSTER_ID.key: self.cluster_id,
               SESSION_TIMEOUT.key: f"{self.session_timeout_ms} ms", CONNECTION_TIMEOUT.key: f"{self.connection_timeout_ms} ms"}
        if self.quorum:
            out[ZOOKEEPER_QUORUM.key] = self.quorum
        if self.storage_dir:
            out[STORAGE_DIR.key] = self.storage_dir
        return out
