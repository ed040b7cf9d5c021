"""KafkaSink against a real broker (tests/kafka_support.py: Kafka 4.4, KRaft, one node; the package's `kafka` fixture).

The sink's halves run on the Sink V2 harness (runtime.api.connectors.sink.testing.SinkHarness:
writers and the committer in-process, checkpoints, failures and restores driven by the test), and
one job runs on a MiniCluster. Every exactly-once test reads the topic as a read_committed consumer
and checks each record is there once; read_uncommitted shows what reached the log at all.
"""
from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from runtime.api.common import Configuration, WatermarkStrategy
from runtime.api.common.serialization import JsonRowSerializationSchema, SimpleStringSchema
from runtime.api.common.typeinfo import Types
from runtime.api.connectors.generator import DataGeneratorSource, RateLimiterStrategy
from runtime.api.connectors.kafka_sink import KafkaCommitter, KafkaSinkError
from runtime.api.connectors.sink.testing import SinkHarness
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.datastream.connectors.kafka import DeliveryGuarantee, KafkaRecordSerializationSchema, KafkaSink
from runtime.core.checkpoint import CheckpointingMode
from runtime.core.records import ColumnBatch, ObjectBatch
from runtime.core.states import JobStatus
from runtime.deploy.minicluster import MiniCluster
from tests.kafka_support import KafkaBroker

pytestmark = pytest.mark.integration


@pytest.fixture
def topic(kafka: KafkaBroker) -> str:
    name = f"out-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(name, partitions=2)
    return name


@pytest.fixture
def after_produce() -> Iterator[list[int]]:
    """KafkaCommitter.after_produce, reset after the test; the list records the checkpoints it saw."""
    calls: list[int] = []
    yield calls
    KafkaCommitter.after_produce = None


def sink(kafka: KafkaBroker, topic: str, guarantee: DeliveryGuarantee, prefix: str | None = None, **props: str) -> KafkaSink:
    b = (KafkaSink.builder().set_bootstrap_servers(kafka.bootstrap_servers).set_delivery_guarantee(guarantee)
         .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(topic).set_value_serialization_schema(SimpleStringSchema()).build()))
    if guarantee is DeliveryGuarantee.EXACTLY_ONCE:
        b.set_transactional_id_prefix(prefix or f"{topic}-sink")
    for k, v in props.items():
        b.set_property(k, v)
    return b.build()


def records(kafka: KafkaBroker, topic: str, isolation: str = "read_committed") -> list[tuple[int, bytes | None, bytes | None, int]]:
    """(partition, key, value, timestamp ms) of every record of `topic`, partition by partition in offset order.
    (From offset 0, not OFFSET_BEGINNING: that one waits ~0.5 s for librdkafka's first offset query; these topics keep their records.)"""
    partitions = kafka.settled(topic)
    settings: dict[str, Any] = {"isolation.level": isolation, "enable.partition.eof": True, "fetch.wait.max.ms": 10}
    consumer = kafka.consumer(**settings)
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        out: list[tuple[int, bytes | None, bytes | None, int]] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + 30
        while len(at_end) < len(partitions) and time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is None:
                continue
            error, partition = message.error(), message.partition()
            assert partition is not None
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(partition)
                    continue
                raise KafkaException(error)
            out.append((partition, message.key(), message.value(), message.timestamp()[1]))
        assert len(at_end) == len(partitions), f"read {topic} to its end in {sorted(at_end)} of {partitions} only"
        return out
    finally:
        consumer.close()


def values(kafka: KafkaBroker, topic: str, isolation: str = "read_committed") -> list[str]:
    return sorted((v or b"").decode() for _, _, v, _ in records(kafka, topic, isolation))


def strings(*xs: str) -> ObjectBatch:
    return ObjectBatch(list(xs))


# --- serialization, NONE, AT_LEAST_ONCE -------------------------------------------------------------------


def test_keys_values_and_event_timestamps_reach_the_topic(kafka: KafkaBroker, topic: str) -> None:
    row = Types.ROW_NAMED(["user", "n"], [Types.STRING(), Types.LONG()])
    serializer = (KafkaRecordSerializationSchema.builder().set_topic(topic)
                  .set_key_serialization_schema(JsonRowSerializationSchema.builder().with_type_info(Types.ROW_NAMED(["user"], [Types.STRING()])).build())
                  .set_value_serialization_schema(JsonRowSerializationSchema.builder().with_type_info(row).build()).build())
    s = (KafkaSink.builder().set_bootstrap_servers(kafka.bootstrap_servers).set_record_serializer(serializer)
         .set_delivery_guarantee(DeliveryGuarantee.AT_LEAST_ONCE).build())
    h = SinkHarness(s, 1)
    h.write(0, ColumnBatch({"user": np.array(["ann", "bob", "ann"], dtype=object), "n": np.array([1, 2, 3])},
                           timestamps=np.array([1_700_000_000_000, 1_700_000_000_001, 1_700_000_000_002], dtype=np.int64)))
    h.finish()
    got = sorted(records(kafka, topic), key=lambda r: r[3])
    assert [r[1:] for r in got] == [(b'{"user":"ann"}', b'{"user":"ann","n":1}', 1_700_000_000_000),
                                    (b'{"user":"bob"}', b'{"user":"bob","n":2}', 1_700_000_000_001),
                                    (b'{"user":"ann"}', b'{"user":"ann","n":3}', 1_700_000_000_002)]
    assert got[0][0] == got[2][0]  # one key, one partition


def test_at_least_once_flushes_before_each_checkpoint_and_none_at_the_end(kafka: KafkaBroker, topic: str) -> None:
    h = SinkHarness(sink(kafka, topic, DeliveryGuarantee.AT_LEAST_ONCE, **{"linger.ms": "10000"}), 2)  # nothing goes by itself for 10 s
    h.write(0, strings("a", "b"))
    h.write(1, strings("c"))
    h.complete(1, h.checkpoint(1))
    assert values(kafka, topic) == ["a", "b", "c"]  # every record before the checkpoint is acknowledged
    h.finish()
    none_topic = f"{topic}-none"
    kafka.create_topic(none_topic)
    h = SinkHarness(sink(kafka, none_topic, DeliveryGuarantee.NONE, **{"linger.ms": "10000"}), 1)
    h.write(0, strings("x", "y"))
    assert h.checkpoint(1) == [[]]  # no flush, no committables
    h.finish()  # the end of input flushes
    assert values(kafka, none_topic) == ["x", "y"]


def test_at_least_once_fails_on_a_failed_delivery_and_none_goes_on(kafka: KafkaBroker, topic: str) -> None:
    small = f"{topic}-small"
    kafka.create_topic(small, config={"max.message.bytes": "1000"})  # the broker refuses larger records
    h = SinkHarness(sink(kafka, small, DeliveryGuarantee.AT_LEAST_ONCE), 1)
    h.write(0, strings("x" * 5000))
    with pytest.raises(KafkaSinkError, match=rf"1 record\(s\) could not be delivered to topic '{small}'.*MSG_SIZE_TOO_LARGE"):
        h.checkpoint(1)
    h.cancel()
    h = SinkHarness(sink(kafka, small, DeliveryGuarantee.NONE), 1)
    h.write(0, strings("x" * 5000))
    h.finish()  # logged, lost
    h = SinkHarness(sink(kafka, small, DeliveryGuarantee.NONE), 1)
    h.write(0, strings("fits"))
    h.finish()
    assert values(kafka, small) == ["fits"]


# --- EXACTLY_ONCE -----------------------------------------------------------------------------------------


def test_a_checkpoint_committed_again_or_offered_again_appears_once(kafka: KafkaBroker, topic: str) -> None:
    h = SinkHarness(sink(kafka, topic, DeliveryGuarantee.EXACTLY_ONCE), 2)
    h.write(0, strings("a"))
    h.write(1, strings("b"))
    held1 = h.checkpoint(1)
    assert values(kafka, topic, "read_uncommitted") == []  # nothing reaches Kafka before the commit
    h.coordinator.notify_checkpoint_complete(1, held1)  # the writers have not heard of it yet ...
    h.coordinator.notify_checkpoint_complete(1, held1)  # ... and the commit comes twice
    assert values(kafka, topic) == ["a", "b"]
    h.write(0, strings("c"))
    held2 = h.checkpoint(2)
    assert len(held2[0]) == 2  # checkpoint 1's records are offered again with 2's
    h.complete(2, held2)
    h.coordinator.reset_to_checkpoint(2, held2)  # a restore commits the restored checkpoint: already done
    assert values(kafka, topic) == ["a", "b", "c"]
    assert values(kafka, topic, "read_uncommitted") == ["a", "b", "c"]  # and was never even produced twice
    h.write(1, strings("d"))
    assert h.finish()["kafka_sink_records_committed"] == 4
    assert values(kafka, topic) == ["a", "b", "c", "d"]


def test_a_commit_failing_after_produce_is_committed_by_the_restore_and_an_uncompleted_checkpoint_never_shows(
    kafka: KafkaBroker, topic: str, after_produce: list[int]
) -> None:
    def fail_checkpoint_2_once(checkpoint_id: int) -> None:
        after_produce.append(checkpoint_id)
        if after_produce.count(2) == 1:
            raise OSError("injected: the JobMaster failed between produce and commit of checkpoint 2")

    KafkaCommitter.after_produce = fail_checkpoint_2_once
    h = SinkHarness(sink(kafka, topic, DeliveryGuarantee.EXACTLY_ONCE), 2)
    h.write(0, strings("a"))
    h.complete(1, h.checkpoint(1))
    h.write(1, strings("b"))
    held2 = h.checkpoint(2)
    with pytest.raises(OSError, match="injected"):
        h.complete(2, held2)
    committer = h.coordinator.committer
    assert isinstance(committer, KafkaCommitter)
    # at once, while the abort's markers may still be on their way: the marker of checkpoint 1, never the aborted one of 2
    assert committer.read_marker() == (1, {"job": 2})
    assert values(kafka, topic) == ["a"]
    assert values(kafka, topic, "read_uncommitted") == ["a", "b"]  # produced (flushed before the hook), aborted
    h.write(0, strings("after 2"))  # checkpoint 3 never completes: these are replayed after the restore
    h.checkpoint(3)
    h.restart(2, held2)  # the job restores checkpoint 2: its commit now goes through
    assert values(kafka, topic) == ["a", "b"]
    h.write(0, strings("after 2"))
    h.finish()
    assert values(kafka, topic) == ["a", "after 2", "b"]
    assert after_produce == [1, 2, 2, 2]  # 2 again: the end of input, after checkpoint 2
    assert values(kafka, topic, "read_uncommitted") == ["a", "after 2", "b", "b"]  # the one aborted copy; checkpoint 3's never produced


class _CoordinatorMoves:
    """A marker consumer whose first committed() calls fail as a moved (or not yet loaded) group coordinator answers."""

    def __init__(self, consumer: Any, failures: list[int]) -> None:
        self._consumer, self.failures, self.calls = consumer, failures, 0

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        self.calls += 1
        if self.failures:
            raise KafkaException(KafkaError(self.failures.pop(0)))
        return self._consumer.committed(partitions, timeout=timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)


def test_the_marker_read_asks_a_moved_group_coordinator_again_and_fails_on_other_errors(kafka: KafkaBroker, topic: str) -> None:
    """librdkafka's committed() returns NOT_COORDINATOR (after looking the coordinator up again) instead of asking again:
    on a broker that has just created __consumer_offsets, or after the coordinator moved, the commit asks again."""
    h = SinkHarness(sink(kafka, topic, DeliveryGuarantee.EXACTLY_ONCE), 1)
    committer = h.coordinator.committer
    assert isinstance(committer, KafkaCommitter)
    moving = _CoordinatorMoves(committer._consumer, [KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS])
    committer._consumer = moving
    h.write(0, strings("a"))
    h.complete(1, h.checkpoint(1))
    assert moving.calls == 3
    assert values(kafka, topic) == ["a"]
    moving.failures = [KafkaError.GROUP_AUTHORIZATION_FAILED]
    h.write(0, strings("b"))
    with pytest.raises(KafkaSinkError, match="reading the commit marker of group .* failed: .*GROUP_AUTHORIZATION_FAILED"):
        h.complete(2, h.checkpoint(2))
    committer._consumer = moving._consumer
    h.cancel()
    assert values(kafka, topic) == ["a"]


def test_a_new_committer_fences_the_old_one_and_commits_what_it_could_not(kafka: KafkaBroker, topic: str) -> None:
    """A JobMaster that lost leadership (the old harness) cannot commit once a new one started."""
    old = SinkHarness(sink(kafka, topic, DeliveryGuarantee.EXACTLY_ONCE, prefix=f"{topic}-shared"), 1)
    old.write(0, strings("a"))
    old.complete(1, old.checkpoint(1))
    old.write(0, strings("b"))
    held2 = old.checkpoint(2)
    new = SinkHarness(sink(kafka, topic, DeliveryGuarantee.EXACTLY_ONCE, prefix=f"{topic}-shared"), 1, job_id="job")
    with pytest.raises(KafkaSinkError, match="fenced"):
        old.coordinator.notify_checkpoint_complete(2, held2)
    new.restart(2, held2)  # the new leader recovers the job from checkpoint 2
    new.write(0, strings("c"))
    new.finish()
    old.cancel()
    assert values(kafka, topic) == ["a", "b", "c"]


def test_a_bounded_jobs_end_commits_each_tail_once_also_after_a_final_checkpoint_committed_one(kafka: KafkaBroker, topic: str) -> None:
    h = SinkHarness(sink(kafka, topic, DeliveryGuarantee.EXACTLY_ONCE), 2)
    h.write(0, strings("a"))
    h.write(1, strings("b"))
    h.complete(1, h.checkpoint(1))
    h.write(0, strings("tail of 0"))
    h.writers[0].end_input()  # subtask 0 finishes; a checkpoint after it holds its tail (FLIP-147)
    h.write(1, strings("c"))
    snapshot_of_1 = h.writers[1].snapshot_state(2)
    held2 = [h.coordinator.final_committables({0})[0], list(snapshot_of_1.committables or [])]
    h.coordinator.notify_checkpoint_complete(2, held2)
    h.writers[1].notify_checkpoint_complete(2)
    assert values(kafka, topic) == ["a", "b", "c", "tail of 0"]
    h.write(1, strings("tail of 1"))
    h.finish()  # commits both tails: subtask 0's again (skipped), subtask 1's
    assert values(kafka, topic) == ["a", "b", "c", "tail of 0", "tail of 1"]


# --- errors at the start ----------------------------------------------------------------------------------


def test_an_unknown_topic_fails_the_start_naming_it(kafka: KafkaBroker) -> None:
    for guarantee in (DeliveryGuarantee.AT_LEAST_ONCE, DeliveryGuarantee.EXACTLY_ONCE):  # writers check it, or the committer
        with pytest.raises(KafkaSinkError, match=f"topic 'no-such-topic' does not exist on {kafka.bootstrap_servers}; create it first"):
            SinkHarness(sink(kafka, "no-such-topic", guarantee), 1)
    assert "no-such-topic" not in kafka.admin().list_topics(timeout=10).topics


def test_an_unreachable_broker_fails_the_start_naming_the_servers_within_the_connection_timeout() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{s.getsockname()[1]}"  # nobody listens once it is closed
    for guarantee in (DeliveryGuarantee.NONE, DeliveryGuarantee.EXACTLY_ONCE):
        b = (KafkaSink.builder().set_bootstrap_servers(closed).set_delivery_guarantee(guarantee).set_transactional_id_prefix("nowhere")
             .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic("t").set_value_serialization_schema(SimpleStringSchema()).build())
             .set_property("socket.connection.setup.timeout.ms", "1000"))  # librdkafka's least
        began = time.monotonic()
        with pytest.raises(KafkaSinkError, match=f"no broker of {closed} answered within 1 s"):
            SinkHarness(b.build(), 1)
        assert time.monotonic() - began < 5


# --- a job ------------------------------------------------------------------------------------------------


def test_a_job_writes_every_record_exactly_once_through_a_failed_commit(
    mini_cluster: MiniCluster, kafka: KafkaBroker, topic: str, tmp_path: Path, after_produce: list[int]
) -> None:
    """generator -> map -> KafkaSink EXACTLY_ONCE, 200 ms checkpoints; the commit of checkpoint 2 fails
    once after its records went into the transaction: the job restores checkpoint 2, commits it, goes on."""
    n = 3000
    conf = Configuration()
    conf.set_string("state.checkpoints.dir", str(tmp_path / "checkpoints"))
    conf.set_string("restart-strategy.type", "fixed-delay")
    conf.set_string("restart-strategy.fixed-delay.attempts", "3")
    conf.set_string("restart-strategy.fixed-delay.delay", "100 ms")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    env.enable_checkpointing(200, CheckpointingMode.EXACTLY_ONCE)
    (env.from_source(DataGeneratorSource(lambda i: i, n, rate_limiter_strategy=RateLimiterStrategy.per_second(2000)),
                     WatermarkStrategy.no_watermarks(), "ids")
     .map(lambda i: f"record-{i}")
     .sink_to(sink(kafka, topic, DeliveryGuarantee.EXACTLY_ONCE)))

    def fail_checkpoint_2_once(checkpoint_id: int) -> None:
        after_produce.append(checkpoint_id)
        if checkpoint_id == 2 and after_produce.count(2) == 1:
            raise OSError("injected: the commit of checkpoint 2 failed after produce")

    KafkaCommitter.after_produce = fail_checkpoint_2_once
    result = mini_cluster.submit(env.get_job_graph("kafka-exactly-once")).get_job_execution_result(timeout=120)
    assert result.status is JobStatus.FINISHED
    assert result.accumulators["restarts"] >= 1
    assert after_produce.count(2) == 2  # failed once, committed by the restore
    assert values(kafka, topic) == sorted(f"record-{i}" for i in range(n))  # every record, once
    uncommitted = values(kafka, topic, "read_uncommitted")
    assert len(uncommitted) > n  # the aborted transaction's copies are in the log, invisible to read_committed

