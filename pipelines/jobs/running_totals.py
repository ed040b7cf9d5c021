"""Running totals per user since the beginning of time, carried from day to day by savepoints.

For every user: the number of events and the sum of `value` since 2026-01-01. One output row per
user that had events on a day, `(user_id, day, events_total, value_total)`, with the totals through
the end of that day, to a Delta table (partitioned by `day`) through the exactly-once sink.

Daily (the `running_totals` asset runs this once per day):
    millrace run pipelines/jobs/running_totals.py --day 2026-01-02 --input warehouse/daily_events \
        --output warehouse/running_totals --savepoint <day 2026-01-01's savepoint>
reads that day's partition of the daily_events table, restores the totals from `--savepoint`
(the first day starts empty), replaces that day's rows in the output, and at the end of the
day's input stops with a drained savepoint (execution.end-of-input.savepoint: every user's day
timer fires, then the totals are saved for the next day). The job's result names the savepoint
(accumulator `savepoint_path`).

Live (`--streaming`): the same operator (uid "running-totals") fed by a continuous DeltaSource
that follows the `live_events` table (pipelines/live_events.py: the daily events continued,
appended commit by commit), appending to the output; event time from `ts_ms`. Restored from the
daily savepoint of day D-1 it continues the totals from the first version of the live table that
holds events of day D (`--start-day`), or from `--starting-version`; events before D are dropped
(the daily savepoints counted them). Restored from a live job's savepoint or checkpoint, the
source reads on from the positions in it (the next version to read, and per unfinished file the
rows done): exactly once. Sources and sinks have their own uids per day and mode, so from a daily
savepoint only the totals are taken (the rest is skipped, as with --allow-non-restored-state); a
savepoint without the totals is refused, and so is a live savepoint without the live table's
read positions.

    millrace run pipelines/jobs/running_totals.py --streaming --input warehouse/live_events \
        --start-day 2026-01-03 --output warehouse/running_totals --savepoint <day 2026-01-02's savepoint>

Live from Kafka (`--streaming --source kafka --bootstrap-servers ... --topic live_events`): the
same, reading a topic that pipelines/jobs/events_to_kafka.py (the Dagster job
`events_to_kafka_job`) fills with the daily events, JSON rows timestamped with their ts_ms; from a
daily savepoint it starts at the first record of --start-day by Kafka timestamp, from a live one at
the offsets in it.

Per user the state is the totals of the days already emitted plus the events of days not yet
emitted (a map day -> counts): a day's row is emitted by an event-time timer at the end of that
day, so events of the next day that arrive before the watermark passes midnight never leak into
the previous day's totals.
"""
from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa

from pipelines.jobs.daily_events import DAY_MS, EVENT_COLUMNS, day_index, day_name, day_start_ms
from pipelines.live_events import first_version_of_day
from runtime.api.common import Configuration, Row, TimestampAssigner, Types, WatermarkStrategy
from runtime.api.common.serialization import JsonRowDeserializationSchema
from runtime.api.connectors.delta import DeltaSink
from runtime.api.connectors.delta_source import DeltaSource
from runtime.api.connectors.kafka_source import KafkaOffsetsInitializer, KafkaSource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.datastream.functions import KeyedProcessFunction, RuntimeContext
from runtime.api.datastream.state import MapStateDescriptor, ValueStateDescriptor
from runtime.core.checkpoint import (
    END_OF_INPUT_SAVEPOINT_KEY,
    SAVEPOINT_IGNORE_UNCLAIMED_KEY,
    SAVEPOINT_PATH_KEY,
    SAVEPOINTS_DIR_KEY,
    CheckpointingMode,
)
from runtime.core.errors import InvalidProgramError

JOB_NAME = "running_totals"
LIVE_JOB_NAME = "running_totals_live"
_LIVE_FROM = "-from-"


def live_job_name(start_day: str) -> str:
    """The live job's Millrace name says where its events start: a restore must start there again."""
    day_index(start_day)
    return f"{LIVE_JOB_NAME}{_LIVE_FROM}{start_day}"


def live_start_day(job_name: str) -> str | None:
    """The start day in a live job's name; None for other jobs."""
    prefix = LIVE_JOB_NAME + _LIVE_FROM
    return job_name[len(prefix):] if job_name.startswith(prefix) else None
OUTPUT_COLUMNS = ("user_id", "day", "events_total", "value_total")
OUTPUT_SCHEMA = pa.schema(
    [("user_id", pa.int64()), ("day", pa.string()), ("events_total", pa.int64()), ("value_total", pa.int64())]
)
OUTPUT_TYPE = Types.ROW_NAMED(list(OUTPUT_COLUMNS), [Types.LONG(), Types.STRING(), Types.LONG(), Types.LONG()])
COUNTS = Types.TUPLE([Types.LONG(), Types.LONG()])

# operator uids: the state in a savepoint is keyed by them (change them and the state is lost). A
# day's source is a new source every day (uid with the day): yesterday's read position is not
# today's, so its state is left behind on restore; the totals must be there (checked up front).
TOTALS_UID = "running-totals"
DAILY_SINK_UID = "daily-totals-sink"
# the live source reads the live_events table; "live-events" was the generator that fed the live job
# before: its savepoints hold no position in the table (refused, see restores_live_positions)
LIVE_SOURCE_UID, LIVE_SINK_UID = "live-events-table", "live-totals-sink"
LIVE_KAFKA_SOURCE_UID = "live-events-kafka"  # --source kafka: the topic's offsets
EVENT_TYPE = Types.ROW_NAMED(list(EVENT_COLUMNS), [Types.LONG()] * len(EVENT_COLUMNS))


def daily_source_uid(day: str) -> str:
    return f"daily-events-{day}"


class RunningTotals(KeyedProcessFunction):
    """Per user: `totals` = (events, value) through the last emitted day; `pending` = day -> (events, value)."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.totals = runtime_context.get_state(ValueStateDescriptor("totals", COUNTS))
        self.pending = runtime_context.get_map_state(MapStateDescriptor("pending", Types.LONG(), COUNTS))

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> None:
        d = int(value.ts_ms) // DAY_MS
        events, total = self.pending.get(d) or (0, 0)
        self.pending.put(d, (events + 1, total + int(value.value)))
        ctx.timer_service().register_event_time_timer((d + 1) * DAY_MS - 1)  # the day's last ms

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Iterable[Row]:
        d = (timestamp + 1) // DAY_MS - 1
        counts = self.pending.get(d)
        if counts is None:
            return
        events, total = self.totals.value() or (0, 0)
        events, total = events + counts[0], total + counts[1]
        self.totals.update((events, total))
        self.pending.remove(d)
        epoch_day0 = int(day_start_ms(0)) // DAY_MS
        yield Row(user_id=ctx.get_current_key(), day=day_name(d - epoch_day0), events_total=events, value_total=total)


class DropBefore:
    """Keeps the events at or after `start_ms` (a batch function: the events before it were counted by the daily savepoint)."""

    def __init__(self, start_ms: int) -> None:
        self.start_ms = start_ms

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        keep = batch["ts_ms"] >= self.start_ms
        return batch if keep.all() else {c: v[keep] for c, v in batch.items()}


def configure(savepoint: str | None, savepoint_dir: str | None, stop_at_end: bool) -> Configuration:
    """Restore from `savepoint` (which must hold the totals; the old sources' and sinks' state is
    skipped), final savepoints into `savepoint_dir`, and with `stop_at_end` a savepoint at the end
    of the input."""
    conf = Configuration()
    if savepoint:
        require_totals(savepoint)
        conf.set_string(SAVEPOINT_PATH_KEY, savepoint)
        conf.set_string(SAVEPOINT_IGNORE_UNCLAIMED_KEY, "true")
    if savepoint_dir:
        conf.set_string(SAVEPOINTS_DIR_KEY, savepoint_dir)
    if stop_at_end:
        conf.set_string(END_OF_INPUT_SAVEPOINT_KEY, "true")
    return conf


def require_totals(savepoint: str) -> None:
    """InvalidProgramError unless the savepoint holds the running-totals operator's state."""
    from runtime.storage.savepoints import read_savepoint

    try:
        operators = set(read_savepoint(savepoint).parallelism)
    except Exception as e:  # a missing or broken savepoint: say which
        raise InvalidProgramError(f"running_totals: cannot read the savepoint {savepoint}: {e}") from e
    if TOTALS_UID not in operators:
        raise InvalidProgramError(
            f"running_totals: the savepoint {savepoint} holds no state of operator '{TOTALS_UID}' "
            f"(it has {sorted(operators) or 'none'}): it is not a running_totals savepoint"
        )


def build_daily(env: StreamExecutionEnvironment, day: str, input_path: str, output: str) -> DeltaSource:
    """One day: that day's partition of the events table -> totals -> that day's rows of `output`."""
    day_index(day)  # a clear error for a bad day
    env.get_configuration().set_string(END_OF_INPUT_SAVEPOINT_KEY, "true")
    source = DeltaSource.for_path(input_path, columns=list(EVENT_COLUMNS), partition_filter={"day": day})
    if not source.snapshot.files:
        raise InvalidProgramError(f"running_totals: {input_path} has no events for day {day} (materialize daily_events for {day} first)")
    # parallelism 1: the day's files are read in time order, so watermarks need no out-of-orderness
    events = env.from_source(source, WatermarkStrategy.no_watermarks(), "daily events").uid(daily_source_uid(day)).set_parallelism(1)
    _totals(events).sink_to(
        DeltaSink(output, schema=OUTPUT_SCHEMA, mode="overwrite", partition_by="day", replace_where={"day": day})
    ).name("delta: running_totals").uid(DAILY_SINK_UID)
    return source


def restores_kafka_offsets(savepoint: str | None) -> bool:
    """True if `savepoint` holds the Kafka live source's offsets (a `--source kafka` live job's): the
    restored source reads on from them. False for a daily savepoint (or none): the source starts at
    the first record of the start day, by Kafka timestamp. A live savepoint of the table-following
    job is refused: where its totals end in the topic is unknown."""
    operators = _savepoint_operators(savepoint)
    if LIVE_KAFKA_SOURCE_UID in operators:
        return True
    if LIVE_SINK_UID in operators:
        raise InvalidProgramError(
            f"running_totals --source kafka: {savepoint} was taken by a live job that did not read the topic "
            f"(no state of '{LIVE_KAFKA_SOURCE_UID}'), so where its totals end in the topic is unknown; restore from the newest "
            "daily savepoint instead (the live job then starts at the first event of the day after it)"
        )
    return False


def _savepoint_operators(savepoint: str | None) -> set[str]:
    if not savepoint:
        return set()
    from runtime.storage.savepoints import read_savepoint

    try:
        return set(read_savepoint(savepoint).parallelism)
    except Exception as e:  # a missing or broken savepoint: say which
        raise InvalidProgramError(f"running_totals: cannot read the savepoint {savepoint}: {e}") from e


def restores_live_positions(savepoint: str | None) -> bool:
    """True if `savepoint` (or checkpoint) holds the live source's read positions in the live events
    table (a live job's): the restored source continues exactly there. False for a daily savepoint (or
    none). A live savepoint without them (taken when the live job read a generator) is refused: its
    totals count events up to a position that is not in the table."""
    operators = _savepoint_operators(savepoint)
    if LIVE_SOURCE_UID in operators:
        return True
    if LIVE_SINK_UID in operators:
        raise InvalidProgramError(
            f"running_totals --streaming: {savepoint} was taken by a live job that did not read the live events table "
            f"(no state of '{LIVE_SOURCE_UID}'), so where its totals end in that table is unknown; restore from the newest "
            "daily savepoint instead (the live job then starts at the first version of the day after it)"
        )
    return False


def live_starting_version(events_path: str, start_day: str, savepoint: str | None, starting_version: int | None = None) -> int | None:
    """Where the live source starts reading `events_path`: None from a live savepoint or checkpoint
    (the restored source continues from its read positions); else (a daily savepoint of the day
    before `start_day`, or none) `starting_version`, or the first version holding events of `start_day`."""
    if restores_live_positions(savepoint):
        return None
    if starting_version is not None:
        return starting_version
    try:
        return first_version_of_day(events_path, start_day)
    except Exception as e:  # no table, a bad day, a cleaned-up log
        raise InvalidProgramError(f"running_totals --streaming: cannot find where {start_day} starts in {events_path}: {e}") from e


def build_live(
    env: StreamExecutionEnvironment,
    events_path: str,
    start_day: str,
    output: str,
    starting_version: int | None,
    checkpoint_interval_ms: int = 1_000,
    discovery_interval_ms: int = 1_000,
) -> DeltaSource:
    """Unbounded: the live events table's commits from `starting_version` on (None: from the read
    positions of the savepoint the job restores; see live_starting_version), events from `start_day`
    on -> totals appended to `output`."""
    start_ms = int(day_start_ms(day_index(start_day)))
    if starting_version is None and not env.get_configuration().get_string(SAVEPOINT_PATH_KEY, ""):
        raise InvalidProgramError("running_totals --streaming: no starting version and no savepoint to take the read positions from")
    env.enable_checkpointing(checkpoint_interval_ms, CheckpointingMode.EXACTLY_ONCE)
    source = (
        DeltaSource.for_table(events_path).columns(list(EVENT_COLUMNS)).continuous(discovery_interval_ms)
        # restored, the enumerator's state replaces the starting point: "latest" is not used then
        .starting_version("latest" if starting_version is None else starting_version).build()
    )
    # parallelism 1: the table's files are read in version (= time) order, so watermarks need no out-of-orderness
    events = (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "live events").uid(LIVE_SOURCE_UID).set_parallelism(1)
        .map_batches(DropBefore(start_ms), output_type=source.get_type_info()).name(f"events from {start_day}").set_parallelism(1)
    )
    _totals(events).sink_to(DeltaSink(output, schema=OUTPUT_SCHEMA, partition_by="day")).name("delta: running_totals (live)").uid(LIVE_SINK_UID)
    return source


def build_live_kafka(
    env: StreamExecutionEnvironment,
    bootstrap_servers: str,
    topic: str,
    start_day: str,
    output: str,
    savepoint: str | None,
    checkpoint_interval_ms: int = 1_000,
    group_id: str = LIVE_JOB_NAME,
) -> KafkaSource:
    """Unbounded, `--source kafka`: the events of a topic (JSON rows user_id, value, ts_ms, each
    record's Kafka timestamp its ts_ms, as pipelines/jobs/events_to_kafka.py writes them) -> totals
    appended to `output`. Restored from a live Kafka savepoint it reads on from its offsets; from a
    daily savepoint (day D-1) it starts at the first record of `start_day` by timestamp. One
    partition (or a topic whose partitions each hold whole days in order): a day ends for every
    partition before the next begins, so no event is late for its day."""
    start_ms = int(day_start_ms(day_index(start_day)))
    restored = restores_kafka_offsets(savepoint)
    env.enable_checkpointing(checkpoint_interval_ms, CheckpointingMode.EXACTLY_ONCE)
    source = (
        KafkaSource.builder().set_bootstrap_servers(bootstrap_servers).set_topics(topic).set_group_id(group_id)
        # restored, the readers' offsets replace the starting point
        .set_starting_offsets(KafkaOffsetsInitializer.timestamp(start_ms) if not restored else KafkaOffsetsInitializer.earliest())
        .set_value_only_deserializer(JsonRowDeserializationSchema.builder().type_info(EVENT_TYPE).build())
        .build()
    )
    events = (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "live events (kafka)").uid(LIVE_KAFKA_SOURCE_UID).set_parallelism(1)
        .map_batches(DropBefore(start_ms), output_type=EVENT_TYPE).name(f"events from {start_day}").set_parallelism(1)
    )
    _totals(events).sink_to(DeltaSink(output, schema=OUTPUT_SCHEMA, partition_by="day")).name("delta: running_totals (live)").uid(LIVE_SINK_UID)
    return source


def _totals(events: Any) -> Any:
    watermarks = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(TimestampAssigner.from_field("ts_ms"))
    return (
        events.assign_timestamps_and_watermarks(watermarks)
        .key_by(lambda e: e.user_id, key_type=Types.LONG())
        .process(RunningTotals(), output_type=OUTPUT_TYPE)
        .name("running totals per user")
        .uid(TOTALS_UID)
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, help="the output Delta table (partitioned by day)")
    parser.add_argument("--day", help="daily: the day to process (YYYY-MM-DD)")
    parser.add_argument("--input", help="the daily_events Delta table (daily), the live_events table (--streaming)")
    parser.add_argument("--savepoint", default=None, help="restore the totals from this savepoint (e.g. the previous day's)")
    parser.add_argument("--savepoint-dir", default=None, help="where the final savepoint goes (default <warehouse>/_savepoints/running_totals)")
    parser.add_argument("--streaming", action="store_true", help="follow the live events table instead of reading one day")
    parser.add_argument("--start-day", help="--streaming: the first day of live events (the day after the savepoint's)")
    parser.add_argument("--starting-version", type=int, default=None,
                        help="--streaming from a daily savepoint: the live table's version to start at (default: the first holding --start-day)")
    parser.add_argument("--discovery-interval-ms", type=int, default=1_000, help="--streaming: how often to look for new commits")
    parser.add_argument("--checkpoint-interval-ms", type=int, default=1_000, help="--streaming: checkpoint interval")
    parser.add_argument("--source", choices=["delta", "kafka"], default="delta",
                        help="--streaming: follow the live_events table (delta) or read a Kafka topic (kafka)")
    parser.add_argument("--bootstrap-servers", help="--source kafka: the brokers, e.g. 127.0.0.1:9092")
    parser.add_argument("--topic", default="live_events", help="--source kafka: the topic the events are in")
    args = parser.parse_args(argv)
    if args.streaming and args.source == "kafka":
        if not args.start_day or not args.bootstrap_servers:
            parser.error("--source kafka needs --start-day and --bootstrap-servers")
        conf = configure(args.savepoint, args.savepoint_dir, stop_at_end=False)
        env = StreamExecutionEnvironment.get_execution_environment(conf)
        build_live_kafka(env, args.bootstrap_servers, args.topic, args.start_day, args.output, args.savepoint, args.checkpoint_interval_ms)
        env.execute(live_job_name(args.start_day))
        return
    if not args.input:
        parser.error("--input is required (daily: the daily_events table; --streaming: the live_events table)")
    if args.streaming and not args.start_day:
        parser.error("--streaming needs --start-day")
    if not args.streaming and not args.day:
        parser.error("a daily run needs --day (or use --streaming)")
    conf = configure(args.savepoint, args.savepoint_dir, stop_at_end=not args.streaming)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    if args.streaming:
        start = live_starting_version(args.input, args.start_day, args.savepoint, args.starting_version)
        build_live(env, args.input, args.start_day, args.output, start, args.checkpoint_interval_ms, args.discovery_interval_ms)
    else:
        build_daily(env, args.day, args.input, args.output)
    env.execute(live_job_name(args.start_day) if args.streaming else JOB_NAME)


if __name__ == "__main__":
    main()
