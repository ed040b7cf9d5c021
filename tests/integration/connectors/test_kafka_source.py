"""KafkaSource's enumerator and readers against a real broker, on the FLIP-27 harness (no job): each
starting-offsets mode, bounded reads, offsets in checkpoints restored at another parallelism,
offsets committed to the group when a checkpoint completes, partitions added while reading, and
the errors a user meets (a missing topic, no broker, a record that cannot be read)."""
from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import NewPartitions

from runtime.api.common.serialization import JsonRowDeserializationSchema, SimpleStringSchema
from runtime.api.common.typeinfo import Types
from runtime.api.connectors.kafka_source import (
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaRecordDeserializationError,
    KafkaSource,
    KafkaSourceError,
    KafkaTopicPartition,
)
from runtime.api.connectors.source.testing import SourceHarness
from runtime.core.errors import InvalidProgramError
from tests.kafka_support import KafkaBroker
from tests.waiting import wait_until

pytestmark = pytest.mark.integration



def topic_with(kafka: KafkaBroker, partitions: int, per_partition: int, prefix: str = "v") -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(name, partitions=partitions)
    for p in range(partitions):
        kafka.produce(name, [f"{prefix}-{p}-{i}" for i in range(per_partition)], partition=p)
    return name


def source(kafka: KafkaBroker, topic: str, **kw: Any) -> KafkaSource:
    b = KafkaSource.builder().set_bootstrap_servers(kafka.bootstrap_servers).set_topics(topic)
    b.set_value_only_deserializer(kw.pop("schema", SimpleStringSchema()))
    for key, value in kw.pop("properties", {}).items():
        b.set_property(key, value)
    if "group" in kw:
        b.set_group_id(kw.pop("group"))
    if "start" in kw:
        b.set_starting_offsets(kw.pop("start"))
    if kw.pop("bounded", True):
        b.set_bounded(KafkaOffsetsInitializer.latest())
    assert not kw
    return b.build()


def read_until(h: SourceHarness, rows: int, timeout_s: float = 20.0) -> list[Any]:
    """Poll the readers until `rows` records came (the broker's fetches arrive in the background)."""
    deadline = time.monotonic() + timeout_s
    while len(h.rows()) < rows:
        assert time.monotonic() < deadline, f"{len(h.rows())} of {rows} records within {timeout_s:.0f}s"
        h.step()
    return h.rows()


def run_to_end(h: SourceHarness, timeout_s: float = 20.0) -> list[Any]:
    deadline = time.monotonic() + timeout_s
    while h.step():
        assert time.monotonic() < deadline, f"the bounded source did not end within {timeout_s:.0f}s ({len(h.rows())} records)"
    return h.rows()


def started(src: KafkaSource, parallelism: int) -> SourceHarness:
    h = SourceHarness(src, parallelism)
    h.discover()  # the first partition discovery: splits with resolved offsets to their owners
    return h


def test_earliest_bounded_reads_every_partition_to_its_end_with_kafka_timestamps(kafka: KafkaBroker) -> None:
    topic = topic_with(kafka, 3, 40)
    h = started(source(kafka, topic), 2)
    assert sorted(run_to_end(h)) == sorted(f"v-{p}-{i}" for p in range(3) for i in range(40))
    assert set(h.split_ids_emitted()) == {f"{topic}-{p}" for p in range(3)}
    for out in h.outputs:
        for _, batch in out.batches:
            assert batch.timestamps is not None and (batch.timestamps > 1_600_000_000_000).all()  # the records' Kafka timestamps
        # every split was released at its stopping offset
        assert sorted(out.released) == sorted({sid for sid, _ in out.batches})


def test_latest_starts_after_what_is_there_and_follows_new_records(kafka: KafkaBroker) -> None:
    topic = topic_with(kafka, 2, 10)
    h = started(source(kafka, topic, start=KafkaOffsetsInitializer.latest(), bounded=False), 2)
    for p in range(2):
        kafka.produce(topic, [f"new-{p}-{i}" for i in range(5)], partition=p)
    assert sorted(read_until(h, 10)) == sorted(f"new-{p}-{i}" for p in range(2) for i in range(5))


def test_timestamp_starts_at_the_first_record_at_or_after_it(kafka: KafkaBroker) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, partitions=1)
    producer = kafka.producer()
    for i in range(10):
        producer.produce(topic, f"r{i}".encode(), partition=0, timestamp=1_700_000_000_000 + i * 1000)
    producer.flush(10)
    h = started(source(kafka, topic, start=KafkaOffsetsInitializer.timestamp(1_700_000_006_000)), 1)
    assert run_to_end(h) == ["r6", "r7", "r8", "r9"]
    late = started(source(kafka, topic, start=KafkaOffsetsInitializer.timestamp(1_800_000_000_000)), 1)
    assert run_to_end(late) == []  # after the last record: the end


def test_given_offsets_and_committed_offsets_with_their_reset_strategy(kafka: KafkaBroker) -> None:
    topic = topic_with(kafka, 2, 10)
    given = KafkaOffsetsInitializer.offsets({KafkaTopicPartition(topic, 0): 7})  # partition 1: the reset strategy (earliest)
    assert sorted(run_to_end(started(source(kafka, topic, start=given), 1))) == sorted([f"v-0-{i}" for i in (7, 8, 9)] + [f"v-1-{i}" for i in range(10)])

    group = f"g-{uuid.uuid4().hex[:6]}"
    with pytest.raises(InvalidProgramError, match="no committed offset"):
        started(source(kafka, topic, group=group, start=KafkaOffsetsInitializer.committed_offsets()), 1)
    latest_reset = KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.LATEST)
    assert run_to_end(started(source(kafka, topic, group=group, start=latest_reset), 1)) == []
    kafka.admin().alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 4), TopicPartition(topic, 1, 9)])]
    )[group].result(10)
    got = run_to_end(started(source(kafka, topic, group=group, start=KafkaOffsetsInitializer.committed_offsets()), 1))
    assert sorted(got) == sorted([f"v-0-{i}" for i in range(4, 10)] + ["v-1-9"])


def test_a_position_out_of_range_rereads_from_the_earliest_record_instead_of_skipping_to_the_end(kafka: KafkaBroker) -> None:
    """Records gone under a reader (retention; a broker not itself yet after a restart): librdkafka's
    default reset, latest, would skip everything up to the end without a word."""
    topic = topic_with(kafka, 1, 10)
    # gone before the reader starts at 2 (deleted after it was assigned, its fetcher may have them already)
    kafka.admin().delete_records([TopicPartition(topic, 0, 6)])[TopicPartition(topic, 0, 6)].result(10)
    h = started(source(kafka, topic, start=KafkaOffsetsInitializer.offsets({KafkaTopicPartition(topic, 0): 2})), 1)
    assert {sid: split.offset for sid, split in h.readers[0].splits.items()} == {f"{topic}-0": 2}  # given 2: out of range
    assert run_to_end(h) == [f"v-0-{i}" for i in range(6, 10)]


def committed(kafka: KafkaBroker, group: str, topic: str, partitions: int) -> dict[int, int]:
    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])]
    result = kafka.admin().list_consumer_group_offsets(request)[group].result(10)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def test_offsets_restore_at_another_parallelism_and_are_committed_when_a_checkpoint_completes(kafka: KafkaBroker) -> None:
    topic = topic_with(kafka, 4, 50)
    group = f"g-{uuid.uuid4().hex[:6]}"
    src = source(kafka, topic, group=group, bounded=False)
    h = started(src, 2)
    before = read_until(h, 60)
    cp = h.checkpoint(1)
    positions = {s.partition: s.offset for splits in cp.reader_splits.values() for s in splits}
    assert sum(positions.values()) == len(before)  # the offsets are exactly what was emitted
    assert committed(kafka, group, topic, 4) == {p: -1001 for p in range(4)}  # nothing before the checkpoint completes
    for reader in h.readers.values():
        reader.notify_checkpoint_complete(1)
    deadline = time.monotonic() + 10
    while committed(kafka, group, topic, 4) != positions:
        assert time.monotonic() < deadline, f"committed {committed(kafka, group, topic, 4)}, expected {positions}"
        h.step()  # the consumers serve their commit callbacks while polled
    h.step()
    for reader in h.readers.values():
        reader.close()
    restored = SourceHarness(src, 3, cp)
    restored.discover()
    after = read_until(restored, 200 - len(before))
    assert sorted(before + after) == sorted(f"v-{p}-{i}" for p in range(4) for i in range(50))


def test_partitions_added_while_reading_are_discovered_and_read_from_their_start(kafka: KafkaBroker) -> None:
    topic = topic_with(kafka, 1, 5)
    h = started(source(kafka, topic, bounded=False, properties={"partition.discovery.interval.ms": "100"}), 2)
    assert sorted(read_until(h, 5)) == [f"v-0-{i}" for i in range(5)]
    kafka.admin().create_partitions([NewPartitions(topic, 3)])[topic].result(10)
    wait_until(lambda: len(kafka.topic_partitions(topic)) == 3, timeout=10, what="the new partitions", interval=0.05)
    kafka.produce(topic, ["late-1"], partition=1)
    kafka.produce(topic, ["late-2"], partition=2)
    h.discover()
    assert sorted(read_until(h, 7)) == sorted([f"v-0-{i}" for i in range(5)] + ["late-1", "late-2"])


def test_a_missing_topic_and_an_unreachable_broker_are_named(kafka: KafkaBroker) -> None:
    missing = source(kafka, "no-such-topic")
    with pytest.raises(KafkaSourceError, match="topic 'no-such-topic' does not exist"):
        started(missing, 1)
    nowhere = (
        KafkaSource.builder().set_bootstrap_servers("127.0.0.1:1").set_topics("x").set_value_only_deserializer(SimpleStringSchema())
        .set_property("socket.connection.setup.timeout.ms", "1500").build()
    )
    began = time.monotonic()
    with pytest.raises(KafkaSourceError, match=r"no broker of 127.0.0.1:1 answered within 1.5 s"):
        started(nowhere, 1)
    assert time.monotonic() - began < 10


def test_a_record_that_cannot_be_read_fails_naming_its_partition_and_offset(kafka: KafkaBroker) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, ['{"user": 1, "amount": 5}', '{"user": 2, "amount": 6}'], partition=1)
    kafka.produce(topic, ['{"user": 3, "amount": 7}', "not json", '{"user": 4, "amount": 8}'], partition=0)
    schema = JsonRowDeserializationSchema.builder().type_info(Types.ROW_NAMED(["user", "amount"], [Types.LONG(), Types.LONG()])).build()
    h = started(source(kafka, topic, schema=schema), 1)
    with pytest.raises(KafkaRecordDeserializationError, match=rf"offset 1 of partition 0 of topic '{topic}'"):
        run_to_end(h)
    ok = started(source(kafka, topic, schema=schema, start=KafkaOffsetsInitializer.offsets({KafkaTopicPartition(topic, 0): 2})), 1)
    rows = run_to_end(ok)
    assert sorted((r.user, r.amount) for r in rows) == [(1, 5), (2, 6), (4, 8)]


def test_bad_builders_are_refused() -> None:
    with pytest.raises(InvalidProgramError, match="set_bootstrap_servers"):
        KafkaSource.builder().set_topics("t").set_value_only_deserializer(SimpleStringSchema()).build()
    with pytest.raises(InvalidProgramError, match="set_topics"):
        KafkaSource.builder().set_bootstrap_servers("h:1").set_value_only_deserializer(SimpleStringSchema()).build()
    with pytest.raises(InvalidProgramError, match="DeserializationSchema"):
        KafkaSource.builder().set_bootstrap_servers("h:1").set_topics("t").build()
    with pytest.raises(InvalidProgramError, match="needs a group id"):
        (KafkaSource.builder().set_bootstrap_servers("h:1").set_topics("t").set_value_only_deserializer(SimpleStringSchema())
         .set_starting_offsets(KafkaOffsetsInitializer.committed_offsets()).build())
    with pytest.raises(InvalidProgramError, match="not a regular expression"):
        KafkaSource.builder().set_topic_pattern("(")
