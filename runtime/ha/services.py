"""What a JobManager process needs for high availability, built from its settings (Flink:
HighAvailabilityServices): the ZooKeeper client, its part in the leader election, and the HA
stores in Delta. The Dispatcher sees only DispatcherHaServices: the stores, the fence, and where
the leader is."""
from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runtime.core.options.high_availability import HighAvailabilitySettings
from runtime.ha.leader import LeaderContender, ZooKeeperLeaderElection, connect, read_leader

log = logging.getLogger(__name__)


@dataclass
class DispatcherHaServices:
    """The Dispatcher's view of HA: the stores, the fence of its leader session, the leader's URL."""

    job_graphs: Any  # runtime.storage.ha_stores.JobGraphStore
    job_results: Any  # runtime.storage.ha_stores.JobResultStore
    confirm_leadership: Callable[[str], bool]  # leader session id -> still leading? (a ZooKeeper round trip)
    leader_url: Callable[[], str | None]


def default_storage_dir(warehouse: str) -> str:
    return os.path.join(warehouse, "_ha")


class ZooKeeperHaServices:
    """One JobManager process's HA: created before anything else of the cluster, so an unreachable
    ZooKeeper fails the start at once with the quorum named."""

    def __init__(self, settings: HighAvailabilitySettings, warehouse: str) -> None:
        from runtime.storage.ha_stores import JobGraphStore, JobResultStore

        assert settings.enabled and settings.quorum
        self.settings = settings
        self.storage_dir = settings.storage_dir or default_storage_dir(warehouse)
        self.client = connect(settings.quorum, settings.connection_timeout_ms, settings.session_timeout_ms)
        self.client.ensure_path(settings.cluster_path)
        self.job_graphs = JobGraphStore(self.storage_dir, settings.cluster_id)
        self.job_results = JobResultStore(self.storage_dir, settings.cluster_id)
        self.election: ZooKeeperLeaderElection | None = None

    def start_election(self, contender: LeaderContender, rest_url: str) -> ZooKeeperLeaderElection:
        self.election = ZooKeeperLeaderElection(self.client, self.settings.cluster_path, self.settings.session_timeout_ms, rest_url)
        self.election.start(contender)
        return self.election

    def dispatcher_services(self) -> DispatcherHaServices:
        def confirm(session_id: str) -> bool:
            return self.election is not None and self.election.confirm_leadership(session_id)

        def leader_url() -> str | None:
            if not self.client.connected:  # unknown while cut off from ZooKeeper (never wait for it here)
                return None
            try:
                info = read_leader(self.client, self.settings.cluster_path)
            except Exception:  # noqa: BLE001 - unknown while ZooKeeper is unreachable
                return None
            return None if info is None else info.rest_url

        return DispatcherHaServices(self.job_graphs, self.job_results, confirm, leader_url)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "zookeeper", "quorum": self.settings.quorum, "cluster_id": self.settings.cluster_id,
                               "storage_dir": self.storage_dir}
        if self.election is not None:
            out.update(self.election.describe())
        return out

    def close(self) -> None:
        """Leave the election (a standby takes over at once), then close the ZooKeeper session."""
        if self.election is not None:
            self.election.stop()
        try:
            self.client.stop()
            self.client.close()
        except Exception as e:  # noqa: BLE001 - closing must go on
            log.warning("closing the ZooKeeper client failed: %s", e)
