"""JobManager failover: the main job on an HA session cluster (ZooKeeper), its leader SIGKILLed.

Starts a ZooKeeper server and two JobManager processes (`high-availability.type: zookeeper`, one
cluster id), submits windowed_sum (checkpoints every --checkpoint-interval-ms, exactly-once Delta
sink, the source throttled to --rate events per second) through a REST client that follows the
leader, then --kills times: waits until the job runs and a checkpoint completed since the last
kill, SIGKILLs the leading JobManager's process group (the JobManager, its Spark driver or local
TaskManagers: all of it), and, once the job runs again, starts a fresh standby in its place. The standby leads once
ZooKeeper expires the dead leader's session (--session-timeout-ms), recovers the job from the job
graph store and its latest checkpoint, and the job finishes. The Delta table is checked row for row
against the plain-Python reference. Prints one JSON line:

    {"jm_kills", "leader_changes", "rows", "duplicate_keys", "missing_keys", "wrong_values", "verified",
     "median_recovery_s", "max_recovery_s", "seconds", "status", "session_timeout_s"}

recovery = kill -> the job RUNNING again under the new leader (its REST says so). Exits non-zero on
any lost, duplicated or wrong row, or when fewer kills happened than asked for.

    .venv/bin/python benchmarks/ha_failover.py --events 200000 --rate 10000 --kills 3 [--provider spark]
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # measure.py beside it, also when loaded by a test
from measure import check_windowed_sum

from pipelines.jobs import windowed_sum
from runtime.api.common import Configuration
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.options.high_availability import HighAvailabilitySettings
from runtime.deploy.cluster_entrypoint import ClusterConfig
from runtime.deploy.cluster_file import ClusterEndpoint
from runtime.deploy.cluster_process import start_cluster_process
from runtime.deploy.remote import rest_client
from runtime.deploy.zookeeper_server import ZooKeeperServer
from runtime.rest.client import RestClusterClient, RestError

log = logging.getLogger("ha_failover")

TERMINAL = ("FINISHED", "FAILED", "CANCELED")


class HaCluster:
    """JobManager processes of one HA cluster, each in a home of its own under `root`."""

    def __init__(self, root: Path, quorum: str, provider: str, session_timeout_ms: int, slots: int) -> None:
        self.root = root
        self.settings = HighAvailabilitySettings(
            type="zookeeper", quorum=quorum, cluster_id=f"bench-{uuid.uuid4().hex[:8]}", storage_dir=str(root / "ha"),
            session_timeout_ms=session_timeout_ms, connection_timeout_ms=10_000,
        )
        self.provider = provider
        self.slots = slots
        self.processes: dict[int, tuple[Any, ClusterEndpoint]] = {}
        self._started = 0
        self._lock = threading.Lock()

    def start_job_manager(self) -> ClusterEndpoint:
        with self._lock:
            self._started += 1
            number = self._started
        cfg = ClusterConfig(
            mode="session", home=str(self.root / f"jm-{number}"), provider=self.provider, task_managers=1,
            slots_per_task_manager=self.slots, max_task_managers=1, log_level="INFO", high_availability=self.settings,
        )
        proc, endpoint = start_cluster_process(cfg)
        self.processes[endpoint.pid] = (proc, endpoint)
        return endpoint

    def start_job_managers(self, n: int) -> list[ClusterEndpoint]:
        """`n` JobManagers started side by side (each start is mostly a Spark driver's start)."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=n) as pool:
            return list(pool.map(lambda _: self.start_job_manager(), range(n)))

    def leader(self, timeout_s: float = 120.0) -> ClusterEndpoint:
        """The live JobManager whose own /cluster says it leads."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for proc, endpoint in self.processes.values():
                if proc.poll() is not None:
                    continue
                try:
                    info = RestClusterClient(endpoint.url, endpoint.token, timeout=5).cluster_info()
                except RestError:
                    continue
                if info.high_availability is not None and info.high_availability.role == "leader":
                    return endpoint
            time.sleep(0.1)
        raise TimeoutError(f"no JobManager leads after {timeout_s:.0f}s")

    def kill(self, endpoint: ClusterEndpoint) -> None:
        """SIGKILL the JobManager's whole process group: nothing of it survives to say goodbye."""
        proc, _ = self.processes.pop(endpoint.pid)
        os.killpg(endpoint.pid, signal.SIGKILL)
        proc.wait(30)

    def close(self) -> None:
        """SIGTERM every JobManager's process group at once, then wait for each (they stop side by
        side, as they start); one still there after 30 s is SIGKILLed."""
        processes = list(self.processes.items())
        for pid, _ in processes:
            try:
                os.killpg(pid, signal.SIGTERM)
            except (ProcessLookupError, OSError):
                pass
        deadline = time.monotonic() + 30
        for pid, (proc, _) in processes:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except Exception:  # noqa: BLE001 - a stuck one is killed below
                pass
            if proc.poll() is None:
                os.killpg(pid, signal.SIGKILL)
        self.processes.clear()


def _state(client: RestClusterClient, job_id: str) -> str:
    return client.job_details(job_id).state


def _completed(client: RestClusterClient, job_id: str) -> int:
    return client.job_checkpoints(job_id).counts.completed


def _await_result(client: RestClusterClient, job_id: str, timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        result = client.job_result(job_id)  # long-polls ~5 s server-side
        if result.status.value in TERMINAL or time.monotonic() > deadline:
            return result


def run(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(args.workdir or tempfile.mkdtemp(prefix="millrace-ha-"))
    output = str(root / "out")
    if os.path.exists(output):
        shutil.rmtree(output)
    with ZooKeeperServer(root / "zookeeper") as zk:
        cluster = HaCluster(root, zk.connect_string, args.provider, args.session_timeout_ms, args.parallelism)
        try:
            first, _ = cluster.start_job_managers(2)
            client = rest_client(first)  # follows the leader from here on
            conf = Configuration()
            conf.set_string("state.checkpoints.dir", str(root / "checkpoints"))
            env = StreamExecutionEnvironment.get_execution_environment(conf)
            env.set_parallelism(args.parallelism)
            windowed_sum.build(env, args.events, output, rate=args.rate, checkpoint_interval_ms=args.checkpoint_interval_ms)
            start = time.monotonic()
            job_id = client.submit_job(env.get_job_graph("windowed_sum-ha"))
            recoveries: list[float] = []
            leaders: list[str] = [cluster.leader().url]
            kills = 0
            while kills < args.kills:
                # the job runs and checkpointed since the last recovery (a kill before that only repeats one)
                seen = _completed(client, job_id)
                while _state(client, job_id) == "RUNNING" and _completed(client, job_id) <= seen:
                    time.sleep(0.1)
                if _state(client, job_id) != "RUNNING":
                    break
                victim = cluster.leader()
                cluster.kill(victim)
                killed_at = time.monotonic()
                kills += 1
                log.warning("kill %d: the leading JobManager at %s (pid %d)", kills, victim.url, victim.pid)
                while True:
                    state = _state(client, job_id)  # through whichever JobManager leads now
                    if state == "RUNNING" and client.url != victim.url.rstrip("/"):
                        recoveries.append(time.monotonic() - killed_at)
                        leaders.append(client.url)
                        break
                    if state in TERMINAL:
                        break
                    if time.monotonic() - killed_at > 180:
                        raise RuntimeError("the job did not run again under a new leader within 180 s")
                    time.sleep(0.1)
                if kills < args.kills:
                    cluster.start_job_manager()  # a standby again, for the next kill
            result = _await_result(client, job_id, timeout_s=900)
            seconds = time.monotonic() - start
        finally:
            cluster.close()
    out: dict[str, Any] = {
        "jm_kills": kills,
        "kills_requested": args.kills,
        "leader_changes": sum(1 for a, b in zip(leaders, leaders[1:]) if a != b),
        **check_windowed_sum(output, args.events),
        "median_recovery_s": round(statistics.median(recoveries), 2) if recoveries else None,
        "max_recovery_s": round(max(recoveries), 2) if recoveries else None,
        "seconds": round(seconds, 2),
        "status": result.status.value,
        "session_timeout_s": args.session_timeout_ms / 1000,
        "provider": args.provider,
        "job_id": job_id,
        "workdir": str(root),
    }
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rate", type=int, default=10_000, help="events per second over all subtasks")
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--provider", choices=["spark", "local"], default="local")
    parser.add_argument("--checkpoint-interval-ms", type=int, default=500)
    parser.add_argument("--session-timeout-ms", type=int, default=4_000,
                        help="high-availability.zookeeper.client.session-timeout: how long a dead leader keeps leading")
    parser.add_argument("--workdir", default=None, help="folder for ZooKeeper, the JobManagers, checkpoints and the output (default: a temp dir)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    out = run(args)
    print(json.dumps(out), flush=True)
    if out["jm_kills"] < args.kills:
        print(f"ha_failover: only {out['jm_kills']} of {args.kills} kills happened before the job ended", file=sys.stderr)
    return 1 if not out["verified"] or out["status"] != "FINISHED" or out["jm_kills"] < args.kills else 0


if __name__ == "__main__":
    sys.exit(main())
