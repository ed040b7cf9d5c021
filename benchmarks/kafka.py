"""Kafka -> Millrace -> Kafka beside a plain consume/transform/produce loop on the same client (confluent-kafka).

Events are JSON rows `{"key": i, "v": value_of(i), "created_us": ...}` in an input topic of
--partitions partitions (event i in partition i % partitions); the work is the same on every path:
read a row, double v (key and created_us kept), write the row as JSON to an output topic.

- `plain_client_loop` (the limit): one process, one confluent_kafka.Consumer and one Producer with
  the settings Millrace's source and sink use (fetch.wait.max.ms 50, idempotent producer,
  murmur2_random), per record json.loads -> compute -> json.dumps -> produce, as fast as it can.
  No offsets committed, no checkpoints: the same client work and nothing else.
- `millrace_columnar`: KafkaSource (JsonRowDeserializationSchema: numpy columns, a ColumnBatch per
  partition and poll) -> map_batches(v * 2 over the numpy column) -> KafkaSink (JsonRowSerializationSchema),
  parallelism --parallelism on local TaskManagers, checkpoints every --interval-ms, AT_LEAST_ONCE
  (the writers flush at every checkpoint).
- `millrace_per_record`: the same with .map(a Python function per Row) instead of map_batches.
- `millrace_columnar_exactly_once`: the columnar job with EXACTLY_ONCE (records reach the topic in
  one transaction per checkpoint, from the committer on the JobMaster: its latency is the
  checkpoint interval, not the path's).

Throughput: the input topic is filled once with --events events before any run (and read from the
page cache by every run); each run writes a fresh output topic whose timestamps are the broker's
append times (message.timestamp.type LogAppendTime), so `seconds` is the start of the run (the job's
submission; the loop's process start) -> the last output record appended, with no watcher polling.
`first_output_s` is start -> the first record appended (the start-up's share). For EXACTLY_ONCE
the last record is appended inside the final transaction, whose commit follows within ~0.1-0.3 s.
--rounds runs per path, alternating their order; the median run's figures are reported, every
round's events/s beside it.

Latency (at --rate events/s, --seconds long, without coordinated omission): a pacer process
produces into a fresh input topic at the offered rate, stamping each event with its *intended*
send time (start + k / rate; the values are encoded before the start), so a pacer or a job that
falls behind shows its lag as latency. A record's latency is the broker's append time of its
output record (LogAppendTime, ms) - created_us: the moment the result is durable in the output
topic and any read_uncommitted consumer may fetch it. No consumer of the output runs meanwhile (a
Python one would take ~0.3 of the 2 cores at 50,000 events/s, and its own fetch wait is not the
pipeline's); the output is read afterwards, checked and its timestamps taken. EXACTLY_ONCE records
are appended inside a transaction and visible only at its commit, so that path is measured at a
read_committed consumer (fetch.wait.max.ms 5, fetch.min.bytes 1 MB: at most 5 ms of its own).
The first --warmup seconds of events are left out; `achieved_rate` = events / (last output -
first intended time), and a run below 97 % of the offered rate is `saturated` (its percentiles
then grow with the run's length). --latency-rounds runs per path, alternating their order; the
run with the median p99 is reported, every round's p99 beside it. Before them, two 8 s paced runs
each of the plain loop and the columnar job, not reported: the broker's JIT needs ~40 s of such
traffic (many small requests) to settle. All producers keep librdkafka's linger.ms (5 ms).

Every run is checked before its figures count: the output topic, read back whole (read_committed),
holds each input key exactly once with v doubled and created_us unchanged (at-least-once would
allow duplicates; a failure-free run must have none, and they are counted; exactly-once requires
none); `verified` false makes the script exit 1.

CPU: `processing_cpu_s` is the CPU of the processes doing the work (JobManager = this process, and
the TaskManagers; or the loop's process), `cpu_s_per_million_events` is that per million events;
`broker_cpu_s` (the Kafka JVM), `harness_cpu_s` (pacer, measuring consumer) and `other_cpu_s`
(everything else on the machine meanwhile: other work slows wall time, not CPU seconds) beside it.
The broker runs with Kafka's own production JVM settings (kafka-server-start.sh: G1, 1 GiB heap,
full tiered JIT), not kafka_server's test default (C1 only).

Prints one JSON line per path:
    {"name", "events", "events_per_s", "p50_latency_ms", "p99_latency_ms", ...}
then {"ratios": ..., "targets": ...}. Targets: millrace_columnar >= 50 % of plain_client_loop's
events/s, and its p99 < 100 ms at 50,000 events/s.

    .venv/bin/python benchmarks/kafka.py [--events 500000] [--rate 50000] [--seconds 10] [--rounds 3] [--latency-rounds 3]
        [--parallelism 2] [--partitions 4] [--interval-ms 1000] [--paths plain,columnar,per_record,columnar_exactly_once]
        [--consumer-property KEY=VALUE ...] [--config state.snapshot.async-mode=thread ...] [--samples-dir DIR]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, cast

import cloudpickle
import numpy as np
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

MAX_RECORDS_PER_POLL = 8192  # as runtime.api.connectors.kafka_source's reader
SATURATED_BELOW = 0.97
JVM_OPTIONS = (  # kafka-run-class.sh's KAFKA_HEAP_OPTS and KAFKA_JVM_PERFORMANCE_OPTS: C2 included
    "-Xms1g", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent", "-XX:-UsePerfData", "-Djava.awt.headless=true",
)
# the Millrace sink's producer settings for AT_LEAST_ONCE (KafkaSink.client_config), used by the plain loop too
PRODUCER_SETTINGS = {"partitioner": "murmur2_random", "enable.idempotence": True}
# the Millrace source reader's consumer settings (KafkaSourceReader._client), used by the plain loop too
CONSUMER_SETTINGS = {"enable.auto.commit": False, "enable.auto.offset.store": False, "enable.partition.eof": False, "fetch.wait.max.ms": 50}


def value_of(key: int | np.ndarray) -> Any:
    """The v of input event `key` (deterministic, so the output can be checked without the input)."""
    return (key * 7919) % 1_000_003


def encode(key: int, v: int, created_us: int) -> bytes:
    return b'{"key":%d,"v":%d,"created_us":%d}' % (key, v, created_us)


# --------------------------------------------------------------------------------------------------
# the helper processes: pacer, measuring consumer, plain loop (this file run with --role)


def _produce(producer: Producer, topic: str, value: bytes, **kw: Any) -> None:
    while True:
        try:
            producer.produce(topic, value, **kw)
            return
        except BufferError:  # the local queue is full: serve deliveries
            producer.poll(0.01)


def role_fill(servers: str, topic: str, events: int, partitions: int, created_base_us: int) -> None:
    """Event i with created_us = created_base_us + i, to partition i % partitions, as fast as the producer takes them."""
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 20, "batch.size": 1_000_000})
    for i in range(events):
        _produce(producer, topic, encode(i, value_of(i), created_base_us + i), partition=i % partitions)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise SystemExit(f"fill: {topic} not delivered within 120 s")


def role_pace(servers: str, topic: str, events: int, partitions: int, rate: int) -> None:
    """Event k is due at start + k / rate and carries that time as created_us, whenever it really goes out.
    The values are encoded before the start (the loop only produces: this process shares the cores)."""
    producer = Producer({"bootstrap.servers": servers})
    start_us = time.time_ns() // 1000 + 300_000 + events  # ~1 µs per value to encode
    values = [encode(k, value_of(k), start_us + k * 1_000_000 // rate) for k in range(events)]
    produce, poll = producer.produce, producer.poll
    k = 0
    while k < events:
        now_us = time.time_ns() // 1000
        due = min(events, (now_us - start_us) * rate // 1_000_000 + 1) if now_us >= start_us else 0
        while k < due:
            while True:
                try:
                    produce(topic, values[k], partition=k % partitions)
                    break
                except BufferError:
                    poll(0.01)
            k += 1
        poll(0)
        wait = (start_us + k * 1_000_000 // rate - time.time_ns() // 1000) / 1e6
        if wait > 0:
            time.sleep(min(wait, 0.001))
    if producer.flush(120):
        raise SystemExit(f"pace: {topic} not delivered within 120 s")
    print(json.dumps({"start_us": start_us, "sent_by_us": time.time_ns() // 1000}), flush=True)


def _take(consumer: Consumer) -> list[Any]:
    """Whatever librdkafka has now; else wait up to 10 ms for one record (never a batch's timeout: that would be latency)."""
    msgs = consumer.consume(MAX_RECORDS_PER_POLL, 0)
    if not msgs:
        m = consumer.poll(0.01)
        msgs = [m] if m is not None else []
    return msgs


def role_measure(servers: str, topic: str, events: int, partitions: int, out: str, deadline_s: float, read_committed: bool) -> None:
    """Read the output topic from its start until `events` records came (or the deadline): key, v, created_us and the receive time of each."""
    consumer = Consumer({"bootstrap.servers": servers, "group.id": f"measure-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
                         # at most one fetch per 5 ms (a fetch returning at once with whatever came would spin: broker CPU)
                         "fetch.wait.max.ms": 5, "fetch.min.bytes": 1_000_000, "isolation.level": "read_committed" if read_committed else "read_uncommitted"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    rows: list[tuple[int, int, int, int, int]] = []
    loads = json.loads
    deadline = time.monotonic() + deadline_s
    while len(rows) < events and time.monotonic() < deadline:
        msgs = _take(consumer)
        now_us = time.time_ns() // 1000
        for m in msgs:
            if m.error() is not None:
                if m.error().fatal():
                    raise KafkaException(m.error())
                continue
            o = loads(m.value())
            rows.append((o["key"], o["v"], o["created_us"], now_us, m.timestamp()[1]))
    consumer.close()
    np.save(out, np.array(rows, dtype=np.int64).reshape(-1, 5))


def role_plain(servers: str, source: str, sink: str, events: int, partitions: int, consumer_properties: dict[str, str]) -> None:
    """The plain loop: consume -> json.loads -> v * 2 -> json.dumps -> produce, until `events` records went out."""
    consumer = Consumer({"bootstrap.servers": servers, "group.id": f"plain-{uuid.uuid4().hex[:8]}", **CONSUMER_SETTINGS, **consumer_properties})
    consumer.assign([TopicPartition(source, p, 0) for p in range(partitions)])
    failures: list[KafkaError] = []
    # delivery reports of failures only, as the sink's writer asks for them
    producer = Producer({"bootstrap.servers": servers, **PRODUCER_SETTINGS, "delivery.report.only.error": True,
                         "on_delivery": lambda err, _msg: failures.append(err) if err is not None else None})
    loads, dumps, produce, poll = json.loads, json.dumps, producer.produce, producer.poll
    done = 0
    while done < events:
        msgs = _take(consumer)
        for m in msgs:
            if m.error() is not None:
                if m.error().fatal():
                    raise KafkaException(m.error())
                continue
            o = loads(m.value())
            value = dumps({"key": o["key"], "v": o["v"] * 2, "created_us": o["created_us"]}, separators=(",", ":")).encode()
            while True:
                try:
                    produce(sink, value)
                    break
                except BufferError:
                    poll(0.01)
            done += 1
        poll(0)
    if producer.flush(120) or failures:
        raise SystemExit(f"plain loop: {len(failures)} failed deliveries to {sink}: {failures[:1]}")
    consumer.close()


_children: list[subprocess.Popen[str]] = []  # every helper process started, so none outlives a failed run


def spawn(role: str, *args: Any) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--role", role, *map(str, args)], stdout=subprocess.PIPE, text=True)
    _children.append(proc)
    return proc


@contextlib.contextmanager
def children_stopped() -> Iterator[None]:
    """On the way out (a failed run too): kill the helper processes still running."""
    try:
        yield
    finally:
        for proc in _children:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def finish(proc: subprocess.Popen[str], what: str, timeout: float) -> str:
    out, _ = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} exited {proc.returncode}")
    return out


# --------------------------------------------------------------------------------------------------
# topics and the output check


def create_topic(admin: Any, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import NewTopic

    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})], operation_timeout=30)[name].result(30)
    deadline = time.monotonic() + 30
    while True:
        described = admin.list_topics(topic=name, timeout=10).topics[name]
        if described.error is None and len(described.partitions) == partitions and all(p.leader >= 0 for p in described.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {name} has no leader")
        time.sleep(0.05)


def output_topic(admin: Any, partitions: int) -> str:
    name = f"out-{uuid.uuid4().hex[:10]}"
    create_topic(admin, name, partitions, {"message.timestamp.type": "LogAppendTime"})
    return name


def read_output(servers: str, topic: str, partitions: int, timeout_s: float = 60.0) -> np.ndarray:
    """Every record of `topic` a read_committed consumer sees: rows (key, v, created_us, append time in ms).

    It reads up to each partition's high watermark, not to the first end of partition: a Kafka
    transaction's commit returns once the coordinator logged the decision, and its markers reach the
    partitions after that, so for a moment a read_committed consumer's end (the last stable offset)
    lies before records that are already committed (seen here: 9,996 of 50,000 read right after
    an exactly-once job finished, all 50,000 three seconds later)."""
    conf = {"bootstrap.servers": servers, "group.id": f"check-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False, "fetch.wait.max.ms": 10}
    tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
    probe = Consumer({**conf, "isolation.level": "read_uncommitted"})  # a read_committed one would answer the last stable offset
    try:
        high = {tp.partition: probe.get_watermark_offsets(tp, timeout=10, cached=False)[1] for tp in tps}
    finally:
        probe.close()
    consumer = Consumer({**conf, "isolation.level": "read_committed"})
    rows: list[tuple[int, int, int, int]] = []
    loads = json.loads
    try:
        consumer.assign(tps)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for m in consumer.consume(10_000, 0.1):
                if m.error() is not None:
                    raise KafkaException(m.error())
                o = loads(cast(bytes, m.value()))
                rows.append((o["key"], o["v"], o["created_us"], m.timestamp()[1]))
            # the position passes commit markers too: at the high watermark, everything was read
            if all(tp.offset >= high[tp.partition] for tp in consumer.position(tps)):
                break
    finally:
        consumer.close()
    return np.array(rows, dtype=np.int64).reshape(-1, 4)


def check(rows: np.ndarray, events: int, created_of: Any, duplicates_allowed: bool) -> dict[str, Any]:
    """The output against the expected transform of the input: every key once, v doubled, created_us kept."""
    keys = rows[:, 0]
    in_range = (keys >= 0) & (keys < events)
    counts = np.bincount(keys[in_range], minlength=events)
    k = keys[in_range]
    wrong = int((~in_range).sum()) + int(((rows[in_range, 1] != 2 * value_of(k)) | (rows[in_range, 2] != created_of(k))).sum())
    missing = int((counts == 0).sum())
    duplicates = int((counts[counts > 1] - 1).sum())
    ok = missing == 0 and wrong == 0 and (duplicates == 0 or duplicates_allowed)
    return {"output_records": int(len(rows)), "missing": missing, "duplicates": duplicates, "wrong": wrong, "verified": ok}


# --------------------------------------------------------------------------------------------------
# the Millrace job


def double_v(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"key": batch["key"], "v": batch["v"] * 2, "created_us": batch["created_us"]}


def job(cluster: Any, servers: str, source_topic: str, stop: dict[int, int] | None, sink_topic: str, path: str,
        guarantee: Any, args: argparse.Namespace, tmp: str) -> Any:
    """Submit the job; `stop` = per-partition stopping offsets (None: the topic's end now)."""
    from runtime.api.common import Configuration, Row, Types, WatermarkStrategy
    from runtime.api.common.serialization import JsonRowDeserializationSchema, JsonRowSerializationSchema
    from runtime.api.datastream import StreamExecutionEnvironment
    from runtime.api.datastream.connectors.kafka import (
        DeliveryGuarantee,
        KafkaOffsetsInitializer,
        KafkaRecordSerializationSchema,
        KafkaSink,
        KafkaSource,
        KafkaTopicPartition,
    )
    from runtime.core.checkpoint import CheckpointingMode

    row_type = Types.ROW_NAMED(["key", "v", "created_us"], [Types.LONG(), Types.LONG(), Types.LONG()])
    conf = Configuration()
    conf.set_string("state.checkpoints.dir", f"{tmp}/checkpoints")
    for key, value in args.job_config.items():
        conf.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(args.parallelism)
    env.enable_checkpointing(args.interval_ms, CheckpointingMode.EXACTLY_ONCE)
    bounded = KafkaOffsetsInitializer.latest() if stop is None else KafkaOffsetsInitializer.offsets(
        {KafkaTopicPartition(source_topic, p): o for p, o in stop.items()})
    source = (KafkaSource.builder().set_bootstrap_servers(servers).set_topics(source_topic)
              .set_starting_offsets(KafkaOffsetsInitializer.earliest()).set_bounded(bounded).set_properties(args.consumer_properties)
              .set_value_only_deserializer(JsonRowDeserializationSchema.builder().type_info(row_type).build()).build())
    sink = (KafkaSink.builder().set_bootstrap_servers(servers).set_delivery_guarantee(guarantee)
            .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(sink_topic)
                                   .set_value_serialization_schema(JsonRowSerializationSchema.builder().with_type_info(row_type).build()).build()))
    if guarantee is DeliveryGuarantee.EXACTLY_ONCE:
        sink = sink.set_transactional_id_prefix(sink_topic)
    events = env.from_source(source, WatermarkStrategy.no_watermarks(), "kafka: events")
    if path == "columnar":
        doubled = events.map_batches(double_v, output_type=row_type).name("v * 2 (numpy)")
    else:
        doubled = events.map(lambda r: Row(key=r.key, v=r.v * 2, created_us=r.created_us), output_type=row_type).name("v * 2 (per Row)")
    doubled.sink_to(sink.build()).name("kafka: out")
    return cluster.submit(env.get_job_graph(f"kafka-bench-{path}-{guarantee.name.lower()}"))


def wait_finished(client: Any, what: str, timeout: float = 900) -> None:
    result = client.get_job_execution_result(timeout=timeout)
    if result.status.value != "FINISHED":
        raise RuntimeError(f"{what} ended {result.status.value}")


# --------------------------------------------------------------------------------------------------
# runs


class Bench:
    def __init__(self, args: argparse.Namespace, cluster: Any, broker: Any, admin: Any, tmp: str) -> None:
        self.args, self.cluster, self.broker, self.admin, self.tmp = args, cluster, broker, admin, tmp
        self.servers = broker.bootstrap_servers
        self.harness: list[int] = []  # pids of the pacer and measuring consumer of the current run

    def meter(self, loop: list[int] | None = None) -> Any:
        from measure import CpuMeter

        groups: dict[str, Callable[[], Iterable[int]]] = {
            "jm": lambda: (os.getpid(),),
            "tm": lambda: [t.pid for t in self.cluster.task_managers() if t.pid],
            "loop": lambda: list(loop or ()),
            "broker": lambda: [self.broker.pid],
            "harness": lambda: list(self.harness),
        }
        return CpuMeter(groups, interval_s=0.2)

    def cpu_fields(self, cpu: Any, events: int, plain: bool) -> dict[str, Any]:
        processing = cpu.seconds("loop") if plain else cpu.seconds("jm") + cpu.seconds("tm")
        f = cpu.fields(events)
        return {"processing_cpu_s": round(processing, 2), "cpu_s_per_million_events": round(processing / (events / 1e6), 2),
                **{k: f[k] for k in ("jm_cpu_s", "tm_cpu_s", "loop_cpu_s", "broker_cpu_s", "harness_cpu_s", "other_cpu_s", "steal_pct")}}

    # --- throughput over the pre-filled input -----------------------------------------------------
    def throughput(self, path: str, source_topic: str, events: int, created_base_us: int, guarantee: Any) -> dict[str, Any]:
        from runtime.api.datastream.connectors.kafka import DeliveryGuarantee

        out = output_topic(self.admin, self.args.partitions)
        plain = path == "plain"
        loop: list[int] = []
        with self.meter(loop) as cpu:
            t0 = time.time()
            if plain:
                proc = spawn("plain", self.servers, source_topic, out, events, self.args.partitions, json.dumps(self.args.consumer_properties))
                loop.append(proc.pid)
                finish(proc, "the plain loop", 900)
            else:
                wait_finished(job(self.cluster, self.servers, source_topic, None, out, path, guarantee, self.args, self.tmp), f"{path} run")
        rows = read_output(self.servers, out, self.args.partitions)
        self.admin.delete_topics([out], operation_timeout=30)
        verdict = check(rows, events, lambda k: created_base_us + k, guarantee is not DeliveryGuarantee.EXACTLY_ONCE)
        if not len(rows):
            return {"seconds": None, "first_output_s": None, "events_per_s": 0, "steady_events_per_s": None, **self.cpu_fields(cpu, events, plain), **verdict}
        last_s = float(rows[:, 3].max() / 1000 - t0)
        first_s = float(rows[:, 3].min() / 1000 - t0)
        return {"seconds": round(last_s, 3), "first_output_s": round(first_s, 3), "events_per_s": round(events / last_s),
                "steady_events_per_s": round(events / (last_s - first_s)) if last_s > first_s else None,
                **self.cpu_fields(cpu, events, plain), **verdict}

    # --- latency at an offered rate ---------------------------------------------------------------
    def latency(self, path: str, guarantee: Any, seconds: float | None = None) -> dict[str, Any]:
        from runtime.api.datastream.connectors.kafka import DeliveryGuarantee

        a = self.args
        seconds = seconds or a.seconds
        n = int(a.rate * seconds)
        src = f"paced-{uuid.uuid4().hex[:10]}"
        create_topic(self.admin, src, a.partitions)
        out = output_topic(self.admin, a.partitions)
        stop = {p: len(range(p, n, a.partitions)) for p in range(a.partitions)}
        samples_file = f"{self.tmp}/{src}.npy"
        plain = path == "plain"
        exactly_once = guarantee is DeliveryGuarantee.EXACTLY_ONCE
        loop: list[int] = []
        with self.meter(loop) as cpu:
            measure = None
            if exactly_once:  # a transaction's records are visible only once it commits: measured where a reader sees them
                measure = spawn("measure", self.servers, out, n, a.partitions, samples_file, seconds * 10 + 120, 1)
                self.harness = [measure.pid]
            client = proc = None
            if plain:
                proc = spawn("plain", self.servers, src, out, n, a.partitions, json.dumps(a.consumer_properties))
                loop.append(proc.pid)
            else:
                client = job(self.cluster, self.servers, src, stop, out, path, guarantee, a, self.tmp)
                while client.get_job_status().value not in ("RUNNING", "FINISHED", "FAILED", "CANCELED"):
                    time.sleep(0.05)
            time.sleep(1.5)  # the loop's or the readers' consumers assigned (earlier records would wait; the warm-up leaves them out)
            pacer = spawn("pace", self.servers, src, n, a.partitions, a.rate)
            self.harness.append(pacer.pid)
            paced = json.loads(finish(pacer, "the pacer", seconds * 10 + 120))
            if measure is not None:
                finish(measure, "the measuring consumer", seconds * 10 + 180)
            if proc is not None:
                finish(proc, "the plain loop", 300)
            if client is not None:
                wait_finished(client, f"{path} latency run")
        self.harness = []
        start_us = paced["start_us"]
        if measure is not None:
            samples = np.load(samples_file)  # key, v, created_us, received (µs), appended (ms)
            done_us = samples[:, 3]
        else:
            samples = read_output(self.servers, out, a.partitions)  # key, v, created_us, appended (ms)
            done_us = samples[:, 3] * 1000
        verdict = check(samples, n, lambda k: start_us + k * 1_000_000 // a.rate, not exactly_once)
        self.admin.delete_topics([src, out], operation_timeout=30)
        if a.samples_dir:  # created_us and done_us of every record, for a look at when the slow ones came
            Path(a.samples_dir).mkdir(parents=True, exist_ok=True)
            np.save(Path(a.samples_dir) / f"{path}-{guarantee.name.lower()}-{start_us}.npy", np.stack([samples[:, 2], done_us], axis=1))
        kept = samples[:, 2] >= start_us + a.warmup * 1e6
        lat_ms = (done_us[kept] - samples[kept, 2]) / 1000.0
        span_s = (done_us.max() - start_us) / 1e6 if len(samples) else float("inf")
        achieved = n / span_s

        def pct(q: float) -> float | None:
            return round(float(np.percentile(lat_ms, q)), 1) if len(lat_ms) else None

        return {
            "latency_events": n, "offered_rate": a.rate, "achieved_rate": round(achieved), "saturated": bool(achieved < SATURATED_BELOW * a.rate),
            "latency_measured_at": "read_committed consumer" if measure is not None else "broker append time",
            "pacer_lag_ms": round((paced["sent_by_us"] - (start_us + n * 1_000_000 // a.rate)) / 1000, 1),
            "p50_latency_ms": pct(50), "p99_latency_ms": pct(99), "max_latency_ms": pct(100), "latency_samples": int(len(lat_ms)),
            **{f"latency_{k}": v for k, v in self.cpu_fields(cpu, n, plain).items()
               if k in ("cpu_s_per_million_events", "broker_cpu_s", "harness_cpu_s", "other_cpu_s")},
            "latency_verified": verdict["verified"], "latency_duplicates": verdict["duplicates"], "latency_missing": verdict["missing"],
            "latency_wrong": verdict["wrong"],
        }


def median_row(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return sorted(runs, key=lambda r: r["events_per_s"])[len(runs) // 2]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=500_000, help="events in the pre-filled input topic (throughput runs)")
    p.add_argument("--rate", type=int, default=50_000, help="offered events/s of the latency runs")
    p.add_argument("--seconds", type=float, default=10.0, help="length of a latency run")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds of a latency run's events left out")
    p.add_argument("--rounds", type=int, default=3, help="throughput runs per path (the median reported)")
    p.add_argument("--latency-rounds", type=int, default=3, help="latency runs per path (the median p99's run reported)")
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--interval-ms", type=int, default=1000, help="checkpoint interval")
    p.add_argument("--paths", default="plain,columnar,per_record,columnar_exactly_once")
    p.add_argument("--consumer-property", action="append", default=[], metavar="KEY=VALUE",
                   help="a librdkafka consumer property for the KafkaSource's readers and the plain loop's consumer alike")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="a configuration option of the Millrace jobs")
    p.add_argument("--samples-dir", help="keep each latency run's (created_us, done_us) per record here, as .npy")
    p.add_argument("--role", help=argparse.SUPPRESS)
    args, rest = p.parse_known_args()
    args.consumer_properties = dict(kv.split("=", 1) for kv in args.consumer_property)
    args.job_config = dict(kv.split("=", 1) for kv in args.config)
    if args.role:
        roles: dict[str, tuple[Callable[..., None], tuple[Callable[[str], Any], ...]]] = {
            "fill": (role_fill, (str, str, int, int, int)),
            "pace": (role_pace, (str, str, int, int, int)),
            "measure": (role_measure, (str, str, int, int, str, float, lambda s: bool(int(s)))),
            "plain": (role_plain, (str, str, str, int, int, json.loads)),
        }
        fn, types = roles[args.role]
        fn(*(t(v) for t, v in zip(types, rest)))
        return 0

    # benchmarks/ is not on the TaskManagers' path: this file's functions travel by value
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    from bench_cluster import bench_cluster
    from confluent_kafka.admin import AdminClient
    from measure import emit, require

    from runtime.api.datastream.connectors.kafka import DeliveryGuarantee
    from runtime.deploy.kafka_server import KafkaServer, fetch_jars

    logging.basicConfig(level=logging.WARNING)
    names = {"plain": "plain_client_loop", "columnar": "millrace_columnar", "per_record": "millrace_per_record",
             "columnar_exactly_once": "millrace_columnar_exactly_once"}
    paths = [x for x in args.paths.split(",") if x]
    guarantee = {x: DeliveryGuarantee.EXACTLY_ONCE if x.endswith("exactly_once") else DeliveryGuarantee.AT_LEAST_ONCE for x in paths}
    kind = {x: x.removesuffix("_exactly_once") for x in paths}
    import confluent_kafka

    emit({"machine": {"cpus": os.cpu_count(), "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
                      "confluent_kafka": confluent_kafka.__version__, "librdkafka": confluent_kafka.libversion()[0],
                      "broker_jvm_options": list(JVM_OPTIONS), "parallelism": args.parallelism, "partitions": args.partitions,
                      "checkpoint_interval_ms": args.interval_ms,
                      "consumer_properties": args.consumer_properties, "job_config": args.job_config}})
    fetch_jars()
    through: dict[str, list[dict[str, Any]]] = {x: [] for x in paths}
    lat: dict[str, list[dict[str, Any]]] = {x: [] for x in paths}
    with (tempfile.TemporaryDirectory() as tmp, KafkaServer(f"{tmp}/kafka", jvm_options=JVM_OPTIONS) as broker,
          bench_cluster("local", "millrace-kafka-bench") as cluster, children_stopped()):
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        bench = Bench(args, cluster, broker, admin, tmp)
        # the input, once: every throughput run reads it whole
        source = f"in-{uuid.uuid4().hex[:10]}"
        create_topic(admin, source, args.partitions)
        created_base_us = time.time_ns() // 1000
        t0 = time.time()
        finish(spawn("fill", broker.bootstrap_servers, source, args.events, args.partitions, created_base_us), "the fill", 900)
        fill_s = time.time() - t0
        # warm-up: TaskManagers up and every path's code loaded, the broker's JIT warm
        warm = f"warm-{uuid.uuid4().hex[:10]}"
        create_topic(admin, warm, args.partitions)
        finish(spawn("fill", broker.bootstrap_servers, warm, 50_000, args.partitions, 0), "the warm-up fill", 300)
        for x in paths:
            r = bench.throughput(kind[x], warm, 50_000, 0, guarantee[x])
            if not r["verified"]:
                raise RuntimeError(f"warm-up of {x}: output not verified: {r}")
        for rnd in range(args.rounds):
            for x in paths if rnd % 2 == 0 else list(reversed(paths)):
                through[x].append(bench.throughput(kind[x], source, args.events, created_base_us, guarantee[x]))
        # the broker's JIT takes ~40 s of paced traffic (many small requests) to settle: measured alone, its CPU for
        # 50,000 events/s from one producer fell from 7.3 to 1.3 s per 8 s over six runs; the throughput runs'
        # big batches do not warm those paths. And the TaskManagers' code for small batches is loaded.
        if args.latency_rounds:
            for x in ("plain", "columnar", "plain", "columnar"):
                if x in paths:
                    bench.latency(kind[x], guarantee[x], seconds=8)
        for rnd in range(args.latency_rounds):
            for x in paths if rnd % 2 == 0 else list(reversed(paths)):
                lat[x].append(bench.latency(kind[x], guarantee[x]))
        del bench, admin  # the clients go before the broker stops (else librdkafka logs every reconnect)
    rows = []
    for x in paths:
        med = median_row(through[x]) if through[x] else {"events_per_s": None}
        lrow = sorted(lat[x], key=lambda r: r["p99_latency_ms"] or 0)[len(lat[x]) // 2] if lat[x] else {}
        rows.append(emit({
            "name": names[x], "events": args.events if through[x] else None, "events_per_s": med["events_per_s"],
            "p50_latency_ms": lrow.get("p50_latency_ms"), "p99_latency_ms": lrow.get("p99_latency_ms"),
            "guarantee": guarantee[x].name, "events_per_s_rounds": [r["events_per_s"] for r in through[x]],
            **{k: v for k, v in med.items() if k not in ("events_per_s", "verified")},
            "p99_latency_ms_rounds": [r["p99_latency_ms"] for r in lat[x]],
            **{k: v for k, v in lrow.items() if k not in ("p50_latency_ms", "p99_latency_ms", "latency_verified")},
            "verified": all(r["verified"] for r in through[x]) and all(r["latency_verified"] for r in lat[x]),
        }))
    by = {r["name"]: r for r in rows}
    plain_rate = by.get("plain_client_loop", {}).get("events_per_s")
    ratios = {f"{n}_vs_plain_client_loop": round(r["events_per_s"] / plain_rate, 3)
              for n, r in by.items() if plain_rate and r["events_per_s"] and n != "plain_client_loop"}
    col = by.get("millrace_columnar", {})
    targets = {
        "columnar_at_least_half_the_plain_loop": ratios.get("millrace_columnar_vs_plain_client_loop", 0) >= 0.5,
        f"columnar_p99_under_100ms_at_{args.rate}": col.get("p99_latency_ms") is not None and col["p99_latency_ms"] < 100 and not col.get("saturated"),
    }
    print(json.dumps({"ratios": ratios, "targets": targets, "fill_events_per_s": round(args.events / fill_s),
                      "loadavg_at_end": [round(x, 2) for x in os.getloadavg()]}), flush=True)
    return require(rows)


if __name__ == "__main__":
    sys.exit(main())
