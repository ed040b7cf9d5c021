"""KafkaSource (PyFlink's pyflink.datastream.connectors.kafka.KafkaSource), on FLIP-27, with confluent-kafka.

- **Splits are partitions**: `KafkaPartitionSplit(topic, partition, offset, stopping_offset)`, the
  offset being the next one to read. The enumerator (on the JobMaster) discovers the partitions of
  the topics (or of the topics matching a pattern) with an admin client, resolves each new
  partition's starting offset there (earliest, latest, committed with a reset strategy, a
  timestamp, given offsets), so a split always carries a concrete offset and a checkpoint taken
  before a reader read anything still restores to the same place. Each partition has one owner
  (Flink's KafkaSourceEnumerator.getSplitOwner: a stable hash of the topic plus the partition,
  modulo the parallelism), assigned when its reader registers; no split requests are needed.
- **Discovery**: once at start, then every `partition.discovery.interval.ms` (Flink's key; 30 s by
  default, 0 turns it off) for an unbounded source: partitions added to a topic while the job runs
  are read from their earliest offset. A failed first discovery fails the job with the brokers
  named; a failed later one is logged and tried again at the next interval.
- **Offsets are state**: a reader snapshots its splits with their offsets; when a checkpoint
  completes, the offsets of that checkpoint are committed to the consumer group (if `group.id` is
  set and `commit.offsets.on.checkpoint` is not false), so consumer-lag monitoring works. Kafka's
  committed offsets are not used for exactly-once: the checkpoint's are.
- **Event time**: each record's timestamp is its Kafka timestamp; a watermark strategy's assigner
  may replace it. Watermarks and idleness are per partition (the reader operator's split-local
  watermarks).
- **Bounded** (`set_bounded(KafkaOffsetsInitializer.latest())`): the stopping offsets are resolved
  at discovery; a reader ends when all its partitions reached theirs.
- **Bad records**: a value the deserializer cannot read fails the job without restarts (a restart
  would meet the same record), naming the topic, partition and offset.

Reader: one confluent_kafka.Consumer per subtask, its partitions assigned (never subscribed: the
enumerator, not a consumer-group rebalance, decides who reads what), polled without blocking.
"""
from __future__ import annotations

import dataclasses
import enum
import logging
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from runtime.api.common.serialization import DeserializationError, DeserializationSchema
from runtime.api.connectors.base import Source
from runtime.api.connectors.source.api import Boundedness, ReaderOutput, SourceReader, SourceReaderContext, SplitEnumerator, SplitEnumeratorContext
from runtime.core.errors import InvalidProgramError, MillraceError, NonRecoverableError
from runtime.core.operators import InputStatus
from runtime.core.records import ColumnBatch, ObjectBatch, RecordBatch

log = logging.getLogger(__name__)

DISCOVERY_INTERVAL_PROPERTY = "partition.discovery.interval.ms"
COMMIT_ON_CHECKPOINT_PROPERTY = "commit.offsets.on.checkpoint"
DEFAULT_DISCOVERY_INTERVAL_MS = 30_000
DEFAULT_TIMEOUT_MS = 30_000  # librdkafka's socket.connection.setup.timeout.ms default
MAX_RECORDS_PER_POLL = 8192
# Flink-only keys that are not librdkafka properties: kept by the source, never given to a client
_SOURCE_PROPERTIES = {DISCOVERY_INTERVAL_PROPERTY, COMMIT_ON_CHECKPOINT_PROPERTY, "client.id.prefix"}


class KafkaSourceError(MillraceError):
    """The brokers cannot be reached or a topic is missing (a restart may help: the broker may be back)."""


class KafkaRecordDeserializationError(NonRecoverableError):
    """A record that cannot be deserialized: every restart would meet it again."""


# --- offsets initializers --------------------------------------------------------------------------


class KafkaOffsetResetStrategy(enum.Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    NONE = "none"


@dataclass(frozen=True)
class KafkaTopicPartition:
    topic: str
    partition: int


@dataclass(frozen=True)
class KafkaOffsetsInitializer:
    """Where a partition starts (or, bounded, stops): PyFlink's KafkaOffsetsInitializer."""

    kind: str  # earliest | latest | committed | timestamp | offsets
    reset: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.NONE
    timestamp_ms: int = 0
    partition_offsets: Mapping[KafkaTopicPartition, int] = field(default_factory=dict)

    @staticmethod
    def earliest() -> KafkaOffsetsInitializer:
        return KafkaOffsetsInitializer("earliest")

    @staticmethod
    def latest() -> KafkaOffsetsInitializer:
        return KafkaOffsetsInitializer("latest")

    @staticmethod
    def committed_offsets(offset_reset_strategy: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.NONE) -> KafkaOffsetsInitializer:
        return KafkaOffsetsInitializer("committed", reset=offset_reset_strategy)

    @staticmethod
    def timestamp(timestamp: int) -> KafkaOffsetsInitializer:
        if timestamp < 0:
            raise InvalidProgramError(f"KafkaOffsetsInitializer.timestamp(): a timestamp in ms since the epoch, got {timestamp}")
        return KafkaOffsetsInitializer("timestamp", timestamp_ms=int(timestamp))

    @staticmethod
    def offsets(
        offsets: Mapping[KafkaTopicPartition, int], offset_reset_strategy: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.EARLIEST
    ) -> KafkaOffsetsInitializer:
        return KafkaOffsetsInitializer("offsets", reset=offset_reset_strategy, partition_offsets=dict(offsets))


# --- splits and the enumerator -----------------------------------------------------------------------


@dataclass(frozen=True)
class KafkaPartitionSplit:
    topic: str
    partition: int
    offset: int  # the next offset to read
    stopping_offset: int | None = None  # bounded: read up to (not including) this one

    @property
    def split_id(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def finished(self) -> bool:
        return self.stopping_offset is not None and self.offset >= self.stopping_offset


@dataclass
class KafkaEnumeratorState:
    known: set[tuple[str, int]]  # every partition ever found: handed out, or pending below
    pending: list[KafkaPartitionSplit]  # found, not handed out yet
    initial_discovery_done: bool


def split_owner(topic: str, partition: int, parallelism: int) -> int:
    """Flink's getSplitOwner with a stable hash: a topic's partitions go round-robin from a topic-dependent start."""
    start = (zlib.crc32(topic.encode()) * 31) & 0x7FFFFFFF
    return (start + partition) % parallelism


class KafkaSourceEnumerator(SplitEnumerator[KafkaPartitionSplit, KafkaEnumeratorState]):
    def __init__(self, context: SplitEnumeratorContext[KafkaPartitionSplit], source: KafkaSource, state: KafkaEnumeratorState | None) -> None:
        self.context, self.source = context, source
        state = state or KafkaEnumeratorState(set(), [], False)
        self.known = set(state.known)
        self.pending = list(state.pending)
        self.initial_discovery_done = state.initial_discovery_done
        self._admin: Any = None

    def start(self) -> None:
        period = self.source.discovery_interval_ms / 1000.0 if not self.source.bounded else 0.0
        self.context.call_async(self._discover, self._on_discovered, 0.0, period)

    def _admin_client(self) -> Any:
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient(self.source.client_config())
        return self._admin

    # --- discovery (off the coordinator's thread) ------------------------------------------------
    def _discover(self) -> list[KafkaPartitionSplit]:
        s = self.source
        admin = self._admin_client()
        timeout = s.timeout_ms / 1000.0
        try:
            metadata = admin.list_topics(timeout=timeout)
        except Exception as e:  # noqa: BLE001 - librdkafka's KafkaException and timeouts alike, named with the brokers
            raise KafkaSourceError(f"KafkaSource: no broker of {s.bootstrap_servers} answered within {timeout:g} s ({e})") from None
        if s.topics is not None:
            missing = [t for t in s.topics if t not in metadata.topics or metadata.topics[t].error is not None]
            if missing:
                raise KafkaSourceError(f"KafkaSource: topic {missing[0]!r} does not exist on {s.bootstrap_servers}")
            topics = list(s.topics)
        else:
            assert s.topic_pattern is not None
            pattern = re.compile(s.topic_pattern)
            topics = sorted(t for t in metadata.topics if pattern.fullmatch(t) and not t.startswith("__"))
        new = [(t, p) for t in topics for p in sorted(metadata.topics[t].partitions) if (t, p) not in self.known]
        if not new:
            return []
        # the first discovery starts where the user said; partitions that appear later start at their beginning
        starting = s.starting_offsets if not self.initial_discovery_done else KafkaOffsetsInitializer.earliest()
        starts = self._resolve(admin, new, starting, timeout)
        stops = self._resolve(admin, new, s.stopping_offsets, timeout) if s.stopping_offsets is not None else {}
        return [KafkaPartitionSplit(t, p, starts[(t, p)], stops.get((t, p))) for t, p in new]

    def _resolve(self, admin: Any, partitions: list[tuple[str, int]], init: KafkaOffsetsInitializer, timeout: float) -> dict[tuple[str, int], int]:
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        out: dict[tuple[str, int], int] = {}
        todo = list(partitions)
        if init.kind == "offsets":
            for t, p in partitions:
                off = init.partition_offsets.get(KafkaTopicPartition(t, p))
                if off is not None:
                    out[(t, p)] = int(off)
            todo = [tp for tp in partitions if tp not in out]
            init = dataclasses.replace(init, kind=init.reset.value if init.reset is not KafkaOffsetResetStrategy.NONE else "none")
        elif init.kind == "committed":
            group = self.source.group_id
            if group is None:
                raise InvalidProgramError("KafkaSource: committed_offsets() needs a group id (set_group_id)")
            request = [ConsumerGroupTopicPartitions(group, [TopicPartition(t, p) for t, p in partitions])]
            result = admin.list_consumer_group_offsets(request, request_timeout=timeout)[group].result(timeout)
            for tp in result.topic_partitions:
                if tp.offset >= 0:
                    out[(tp.topic, tp.partition)] = tp.offset
            todo = [tp for tp in partitions if tp not in out]
            if todo and init.reset is KafkaOffsetResetStrategy.NONE:
                t, p = todo[0]
                raise InvalidProgramError(
                    f"KafkaSource: group {group!r} has no committed offset for {t}-{p} and the reset strategy is NONE "
                    "(committed_offsets(KafkaOffsetResetStrategy.EARLIEST or LATEST) starts such partitions there)"
                )
            init = dataclasses.replace(init, kind=init.reset.value)
        if not todo or init.kind == "none":
            if todo:
                raise InvalidProgramError(f"KafkaSource: no offset given for {todo[0][0]}-{todo[0][1]}")
            return out
        if init.kind == "earliest":
            spec = OffsetSpec.earliest()
        elif init.kind == "latest":
            spec = OffsetSpec.latest()
        else:
            spec = OffsetSpec.for_timestamp(init.timestamp_ms)
        futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in todo}, request_timeout=timeout)
        latest: dict[tuple[str, int], int] = {}
        for tp, fut in futures.items():
            off = fut.result(timeout).offset
            if off < 0:  # a timestamp after the last record: start at the end
                if not latest:
                    ends = admin.list_offsets({TopicPartition(t, p): OffsetSpec.latest() for t, p in todo}, request_timeout=timeout)
                    latest = {(k.topic, k.partition): f.result(timeout).offset for k, f in ends.items()}
                off = latest[(tp.topic, tp.partition)]
            out[(tp.topic, tp.partition)] = off
        return out

    # --- on the coordinator's thread -----------------------------------------------------------------
    def _on_discovered(self, splits: list[KafkaPartitionSplit] | None, error: BaseException | None) -> None:
        if error is not None:
            if not self.initial_discovery_done:
                raise error
            log.warning("KafkaSource: partition discovery failed, trying again at the next interval: %s", error)
            return
        for split in splits or []:
            if (split.topic, split.partition) not in self.known:
                self.known.add((split.topic, split.partition))
                self.pending.append(split)
        self.initial_discovery_done = True
        for subtask in self.context.registered_readers():
            self._assign(subtask)

    def _assign(self, subtask: int) -> None:
        p = self.context.current_parallelism()
        mine = [s for s in self.pending if split_owner(s.topic, s.partition, p) == subtask]
        if mine:
            self.pending = [s for s in self.pending if split_owner(s.topic, s.partition, p) != subtask]
            self.context.assign_splits({subtask: mine})
        if self.source.bounded and self.initial_discovery_done:
            self.context.signal_no_more_splits(subtask)

    def add_reader(self, subtask: int) -> None:
        if self.initial_discovery_done:
            self._assign(subtask)

    def handle_split_request(self, subtask: int, requester_hostname: str | None) -> None:
        pass  # partitions are pushed to their owners

    def add_splits_back(self, splits: list[KafkaPartitionSplit], subtask: int) -> None:
        self.pending.extend(splits)
        if subtask in self.context.registered_readers():
            self._assign(subtask)

    def snapshot_state(self, checkpoint_id: int) -> KafkaEnumeratorState:
        return KafkaEnumeratorState(set(self.known), list(self.pending), self.initial_discovery_done)

    def close(self) -> None:
        self._admin = None


# --- the reader ------------------------------------------------------------------------------------


class KafkaSourceReader(SourceReader[KafkaPartitionSplit]):
    def __init__(self, context: SourceReaderContext, source: KafkaSource) -> None:
        self.context, self.source = context, source
        self.splits: dict[str, KafkaPartitionSplit] = {}
        self.no_more_splits = False
        self._consumer: Any = None
        self._to_commit: dict[int, list[KafkaPartitionSplit]] = {}  # checkpoint id -> its offsets

    def _client(self) -> Any:
        if self._consumer is None:
            from confluent_kafka import Consumer

            conf = self.source.client_config()
            conf.update({
                "group.id": self.source.group_id or f"millrace-kafka-source-{self.context.index_of_subtask}",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": False,
            })
            conf.setdefault("fetch.wait.max.ms", 50)  # a reader polls without blocking: its latency is the broker's wait
            # a position the broker calls out of range (records deleted by retention, or a broker
            # that is not yet itself after a restart) must not make the reader jump to the end:
            # librdkafka's default, latest, would skip records silently. Earliest re-reads what is
            # there (Flink's default too), unless the job chose LATEST as its reset strategy.
            chosen = self.source.starting_offsets.reset
            conf.setdefault("auto.offset.reset", "latest" if chosen is KafkaOffsetResetStrategy.LATEST else "earliest")
            self._consumer = Consumer(conf)
        return self._consumer

    def add_splits(self, splits: list[KafkaPartitionSplit]) -> None:
        from confluent_kafka import TopicPartition

        fresh = []
        for s in splits:
            if not isinstance(s, KafkaPartitionSplit):
                raise InvalidProgramError(
                    f"KafkaSource: restored split {s!r} is not a Kafka partition split; the checkpoint belongs to another source under the same uid"
                )
            if s.finished:
                continue
            self.splits[s.split_id] = s
            fresh.append(TopicPartition(s.topic, s.partition, s.offset))
        if fresh:
            self._client().incremental_assign(fresh)

    def notify_no_more_splits(self) -> None:
        self.no_more_splits = True

    def poll_next(self, output: ReaderOutput) -> InputStatus:
        if not self.splits:
            return InputStatus.END_OF_INPUT if self.no_more_splits else InputStatus.NOTHING_AVAILABLE
        messages = self._client().consume(num_messages=MAX_RECORDS_PER_POLL, timeout=0)
        if not messages:
            return InputStatus.NOTHING_AVAILABLE
        by_partition: dict[tuple[str, int], list[Any]] = {}
        for m in messages:
            err = m.error()
            if err is not None:
                if err.fatal():
                    raise KafkaSourceError(f"KafkaSource: the consumer failed: {err}")
                from confluent_kafka import KafkaError  # an error: rare, imported here off the record path

                if err.code() == KafkaError._AUTO_OFFSET_RESET:
                    # the position was out of range and was reset (auto.offset.reset): say so, loudly
                    log.warning("KafkaSource: partition %s-%s: %s", m.topic(), m.partition(), err)
                else:
                    log.debug("KafkaSource: %s", err)  # transient (a broker away): librdkafka retries
                continue
            by_partition.setdefault((m.topic(), m.partition()), []).append(m)
        for (topic, partition), msgs in by_partition.items():
            split = self.splits.get(f"{topic}-{partition}")
            if split is None:
                continue  # unassigned since (finished)
            if split.stopping_offset is not None:
                msgs = [m for m in msgs if m.offset() < split.stopping_offset]
            if msgs:
                output.collect(self._batch(split, msgs), split.split_id)
                split = dataclasses.replace(split, offset=msgs[-1].offset() + 1)
                self.splits[split.split_id] = split
            if split.finished:
                self._finish(split, output)
        return InputStatus.MORE_AVAILABLE if self.splits or not self.no_more_splits else InputStatus.END_OF_INPUT

    def _batch(self, split: KafkaPartitionSplit, msgs: list[Any]) -> RecordBatch:
        try:
            batch = self.source.deserializer.deserialize_batch([m.value() for m in msgs])
        except DeserializationError as e:
            bad = msgs[e.index] if 0 <= e.index < len(msgs) else msgs[0]
            raise KafkaRecordDeserializationError(
                f"KafkaSource: the record at offset {bad.offset()} of partition {split.partition} of topic {split.topic!r} "
                f"cannot be deserialized by {type(self.source.deserializer).__name__}: {e}"
            ) from None
        ts = np.fromiter((m.timestamp()[1] for m in msgs), dtype=np.int64, count=len(msgs))
        if len(batch) != len(msgs):  # a deserializer that skips bad records: Kafka timestamps no longer line up
            return batch
        if isinstance(batch, ColumnBatch):
            return ColumnBatch(batch.columns, ts)
        return ObjectBatch(batch.rows(), ts)

    def _finish(self, split: KafkaPartitionSplit, output: ReaderOutput) -> None:
        from confluent_kafka import TopicPartition

        del self.splits[split.split_id]
        self._client().incremental_unassign([TopicPartition(split.topic, split.partition)])
        output.release_split(split.split_id)

    def snapshot_state(self, checkpoint_id: int) -> list[KafkaPartitionSplit]:
        splits = list(self.splits.values())
        if self.source.commit_offsets:
            self._to_commit[checkpoint_id] = splits
        return splits

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        from confluent_kafka import TopicPartition

        done = [c for c in self._to_commit if c <= checkpoint_id]
        offsets = self._to_commit.get(checkpoint_id)
        for c in done:
            del self._to_commit[c]
        if offsets:
            try:
                self._client().commit(offsets=[TopicPartition(s.topic, s.partition, s.offset) for s in offsets], asynchronous=True)
            except Exception as e:  # noqa: BLE001 - a failed offset commit only delays lag monitoring (Flink logs it too)
                log.warning("KafkaSource: committing the offsets of checkpoint %d failed: %s", checkpoint_id, e)

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


# --- the source and its builder ----------------------------------------------------------------------


class KafkaSource(Source):
    def __init__(
        self,
        bootstrap_servers: str,
        topics: list[str] | None,
        topic_pattern: str | None,
        group_id: str | None,
        starting_offsets: KafkaOffsetsInitializer,
        stopping_offsets: KafkaOffsetsInitializer | None,
        deserializer: DeserializationSchema,
        properties: dict[str, str],
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topics, self.topic_pattern, self.group_id = topics, topic_pattern, group_id
        self.starting_offsets, self.stopping_offsets = starting_offsets, stopping_offsets
        self.deserializer = deserializer
        self.properties = properties
        self.bounded = stopping_offsets is not None
        self.discovery_interval_ms = int(properties.get(DISCOVERY_INTERVAL_PROPERTY, DEFAULT_DISCOVERY_INTERVAL_MS))
        self.commit_offsets = group_id is not None and str(properties.get(COMMIT_ON_CHECKPOINT_PROPERTY, "true")).lower() != "false"
        self.timeout_ms = int(properties.get("socket.connection.setup.timeout.ms", DEFAULT_TIMEOUT_MS))

    @staticmethod
    def builder() -> KafkaSourceBuilder:
        return KafkaSourceBuilder()

    def client_config(self) -> dict[str, Any]:
        conf: dict[str, Any] = {k: v for k, v in self.properties.items() if k not in _SOURCE_PROPERTIES}
        conf["bootstrap.servers"] = self.bootstrap_servers
        return conf

    def get_boundedness(self) -> Boundedness:
        return Boundedness.BOUNDED if self.bounded else Boundedness.CONTINUOUS_UNBOUNDED

    def create_enumerator(self, context: SplitEnumeratorContext[KafkaPartitionSplit]) -> KafkaSourceEnumerator:
        return KafkaSourceEnumerator(context, self, None)

    def restore_enumerator(self, context: SplitEnumeratorContext[KafkaPartitionSplit], checkpoint: Any) -> KafkaSourceEnumerator:
        if not isinstance(checkpoint, KafkaEnumeratorState):
            raise InvalidProgramError(
                f"KafkaSource: the checkpoint's enumerator state is a {type(checkpoint).__name__}; it belongs to another source under the same uid"
            )
        return KafkaSourceEnumerator(context, self, checkpoint)

    def create_reader(self, context: SourceReaderContext) -> KafkaSourceReader:
        return KafkaSourceReader(context, self)

    def get_type_info(self) -> Any:
        return self.deserializer.get_produced_type()


class KafkaSourceBuilder:
    def __init__(self) -> None:
        self._servers: str | None = None
        self._topics: list[str] | None = None
        self._pattern: str | None = None
        self._group: str | None = None
        self._starting = KafkaOffsetsInitializer.earliest()
        self._stopping: KafkaOffsetsInitializer | None = None
        self._deserializer: DeserializationSchema | None = None
        self._properties: dict[str, str] = {}

    def set_bootstrap_servers(self, bootstrap_servers: str) -> KafkaSourceBuilder:
        self._servers = bootstrap_servers
        return self

    def set_topics(self, *topics: str) -> KafkaSourceBuilder:
        self._topics, self._pattern = list(topics), None
        return self

    def set_topic_pattern(self, topic_pattern: str) -> KafkaSourceBuilder:
        try:
            re.compile(topic_pattern)
        except re.error as e:
            raise InvalidProgramError(f"KafkaSource: topic pattern {topic_pattern!r} is not a regular expression: {e}") from None
        self._pattern, self._topics = topic_pattern, None
        return self

    def set_group_id(self, group_id: str) -> KafkaSourceBuilder:
        self._group = group_id
        return self

    def set_starting_offsets(self, starting_offsets_initializer: KafkaOffsetsInitializer) -> KafkaSourceBuilder:
        self._starting = starting_offsets_initializer
        return self

    def set_bounded(self, stopping_offsets_initializer: KafkaOffsetsInitializer) -> KafkaSourceBuilder:
        if stopping_offsets_initializer.kind == "committed":
            raise InvalidProgramError("KafkaSource.set_bounded(): stop at latest(), a timestamp() or given offsets(), not at committed offsets")
        self._stopping = stopping_offsets_initializer
        return self

    def set_value_only_deserializer(self, deserialization_schema: DeserializationSchema) -> KafkaSourceBuilder:
        self._deserializer = deserialization_schema
        return self

    def set_property(self, key: str, value: str) -> KafkaSourceBuilder:
        self._properties[key] = value
        return self

    def set_properties(self, props: Mapping[str, str]) -> KafkaSourceBuilder:
        self._properties.update(props)
        return self

    def set_client_id_prefix(self, prefix: str) -> KafkaSourceBuilder:
        self._properties["client.id"] = prefix
        return self

    def build(self) -> KafkaSource:
        if not self._servers:
            raise InvalidProgramError("KafkaSource: set_bootstrap_servers() is required (e.g. 'localhost:9092')")
        if not self._topics and self._pattern is None:
            raise InvalidProgramError("KafkaSource: set_topics(...) or set_topic_pattern(...) is required")
        if self._deserializer is None or not isinstance(self._deserializer, DeserializationSchema):
            raise InvalidProgramError(
                "KafkaSource: set_value_only_deserializer() needs a DeserializationSchema (SimpleStringSchema(), JsonRowDeserializationSchema), "
                f"got {type(self._deserializer).__name__}"
            )
        for key in (DISCOVERY_INTERVAL_PROPERTY, "socket.connection.setup.timeout.ms"):
            if key in self._properties:
                try:
                    if int(self._properties[key]) < 0:
                        raise ValueError
                except ValueError:
                    raise InvalidProgramError(f"KafkaSource: property {key} must be a number of ms >= 0, got {self._properties[key]!r}") from None
        if self._starting.kind == "committed" and self._group is None:
            raise InvalidProgramError("KafkaSource: committed_offsets() needs a group id (set_group_id)")
        return KafkaSource(self._servers, self._topics, self._pattern, self._group, self._starting, self._stopping, self._deserializer, dict(self._properties))


__all__ = [
    "KafkaOffsetResetStrategy", "KafkaOffsetsInitializer", "KafkaPartitionSplit", "KafkaRecordDeserializationError", "KafkaSource",
    "KafkaSourceBuilder", "KafkaSourceEnumerator", "KafkaSourceError", "KafkaSourceReader", "KafkaTopicPartition", "split_owner",
]
