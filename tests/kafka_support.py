"""A real Kafka broker for tests (runtime.deploy.kafka_server), with the few client steps tests need:
create a topic, produce values, read a topic back whole.

A test module gets a broker of its own, started once for the module and stopped (by process group)
after its last test, even when a test fails:

    from tests.kafka_support import KafkaBroker, kafka_broker_fixture

    kafka = kafka_broker_fixture()          # the fixture is named "kafka"

    def test_something(kafka: KafkaBroker) -> None:
        kafka.create_topic("orders", partitions=2)
        kafka.produce("orders", [b"a", b"b"])
        assert sorted(kafka.consume_all("orders")) == [b"a", b"b"]
"""
from __future__ import annotations

import gc
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, IsolationLevel, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from runtime.deploy.kafka_server import KafkaServer, fetch_jars

log = logging.getLogger(__name__)

# a producer of a missing topic fails after this long (librdkafka waits 30 s by default for the topic to appear)
_MISSING_TOPIC_MS = 1000


@dataclass
class KafkaBroker:
    """A running broker and client helpers bound to it."""

    server: KafkaServer
    started_in_s: float = 0.0
    _admin: AdminClient | None = field(default=None, repr=False)

    @property
    def bootstrap_servers(self) -> str:
        return self.server.bootstrap_servers

    def client_config(self, **overrides: Any) -> dict[str, Any]:
        """The settings every client of this broker needs, plus `overrides` (librdkafka's names)."""
        return {"bootstrap.servers": self.bootstrap_servers, **overrides}

    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(self.client_config())
        return self._admin

    def close(self) -> None:
        """Let go of the admin client and of clients a failed test left in a traceback, before the broker
        stops (else librdkafka logs every failed reconnect)."""
        self._admin = None
        gc.collect()

    def topic_partitions(self, topic: str, timeout_s: float = 10.0) -> list[int]:
        """The partitions of `topic`; raises KafkaException if the broker does not know it."""
        metadata = self.admin().list_topics(topic=topic, timeout=timeout_s)
        described = metadata.topics[topic]
        if described.error is not None:
            raise KafkaException(described.error)
        return sorted(described.partitions)

    def create_topic(self, name: str, partitions: int = 1, config: dict[str, str] | None = None, timeout_s: float = 30.0) -> None:
        """Create `name` and return once every partition has its leader (so a produce goes through at once)."""
        futures = self.admin().create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
                                             operation_timeout=timeout_s, request_timeout=timeout_s)
        futures[name].result(timeout=timeout_s)
        deadline = time.monotonic() + timeout_s
        while True:
            described = self.admin().list_topics(topic=name, timeout=timeout_s).topics[name]
            if described.error is None and len(described.partitions) == partitions and all(p.leader >= 0 for p in described.partitions.values()):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"topic {name} had no leader for each of its {partitions} partitions within {timeout_s:.0f}s")
            time.sleep(0.05)

    def producer(self, **overrides: Any) -> Producer:
        """A producer of this broker: acks from all in-sync replicas; a missing topic fails it soon."""
        return Producer(self.client_config(**{"acks": "all", "topic.metadata.propagation.max.ms": _MISSING_TOPIC_MS, **overrides}))

    def produce(self, topic: str, values: Iterable[bytes | str], partition: int | None = None, timeout_s: float = 30.0) -> list[tuple[int, int]]:
        """Send each value (to `partition`, else where the partitioner puts it) and wait until the broker
        has them all; their (partition, offset)s in order. Raises KafkaException on the first failure."""
        producer = self.producer()
        delivered: list[tuple[int, int]] = []
        failures: list[KafkaError] = []

        def on_delivery(error: KafkaError | None, message: Message) -> None:
            if error is not None:
                failures.append(error)
            else:
                delivered.append((message.partition(), message.offset()))

        values = list(values)
        for value in values:
            kwargs: dict[str, Any] = {"on_delivery": on_delivery}
            if partition is not None:
                kwargs["partition"] = partition
            producer.produce(topic, value.encode() if isinstance(value, str) else value, **kwargs)
        left = producer.flush(timeout_s)
        del producer  # destroyed now, not when a traceback that holds this frame goes
        if failures:
            raise KafkaException(failures[0])
        if left or len(delivered) != len(values):
            raise AssertionError(f"{left} of {len(values)} records to {topic} not delivered within {timeout_s:.0f}s")
        return delivered

    def consumer(self, group_id: str | None = None, **overrides: Any) -> Consumer:
        """A consumer of this broker (a fresh group unless `group_id`), no automatic offset commits."""
        return Consumer(self.client_config(**{
            "group.id": group_id or f"millrace-test-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **overrides,
        }))

    def settled(self, topic: str, timeout_s: float = 30.0) -> list[int]:
        """Wait until no transaction is open on `topic` (each partition's last stable offset is its end);
        its partitions. A transaction's markers reach the partitions after commit_transaction returned:
        a read_committed consumer that looks at once may stop short of a just-committed transaction."""
        partitions = self.topic_partitions(topic)
        deadline = time.monotonic() + timeout_s
        while True:
            ends = []
            for level in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED):
                futures = self.admin().list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in partitions}, isolation_level=level)
                ends.append({tp.partition: f.result(timeout_s).offset for tp, f in futures.items()})
            if ends[0] == ends[1]:
                return partitions
            if time.monotonic() > deadline:
                raise AssertionError(f"a transaction on {topic} stayed open {timeout_s:.0f}s: stable {ends[0]}, end {ends[1]}")
            time.sleep(0.01)

    def consume_all(self, topic: str, isolation: str = "read_committed", timeout_s: float = 30.0) -> list[bytes]:
        """Every value in `topic` now, partition by partition in offset order (partitions assigned, no
        group join). `read_committed` waits until no transaction is open (`settled`), then stops at
        each partition's last stable offset and skips aborted transactions; `read_uncommitted` reads
        to the high watermark."""
        partitions = self.settled(topic, timeout_s) if isolation == "read_committed" else self.topic_partitions(topic)
        # fetch.wait.max.ms: an empty fetch returns at once, not after librdkafka's 500 ms default
        consumer = self.consumer(**{"isolation.level": isolation, "enable.partition.eof": True, "fetch.wait.max.ms": 10})
        try:
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
            records: dict[int, list[tuple[int, bytes]]] = {p: [] for p in partitions}
            at_end: set[int] = set()
            deadline = time.monotonic() + timeout_s
            while len(at_end) < len(partitions):
                if time.monotonic() > deadline:
                    raise AssertionError(f"read {topic} to its end in partitions {sorted(at_end)} only, of {partitions}, within {timeout_s:.0f}s")
                message = consumer.poll(0.1)
                if message is None:
                    continue
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        at_end.add(message.partition())
                        continue
                    raise KafkaException(error)
                records[message.partition()].append((message.offset(), message.value() or b""))
            return [value for p in partitions for _, value in sorted(records[p])]
        finally:
            consumer.close()


def start_broker(home: Any, timeout_s: float = 90.0) -> KafkaBroker:
    """A broker in `home` on free loopback ports, serving (a Metadata request through the AdminClient
    answers) when this returns."""
    fetch_jars()  # from Maven Central the first time (infra/setup.sh normally did it), else nothing
    began = time.monotonic()
    server = KafkaServer(home).start(timeout_s)
    broker = KafkaBroker(server)
    try:
        broker.admin().list_topics(timeout=timeout_s)
        broker.started_in_s = time.monotonic() - began
    except BaseException:
        broker.close()
        server.stop()
        raise
    log.info("Kafka broker on %s served %.2fs after start", broker.bootstrap_servers, broker.started_in_s)
    return broker


def kafka_broker_fixture(name: str = "kafka", scope: Literal["session", "package", "module", "class"] = "module") -> Callable[..., Iterator[KafkaBroker]]:
    """A pytest fixture named `name`: one broker for the `scope` (default: the test module), in a
    temporary home; stopped by process group at teardown, and checked gone."""

    @pytest.fixture(scope=scope, name=name)
    def _broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
        broker = start_broker(tmp_path_factory.mktemp("kafka"))
        try:
            yield broker
        finally:
            broker.close()
            broker.server.stop()
            assert not broker.server.alive(), f"the Kafka broker (pid {broker.server.pid}) outlived its fixture"

    return _broker
