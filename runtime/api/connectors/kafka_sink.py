"""KafkaSink (PyFlink's pyflink.datastream.connectors.kafka.KafkaSink) on Sink V2, with confluent-kafka.

    sink = (KafkaSink.builder()
            .set_bootstrap_servers("localhost:9092")
            .set_record_serializer(KafkaRecordSerializationSchema.builder()
                                   .set_topic("orders")
                                   .set_key_serialization_schema(SimpleStringSchema())      # optional
                                   .set_value_serialization_schema(JsonRowSerializationSchema.builder()
                                                                   .with_type_info(Types.ROW_NAMED(...)).build())
                                   .build())
            .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
            .set_transactional_id_prefix("orders-sink")
            .set_property("transaction.timeout.ms", "900000")                               # any librdkafka property
            .build())
    ds.sink_to(sink)

Records come to the writer in batches (RecordBatch: ObjectBatch rows or ColumnBatch columns); the
schemas serialize a whole batch at once. A record's event timestamp becomes its Kafka timestamp
(as Flink's KafkaSink does); a record without one gets the producer's clock.

NONE and AT_LEAST_ONCE: each writer produces its batches at once through its own
`confluent_kafka.Producer` (polled after every batch, so delivery reports are served).
AT_LEAST_ONCE flushes before every checkpoint (the checkpoint completes only when every record
before it is acknowledged) and fails the job on any failed delivery; NONE flushes only at the end
of input and logs failed deliveries (fire and forget, as the brief of Flink's NONE).

EXACTLY_ONCE: a write-ahead design, not Flink's resumed transactions.
Flink's KafkaWriter opens a Kafka transaction per checkpoint in each writer, pre-commits it at
the barrier and lets the committer finish it after the checkpoint completes; after a failover the
committer resumes the still-open transaction of another (dead) producer by setting its producer
id and epoch through reflection (FlinkKafkaInternalProducer). librdkafka cannot do that, and
re-initializing a transactional.id aborts whatever transaction it had open: a transaction left
open at a completed checkpoint would be lost at a failover. So here:

- the writer (each subtask) only serializes: it buffers the records of the current checkpoint
  (key, value, timestamp) and hands them over as the checkpoint's committables
  (`prepare_commit`). Nothing reaches Kafka from a TaskManager; an attempt that fails leaves
  nothing behind.
- the committer (one per sink, on the JobMaster; it runs after the checkpoint completed, may see a
  committable again, and must be idempotent) produces one checkpoint's records in ONE Kafka
  transaction (transactional.id `<prefix>-committer`) and, inside the same transaction, commits a
  marker offset with `send_offsets_to_transaction`: consumer group `<prefix>-commits`, partition 0
  of the output topic, offset = the checkpoint id, metadata = for each job, how far its
  committables are committed. Records and marker become visible atomically (the broker accepts any
  offset value there; it refuses a partition the topic does not have, hence partition 0).
- before a commit it reads the marker (a read_committed consumer's OffsetFetch asks for stable
  offsets: while a transaction's marker offset awaits its commit or abort marker the broker answers
  UNSTABLE_OFFSET_COMMIT and librdkafka asks again, so neither a committed marker not yet applied
  nor an aborted one is ever read; a group coordinator that moved or is loading is asked again up
  to the operation timeout) and produces only the committables it does not cover, so a checkpoint
  committed once is never committed again: not when a committable comes again with a later
  checkpoint (a writer offers it until it hears its checkpoint completed), not when a restore
  commits the restored checkpoint, not when a bounded job's end commits tails that a FLIP-147
  final checkpoint already committed.
- a committable is tagged (job id, subtask, 2*L+1) where L is the last checkpoint its writer
  snapshotted (or restored from) before it was made; the marker holds per job the highest
  2*C of a committed checkpoint C (2*C+1 for a bounded job's end). A committable is committed iff
  its tag is at most its job's marker: commit(C) covers every committable made before the writers
  snapshotted C (each is in C's committables, or was dropped by its writer after an earlier
  completed checkpoint committed it), and nothing made after. Checkpoint ids only grow within a
  job, across restores too; another job (one restored from this job's savepoint) has its own entry
  (the newest 16 jobs are kept).
- `start()` runs `init_transactions`, which fences zombies (a JobMaster that lost leadership, an
  earlier committer of the same prefix) and aborts any transaction they left open; a commit that
  fails aborts its transaction and fails the job, which restores the last checkpoint and commits
  it again (idempotently, see above). Records of a checkpoint that never completed are never
  produced at all.

Costs of this design: a checkpoint's records travel twice (TaskManager -> checkpoint metadata on
the JobMaster -> Kafka), are held in the checkpoint's metadata (pickled, base64 in its JSON) and in
the writer's memory until the checkpoint, and one producer on the JobMaster writes for all
subtasks. docs/connectors.md ("Kafka sink") has the figures.

`transaction.timeout.ms` shorter than the job's checkpoint interval is refused (Flink's rule; in
this design a transaction lasts one commit, but a setting Flink would reject is not accepted
silently); the interval is known only with the job's configuration, so the writers check it when
they open (a NonRecoverableError naming both values).

Errors: a topic the brokers do not have, or brokers that do not answer within the connection
timeout (`socket.connection.setup.timeout.ms`, default 30 s), fail the job when the sink opens
(writers for NONE/AT_LEAST_ONCE, the committer for EXACTLY_ONCE), naming the topic or the servers.
"""
from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import repeat
from typing import Any, ClassVar

import numpy as np
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from runtime.api.common.serialization import SerializationSchema
from runtime.api.connectors.base import Sink
from runtime.api.connectors.sink import (
    Committer,
    CommitterContext,
    CommitterCoordinatorProvider,
    DeliveryGuarantee,
    SinkWriter,
    SinkWriterContext,
    SinkWriterOperator,
    TwoPhaseCommittingSink,
)
from runtime.core.errors import InvalidProgramError, MillraceError, NonRecoverableError
from runtime.core.options.checkpointing import CHECKPOINTING_INTERVAL
from runtime.core.records import RecordBatch

log = logging.getLogger(__name__)

DEFAULT_CONNECTION_TIMEOUT_MS = 30_000  # librdkafka's socket.connection.setup.timeout.ms default
TRANSACTION_OPERATION_TIMEOUT_S = 60.0  # init / send offsets / commit / abort of one transaction
# one subtask's records of one checkpoint above this many bytes: a warning (benchmarks/kafka_sink.py: ~20 MB
# per checkpoint still commit in well under a second; ~120 MB take seconds and checkpoints fall behind)
LARGE_COMMITTABLE_BYTES = 32 * 1024 * 1024
MARKER_PARTITION = 0
MARKER_JOBS_KEPT = 16  # the marker's metadata (at most offset.metadata.max.bytes, 4096 by default) keeps the newest jobs
_MARKER_FORMAT = 1
# an OffsetFetch of the marker that can succeed when asked again: the group's coordinator moved, is not there yet or is
# loading (librdkafka's committed() asks again only while it has no coordinator; on NOT_COORDINATOR it looks the
# coordinator up again but returns the error), or a transactional offset is pending (librdkafka retries that one itself)
_MARKER_READ_RETRIABLE = frozenset({KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                                    KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.UNSTABLE_OFFSET_COMMIT})
MARKER_READ_BACKOFF_S = 0.1  # between those tries (librdkafka's retry.backoff.ms)
_CONSUMER_PREFIXES = ("bootstrap.", "security.", "sasl.", "ssl.", "socket.", "client.", "broker.", "metadata.", "reconnect.",
                      "api.version", "topic.metadata.", "retry.backoff", "connections.max.idle.ms", "debug", "log")
_RESERVED = ("transactional.id", "bootstrap.servers")


class KafkaSinkError(MillraceError):
    """The brokers, the topic or a delivery failed (the restart strategy decides)."""


class KafkaSinkConfigurationError(NonRecoverableError):
    """The sink does not fit the job's configuration: no restart can help."""


# --- record serialization --------------------------------------------------------------------------


class KafkaRecordSerializationSchema:
    """Topic, key and value formats of the records (PyFlink's KafkaRecordSerializationSchema)."""

    def __init__(self, topic: str, value_schema: SerializationSchema, key_schema: SerializationSchema | None = None) -> None:
        self.topic, self.value_schema, self.key_schema = topic, value_schema, key_schema

    @staticmethod
    def builder() -> KafkaRecordSerializationSchemaBuilder:
        return KafkaRecordSerializationSchemaBuilder()

    def serialize(self, batch: RecordBatch) -> tuple[list[bytes | None] | None, list[bytes | None]]:
        """(keys or None, values) of a whole batch."""
        values = self.value_schema.serialize_batch(batch)
        keys = self.key_schema.serialize_batch(batch) if self.key_schema is not None else None
        return keys, values


def _check_schema(schema: Any, what: str) -> SerializationSchema:
    if not isinstance(schema, SerializationSchema):
        raise InvalidProgramError(
            f"KafkaRecordSerializationSchema: {what} must be a SerializationSchema (SimpleStringSchema(), "
            f"JsonRowSerializationSchema.builder()...build()), got {type(schema).__name__}"
        )
    return schema


class KafkaRecordSerializationSchemaBuilder:
    def __init__(self) -> None:
        self._topic: str | None = None
        self._key: SerializationSchema | None = None
        self._value: SerializationSchema | None = None

    def set_topic(self, topic: str) -> KafkaRecordSerializationSchemaBuilder:
        if not isinstance(topic, str) or not topic:
            raise InvalidProgramError(f"KafkaRecordSerializationSchema: set_topic() needs a topic name, got {topic!r}")
        self._topic = topic
        return self

    def set_key_serialization_schema(self, key_serialization_schema: SerializationSchema) -> KafkaRecordSerializationSchemaBuilder:
        self._key = _check_schema(key_serialization_schema, "the key serialization schema")
        return self

    def set_value_serialization_schema(self, value_serialization_schema: SerializationSchema) -> KafkaRecordSerializationSchemaBuilder:
        self._value = _check_schema(value_serialization_schema, "the value serialization schema")
        return self

    def build(self) -> KafkaRecordSerializationSchema:
        if self._topic is None:
            raise InvalidProgramError("KafkaRecordSerializationSchema: no topic; call set_topic(...)")
        if self._value is None:
            raise InvalidProgramError("KafkaRecordSerializationSchema: no value format; call set_value_serialization_schema(...)")
        return KafkaRecordSerializationSchema(self._topic, self._value, self._key)


# --- committables and the commit marker ------------------------------------------------------------


@dataclass(frozen=True)
class KafkaCommittable:
    """One writer's serialized records of one checkpoint (EXACTLY_ONCE).

    `tag` = 2 * L + 1, L the last checkpoint the writer snapshotted or restored from before it made
    this committable (0 if none): it is committed iff `tag <= marker[job_id]`."""

    job_id: str
    subtask: int
    tag: int
    values: list[bytes | None]
    keys: list[bytes | None] | None = None
    timestamps: list[int] | None = None  # ms; 0: the producer's clock

    def __len__(self) -> int:
        return len(self.values)

    @property
    def size_bytes(self) -> int:
        return sum(len(v) for v in self.values if v is not None) + sum(len(k) for k in (self.keys or ()) if k is not None)


def encode_marker(jobs: dict[str, int]) -> str:
    return json.dumps({"millrace-kafka-sink": _MARKER_FORMAT, "jobs": jobs}, separators=(",", ":"))


def decode_marker(metadata: str | None, where: str) -> dict[str, int]:
    if not metadata:
        return {}
    try:
        obj = json.loads(metadata)
        if obj.get("millrace-kafka-sink") != _MARKER_FORMAT:
            raise ValueError("not a marker of this sink")
        return {str(k): int(v) for k, v in obj["jobs"].items()}
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise KafkaSinkError(
            f"{where} holds an offset that is not this sink's commit marker ({e}): another consumer group of that name? "
            "Give the sink a transactional id prefix of its own"
        ) from None


def covered(marker: dict[str, int], committable: KafkaCommittable) -> bool:
    return committable.tag <= marker.get(committable.job_id, -1)


def advanced(marker: dict[str, int], updates: dict[str, int]) -> dict[str, int]:
    """`marker` with each job's entry raised to `updates` (never lowered), newest jobs last, the newest MARKER_JOBS_KEPT kept."""
    out = dict(marker)
    for job, tag in updates.items():
        out[job] = max(out.pop(job, -1), tag)
    return dict(list(out.items())[-MARKER_JOBS_KEPT:])


# --- the sink ----------------------------------------------------------------------------------------


def _int_property(props: dict[str, str], key: str) -> int | None:
    if key not in props:
        return None
    try:
        value = int(props[key])
    except ValueError:
        raise InvalidProgramError(f"KafkaSink: property {key} must be a whole number of milliseconds, got {props[key]!r}") from None
    if value <= 0:
        raise InvalidProgramError(f"KafkaSink: property {key} must be > 0, got {value}")
    return value


class KafkaSink(Sink, TwoPhaseCommittingSink[KafkaCommittable]):
    """PyFlink's KafkaSink: `KafkaSink.builder()...build()` (see the module's docstring)."""

    def __init__(self, bootstrap_servers: str, serializer: KafkaRecordSerializationSchema, delivery_guarantee: DeliveryGuarantee,
                 transactional_id_prefix: str | None, properties: dict[str, str]) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.serializer = serializer
        self.delivery_guarantee = delivery_guarantee
        self.transactional_id_prefix = transactional_id_prefix
        self.properties = dict(properties)
        self.transaction_timeout_ms = _int_property(self.properties, "transaction.timeout.ms")
        self.connection_timeout_ms = _int_property(self.properties, "socket.connection.setup.timeout.ms") or DEFAULT_CONNECTION_TIMEOUT_MS

    @staticmethod
    def builder() -> KafkaSinkBuilder:
        return KafkaSinkBuilder()

    @property
    def topic(self) -> str:
        return self.serializer.topic

    @property
    def exactly_once(self) -> bool:
        return self.delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE

    def client_config(self, **extra: Any) -> dict[str, Any]:
        """librdkafka settings: Java-compatible defaults, then the sink's properties, then `extra`."""
        defaults: dict[str, Any] = {"partitioner": "murmur2_random"}  # the Java client's (and so Flink's) partitions for keyed records
        if self.delivery_guarantee is DeliveryGuarantee.AT_LEAST_ONCE:
            defaults["enable.idempotence"] = True  # retries neither duplicate nor reorder (the Java client's default)
        return {**defaults, **self.properties, "bootstrap.servers": self.bootstrap_servers, **extra}

    def check_properties(self) -> None:
        """librdkafka checks the settings (names, ranges, combinations) of a client that never connects (no brokers given)."""
        settings = {k: v for k, v in self.client_config().items() if k != "bootstrap.servers"}
        if self.exactly_once:
            settings["transactional.id"] = f"{self.transactional_id_prefix}-committer"
        try:
            Producer(settings)
        except KafkaException as e:
            raise InvalidProgramError(f"KafkaSink: the Kafka client refuses its properties: {str(e.args[0].str() if e.args else e).strip()}") from None

    def consumer_config(self, group_id: str) -> dict[str, Any]:
        """A consumer's settings: only the sink's connection and security properties (producer ones would be warned about)."""
        own = {k: v for k, v in self.properties.items() if k.startswith(_CONSUMER_PREFIXES)}
        return {**own, "bootstrap.servers": self.bootstrap_servers, "group.id": group_id, "enable.auto.commit": False,
                "isolation.level": "read_committed"}

    def check_topic(self, client: Any, who: str) -> None:
        """The brokers answer within the connection timeout and have the topic; else KafkaSinkError naming them."""
        timeout_s = self.connection_timeout_ms / 1000.0
        try:
            metadata = client.list_topics(timeout=timeout_s)  # all topics: asking for one may auto-create it
        except KafkaException as e:
            raise KafkaSinkError(
                f"{who}: no broker of {self.bootstrap_servers} answered within {timeout_s:g} s "
                f"(socket.connection.setup.timeout.ms): {e.args[0] if e.args else e}"
            ) from None
        described = metadata.topics.get(self.topic)
        if described is None or described.error is not None:
            if described is None and str(self.properties.get("allow.auto.create.topics", "false")).lower() == "true":
                return  # the brokers create it on the first record
            raise KafkaSinkError(f"{who}: topic {self.topic!r} does not exist on {self.bootstrap_servers}; create it first")

    def create_writer(self) -> SinkWriterOperator:
        return SinkWriterOperator(self)

    def coordinator_provider(self) -> CommitterCoordinatorProvider:
        return CommitterCoordinatorProvider(self)

    def create_sink_writer(self, context: SinkWriterContext) -> KafkaWriter:
        return KafkaWriter(self, context)

    def create_committer(self, context: CommitterContext) -> KafkaCommitter:
        return KafkaCommitter(self, context)

    def default_name(self) -> str:
        return f"KafkaSink({self.topic})"


class KafkaSinkBuilder:
    def __init__(self) -> None:
        self._servers: str | None = None
        self._serializer: KafkaRecordSerializationSchema | None = None
        self._guarantee = DeliveryGuarantee.NONE  # Flink's KafkaSinkBuilder default
        self._prefix: str | None = None
        self._properties: dict[str, str] = {}

    def set_bootstrap_servers(self, bootstrap_servers: str) -> KafkaSinkBuilder:
        if not isinstance(bootstrap_servers, str) or not bootstrap_servers.strip():
            raise InvalidProgramError(f"KafkaSink: set_bootstrap_servers() needs host:port[,host:port...], got {bootstrap_servers!r}")
        self._servers = bootstrap_servers
        return self

    def set_record_serializer(self, record_serializer: KafkaRecordSerializationSchema) -> KafkaSinkBuilder:
        if not isinstance(record_serializer, KafkaRecordSerializationSchema):
            raise InvalidProgramError(
                "KafkaSink: set_record_serializer() needs KafkaRecordSerializationSchema.builder()...build(), "
                f"got {type(record_serializer).__name__}"
            )
        self._serializer = record_serializer
        return self

    def set_delivery_guarantee(self, delivery_guarantee: DeliveryGuarantee) -> KafkaSinkBuilder:
        if not isinstance(delivery_guarantee, DeliveryGuarantee):
            raise InvalidProgramError(f"KafkaSink: set_delivery_guarantee() needs a DeliveryGuarantee, got {delivery_guarantee!r}")
        self._guarantee = delivery_guarantee
        return self

    def set_transactional_id_prefix(self, transactional_id_prefix: str) -> KafkaSinkBuilder:
        if not isinstance(transactional_id_prefix, str) or not transactional_id_prefix:
            raise InvalidProgramError(f"KafkaSink: set_transactional_id_prefix() needs a non-empty string, got {transactional_id_prefix!r}")
        self._prefix = transactional_id_prefix
        return self

    def set_property(self, key: str, value: str) -> KafkaSinkBuilder:
        if key in _RESERVED:
            raise InvalidProgramError(f"KafkaSink: property {key} is the sink's own (set_bootstrap_servers / set_transactional_id_prefix)")
        self._properties[str(key)] = str(value)
        return self

    def build(self) -> KafkaSink:
        if self._servers is None:
            raise InvalidProgramError("KafkaSink: no brokers; call set_bootstrap_servers(...)")
        if self._serializer is None:
            raise InvalidProgramError("KafkaSink: no record serializer; call set_record_serializer(...)")
        if self._guarantee is DeliveryGuarantee.EXACTLY_ONCE and self._prefix is None:
            raise InvalidProgramError(
                "KafkaSink: EXACTLY_ONCE needs set_transactional_id_prefix(...), unique to this sink among those writing to the same "
                "Kafka cluster (its transactional id and the consumer group of its commit marker are named by it)"
            )
        sink = KafkaSink(self._servers, self._serializer, self._guarantee, self._prefix, self._properties)
        sink.check_properties()
        return sink


# --- the writer (each subtask) ------------------------------------------------------------------------


class KafkaWriter(SinkWriter[KafkaCommittable]):
    def __init__(self, sink: KafkaSink, context: SinkWriterContext) -> None:
        self.sink = sink
        self.context = context
        self.where = f"KafkaSink({sink.topic}) of job {context.job_id}, subtask {context.subtask_index + 1}/{context.parallelism}"
        self._last_checkpoint = context.restored_checkpoint_id or 0
        self._producer: Any = None
        self._failures = 0
        self._first_failure: KafkaError | None = None
        self.records_sent = 0
        # EXACTLY_ONCE: this checkpoint's records, serialized
        self._values: list[bytes | None] = []
        self._keys: list[bytes | None] | None = [] if sink.serializer.key_schema is not None else None
        self._timestamps: list[int] | None = None
        self._bytes = 0
        self._warned = False
        if sink.exactly_once:
            self._check_checkpointing(context.config)
        else:
            self._producer = Producer(sink.client_config(on_delivery=self._on_delivery, **{"delivery.report.only.error": True}))
            try:
                sink.check_topic(self._producer, self.where)
            except BaseException:
                self.close()
                raise

    def _check_checkpointing(self, config: Any) -> None:
        interval = CHECKPOINTING_INTERVAL.get(config) or 0
        timeout = self.sink.transaction_timeout_ms
        if interval > 0 and timeout is not None and timeout < interval:
            raise KafkaSinkConfigurationError(
                f"{self.where}: transaction.timeout.ms = {timeout} ms is shorter than the job's checkpoint interval "
                f"({CHECKPOINTING_INTERVAL.key} = {interval} ms); set transaction.timeout.ms to at least {interval} "
                "(and at most the brokers' transaction.max.timeout.ms) or checkpoint more often"
            )
        if interval <= 0 and self.context.subtask_index == 0:
            log.warning("%s: EXACTLY_ONCE without checkpointing: records become visible only when the job finishes", self.where)

    # delivery reports (served by poll/flush on this thread)
    def _on_delivery(self, error: KafkaError | None, message: Any) -> None:
        if error is None:
            return
        self._failures += 1
        if self._first_failure is None:
            self._first_failure = error
        if self.sink.delivery_guarantee is DeliveryGuarantee.NONE and self._failures <= 10:
            log.warning("%s: a record was not delivered (delivery guarantee NONE, so it is lost): %s", self.where, error)

    def _raise_failures(self) -> None:
        if self.sink.delivery_guarantee is DeliveryGuarantee.AT_LEAST_ONCE and self._first_failure is not None:
            raise KafkaSinkError(
                f"{self.where}: {self._failures} record(s) could not be delivered to topic {self.sink.topic!r}: {self._first_failure}"
            )

    def write(self, batch: RecordBatch) -> None:
        keys, values = self.sink.serializer.serialize(batch)
        timestamps = _kafka_timestamps(batch)
        if self.sink.exactly_once:
            if timestamps is not None and self._timestamps is None:
                self._timestamps = [0] * len(self._values)
            self._values.extend(values)
            if self._keys is not None and keys is not None:
                self._keys.extend(keys)
            if self._timestamps is not None:
                self._timestamps.extend(timestamps if timestamps is not None else repeat(0, len(values)))
            self._bytes += sum(len(v) for v in values if v is not None)
            return
        self._raise_failures()
        self.records_sent += produce_all(self._producer, self.sink.topic, values, keys, timestamps)
        self._producer.poll(0)
        self._raise_failures()

    def flush(self, end_of_input: bool) -> None:
        if self._producer is None:
            return
        if end_of_input or self.sink.delivery_guarantee is DeliveryGuarantee.AT_LEAST_ONCE:
            left = self._producer.flush()  # bounded by message.timeout.ms: every record is delivered or failed
            self._raise_failures()
            if left:
                raise KafkaSinkError(f"{self.where}: {left} record(s) to topic {self.sink.topic!r} were neither delivered nor failed")

    def prepare_commit(self) -> list[KafkaCommittable]:
        if not self._values:
            return []
        if self._bytes > LARGE_COMMITTABLE_BYTES and not self._warned:
            self._warned = True
            log.warning("%s: %d records (%.0f MB) in one checkpoint: exactly-once records travel through the checkpoint's metadata "
                        "to the JobMaster, which produces them; checkpoints this large take seconds (checkpoint more often)",
                        self.where, len(self._values), self._bytes / 1e6)
        committable = KafkaCommittable(self.context.job_id, self.context.subtask_index, 2 * self._last_checkpoint + 1, self._values,
                                       self._keys, self._timestamps)
        self._values = []
        self._keys = [] if self._keys is not None else None
        self._timestamps = None
        self._bytes = 0
        return [committable]

    def snapshot_state(self, checkpoint_id: int) -> list[Any]:
        self._last_checkpoint = checkpoint_id
        return []

    def abort(self) -> None:
        self._values = []
        self._bytes = 0
        if self._producer is not None:
            self._producer.purge()  # NONE / AT_LEAST_ONCE: what is not sent yet goes (a restart sends it again)

    def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.purge()
            producer.poll(0)


def _kafka_timestamps(batch: RecordBatch) -> list[int] | None:
    ts = batch.timestamps
    if ts is None:
        return None
    return np.where(ts >= 0, ts, 0).tolist()  # a record without an event time (Long.MIN_VALUE) gets the producer's clock


def produce_all(producer: Any, topic: str, values: list[bytes | None], keys: Iterable[bytes | None] | None,
                timestamps: Iterable[int] | None) -> int:
    """Queue every record; a full queue is waited out by serving delivery reports (backpressure)."""
    produce, poll = producer.produce, producer.poll
    n = 0
    for value, key, ts in zip(values, keys if keys is not None else repeat(None), timestamps if timestamps is not None else repeat(0)):
        while True:
            try:
                produce(topic, value, key, timestamp=ts)
                break
            except BufferError:
                poll(0.05)
        n += 1
    return n


# --- the committer (on the JobMaster) ------------------------------------------------------------------


class KafkaCommitter(Committer[KafkaCommittable]):
    """EXACTLY_ONCE: produces a checkpoint's records and its marker in one transaction (see the module's docstring).
    NONE / AT_LEAST_ONCE: nothing to do (the writers produced their records)."""

    # test hook (a settable callable): called with the checkpoint id after its records and marker went into
    # the transaction, before the transaction commits. The records are flushed to the brokers first (an abort
    # purges those still queued in the producer, which commit_transaction would have sent): the hook stands
    # for a failure after the records reached the log
    after_produce: ClassVar[Callable[[int], None] | None] = None

    def __init__(self, sink: KafkaSink, context: CommitterContext) -> None:
        self.sink = sink
        self.context = context
        self.where = f"KafkaSink({sink.topic}) of job {context.job_id}, committer"
        self._producer: Any = None
        self._consumer: Any = None
        self.records_committed = 0
        self.transactions = 0

    @property
    def transactional_id(self) -> str:
        return f"{self.sink.transactional_id_prefix}-committer"

    @property
    def group_id(self) -> str:
        return f"{self.sink.transactional_id_prefix}-commits"

    def start(self) -> None:
        if self.sink.exactly_once:
            self._connect()

    def _connect(self) -> Any:
        """The transactional producer (fencing earlier ones and aborting what they left open) and the marker's consumer."""
        if self._producer is not None:
            return self._producer
        producer = Producer(self.sink.client_config(**{"transactional.id": self.transactional_id}))
        try:
            self.sink.check_topic(producer, self.where)
            producer.init_transactions(TRANSACTION_OPERATION_TIMEOUT_S)
        except KafkaException as e:
            raise KafkaSinkError(f"{self.where}: init_transactions({self.transactional_id!r}) failed: {e.args[0] if e.args else e}") from None
        if self._consumer is None:
            self._consumer = Consumer(self.sink.consumer_config(self.group_id))
        self._producer = producer
        return producer

    def read_marker(self) -> tuple[int, dict[str, int]]:
        """(offset, per-job tags) of the committed marker; (-1, {}) if none.

        The consumer is read_committed, so its OffsetFetch asks for stable offsets (see the module's docstring):
        the answer is never a pending or aborted transaction's marker. A coordinator that moved or is loading
        is asked again until TRANSACTION_OPERATION_TIMEOUT_S has passed."""
        self._connect()
        tp = TopicPartition(self.sink.topic, MARKER_PARTITION)
        deadline = time.monotonic() + TRANSACTION_OPERATION_TIMEOUT_S
        tries = 0
        while True:
            tries += 1
            try:
                (got,) = self._consumer.committed([tp], timeout=max(deadline - time.monotonic(), MARKER_READ_BACKOFF_S))
                error = got.error
            except KafkaException as e:
                error = e.args[0] if e.args else e
            if error is None:
                break
            if not (isinstance(error, KafkaError) and error.code() in _MARKER_READ_RETRIABLE) or time.monotonic() >= deadline:
                raise KafkaSinkError(f"{self.where}: reading the commit marker of group {self.group_id!r} failed"
                                     f"{f' ({tries} tries)' if tries > 1 else ''}: {error}")
            (log.info if tries == 1 else log.debug)("%s: reading the commit marker of group %r: %s; asking again", self.where,
                                                    self.group_id, error)
            time.sleep(MARKER_READ_BACKOFF_S)
        where = f"{self.where}: group {self.group_id!r} at {self.sink.topic}[{MARKER_PARTITION}]"
        return (got.offset, decode_marker(got.metadata, where)) if got.offset >= 0 else (-1, {})

    def commit(self, checkpoint_id: int, by_subtask: list[list[KafkaCommittable]]) -> None:
        self._commit(checkpoint_id, [c for per in by_subtask for c in per], end=False)

    def _commit(self, checkpoint_id: int, committables: list[KafkaCommittable], end: bool) -> None:
        if not self.sink.exactly_once or not committables:
            return
        _, marker = self.read_marker()
        todo = [c for c in committables if not covered(marker, c)]
        if not todo:
            log.info("%s: checkpoint %d was committed before; nothing to do", self.where, checkpoint_id)
            return
        updates: dict[str, int] = {}
        for c in committables:  # every committable given is committed after this (the covered ones were before)
            updates[c.job_id] = max(updates.get(c.job_id, -1), c.tag)
        if not end:
            # all committables made before the writers snapshotted this checkpoint (see the module's docstring)
            updates[self.context.job_id] = max(updates.get(self.context.job_id, -1), 2 * checkpoint_id)
        offset = max(checkpoint_id, 0)
        producer = self._connect()
        records = sum(len(c) for c in todo)
        began = time.monotonic()
        try:
            producer.begin_transaction()
            for c in sorted(todo, key=lambda c: (c.job_id, c.tag, c.subtask)):
                produce_all(producer, self.sink.topic, c.values, c.keys, c.timestamps)
                producer.poll(0)
            marker_tp = TopicPartition(self.sink.topic, MARKER_PARTITION, offset, encode_marker(advanced(marker, updates)))
            producer.send_offsets_to_transaction([marker_tp], self._consumer.consumer_group_metadata(), TRANSACTION_OPERATION_TIMEOUT_S)
            hook = type(self).after_produce  # through the class: a plain function, not a bound method
            if hook is not None:
                producer.flush(TRANSACTION_OPERATION_TIMEOUT_S)
                hook(checkpoint_id)
            producer.commit_transaction(TRANSACTION_OPERATION_TIMEOUT_S)
        except BaseException as e:
            self._abandon()
            if isinstance(e, KafkaException):
                what = "the end of input" if end else f"checkpoint {checkpoint_id}"
                raise KafkaSinkError(f"{self.where}: committing {what} ({records} records) failed: {e.args[0] if e.args else e}") from None
            raise
        self.records_committed += records
        self.transactions += 1
        seconds = time.monotonic() - began
        size = sum(c.size_bytes for c in todo)
        # `extra`: the figures as fields, for a benchmark's log handler (benchmarks/kafka_sink.py)
        log.info("%s: committed %s: %d records (%d bytes) in %.3f s", self.where, "the end of input" if end else f"checkpoint {checkpoint_id}",
                 records, size, seconds, extra={"kafka_commit": {"checkpoint": checkpoint_id, "end": end, "records": records, "bytes": size,
                                                                 "seconds": seconds}})

    def _abandon(self) -> None:
        """After a failed commit: abort the open transaction (read_committed readers wait at it until then); if even
        that fails, drop the producer: the next use re-initializes the transactional id, which aborts it."""
        producer, self._producer = self._producer, None
        if producer is None:
            return
        try:
            producer.abort_transaction(TRANSACTION_OPERATION_TIMEOUT_S)
            self._producer = producer
        except KafkaException as e:
            log.warning("%s: aborting the failed transaction failed (%s); the next commit fences it", self.where, e)

    def commit_end(self, last_checkpoint: int | None, by_subtask: list[list[KafkaCommittable]]) -> dict[str, Any]:
        self._commit(last_checkpoint or 0, [c for per in by_subtask for c in per], end=True)
        return {"kafka_sink_topic": self.sink.topic, "kafka_sink_records_committed": self.records_committed}

    def close(self, finished: bool, uncommitted: list[KafkaCommittable]) -> None:
        # nothing to delete: uncommitted records never reached Kafka
        producer, self._producer = self._producer, None
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()
        del producer  # no transaction is open between commits


__all__ = [
    "DeliveryGuarantee", "KafkaCommittable", "KafkaCommitter", "KafkaRecordSerializationSchema", "KafkaRecordSerializationSchemaBuilder",
    "KafkaSink", "KafkaSinkBuilder", "KafkaSinkConfigurationError", "KafkaSinkError", "KafkaWriter",
]
