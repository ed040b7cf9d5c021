"""KafkaSink: what its exactly-once write-ahead costs beside at-least-once, on one broker and one warm cluster.

The job: a generator of --events string records of --record-bytes bytes each (the index first; at
--rate records per second if given, so a checkpoint holds about rate * interval records) ->
KafkaSink at parallelism --parallelism, a checkpoint every --interval-ms. Two delivery guarantees
run side by side, --rounds times each (the order alternating):

- AT_LEAST_ONCE (the baseline): each writer produces its records at once and flushes before every
  checkpoint.
- EXACTLY_ONCE: writers hand each checkpoint's serialized records over as committables (they go
  into the checkpoint's metadata, on the JobMaster); the JobMaster produces them in one Kafka
  transaction after the checkpoint completed.

Prints one JSON line per guarantee, the median run's figures (events_per_s: from submission to the
job's end, the end's commit included, so every record is in Kafka):

    {"guarantee", "events", "record_bytes", "interval_ms", "events_per_s", "events_per_s_rounds",
     "jm_cpu_s", "tm_cpu_s", "cpu_s_per_million_events", "checkpoints", "checkpoint_acked_s",
     "max_checkpoint_acked_s", "checkpoint_committed_s", "max_checkpoint_committed_s",
     "kafka_commit_s", "max_kafka_commit_s", "max_commit_records", "max_commit_bytes", "verified"}

checkpoint_acked_s: trigger -> the last task's acknowledgement (median over the run's completed
checkpoints; max_: the largest); checkpoint_committed_s: trigger -> the checkpoint committed to
Delta (its metadata, committables included, written); kafka_commit_s: one exactly-once Kafka
transaction on the JobMaster (produce + marker + commit; from the sink's log); max_commit_bytes:
the largest checkpoint's records, serialized (in the metadata they are pickled and base64-encoded,
about 4/3 of that). Each run is checked by reading the topic back as a read_committed consumer:
every index present, exactly once for EXACTLY_ONCE (`verified`).

    .venv/bin/python benchmarks/kafka_sink.py [--events 1000000] [--record-bytes 100] [--interval-ms 1000] [--parallelism 2] [--rounds 3] [--rate 0]
"""
from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any

from bench_cluster import bench_cluster
from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from measure import CpuMeter, emit, require

from runtime.api.common import Configuration, WatermarkStrategy
from runtime.api.common.serialization import SimpleStringSchema
from runtime.api.connectors.generator import DataGeneratorSource, RateLimiterStrategy
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.datastream.connectors.kafka import DeliveryGuarantee, KafkaRecordSerializationSchema, KafkaSink
from runtime.core.checkpoint import CheckpointingMode
from runtime.deploy.kafka_server import KafkaServer, fetch_jars
from runtime.deploy.minicluster import MiniCluster
from runtime.rpc import messages as m


class Payload:
    """Record i: its index (12 digits) padded to `size` bytes."""

    def __init__(self, size: int) -> None:
        self.pad = "x" * max(0, size - 12)

    def __call__(self, i: int) -> str:
        return f"{i:012d}{self.pad}"


class CommitLog(logging.Handler):
    """The exactly-once committer's figures per transaction (its log records' `kafka_commit` field)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.commits: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        figures = getattr(record, "kafka_commit", None)
        if figures is not None:
            self.commits.append(figures)


def create_topic(admin: AdminClient, name: str, partitions: int) -> None:
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)], operation_timeout=30)[name].result(30)
    deadline = time.monotonic() + 30
    while True:
        described = admin.list_topics(topic=name, timeout=10).topics[name]
        if described.error is None and len(described.partitions) == partitions and all(p.leader >= 0 for p in described.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {name} has no leader")
        time.sleep(0.05)


def settle(admin: AdminClient, topic: str, partitions: int, timeout_s: float = 60.0) -> None:
    """Wait until each partition's last stable offset is its end: a commit's markers land after commit_transaction
    returned, and a read_committed consumer that looks at once stops short of them."""
    deadline = time.monotonic() + timeout_s
    while True:
        ends = []
        for level in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED):
            futures = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}, isolation_level=level)
            ends.append({tp.partition: f.result(timeout_s).offset for tp, f in futures.items()})
        if ends[0] == ends[1]:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"a transaction on {topic} stayed open: stable {ends[0]}, end {ends[1]}")
        time.sleep(0.01)


def read_indices(servers: str, topic: str, partitions: int) -> list[int]:
    """The index of every record a read_committed consumer sees in `topic` (settled first)."""
    consumer = Consumer({"bootstrap.servers": servers, "group.id": f"bench-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True, "fetch.wait.max.ms": 10})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[int] = []
        at_end: set[int | None] = set()
        while len(at_end) < partitions:
            batch = consumer.consume(10000, 1.0)
            for message in batch:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        at_end.add(message.partition())
                        continue
                    raise KafkaException(error)
                out.append(int((message.value() or b"0")[:12]))
        return out
    finally:
        consumer.close()


def run(cluster: MiniCluster, servers: str, admin: AdminClient, guarantee: DeliveryGuarantee, args: argparse.Namespace, tmp: str,
        commit_log: CommitLog) -> dict[str, Any]:
    topic = f"bench-{guarantee.name.lower()}-{uuid.uuid4().hex[:8]}"
    create_topic(admin, topic, args.parallelism)
    conf = Configuration()
    conf.set_string("state.checkpoints.dir", f"{tmp}/checkpoints")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(args.parallelism)
    env.enable_checkpointing(args.interval_ms, CheckpointingMode.EXACTLY_ONCE)
    sink = (KafkaSink.builder().set_bootstrap_servers(servers).set_delivery_guarantee(guarantee).set_transactional_id_prefix(topic)
            .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic(topic).set_value_serialization_schema(SimpleStringSchema()).build())
            .build())
    rate = RateLimiterStrategy.per_second(args.rate) if args.rate else None
    source = DataGeneratorSource(Payload(args.record_bytes), args.events, rate_limiter_strategy=rate)
    env.from_source(source, WatermarkStrategy.no_watermarks(), "records").sink_to(sink)
    job_graph = env.get_job_graph(f"kafka-sink-{guarantee.name.lower()}")
    commit_log.commits.clear()
    history: dict[int, dict[str, Any]] = {}
    gw = cluster.dispatcher_gateway()
    with CpuMeter.for_cluster(cluster) as cpu:
        began = time.monotonic()
        client = cluster.submit(job_graph)
        while client.get_job_status().value not in ("FINISHED", "FAILED", "CANCELED"):
            time.sleep(0.5)  # sampling the statistics (they keep the newest 10)
            stats = json.loads(gw.call_sync("request_checkpoint_statistics", m.JobIdMessage(job_id=client.job_id), timeout=10).statistics_json)
            for e in stats.get("history", []):
                if e["status"] == "COMPLETED":
                    history[e["id"]] = e
        result = client.get_job_execution_result(timeout=3600)
        seconds = time.monotonic() - began  # submit -> finished, the end's commit included (every record delivered)
    if result.status.value != "FINISHED":
        raise RuntimeError(f"{guarantee.name} run ended {result.status.value}")
    settle(admin, topic, args.parallelism)
    indices = read_indices(servers, topic, args.parallelism)
    unique = set(indices)
    complete = unique == set(range(args.events))
    verified = complete and (len(indices) == args.events if guarantee is DeliveryGuarantee.EXACTLY_ONCE else True)
    done = [history[k] for k in sorted(history)]
    acked = [e["end_to_end_duration"] / 1000 for e in done]
    committed = [(e["end_to_end_duration"] + (e.get("commit_duration") or 0)) / 1000 for e in done]
    commits = [c for c in commit_log.commits if not c["end"]]
    out: dict[str, Any] = {
        "seconds": seconds, "events_per_s": args.events / seconds, **cpu.fields(args.events),
        "checkpoints": len(done),
        "checkpoint_acked_s": round(statistics.median(acked), 3) if acked else None,
        "max_checkpoint_acked_s": round(max(acked), 3) if acked else None,
        "checkpoint_committed_s": round(statistics.median(committed), 3) if committed else None,
        "max_checkpoint_committed_s": round(max(committed), 3) if committed else None,
        "kafka_commit_s": round(statistics.median(c["seconds"] for c in commits), 3) if commits else None,
        "max_kafka_commit_s": round(max(c["seconds"] for c in commits), 3) if commits else None,
        "max_commit_records": max((c["records"] for c in commits), default=None),
        "max_commit_bytes": max((c["bytes"] for c in commits), default=None),
        "records_read": len(indices), "duplicates": len(indices) - len(unique), "missing": args.events - len(unique & set(range(args.events))),
        "verified": verified,
    }
    admin.delete_topics([topic], operation_timeout=30)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--interval-ms", type=int, default=1000)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=int, default=0, help="records per second over all subtasks (0: as fast as it goes)")
    parser.add_argument("--guarantees", default="AT_LEAST_ONCE,EXACTLY_ONCE")
    parser.add_argument("--provider", choices=["local", "spark"], default="local")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    commit_log = CommitLog()
    sink_log = logging.getLogger("runtime.api.connectors.kafka_sink")
    sink_log.setLevel(logging.INFO)
    sink_log.addHandler(commit_log)
    sink_log.propagate = False
    guarantees = [DeliveryGuarantee[g] for g in args.guarantees.split(",")]
    runs: dict[DeliveryGuarantee, list[dict[str, Any]]] = {g: [] for g in guarantees}
    fetch_jars()
    with (tempfile.TemporaryDirectory() as tmp, KafkaServer(f"{tmp}/kafka") as broker,
          bench_cluster(args.provider, "millrace-kafka-sink-bench") as cluster):
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for r in range(args.rounds):
            for g in guarantees if r % 2 == 0 else list(reversed(guarantees)):
                runs[g].append(run(cluster, broker.bootstrap_servers, admin, g, args, tmp, commit_log))
    rows = []
    for g, done in runs.items():
        median = sorted(done, key=lambda x: x["events_per_s"])[len(done) // 2]
        rows.append(emit({
            "guarantee": g.name, "events": args.events, "rate": args.rate or None, "record_bytes": args.record_bytes, "interval_ms": args.interval_ms,
            "parallelism": args.parallelism, "events_per_s": round(median["events_per_s"]),
            "events_per_s_rounds": [round(x["events_per_s"]) for x in done],
            **{k: v for k, v in median.items() if k not in ("events_per_s", "seconds")},
            "verified": all(x["verified"] for x in done),
        }))
    return require(rows)


if __name__ == "__main__":
    sys.exit(main())
