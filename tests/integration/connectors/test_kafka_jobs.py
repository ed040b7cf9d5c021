"""Kafka jobs on a cluster against a real broker: windowed_sum_kafka (KafkaSource -> keyed 1 s
event-time windows -> Delta sink, exactly-once checkpoints) while events keep arriving and two
TaskManagers are SIGKILLed on the way; the output table equals windowed_sum's plain-Python
reference row for row, and the consumer group's committed offsets (what lag monitoring reads)
reach the end of every partition."""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

from benchmarks.measure import check_windowed_sum
from pipelines.jobs import events_to_kafka, running_totals, windowed_sum_kafka
from pipelines.jobs.daily_events import day_events, day_index, day_name
from runtime.api.common import WatermarkStrategy
from runtime.api.common.serialization import SimpleStringSchema
from runtime.api.connectors.kafka_sink import DeliveryGuarantee, KafkaRecordSerializationSchema, KafkaSink
from runtime.api.connectors.kafka_source import KafkaSource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.states import JobStatus
from runtime.deploy.minicluster import MiniCluster
from tests.integration.connectors.test_continuous_delta_source import closed_windows_written, kill_a_task_manager, tail_env
from tests.integration.pipelines.test_running_totals_job import DAYS, N, _days_out, live_env, run_day, write_days
from tests.integration.runtime.test_savepoints import savepoint
from tests.kafka_support import KafkaBroker
from tests.running_totals_support import expected_by_day, totals_by_user_day
from tests.waiting import wait_for_all_subtasks, wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 4
CHUNK = 4000  # events per feed: 4 s of event time



def committed_total(kafka: KafkaBroker, group: str, topic: str) -> int:
    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])]
    result = kafka.admin().list_consumer_group_offsets(request)[group].result(10)
    return sum(max(tp.offset, 0) for tp in result.topic_partitions)


def test_kafka_to_windowed_sum_to_delta_exactly_once_through_two_killed_task_managers(
    cluster: MiniCluster, kafka: KafkaBroker, tmp_path: Path
) -> None:
    topic, group, out = f"events-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}", str(tmp_path / "out")
    kafka.create_topic(topic, partitions=PARTITIONS)
    producer = kafka.producer()
    windowed_sum_kafka.feed(producer, topic, 0, CHUNK, PARTITIONS)
    env = tail_env(2)
    windowed_sum_kafka.build(env, kafka.bootstrap_servers, topic, out, group, checkpoint_interval_ms=300)
    client = cluster.submit(env.get_job_graph("windowed_sum_kafka"))
    wait_for_all_subtasks(cluster, client.job_id)
    killed = []
    fed = CHUNK
    for _ in range(2):
        # a checkpoint of the job in the output's log (a restore point past the start), then more events, then the kill
        wait_until(lambda: (Path(out) / "_delta_log").exists(), timeout=60, what="the first sink commit", interval=0.05)
        windowed_sum_kafka.feed(producer, topic, fed, CHUNK, PARTITIONS)
        fed += CHUNK
        killed.append(kill_a_task_manager(cluster, client.job_id))
    windowed_sum_kafka.feed(producer, topic, fed, CHUNK, PARTITIONS)
    fed += CHUNK
    wait_until(lambda: closed_windows_written(out, fed), timeout=120, what="every closed window in the output")
    # offsets of completed checkpoints reach the consumer group: lag monitoring sees the job at the end
    wait_until(lambda: committed_total(kafka, group, topic) == fed, timeout=60, what="the group's committed offsets at the end")
    status = savepoint(cluster, client.job_id, stop=True, drain=True, target=str(tmp_path / "sp"))
    assert status.status == "COMPLETED", status
    assert client.get_job_execution_result(timeout=60).status is JobStatus.FINISHED
    assert len(set(killed)) == 2
    check = check_windowed_sum(out, fed)
    assert check["verified"], check


def test_kafka_to_map_to_kafka_exactly_once_through_a_killed_task_manager(cluster: MiniCluster, kafka: KafkaBroker, tmp_path: Path) -> None:
    """KafkaSource -> map -> KafkaSink EXACTLY_ONCE while records keep coming and a TaskManager is
    SIGKILLed: a read_committed consumer of the output sees every input record, transformed, once."""
    source_topic, out_topic = f"in-{uuid.uuid4().hex[:6]}", f"out-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(source_topic, partitions=PARTITIONS)
    kafka.create_topic(out_topic, partitions=2)
    n = 3 * 3000
    kafka.produce(source_topic, [f"r{i}" for i in range(3000)])
    env = tail_env(2)
    env.enable_checkpointing(300)
    source = (KafkaSource.builder().set_bootstrap_servers(kafka.bootstrap_servers).set_topics(source_topic)
              .set_value_only_deserializer(SimpleStringSchema()).build())
    sink = (KafkaSink.builder().set_bootstrap_servers(kafka.bootstrap_servers)
            .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(out_topic)
                                   .set_value_serialization_schema(SimpleStringSchema()).build())
            .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE).set_transactional_id_prefix(f"tx-{uuid.uuid4().hex[:6]}").build())
    env.from_source(source, WatermarkStrategy.no_watermarks(), "kafka in").map(lambda v: v.upper()).sink_to(sink)
    client = cluster.submit(env.get_job_graph("kafka-map-kafka"))
    wait_until(lambda: len(kafka.consume_all(out_topic)) > 0, timeout=60, what="the first committed transaction in the output")
    kafka.produce(source_topic, [f"r{i}" for i in range(3000, 6000)])
    kill_a_task_manager(cluster, client.job_id)
    kafka.produce(source_topic, [f"r{i}" for i in range(6000, n)])
    wait_until(lambda: len(kafka.consume_all(out_topic)) >= n, timeout=120, what=f"{n} records committed to the output")
    status = savepoint(cluster, client.job_id, stop=True, target=str(tmp_path / "sp"))  # the last checkpoint's transaction commits
    assert status.status == "COMPLETED", status
    got = sorted(v.decode() for v in kafka.consume_all(out_topic))
    assert got == sorted(f"R{i}" for i in range(n)), f"{len(got)} records, {len(got) - len(set(got))} duplicated"
    assert len(kafka.consume_all(out_topic, isolation="read_uncommitted")) > 0


def test_a_broker_restarted_mid_job_leaves_the_output_exact(cluster: MiniCluster, kafka: KafkaBroker, tmp_path: Path) -> None:
    """The broker goes away while the job reads (same home and ports when it is back): the readers'
    consumers reconnect, offset commits and partition discovery fail meanwhile and go on after."""
    topic, group, out = f"events-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}", str(tmp_path / "out")
    kafka.create_topic(topic, partitions=PARTITIONS)
    windowed_sum_kafka.feed(kafka.producer(), topic, 0, CHUNK, PARTITIONS)
    env = tail_env(2)
    windowed_sum_kafka.build(env, kafka.bootstrap_servers, topic, out, group, checkpoint_interval_ms=300,
                             properties={"partition.discovery.interval.ms": "500"})
    client = cluster.submit(env.get_job_graph("windowed_sum_kafka"))
    wait_for_all_subtasks(cluster, client.job_id)
    wait_until(lambda: committed_total(kafka, group, topic) == CHUNK, timeout=60, what="the first events read and checkpointed")
    kafka.close()  # our admin client goes with the broker
    kafka.server.stop()
    assert not kafka.server.alive()
    kafka.server.start()
    fed = CHUNK
    for _ in range(2):
        windowed_sum_kafka.feed(kafka.producer(), topic, fed, CHUNK, PARTITIONS)
        fed += CHUNK
    wait_until(lambda: closed_windows_written(out, fed), timeout=120, what="every closed window in the output")
    status = savepoint(cluster, client.job_id, stop=True, drain=True, target=str(tmp_path / "sp"))
    assert status.status == "COMPLETED", status
    assert client.get_job_execution_result(timeout=60).status is JobStatus.FINISHED
    check = check_windowed_sum(out, fed)
    assert check["verified"], check


def test_running_totals_live_from_kafka_continues_a_daily_savepoint_and_a_stop_and_restore_is_exactly_once(
    cluster: MiniCluster, kafka: KafkaBroker, tmp_path: Path
) -> None:
    """Days fed to a topic by the events_to_kafka job; the live running_totals job (--source kafka)
    starts from day 1's daily savepoint at day 2's first record (by Kafka timestamp), is stopped with
    a savepoint, and restored from its offsets while more days arrive; every (user, day) total equals
    a plain count, none written twice, nothing of day 1 from the live job."""
    days = [day_name(day_index(DAYS[0]) + k) for k in range(5)]
    events, live_out = str(tmp_path / "events"), str(tmp_path / "live")  # run_day writes the daily totals beside them
    write_days(events, days)
    day1 = run_day(cluster, tmp_path, days[0], None).accumulators["savepoint_path"]
    topic = f"live-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(topic, partitions=1)

    def feed(day: str) -> None:
        env = StreamExecutionEnvironment.get_execution_environment()
        events_to_kafka.build(env, events, day, kafka.bootstrap_servers, topic, checkpoint_interval_ms=200)
        assert cluster.submit(env.get_job_graph(f"feed {day}")).get_job_execution_result(timeout=120).status is JobStatus.FINISHED

    for day in days[:4]:  # day 1 too: the live job starts after it by timestamp
        feed(day)
    env = live_env(day1, str(tmp_path / "savepoints"))
    running_totals.build_live_kafka(env, kafka.bootstrap_servers, topic, days[1], live_out, day1, checkpoint_interval_ms=200)
    client = cluster.submit(env.get_job_graph(running_totals.live_job_name(days[1])))
    wait_until(lambda: _days_out(live_out, days[1], days[2]), timeout=60, what="live days 2 and 3 in the output")
    stopped = savepoint(cluster, client.job_id, stop=True)
    assert stopped.status == "COMPLETED" and stopped.location, stopped
    feed(days[4])  # while no job reads the topic; the restored job reads on from the savepoint's offsets
    assert running_totals.restores_kafka_offsets(stopped.location)
    env = live_env(stopped.location)
    running_totals.build_live_kafka(env, kafka.bootstrap_servers, topic, days[1], live_out, stopped.location, checkpoint_interval_ms=200)
    client = cluster.submit(env.get_job_graph(running_totals.live_job_name(days[1])))
    try:
        wait_until(lambda: _days_out(live_out, days[3]), timeout=60, what="live day 4 in the output")
    finally:
        client.cancel()
    seen = totals_by_user_day(live_out)  # fails on a (user, day) written twice
    out_days = sorted({d for _, d in seen})
    assert out_days[:3] == days[1:4], out_days  # nothing of day 1 from the live job
    for day, expected in expected_by_day(out_days, N).items():
        assert {u: t for (u, d), t in seen.items() if d == day} == expected, day


def test_the_dagster_job_feeds_a_day_of_daily_events_into_the_topic(kafka: KafkaBroker, tmp_path: Path) -> None:
    """events_to_kafka_job (Dagster, an embedded Millrace cluster) puts exactly the day's events into
    the topic, once, each record timestamped with its event time."""
    from dagster import DagsterInstance

    from pipelines.kafka_feed import events_to_kafka_job
    from resources.millrace import MillraceClusterResource
    from resources.spark import SparkResource
    from resources.warehouse import DeltaWarehouseResource

    warehouse = DeltaWarehouseResource(base_path=str(tmp_path))
    write_days(warehouse.table_path("daily_events"), DAYS[:2])
    topic = f"feed-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(topic, partitions=1)
    result = events_to_kafka_job.execute_in_process(
        run_config={"ops": {"feed_events_to_kafka": {"config": {"day": DAYS[1], "bootstrap_servers": kafka.bootstrap_servers, "topic": topic}}}},
        resources={"millrace": MillraceClusterResource(mode="embedded", provider="local", spark=SparkResource()), "warehouse": warehouse},
        instance=DagsterInstance.ephemeral(),
    )
    assert result.success
    rows = [json.loads(v) for v in kafka.consume_all(topic)]
    expected = day_events(DAYS[1], N)
    assert sorted((r["user_id"], r["value"], r["ts_ms"]) for r in rows) == sorted(
        zip(expected["user_id"].tolist(), expected["value"].tolist(), expected["ts_ms"].tolist())
    )
