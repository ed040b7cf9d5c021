"""A real Apache ZooKeeper, run from jars fetched once from Maven Central, for JobManager high availability.

Flink's high-availability services keep the leader's address, job graphs and checkpoint pointers in
ZooKeeper (through Curator). Millrace's HA services talk to a real server through kazoo, so tests
and local clusters need one: not a fake that agrees with whatever the client expects, but the same
leader election, sessions and watches a production ensemble has. ZooKeeper is a Java program; this
module fetches its jars once (no Maven, no Ivy: eight files over HTTPS, each checked against Maven
Central's `.sha1`, by runtime.deploy.java_servers as Kafka's are), writes a `zoo.cfg` and runs
`QuorumPeerMain` as a child process in its own session, either one node (standalone) or an
ensemble of N nodes on loopback.

    python -m runtime.deploy.zookeeper_server fetch | start [--home DIR] [--port 2181] [--ensemble 3] | stop | status

`start` leaves the servers running detached and records them in `<home>/zookeeper.json`; `stop` and
`status` read that file. `infra/zookeeper.sh` wraps the command; `infra/setup.sh` runs `fetch`.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from pydantic import BaseModel, Field, ValidationError

from runtime.core.errors import MillraceError
from runtime.deploy import java_servers
from runtime.deploy.java_servers import MAVEN_CENTRAL, JavaServerError, free_ports  # MAVEN_CENTRAL, free_ports: callers import them from here

log = logging.getLogger(__name__)

ZOOKEEPER_VERSION = "3.9.5"
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

# group:artifact:version; exactly what QuorumPeerMain needs (slf4j-simple: without a provider
# slf4j drops every line, so a server that fails to start would say nothing)
JARS: tuple[str, ...] = (
    f"org.apache.zookeeper:zookeeper:{ZOOKEEPER_VERSION}",
    f"org.apache.zookeeper:zookeeper-jute:{ZOOKEEPER_VERSION}",
    "org.slf4j:slf4j-api:2.0.13",
    "org.slf4j:slf4j-simple:2.0.13",
    "org.apache.yetus:audience-annotations:0.12.0",
    "io.dropwizard.metrics:metrics-core:4.1.12.1",
    "commons-io:commons-io:2.17.0",
    "org.xerial.snappy:snappy-java:1.1.10.5",
)

RECORD_FILE = "zookeeper.json"
DEFAULT_HOME = Path(".millrace") / "zookeeper"
LOG_FILE = "zookeeper.log"
TICK_TIME_MS = 500
STOP_GRACE_S = 5.0
_PROBE_TIMEOUT_S = 1.0
# slf4j-simple's lines carry a wall-clock time (its default is milliseconds since the JVM started)
_LOG_OPTIONS = ("-Dorg.slf4j.simpleLogger.showDateTime=true", "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss.SSS")


class ZooKeeperError(JavaServerError):
    """A ZooKeeper server could not be fetched, started or reached."""


# --------------------------------------------------------------------------------------------------
# the jars


def jars_dir() -> Path:
    """Where this environment keeps the ZooKeeper jars (beside runtime.deploy.spark_jars' jars)."""
    return java_servers.jars_home() / f"zookeeper-{ZOOKEEPER_VERSION}"


def fetch_jars(dest: Path | None = None, repository: str = MAVEN_CENTRAL) -> list[Path]:
    """The ZooKeeper classpath: each jar of JARS in `dest` (default jars_dir()), downloaded once and
    checked against Maven Central's sha1 (runtime.deploy.java_servers.fetch_jars)."""
    return java_servers.fetch_jars(JARS, jars_dir() if dest is None else dest, "ZooKeeper", repository, ZooKeeperError)


# --------------------------------------------------------------------------------------------------
# four-letter words


def four_letter_word(port: int, word: str, host: str = "127.0.0.1", timeout_s: float = _PROBE_TIMEOUT_S) -> str | None:
    """The server's answer to a four-letter command (`ruok`, `srvr`, `mntr`), or None if it did not answer."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            s.sendall(word.encode("ascii"))
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", errors="replace")
    except OSError:
        return None


def server_mode(port: int, host: str = "127.0.0.1") -> str | None:
    """`standalone`, `leader` or `follower` (from `srvr`); None if the node does not serve requests."""
    answer = four_letter_word(port, "srvr", host)
    for line in (answer or "").splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip()
    return None


# --------------------------------------------------------------------------------------------------
# one node


class ZooKeeperServer:
    """One ZooKeeper node: its cfg, data and log under `home`, the JVM a child in its own session.

    `client_port` 0 picks a free loopback port now, so `connect_string` is known before `start()`
    (and a restarted node keeps its address). `peers` ({server id: (quorum port, election port)},
    this node's `server_id` among them) makes it a member of an ensemble; without it, standalone.
    """

    def __init__(self, home: str | os.PathLike[str], client_port: int = 0, server_id: int = 1, peers: dict[int, tuple[int, int]] | None = None) -> None:
        if peers is not None and server_id not in peers:
            raise ZooKeeperError(f"server id {server_id} is not among the ensemble's peers {sorted(peers)}")
        self.home = Path(home).resolve()
        self.client_port = client_port or free_ports(1)[0]
        self.server_id = server_id
        self.peers = dict(peers) if peers else None
        self._proc: subprocess.Popen[bytes] | None = None
        self._adopted_pid: int | None = None

    @classmethod
    def adopt(cls, home: str | os.PathLike[str], client_port: int, pid: int, server_id: int = 1) -> ZooKeeperServer:
        """A handle on a node started by another process (the CLI's `start`), to stop it or ask its status."""
        server = cls(home, client_port, server_id)
        server._adopted_pid = pid
        return server

    @property
    def cfg_path(self) -> Path:
        return self.home / "zoo.cfg"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def log_path(self) -> Path:
        return self.home / LOG_FILE

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else self._adopted_pid

    def alive(self) -> bool:
        """True while the JVM runs (whether or not it serves yet)."""
        if self._proc is not None:
            return self._proc.poll() is None
        return self._adopted_pid is not None and java_servers.is_live_process_of(self._adopted_pid, (MAIN_CLASS, str(self.cfg_path)))

    def mode(self) -> str | None:
        """`standalone`, `leader` or `follower`; None while it does not serve."""
        return server_mode(self.client_port)

    def write_config(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            f"# written by runtime/deploy/zookeeper_server.py (ZooKeeper {ZOOKEEPER_VERSION})",
            f"tickTime={TICK_TIME_MS}",
            f"dataDir={self.data_dir}",
            f"clientPort={self.client_port}",
            "clientPortAddress=127.0.0.1",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr,mntr",
            f"minSessionTimeout={2 * TICK_TIME_MS}",
            "maxSessionTimeout=60000",
        ]
        if self.peers:
            lines += ["initLimit=10", "syncLimit=5", "reconfigEnabled=false"]
            lines += [f"server.{i}=127.0.0.1:{quorum}:{election}" for i, (quorum, election) in sorted(self.peers.items())]
        java_servers.write_atomically(self.cfg_path, ("\n".join(lines) + "\n").encode())
        java_servers.write_atomically(self.data_dir / "myid", f"{self.server_id}\n".encode())

    def launch(self) -> None:
        """Write cfg and myid and start the JVM; returns at once (see wait_serving)."""
        if self.alive():
            raise ZooKeeperError(f"ZooKeeper node {self.server_id} in {self.home} is already running (pid {self.pid})")
        if not java_servers.port_free(self.client_port):  # else `ruok` would be answered by whoever holds it
            raise ZooKeeperError(f"port {self.client_port} on 127.0.0.1 is in use; ZooKeeper node {self.server_id} needs another client port (0: a free one)")
        classpath = os.pathsep.join(str(p) for p in fetch_jars())
        self.home.mkdir(parents=True, exist_ok=True)
        self.write_config()
        command = [java_servers.java("ZooKeeper", ZooKeeperError), "-Xmx256m", *_LOG_OPTIONS, "-cp", classpath, MAIN_CLASS, str(self.cfg_path)]
        with open(self.log_path, "ab") as out:
            self._proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self._adopted_pid = None
        log.info("ZooKeeper node %d starting on %s (pid %d, log %s)", self.server_id, self.connect_string, self._proc.pid, self.log_path)

    def wait_serving(self, timeout_s: float = 30.0) -> None:
        """Until the node answers `ruok` with `imok` and `srvr` with its mode (standalone; an ensemble
        member: leader or follower, i.e. it has joined a quorum); raises with the log's tail if it
        exits or times out. `imok` alone is not enough: a standalone server says it as soon as its
        port is open, while it still refuses sessions ("not currently serving requests")."""
        deadline = time.monotonic() + timeout_s
        wanted = ("leader", "follower") if self.peers else ("standalone",)
        while True:
            if four_letter_word(self.client_port, "ruok") == "imok" and self.mode() in wanted:
                return
            if not self.alive():
                code = self._proc.returncode if self._proc is not None else None
                raise ZooKeeperError(f"ZooKeeper node {self.server_id} ({self.connect_string}) exited with code {code} before it served; "
                                     f"its log ({self.log_path}) ends with:\n{java_servers.log_tail(self.log_path)}")
            if time.monotonic() > deadline:
                raise ZooKeeperError(f"ZooKeeper node {self.server_id} ({self.connect_string}) did not serve within {timeout_s:.0f}s; "
                                     f"its log ({self.log_path}) ends with:\n{java_servers.log_tail(self.log_path)}")
            time.sleep(0.05)

    def start(self, timeout_s: float = 30.0) -> Self:
        """Start the node and return once it serves; a node that does not is stopped again."""
        self.launch()
        try:
            self.wait_serving(timeout_s)
        except BaseException:
            self.stop()
            raise
        log.info("ZooKeeper node %d serving on %s", self.server_id, self.connect_string)
        return self

    def _signal(self, sig: signal.Signals) -> None:
        pid = self.pid
        if pid is not None and self.alive():
            java_servers.signal_group(pid, sig)  # its own session: the process group id is its pid

    def _wait_gone(self, timeout_s: float) -> bool:
        if self._proc is not None:
            try:
                self._proc.wait(timeout=timeout_s)
                return True
            except subprocess.TimeoutExpired:
                return False
        return java_servers.wait_until_gone(self.alive, timeout_s)  # not our child: its parent (init) reaps it

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM to the node's process group, SIGKILL if it is still there after `grace_s`; waits until it is gone."""
        if self.pid is None:
            return
        self._signal(signal.SIGTERM)
        if not self._wait_gone(grace_s):
            log.warning("ZooKeeper node %d (pid %s) ignored SIGTERM for %.0fs; killing it", self.server_id, self.pid, grace_s)
            self._signal(signal.SIGKILL)
            self._wait_gone(grace_s)
        log.info("ZooKeeper node %d (%s) stopped", self.server_id, self.connect_string)

    def kill(self) -> None:
        """SIGKILL, no shutdown: a node lost as a machine is lost (for failure tests)."""
        self._signal(signal.SIGKILL)
        self._wait_gone(STOP_GRACE_S)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


# --------------------------------------------------------------------------------------------------
# an ensemble


class ZooKeeperEnsemble:
    """`size` ZooKeeper nodes on loopback, in `home/node-<i>`, forming one quorum.

    `client_port` 0 gives each node a free port; otherwise nodes use consecutive ports from it.
    Quorum and election ports are always free ports picked now."""

    def __init__(self, home: str | os.PathLike[str], size: int = 3, client_port: int = 0) -> None:
        if size < 1:
            raise ZooKeeperError(f"an ensemble needs at least one node, not {size}")
        self.home = Path(home).resolve()
        ports = free_ports(3 * size if client_port == 0 else 2 * size)
        clients = ports[2 * size:] if client_port == 0 else [client_port + i for i in range(size)]
        peers = {i + 1: (ports[2 * i], ports[2 * i + 1]) for i in range(size)}
        self.nodes = [ZooKeeperServer(self.home / f"node-{i}", clients[i - 1], server_id=i, peers=peers) for i in peers]

    @property
    def size(self) -> int:
        return len(self.nodes)

    def node(self, i: int) -> ZooKeeperServer:
        """Node `i`, counted from 1 as ZooKeeper's server ids are."""
        if not 1 <= i <= len(self.nodes):
            raise ZooKeeperError(f"the ensemble has nodes 1..{len(self.nodes)}, not {i}")
        return self.nodes[i - 1]

    @property
    def connect_string(self) -> str:
        return ",".join(n.connect_string for n in self.nodes)

    def leader(self) -> ZooKeeperServer | None:
        leaders = [n for n in self.nodes if n.mode() == "leader"]
        return leaders[0] if len(leaders) == 1 else None

    def start(self, timeout_s: float = 30.0) -> Self:
        """Start every node at once; return when each serves and exactly one is the leader."""
        deadline = time.monotonic() + timeout_s
        try:
            for n in self.nodes:
                n.launch()
            for n in self.nodes:
                n.wait_serving(max(0.1, deadline - time.monotonic()))
            while [n.mode() for n in self.nodes].count("leader") != 1:
                if time.monotonic() > deadline:
                    raise ZooKeeperError(f"the ZooKeeper ensemble {self.connect_string} did not settle on one leader within {timeout_s:.0f}s; "
                                         f"modes: {[n.mode() for n in self.nodes]}; logs in {self.home}/node-*/{LOG_FILE}")
                time.sleep(0.05)
        except BaseException:
            self.stop()
            raise
        log.info("ZooKeeper ensemble serving on %s (leader: node %d)", self.connect_string, next(n.server_id for n in self.nodes if n.mode() == "leader"))
        return self

    def stop(self) -> None:
        for n in self.nodes:
            n._signal(signal.SIGTERM)  # all at once, so the last ones do not re-elect in turn
        for n in self.nodes:
            n.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


# --------------------------------------------------------------------------------------------------
# the record of detached servers, and the CLI


class NodeRecord(BaseModel):
    server_id: int = Field(description="ZooKeeper's server id (myid), 1 for a standalone server")
    pid: int = Field(description="process id of the node's JVM (also its process group)")
    client_port: int = Field(description="the port clients connect to, on 127.0.0.1")
    home: str = Field(description="the node's directory: zoo.cfg, data/, zookeeper.log")


class ZooKeeperRecord(BaseModel):
    """`<home>/zookeeper.json`: the servers `start` left running, for `stop`, `status` and clients."""

    version: str = ZOOKEEPER_VERSION
    connect_string: str = Field(description="what a client passes to connect, e.g. 127.0.0.1:2181,127.0.0.1:2182")
    nodes: list[NodeRecord]
    started_at_ms: int = 0


def record_path(home: str | os.PathLike[str]) -> Path:
    return Path(home) / RECORD_FILE


def read_record(home: str | os.PathLike[str]) -> ZooKeeperRecord | None:
    path = record_path(home)
    try:
        return ZooKeeperRecord.model_validate_json(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValidationError) as exc:
        raise ZooKeeperError(f"{path} is unreadable ({exc}); stop the servers by hand and delete it") from exc


def _handles(record: ZooKeeperRecord) -> list[ZooKeeperServer]:
    return [ZooKeeperServer.adopt(n.home, n.client_port, n.pid, n.server_id) for n in record.nodes]


def start_detached(home: str | os.PathLike[str], port: int = 2181, ensemble: int = 1, timeout_s: float = 30.0) -> ZooKeeperRecord:
    """Start a standalone server (ensemble 1) or an ensemble in `home`, record it and leave it running."""
    home = Path(home).resolve()
    existing = read_record(home)
    if existing is not None:
        if any(h.alive() for h in _handles(existing)):
            raise ZooKeeperError(f"ZooKeeper is already running in {home} ({existing.connect_string}); stop it first")
        record_path(home).unlink()  # left by servers that died
    nodes: list[ZooKeeperServer]
    if ensemble > 1:
        group = ZooKeeperEnsemble(home, ensemble, client_port=port)
        group.start(timeout_s)
        nodes, connect = group.nodes, group.connect_string
    else:
        single = ZooKeeperServer(home / "node-1", port).start(timeout_s)
        nodes, connect = [single], single.connect_string
    record = ZooKeeperRecord(
        connect_string=connect,
        nodes=[NodeRecord(server_id=n.server_id, pid=n.pid or 0, client_port=n.client_port, home=str(n.home)) for n in nodes],
        started_at_ms=int(time.time() * 1000),
    )
    java_servers.write_atomically(record_path(home), record.model_dump_json(indent=2).encode())
    return record


def stop_recorded(home: str | os.PathLike[str]) -> ZooKeeperRecord | None:
    """Stop the servers recorded in `home` (those still running) and remove the record."""
    record = read_record(home)
    if record is None:
        return None
    handles = _handles(record)
    for h in handles:
        h._signal(signal.SIGTERM)
    for h in handles:
        h.stop()
    record_path(home).unlink(missing_ok=True)
    return record


def _cli(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m runtime.deploy.zookeeper_server", description=f"Apache ZooKeeper {ZOOKEEPER_VERSION} for Millrace's high availability"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("fetch", help="download the ZooKeeper jars from Maven Central (once)")
    home_help = f"where cfg, data, logs and {RECORD_FILE} go (default: {DEFAULT_HOME})"
    start = commands.add_parser("start", help="start ZooKeeper detached and print its connect string")
    start.add_argument("--home", type=Path, default=DEFAULT_HOME, help=home_help)
    start.add_argument("--port", type=int, default=2181, help="client port (an ensemble uses consecutive ports from it; 0: free ports)")
    start.add_argument("--ensemble", type=int, default=1, metavar="N", help="number of nodes (1: a standalone server)")
    start.add_argument("--timeout", type=float, default=60.0, help="seconds to wait until it serves")
    for name, text in (("stop", "stop the servers recorded in HOME"), ("status", "each recorded node's mode; exit 1 if none serves")):
        commands.add_parser(name, help=text).add_argument("--home", type=Path, default=DEFAULT_HOME, help=home_help)
    args = parser.parse_args(argv)

    if args.command == "fetch":
        jars = fetch_jars()
        print(f"ZooKeeper {ZOOKEEPER_VERSION} jars: {len(jars)} files in {jars_dir()}")
        return 0
    if args.command == "start":
        print(start_detached(args.home, args.port, args.ensemble, args.timeout).connect_string)
        return 0
    if args.command == "stop":
        stopped = stop_recorded(args.home)
        print(f"stopped ZooKeeper {stopped.connect_string}" if stopped else f"no ZooKeeper recorded in {args.home}")
        return 0
    record = read_record(args.home)
    if record is None:
        print(f"no ZooKeeper recorded in {args.home}")
        return 1
    serving = 0
    for h in _handles(record):
        mode = h.mode() if h.alive() else None
        serving += mode is not None
        state = mode or ("running, not serving" if h.alive() else "not running")
        print(f"node {h.server_id}  {h.connect_string}  pid {h.pid}  {state}")
    return 0 if serving else 1


def main(argv: Sequence[str] | None = None) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        code = _cli(argv)
    except MillraceError as exc:  # a message for the user, no traceback (CONVENTIONS: errors)
        print(f"error: {exc}", file=sys.stderr)
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()

