"""KafkaSink's pure parts: the builders' checks, batch serialization, the commit marker's rules, the
EXACTLY_ONCE writer's committables (it never connects) and the transaction-timeout check. Everything
that talks to a broker is in tests/integration/connectors/test_kafka_sink.py."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from runtime.api.common.serialization import JsonRowSerializationSchema, SimpleStringSchema
from runtime.api.common.typeinfo import Types
from runtime.api.connectors.kafka_sink import (
    MARKER_JOBS_KEPT,
    DeliveryGuarantee,
    KafkaCommittable,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSinkConfigurationError,
    KafkaSinkError,
    KafkaWriter,
    advanced,
    covered,
    decode_marker,
    encode_marker,
)
from runtime.core.errors import InvalidProgramError, ThrowableType, throwable_type_of
from runtime.core.records import ColumnBatch, ObjectBatch
from runtime.core.row import Row

pytestmark = pytest.mark.unit


def _serializer(key: bool = False) -> KafkaRecordSerializationSchema:
    b = KafkaRecordSerializationSchema.builder().set_topic("out").set_value_serialization_schema(SimpleStringSchema())
    return (b.set_key_serialization_schema(SimpleStringSchema()) if key else b).build()


def _sink(guarantee: DeliveryGuarantee = DeliveryGuarantee.EXACTLY_ONCE, key: bool = False, **props: str) -> KafkaSink:
    b = KafkaSink.builder().set_bootstrap_servers("127.0.0.1:1").set_record_serializer(_serializer(key)).set_delivery_guarantee(guarantee)
    if guarantee is DeliveryGuarantee.EXACTLY_ONCE:
        b.set_transactional_id_prefix("p")
    for k, v in props.items():
        b.set_property(k.replace("_", "."), v)
    return b.build()


@dataclass
class _Context:
    job_id: str = "job-a"
    subtask_index: int = 0
    parallelism: int = 1
    attempt_number: int = 0
    restored_state: list[Any] = field(default_factory=list)
    config: dict[str, str] = field(default_factory=dict)
    restored_checkpoint_id: int | None = None


def test_the_builders_name_what_is_missing_or_wrong() -> None:
    with pytest.raises(InvalidProgramError, match="no topic"):
        KafkaRecordSerializationSchema.builder().set_value_serialization_schema(SimpleStringSchema()).build()
    with pytest.raises(InvalidProgramError, match="no value format"):
        KafkaRecordSerializationSchema.builder().set_topic("t").build()
    with pytest.raises(InvalidProgramError, match="must be a SerializationSchema"):
        KafkaRecordSerializationSchema.builder().set_value_serialization_schema(str)  # type: ignore[arg-type]  # the wrong type on purpose
    with pytest.raises(InvalidProgramError, match="set_transactional_id_prefix"):
        KafkaSink.builder().set_bootstrap_servers("b:1").set_record_serializer(_serializer()).set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE).build()
    with pytest.raises(InvalidProgramError, match="no brokers"):
        KafkaSink.builder().set_record_serializer(_serializer()).build()
    with pytest.raises(InvalidProgramError, match="transactional.id is the sink's own"):
        KafkaSink.builder().set_property("transactional.id", "x")
    with pytest.raises(InvalidProgramError, match="transaction.timeout.ms must be a whole number"):
        _sink(transaction_timeout_ms="1 minute")
    with pytest.raises(InvalidProgramError, match="refuses its properties: .*socket.connection.setup.timeout.ms.* value 500 is outside"):
        _sink(socket_connection_setup_timeout_ms="500")  # librdkafka's own check, at build()
    with pytest.raises(InvalidProgramError, match='No such configuration property: "no.such.property"'):
        _sink(no_such_property="1")
    sink = _sink(DeliveryGuarantee.AT_LEAST_ONCE, linger_ms="20")
    assert sink.default_name() == "KafkaSink(out)" and sink.delivery_guarantee is DeliveryGuarantee.AT_LEAST_ONCE
    config = sink.client_config()
    assert config["linger.ms"] == "20" and config["partitioner"] == "murmur2_random" and config["enable.idempotence"] is True
    assert "linger.ms" not in sink.consumer_config("g")  # producer settings stay off the marker's consumer


def test_a_batch_serializes_whole_rows_or_columns_and_keys_are_optional() -> None:
    plain = _serializer()
    assert plain.serialize(ObjectBatch(["a", 1])) == (None, [b"a", b"1"])
    row = Types.ROW_NAMED(["user", "n"], [Types.STRING(), Types.LONG()])
    json_values = (KafkaRecordSerializationSchema.builder().set_topic("t")
                   .set_key_serialization_schema(JsonRowSerializationSchema.builder().with_type_info(Types.ROW_NAMED(["user"], [Types.STRING()])).build())
                   .set_value_serialization_schema(JsonRowSerializationSchema.builder().with_type_info(row).build()).build())
    columns = ColumnBatch({"user": np.array(["u1", "u2"], dtype=object), "n": np.array([1, 2])})
    rows = ObjectBatch([Row.of(("user", "n"), ("u1", 1)), Row.of(("user", "n"), ("u2", 2))])
    for batch in (columns, rows):
        keys, values = json_values.serialize(batch)
        assert keys == [b'{"user":"u1"}', b'{"user":"u2"}']
        assert [json.loads(v or b"") for v in values] == [{"user": "u1", "n": 1}, {"user": "u2", "n": 2}]


def test_the_exactly_once_writer_hands_each_checkpoints_records_over_tagged_by_the_checkpoint_before() -> None:
    writer = KafkaWriter(_sink(key=True), _Context(restored_checkpoint_id=4))  # never connects
    assert writer.prepare_commit() == []
    writer.write(ObjectBatch(["a", "b"]))
    writer.write(ObjectBatch(["c"], timestamps=np.array([1000], dtype=np.int64)))
    (first,) = writer.prepare_commit()
    assert (first.job_id, first.subtask, first.tag) == ("job-a", 0, 9)  # made after restoring checkpoint 4
    assert first.values == [b"a", b"b", b"c"] and first.keys == first.values and first.timestamps == [0, 0, 1000]
    writer.snapshot_state(5)
    writer.write(ObjectBatch(["d"], timestamps=np.array([-(1 << 63)], dtype=np.int64)))  # no event time: the producer's clock
    (second,) = writer.prepare_commit()
    assert second.tag == 11 and second.values == [b"d"] and second.timestamps == [0]
    writer.write(ObjectBatch(["lost"]))
    writer.abort()
    assert writer.prepare_commit() == [] and first.values == [b"a", b"b", b"c"]


def test_the_marker_covers_a_jobs_committables_up_to_its_tag_and_keeps_the_newest_jobs() -> None:
    def c(job: str, tag: int) -> KafkaCommittable:
        return KafkaCommittable(job, 0, tag, [b"x"])

    marker = advanced({}, {"job-a": 4})  # checkpoint 2 of job-a committed
    assert covered(marker, c("job-a", 1)) and covered(marker, c("job-a", 3))  # made before checkpoint 2's snapshot
    assert not covered(marker, c("job-a", 5)) and not covered(marker, c("job-b", 1))
    assert advanced(marker, {"job-a": 2}) == marker  # never lowered
    assert decode_marker(encode_marker(marker), "here") == marker and decode_marker(None, "here") == {}
    many = advanced(marker, {f"job-{i}": i for i in range(MARKER_JOBS_KEPT)})
    assert len(many) == MARKER_JOBS_KEPT and "job-a" not in many and len(encode_marker({f"{i:032x}": 1 << 40 for i in range(MARKER_JOBS_KEPT)})) < 4096
    with pytest.raises(KafkaSinkError, match="not this sink's commit marker"):
        decode_marker("some consumer's note", "group g")


def test_a_transaction_timeout_shorter_than_the_checkpoint_interval_is_refused_naming_both() -> None:
    sink = _sink(transaction_timeout_ms="60000")
    with pytest.raises(KafkaSinkConfigurationError) as refused:
        KafkaWriter(sink, _Context(config={"execution.checkpointing.interval": "2 min"}))
    assert "transaction.timeout.ms = 60000 ms" in str(refused.value) and "execution.checkpointing.interval = 120000 ms" in str(refused.value)
    assert throwable_type_of(refused.value) is ThrowableType.NON_RECOVERABLE_ERROR  # no restart can help
    KafkaWriter(sink, _Context(config={"execution.checkpointing.interval": "60000"}))  # as long as the interval: fine
    KafkaWriter(_sink(), _Context(config={"execution.checkpointing.interval": "2 min"}))  # not set: librdkafka's default, not checked
