"""A real Apache Kafka broker (KRaft, no ZooKeeper), run from jars fetched once from Maven Central,
for the Kafka connectors' tests and for local use.

Millrace's Kafka source and sink talk to Kafka through librdkafka (confluent-kafka): transactions,
idempotent producers, consumer-group offsets. Tests of them need the real thing, not a fake that
agrees with whatever the client expects. Kafka is a Java program; this module fetches its jars once
(no Maven: the broker's runtime closure, read from the POMs on Maven Central and written down below,
each jar checked against Maven Central's `.sha1`), writes a `server.properties` for one node in
combined mode (broker and KRaft controller in one JVM), formats its storage once and runs `kafka.Kafka`
as a child process in its own session.

    python -m runtime.deploy.kafka_server fetch | start [--home DIR] [--port 9092] | stop | status

`start` leaves the broker running detached and records it in `<home>/kafka.json`; `stop` and
`status` read that file. `infra/kafka.sh` wraps the command; `infra/setup.sh` runs `fetch`.

The broker is set for one node and for tests: internal topics (consumer offsets, transaction state,
share-group state) with replication factor 1 and min ISR 1, so transactions work; no automatic topic
creation (a producer or consumer of a missing topic gets an error, not a new topic); consumer groups
rebalance without the initial delay; a small heap.

Readiness is a Kafka Metadata request answered with this broker in it, sent over a plain socket (as
zookeeper_server asks `ruok`): only runtime.connectors imports a Kafka client (ARCHITECTURE).
"""
from __future__ import annotations

import argparse
import base64
import logging
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from pydantic import BaseModel, Field, ValidationError

from runtime.core.errors import MillraceError
from runtime.deploy import java_servers
from runtime.deploy.java_servers import (
    MAVEN_CENTRAL,
    JavaServerError,
    free_ports,
    is_live_process_of,
    jars_home,
    java,
    log_tail,
    port_free,
    signal_group,
    wait_until_gone,
    write_atomically,
)

log = logging.getLogger(__name__)

KAFKA_VERSION = "4.4.0"
SCALA_VERSION = "2.13"
MAIN_CLASS = "kafka.Kafka"
STORAGE_TOOL_CLASS = "kafka.tools.StorageTool"

# group:artifact:version: the runtime closure of org.apache.kafka:kafka_2.13:4.4.0 (compile and
# runtime scopes, nearest version wins, as Maven resolves it), plus log4j-slf4j-impl: Kafka 4 logs
# through slf4j 1.7 and log4j2, and without a binding slf4j drops every line, so a broker that fails
# to start would say nothing (the binary distribution ships the same binding).
JARS: tuple[str, ...] = (
    # Kafka
    f"org.apache.kafka:kafka_{SCALA_VERSION}:{KAFKA_VERSION}",
    f"org.apache.kafka:kafka-clients:{KAFKA_VERSION}",
    f"org.apache.kafka:kafka-server-common:{KAFKA_VERSION}",
    f"org.apache.kafka:kafka-group-coordinator-api:{KAFKA_VERSION}",
    f"org.apache.kafka:kafka-group-coordinator:{KAFKA_VERSION}",
    f"org.apache.kafka:kafka-transaction-coordinator:{KAFKA_VERSION}",
    f"org.apache.kafka:kafka-metadata:{KAFKA_VERSION}",
    f"org.apache.kafka:kafka-storage-api:{KAFKA_VERSION}",
    f"org.apache.kafka:kafka-tools-api:{KAFKA_VERSION}",
    f"org.apache.kafka:kafka-raft:{KAFKA_VERSION}",
    f"org.apache.kafka:kafka-storage:{KAFKA_VERSION}",
    f"org.apache.kafka:kafka-server:{KAFKA_VERSION}",
    f"org.apache.kafka:kafka-coordinator-common:{KAFKA_VERSION}",
    f"org.apache.kafka:kafka-share-coordinator:{KAFKA_VERSION}",
    # Scala
    "org.scala-lang:scala-library:2.13.18",
    "org.scala-lang:scala-reflect:2.13.18",
    "com.typesafe.scala-logging:scala-logging_2.13:3.9.6",
    # JSON, YAML, command lines
    "com.fasterxml.jackson.core:jackson-databind:2.21.7",
    "com.fasterxml.jackson.core:jackson-annotations:2.21",
    "com.fasterxml.jackson.core:jackson-core:2.21.7",
    "com.fasterxml.jackson.datatype:jackson-datatype-jdk8:2.21.7",
    "com.fasterxml.jackson.dataformat:jackson-dataformat-yaml:2.21.7",
    "org.yaml:snakeyaml:2.5",
    "net.sourceforge.argparse4j:argparse4j:0.7.0",
    "net.sf.jopt-simple:jopt-simple:5.0.4",
    # compression codecs
    "com.github.luben:zstd-jni:1.5.7-17",
    "at.yawk.lz4:lz4-java:1.11.2",
    "org.xerial.snappy:snappy-java:1.1.10.7",
    # metrics, logging
    "com.yammer.metrics:metrics-core:2.2.0",
    "org.hdrhistogram:HdrHistogram:2.2.2",
    "org.slf4j:slf4j-api:1.7.36",
    "org.apache.logging.log4j:log4j-api:2.25.5",
    "org.apache.logging.log4j:log4j-core:2.25.5",
    "org.apache.logging.log4j:log4j-slf4j-impl:2.25.5",
    # the rest of the closure
    "org.bitbucket.b_c:jose4j:0.9.6",
    "com.google.re2j:re2j:1.8",
    "org.pcollections:pcollections:4.0.2",
    "com.dynatrace.hash4j:hash4j:0.22.0",
    "com.github.ben-manes.caffeine:caffeine:3.2.0",
    "org.jspecify:jspecify:1.0.0",
    "commons-validator:commons-validator:1.10.1",
    "commons-beanutils:commons-beanutils:1.11.0",
    "commons-digester:commons-digester:2.1",
    "commons-logging:commons-logging:1.3.5",
    "commons-collections:commons-collections:3.2.2",
)

RECORD_FILE = "kafka.json"
DEFAULT_HOME = Path(".millrace") / "kafka"
LOG_FILE = "kafka.log"
NODE_ID = 1
STOP_GRACE_S = 15.0
_PROBE_TIMEOUT_S = 1.0
_FORMAT_TIMEOUT_S = 120.0
# A test broker on a machine of two cores shared with the suite: a small heap, the serial collector,
# and the client compiler only, which halves the CPU a start costs (measured: 3.7 against 6.1 CPU s,
# 4.1 against 5.3 s to serve, medians of 4 under load) at some steady-state speed. A benchmark that
# wants the broker at full speed passes KafkaServer(jvm_options=...) without -XX:TieredStopAtLevel.
JVM_OPTIONS: tuple[str, ...] = (
    "-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData", "-Djava.awt.headless=true",
)
# the storage tool runs for a second: the client compiler only (it starts faster; C2 would never pay off)
_TOOL_JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData", "-Djava.awt.headless=true")
_LOG4J2 = """\
# written by runtime/deploy/kafka_server.py: everything to the console (the broker's kafka.log)
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d{yyyy-MM-dd HH:mm:ss.SSS}] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
"""


class KafkaServerError(JavaServerError):
    """A Kafka broker could not be fetched, formatted, started or reached."""


def jars_dir() -> Path:
    """Where this environment keeps the Kafka jars (beside the ZooKeeper and Spark jars)."""
    return jars_home() / f"kafka-{KAFKA_VERSION}"


def fetch_jars(dest: Path | None = None, repository: str = MAVEN_CENTRAL) -> list[Path]:
    """The broker's classpath: each jar of JARS in `dest` (default jars_dir()), downloaded once and
    checked against Maven Central's sha1 (runtime.deploy.java_servers.fetch_jars)."""
    return java_servers.fetch_jars(JARS, jars_dir() if dest is None else dest, f"Kafka {KAFKA_VERSION}", repository, KafkaServerError)


def new_cluster_id() -> str:
    """A random Kafka cluster id: 16 bytes, URL-safe base64 without padding (Kafka's Uuid.randomUuid;
    like it, never one that starts with '-', which a command line would take for an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        if not text.startswith("-"):
            return text


# --------------------------------------------------------------------------------------------------
# the Metadata probe: Kafka's wire protocol, Metadata v4 (the oldest version Kafka 4 still answers)


@dataclass(frozen=True)
class BrokerMetadata:
    """What a Metadata request told about the cluster."""

    cluster_id: str | None
    controller_id: int
    brokers: dict[int, tuple[str, int]]  # node id -> (host, port)


_METADATA_API_KEY = 3
_METADATA_VERSION = 4
_PROBE_CORRELATION_ID = 0x4D52  # "MR"


def metadata_request(client_id: str = "millrace-probe") -> bytes:
    """A size-prefixed Metadata v4 request for no topics (so the answer is just the brokers)."""
    name = client_id.encode()
    header = struct.pack(">hhih", _METADATA_API_KEY, _METADATA_VERSION, _PROBE_CORRELATION_ID, len(name)) + name
    body = struct.pack(">ib", 0, 0)  # topics: an empty array; allow_auto_topic_creation: false
    message = header + body
    return struct.pack(">i", len(message)) + message


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def string(self) -> str | None:
        length = self.take(">h")
        if length < 0:
            return None
        text = self.data[self.pos:self.pos + length].decode("utf-8", errors="replace")
        self.pos += length
        return text


def parse_metadata_response(payload: bytes) -> BrokerMetadata:
    """The brokers, cluster id and controller of a Metadata v4 response (without its size prefix)."""
    r = _Reader(payload)
    if r.take(">i") != _PROBE_CORRELATION_ID:
        raise ValueError("a Metadata response for another request")
    r.take(">i")  # throttle_time_ms
    brokers = {}
    for _ in range(r.take(">i")):
        node_id = r.take(">i")
        host = r.string() or ""
        port = r.take(">i")
        r.string()  # rack
        brokers[node_id] = (host, port)
    cluster_id = r.string()
    return BrokerMetadata(cluster_id=cluster_id, controller_id=r.take(">i"), brokers=brokers)


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = s.recv(left)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def probe_metadata(port: int, host: str = "127.0.0.1", timeout_s: float = _PROBE_TIMEOUT_S) -> BrokerMetadata | None:
    """The broker's answer to a Metadata request, or None if it did not answer (not listening yet,
    closed the connection, answered something else)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            s.sendall(metadata_request())
            (size,) = struct.unpack(">i", _recv_exactly(s, 4))
            return parse_metadata_response(_recv_exactly(s, size))
    except (OSError, ValueError, struct.error):
        return None


# --------------------------------------------------------------------------------------------------
# one broker


class KafkaServer:
    """One Kafka node in combined mode (broker and KRaft controller): its config, data and log under
    `home`, the JVM a child in its own session.

    `port` (the PLAINTEXT listener clients use) and `controller_port` 0 pick free loopback ports now,
    so `bootstrap_servers` is known before `start()`. A home keeps its formatted storage: a broker
    started again in it has its topics and cluster id back. `jvm_options` replaces JVM_OPTIONS (heap,
    collector, compiler).
    """

    def __init__(self, home: str | os.PathLike[str], port: int = 0, controller_port: int = 0, jvm_options: Sequence[str] = JVM_OPTIONS) -> None:
        self.home = Path(home).resolve()
        self.jvm_options = tuple(jvm_options)
        wanted = free_ports(2)
        self.port = port or wanted[0]
        self.controller_port = controller_port or next(p for p in wanted if p != self.port)
        if self.port == self.controller_port:
            raise KafkaServerError(f"the Kafka broker in {self.home} needs two ports, not {self.port} for both its client and controller listeners")
        self._proc: subprocess.Popen[bytes] | None = None
        self._adopted_pid: int | None = None

    @classmethod
    def adopt(cls, home: str | os.PathLike[str], port: int, controller_port: int, pid: int) -> KafkaServer:
        """A handle on a broker started by another process (the CLI's `start`), to stop it or ask its status."""
        server = cls(home, port, controller_port)
        server._adopted_pid = pid
        return server

    @property
    def config_path(self) -> Path:
        return self.home / "server.properties"

    @property
    def log4j_path(self) -> Path:
        return self.home / "log4j2.properties"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def log_path(self) -> Path:
        return self.home / LOG_FILE

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else self._adopted_pid

    @property
    def cluster_id(self) -> str | None:
        """The id the storage was formatted with (None before the first start)."""
        try:
            for line in (self.data_dir / "meta.properties").read_text().splitlines():
                if line.startswith("cluster.id="):
                    return line.split("=", 1)[1].strip()
        except OSError:
            pass
        return None

    def alive(self) -> bool:
        """True while the JVM runs (whether or not it serves yet)."""
        if self._proc is not None:
            return self._proc.poll() is None
        return self._adopted_pid is not None and is_live_process_of(self._adopted_pid, (MAIN_CLASS, str(self.config_path)))

    def metadata(self) -> BrokerMetadata | None:
        """The broker's answer to a Metadata request; None while it does not serve."""
        return probe_metadata(self.port)

    def serving(self) -> bool:
        """True when the broker answers a Metadata request and names itself among the live brokers
        (registered with the controller and unfenced: it takes produce and fetch requests)."""
        answer = self.metadata()
        return answer is not None and NODE_ID in answer.brokers

    def write_config(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        controller = f"127.0.0.1:{self.controller_port}"
        settings = {
            "process.roles": "broker,controller",
            "node.id": NODE_ID,
            # a static quorum of this one voter: the voter set is configuration, not log, so a broker
            # started again in this home may take another controller port
            "controller.quorum.voters": f"{NODE_ID}@{controller}",
            "listeners": f"PLAINTEXT://{self.bootstrap_servers},CONTROLLER://{controller}",
            "advertised.listeners": f"PLAINTEXT://{self.bootstrap_servers}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "log.dirs": self.data_dir,
            "num.partitions": 1,
            "default.replication.factor": 1,
            "min.insync.replicas": 1,
            # a missing topic is an error (a mistyped topic name must not create a topic)
            "auto.create.topics.enable": "false",
            # internal topics on one broker: replication factor and min ISR 1 (transactions need the
            # transaction state topic to have its min ISR); few partitions, so they are created fast
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "share.coordinator.state.topic.num.partitions": 1,
            # consumer groups form at once, not after the default 3 s wait for more members
            "group.initial.rebalance.delay.ms": 0,
            # a test broker on two cores: few threads, a small compaction buffer (the default is 128 MiB of heap)
            "num.network.threads": 2,
            "num.io.threads": 4,
            "num.recovery.threads.per.data.dir": 1,
            "background.threads": 4,
            "log.cleaner.threads": 1,
            "log.cleaner.dedupe.buffer.size": 8 * 1024 * 1024,
        }
        lines = [f"# written by runtime/deploy/kafka_server.py (Kafka {KAFKA_VERSION})"]
        lines += [f"{key}={value}" for key, value in settings.items()]
        write_atomically(self.config_path, ("\n".join(lines) + "\n").encode())
        write_atomically(self.log4j_path, _LOG4J2.encode())

    def _java_command(self, jvm_options: Sequence[str], classpath: str, main_class: str, *args: str) -> list[str]:
        return [java("Kafka", KafkaServerError), *jvm_options, f"-Dlog4j2.configurationFile={self.log4j_path}", "-cp", classpath, main_class, *args]

    def format_storage(self, classpath: str) -> None:
        """Format the log directory once (Kafka's StorageTool, a new cluster id); a formatted home is kept."""
        if (self.data_dir / "meta.properties").exists():
            return
        args = ("format", "--config", str(self.config_path), "--cluster-id", new_cluster_id())
        command = self._java_command(_TOOL_JVM_OPTIONS, classpath, STORAGE_TOOL_CLASS, *args)
        try:
            result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=_FORMAT_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired as exc:
            raise KafkaServerError(f"formatting the Kafka storage in {self.data_dir} took over {_FORMAT_TIMEOUT_S:.0f}s; is the machine overloaded?") from exc
        if result.returncode != 0:
            output = (result.stdout + result.stderr).decode(errors="replace").strip()
            raise KafkaServerError(f"formatting the Kafka storage in {self.data_dir} failed (exit {result.returncode}): {output[-2000:]}")

    def launch(self) -> None:
        """Write the config, format the storage if new and start the JVM; returns once it runs (see wait_serving)."""
        if self.alive():
            raise KafkaServerError(f"the Kafka broker in {self.home} is already running (pid {self.pid})")
        for name, port in (("client", self.port), ("controller", self.controller_port)):
            if not port_free(port):  # else the readiness probe would be answered by whoever holds it
                raise KafkaServerError(f"port {port} on 127.0.0.1 is in use; the Kafka broker in {self.home} needs another {name} port (0: a free one)")
        classpath = os.pathsep.join(str(p) for p in fetch_jars())
        self.home.mkdir(parents=True, exist_ok=True)
        self.write_config()
        self.format_storage(classpath)
        command = self._java_command(self.jvm_options, classpath, MAIN_CLASS, str(self.config_path))
        with open(self.log_path, "ab") as out:
            self._proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self._adopted_pid = None
        log.info("Kafka broker starting on %s (pid %d, log %s)", self.bootstrap_servers, self._proc.pid, self.log_path)

    def wait_serving(self, timeout_s: float = 60.0) -> None:
        """Until the broker answers a Metadata request naming itself; raises with the log's tail if the
        JVM exits or the time runs out."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.serving():
                return
            if not self.alive():
                code = self._proc.returncode if self._proc is not None else None
                raise KafkaServerError(f"the Kafka broker ({self.bootstrap_servers}) exited with code {code} before it served; "
                                       f"its log ({self.log_path}) ends with:\n{log_tail(self.log_path)}")
            if time.monotonic() > deadline:
                raise KafkaServerError(f"the Kafka broker ({self.bootstrap_servers}) did not serve within {timeout_s:.0f}s; "
                                       f"its log ({self.log_path}) ends with:\n{log_tail(self.log_path)}")
            time.sleep(0.05)

    def start(self, timeout_s: float = 60.0) -> Self:
        """Start the broker and return once it serves; a broker that does not is stopped again."""
        self.launch()
        try:
            self.wait_serving(timeout_s)
        except BaseException:
            self.stop()
            raise
        log.info("Kafka broker serving on %s", self.bootstrap_servers)
        return self

    def _signal(self, sig: signal.Signals) -> None:
        pid = self.pid
        if pid is not None and self.alive():
            signal_group(pid, sig)  # its own session: the process group id is its pid

    def _wait_gone(self, timeout_s: float) -> bool:
        if self._proc is not None:
            try:
                self._proc.wait(timeout=timeout_s)
                return True
            except subprocess.TimeoutExpired:
                return False
        return wait_until_gone(self.alive, timeout_s)  # not our child: its parent (init) reaps it

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM to the broker's process group (a controlled shutdown), SIGKILL if it is still there
        after `grace_s`; waits until it is gone."""
        if self.pid is None:
            return
        self._signal(signal.SIGTERM)
        if not self._wait_gone(grace_s):
            log.warning("the Kafka broker (pid %s) ignored SIGTERM for %.0fs; killing it", self.pid, grace_s)
            self._signal(signal.SIGKILL)
            self._wait_gone(grace_s)
        log.info("Kafka broker (%s) stopped", self.bootstrap_servers)

    def kill(self) -> None:
        """SIGKILL, no shutdown: a broker lost as a machine is lost (for failure tests)."""
        self._signal(signal.SIGKILL)
        self._wait_gone(STOP_GRACE_S)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


# --------------------------------------------------------------------------------------------------
# the record of a detached broker, and the CLI


class KafkaRecord(BaseModel):
    """`<home>/kafka.json`: the broker `start` left running, for `stop`, `status` and clients."""

    version: str = KAFKA_VERSION
    bootstrap_servers: str = Field(description="what a client passes as bootstrap.servers, e.g. 127.0.0.1:9092")
    pid: int = Field(description="process id of the broker's JVM (also its process group)")
    port: int = Field(description="the PLAINTEXT listener clients connect to, on 127.0.0.1")
    controller_port: int = Field(description="the KRaft controller listener, on 127.0.0.1")
    home: str = Field(description="the broker's directory: server.properties, data/, kafka.log")
    cluster_id: str | None = Field(default=None, description="the id its storage was formatted with")
    started_at_ms: int = 0


def record_path(home: str | os.PathLike[str]) -> Path:
    return Path(home) / RECORD_FILE


def read_record(home: str | os.PathLike[str]) -> KafkaRecord | None:
    path = record_path(home)
    try:
        return KafkaRecord.model_validate_json(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValidationError) as exc:
        raise KafkaServerError(f"{path} is unreadable ({exc}); stop the broker by hand and delete it") from exc


def _handle(record: KafkaRecord) -> KafkaServer:
    return KafkaServer.adopt(record.home, record.port, record.controller_port, record.pid)


def start_detached(home: str | os.PathLike[str], port: int = 9092, controller_port: int = 0, timeout_s: float = 60.0) -> KafkaRecord:
    """Start a broker in `home`, record it and leave it running."""
    home = Path(home).resolve()
    existing = read_record(home)
    if existing is not None:
        if _handle(existing).alive():
            raise KafkaServerError(f"Kafka is already running in {home} ({existing.bootstrap_servers}); stop it first")
        record_path(home).unlink()  # left by a broker that died
    server = KafkaServer(home, port, controller_port).start(timeout_s)
    record = KafkaRecord(
        bootstrap_servers=server.bootstrap_servers, pid=server.pid or 0, port=server.port, controller_port=server.controller_port,
        home=str(server.home), cluster_id=server.cluster_id, started_at_ms=int(time.time() * 1000),
    )
    write_atomically(record_path(home), record.model_dump_json(indent=2).encode())
    return record


def stop_recorded(home: str | os.PathLike[str]) -> KafkaRecord | None:
    """Stop the broker recorded in `home` (if it still runs) and remove the record."""
    record = read_record(home)
    if record is None:
        return None
    _handle(record).stop()
    record_path(home).unlink(missing_ok=True)
    return record


def status(home: str | os.PathLike[str]) -> tuple[bool, str]:
    """Whether the broker recorded in `home` serves, and a line saying so."""
    record = read_record(home)
    if record is None:
        return False, f"no Kafka recorded in {home}: down"
    server = _handle(record)
    running = server.alive()
    serving = running and server.serving()
    state = "serving" if serving else ("running, not serving" if running else "down (not running)")
    return serving, f"Kafka {record.version}  {record.bootstrap_servers}  pid {record.pid}  cluster {record.cluster_id}  {state}"


def _cli(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runtime.deploy.kafka_server", description=f"Apache Kafka {KAFKA_VERSION} (KRaft, one node) for Millrace")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("fetch", help="download the Kafka jars from Maven Central (once)")
    home_help = f"where config, data, logs and {RECORD_FILE} go (default: {DEFAULT_HOME})"
    start = commands.add_parser("start", help="start a broker detached and print its bootstrap servers")
    start.add_argument("--home", type=Path, default=DEFAULT_HOME, help=home_help)
    start.add_argument("--port", type=int, default=9092, help="the client (PLAINTEXT) port on 127.0.0.1 (0: a free one)")
    start.add_argument("--controller-port", type=int, default=0, help="the KRaft controller port on 127.0.0.1 (default: a free one)")
    start.add_argument("--timeout", type=float, default=90.0, help="seconds to wait until it serves")
    for name, text in (("stop", "stop the broker recorded in HOME"), ("status", "whether the recorded broker serves; exit 1 if not")):
        commands.add_parser(name, help=text).add_argument("--home", type=Path, default=DEFAULT_HOME, help=home_help)
    args = parser.parse_args(argv)

    if args.command == "fetch":
        jars = fetch_jars()
        print(f"Kafka {KAFKA_VERSION} jars: {len(jars)} files in {jars_dir()}")
        return 0
    if args.command == "start":
        print(start_detached(args.home, args.port, args.controller_port, args.timeout).bootstrap_servers)
        return 0
    if args.command == "stop":
        stopped = stop_recorded(args.home)
        print(f"stopped Kafka {stopped.bootstrap_servers}" if stopped else f"no Kafka recorded in {args.home}")
        return 0
    serving, line = status(args.home)
    print(line)
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
