"""Feeds a Kafka topic with days of the daily events: the input of running_totals --source kafka.

A bounded Millrace job: the day's partition of the daily_events Delta table -> JSON rows
`{"user_id", "value", "ts_ms"}` -> a Kafka topic, exactly once (Kafka transactions), each record's
Kafka timestamp its `ts_ms`, so a consumer can start at a day by timestamp. Parallelism 1 into
the topic's partition 0: a day's events all precede the next day's, so a live job reading the
topic never sees an event late for its day. Feed each day once, in day order (Kafka keeps what it
was given; feeding a day again appends it again).

    millrace run pipelines/jobs/events_to_kafka.py --input warehouse/daily_events --day 2026-01-02 \
        --bootstrap-servers 127.0.0.1:9092 --topic live_events
"""
from __future__ import annotations

import argparse

from pipelines.jobs.daily_events import EVENT_COLUMNS, day_index
from runtime.api.common import TimestampAssigner, Types, WatermarkStrategy
from runtime.api.common.serialization import JsonRowSerializationSchema
from runtime.api.connectors.delta_source import DeltaSource
from runtime.api.connectors.kafka_sink import DeliveryGuarantee, KafkaRecordSerializationSchema, KafkaSink
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.checkpoint import CheckpointingMode

JOB_NAME = "events_to_kafka"
EVENT_TYPE = Types.ROW_NAMED(list(EVENT_COLUMNS), [Types.LONG()] * len(EVENT_COLUMNS))


def build(env: StreamExecutionEnvironment, input_path: str, day: str, bootstrap_servers: str, topic: str, checkpoint_interval_ms: int = 1_000) -> None:
    day_index(day)  # a bad day fails here, naming it
    env.enable_checkpointing(checkpoint_interval_ms, CheckpointingMode.EXACTLY_ONCE)
    source = DeltaSource.for_path(input_path, columns=list(EVENT_COLUMNS), partition_filter={"day": day})
    timestamps = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(TimestampAssigner.from_field("ts_ms"))
    sink = (
        KafkaSink.builder().set_bootstrap_servers(bootstrap_servers)
        .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(topic)
                               .set_value_serialization_schema(JsonRowSerializationSchema.builder().with_type_info(EVENT_TYPE).build())
                               .build())
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix(f"{JOB_NAME}-{topic}-{day}")
        .set_property("partitioner", "consistent")  # fixed key (none): every record to one partition
        .build()
    )
    (env.from_source(source, timestamps, f"daily_events {day}").set_parallelism(1)
     .sink_to(sink).name(f"kafka: {topic}").set_parallelism(1))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True, help="the daily_events Delta table")
    parser.add_argument("--day", required=True, help="the day to feed (YYYY-MM-DD)")
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--topic", default="live_events")
    args = parser.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    build(env, args.input, args.day, args.bootstrap_servers, args.topic)
    env.execute(f"{JOB_NAME} {args.day}")


if __name__ == "__main__":
    main()
