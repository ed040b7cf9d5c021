"""The Dagster job that feeds the Kafka topic the live running_totals job can read (`source: kafka`).

`events_to_kafka_job` runs the Millrace program pipelines/jobs/events_to_kafka.py for one day of
the daily_events table: that day's events into the topic, exactly once (Kafka transactions), each
record timestamped with its event time. Feed each day once, in day order; the live job, started
with `source: kafka` from a daily savepoint, begins at the first record of the day after it.
No `from __future__ import annotations` here: Dagster reads the Config classes' annotations.
"""
from dagster import Config, Failure, OpExecutionContext, job, op
from pydantic import Field

from pipelines.daily_totals import EVENTS_TABLE
from pipelines.jobs import events_to_kafka as program
from resources.millrace import MillraceClusterResource
from resources.warehouse import DeltaWarehouseResource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.errors import InvalidProgramError


class EventsToKafkaConfig(Config):
    day: str = Field(description="the day of daily_events to feed (YYYY-MM-DD)")
    bootstrap_servers: str = Field(description="the brokers, e.g. 127.0.0.1:9092")
    topic: str = Field(default="live_events", description="the topic the live job reads")


@op(description="Feed one day of daily_events into the Kafka topic (a Millrace job, exactly once).")
def feed_events_to_kafka(
    context: OpExecutionContext, config: EventsToKafkaConfig, millrace: MillraceClusterResource, warehouse: DeltaWarehouseResource
) -> int:
    env = StreamExecutionEnvironment.get_execution_environment()
    try:
        program.build(env, warehouse.table_path(EVENTS_TABLE), config.day, config.bootstrap_servers, config.topic)
    except InvalidProgramError as e:
        raise Failure(description=f"cannot feed {config.day} to {config.topic}: {e}") from e
    run = millrace.run(env.get_job_graph(f"{program.JOB_NAME} {config.day}"), context=context)
    context.add_output_metadata({**run.metadata(), "day": config.day, "topic": config.topic, "bootstrap_servers": config.bootstrap_servers})
    return 1


@job(description="Feed a day of daily_events into the Kafka topic of the live running_totals job (source: kafka).")
def events_to_kafka_job() -> None:
    feed_events_to_kafka()
