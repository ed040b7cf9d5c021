"""windowed_sum over a Kafka topic: the KafkaSource reads windowed_sum's events as JSON rows.

The topic holds windowed_sum's events (`{"user_id", "ts_ms", "value"}`), produced by anything
(`feed()` here, another job, a Dagster asset). The job reads every partition from its earliest
offset (or the group's committed offsets), with event time from `ts_ms` per partition, and writes
windowed_sum's per-user count and sum over tumbling 1 s event-time windows into a Delta table,
exactly once with checkpoints. The offsets of each completed checkpoint are committed to the
consumer group, so `kafka-consumer-groups --describe` shows the job's lag.

    millrace run pipelines/jobs/windowed_sum_kafka.py --bootstrap-servers 127.0.0.1:9092 --topic events --output /tmp/out
"""
from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from pipelines.jobs.windowed_sum import event_columns
from pipelines.jobs.windowed_sum_tail import windows_to_delta
from runtime.api.common import TimestampAssigner, Types, WatermarkStrategy
from runtime.api.common.serialization import JsonRowDeserializationSchema
from runtime.api.connectors.kafka_source import KafkaOffsetResetStrategy, KafkaOffsetsInitializer, KafkaSource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.checkpoint import CheckpointingMode
from runtime.core.errors import InvalidProgramError

SOURCE_UID = "windowed-sum-kafka-source"
EVENT_TYPE = Types.ROW_NAMED(["user_id", "ts_ms", "value"], [Types.LONG(), Types.LONG(), Types.LONG()])


def build(
    env: StreamExecutionEnvironment,
    bootstrap_servers: str,
    topic: str,
    output: str,
    group_id: str = "windowed-sum",
    checkpoint_interval_ms: int = 1000,
    properties: dict[str, str] | None = None,
) -> KafkaSource:
    if checkpoint_interval_ms < 0:
        raise InvalidProgramError(f"windowed_sum_kafka: checkpoint_interval_ms must be >= 0, got {checkpoint_interval_ms}")
    if checkpoint_interval_ms > 0:
        env.enable_checkpointing(checkpoint_interval_ms, CheckpointingMode.EXACTLY_ONCE)
    builder = (
        KafkaSource.builder().set_bootstrap_servers(bootstrap_servers).set_topics(topic).set_group_id(group_id)
        .set_starting_offsets(KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.EARLIEST))
        .set_value_only_deserializer(JsonRowDeserializationSchema.builder().type_info(EVENT_TYPE).build())
    )
    for key, value in (properties or {}).items():
        builder.set_property(key, value)
    source = builder.build()
    # each partition's events come in ts_ms order (feed() sends them so): per-partition watermarks may follow them closely
    watermarks = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(TimestampAssigner.from_field("ts_ms"))
    windows_to_delta(env.from_source(source, watermarks, "kafka: events").uid(SOURCE_UID), output, "windowed_sum_kafka")
    return source


def event_values(first: int, count: int) -> list[bytes]:
    """windowed_sum's events first .. first+count-1 as the JSON rows the job reads."""
    cols = event_columns(np.arange(first, first + count, dtype=np.int64))
    names = list(cols)
    lists = [cols[n].tolist() for n in names]
    return [json.dumps(dict(zip(names, vals)), separators=(",", ":")).encode() for vals in zip(*lists)]


def feed(producer: Any, topic: str, first: int, count: int, partitions: int) -> None:
    """Send events first .. first+count-1, event i to partition i % partitions (each partition in ts_ms order), and wait for them."""
    for i, value in enumerate(event_values(first, count), start=first):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.05)
        producer.poll(0)
    left = producer.flush(60)
    if left:
        raise RuntimeError(f"{left} events to {topic} not delivered within 60 s")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--output", required=True, help="path of the output Delta table")
    parser.add_argument("--group-id", default="windowed-sum")
    parser.add_argument("--checkpoint-interval-ms", type=int, default=1000, metavar="MS")
    args = parser.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    build(env, args.bootstrap_servers, args.topic, args.output, args.group_id, args.checkpoint_interval_ms)
    env.execute("windowed_sum_kafka")


if __name__ == "__main__":
    main()
