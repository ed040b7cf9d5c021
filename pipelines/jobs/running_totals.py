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

Live (`--streaming`): the same operator (uid "running-totals") fed by an unbounded, rate-limited
generator that continues the daily events from `--start-day` on, appending to the output; restored
from the last day's savepoint it continues the totals. Sources and sinks have their own uids per
day and mode, so only the totals are taken from a savepoint (the rest is skipped, as with
--allow-non-restored-state); a savepoint without the totals is refused.

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

from pipelines.jobs.daily_events import DAY_MS, EVENT_COLUMNS, day_index, day_name, day_start_ms, event_columns
from runtime.api.common import Configuration, Row, TimestampAssigner, Types, WatermarkStrategy
from runtime.api.connectors.base import RateLimiterStrategy
from runtime.api.connectors.delta import DeltaSink
from runtime.api.connectors.delta_source import DeltaSource
from runtime.api.connectors.generator import DataGeneratorSource
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
EVENT_TYPE = Types.ROW_NAMED(list(EVENT_COLUMNS), [Types.LONG(), Types.LONG(), Types.LONG()])
COUNTS = Types.TUPLE([Types.LONG(), Types.LONG()])

# operator uids: the state in a savepoint is keyed by them (change them and the state is lost). A
# day's source is a new source every day (uid with the day): yesterday's read position is not
# today's, so its state is left behind on restore; the totals must be there (checked up front).
TOTALS_UID = "running-totals"
DAILY_SINK_UID = "daily-totals-sink"
LIVE_SOURCE_UID, LIVE_SINK_UID = "live-events", "live-totals-sink"


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


class LiveEvents:
    """The daily events' generator from global index `first` on (an unbounded continuation)."""

    def __init__(self, first: int, events_per_day: int) -> None:
        self.first, self.events_per_day = first, events_per_day

    def columns(self, i: np.ndarray) -> dict[str, np.ndarray]:
        return event_columns(i + self.first, self.events_per_day)

    def __call__(self, i: int) -> Row:
        cols = self.columns(np.array([i], dtype=np.int64))
        return Row(**{c: int(cols[c][0]) for c in EVENT_COLUMNS})


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


def build_live(env: StreamExecutionEnvironment, start_day: str, events_per_day: int, rate: int, output: str, checkpoint_interval_ms: int) -> None:
    """Unbounded: the events from `start_day` on at `rate` per second -> totals appended to `output`."""
    if events_per_day < 1 or rate < 1:
        raise InvalidProgramError(f"running_totals --streaming: events_per_day and rate must be >= 1, got {events_per_day}, {rate}")
    env.enable_checkpointing(checkpoint_interval_ms, CheckpointingMode.EXACTLY_ONCE)
    live = LiveEvents(day_index(start_day) * events_per_day, events_per_day)
    source = DataGeneratorSource(
        live, 2**62, EVENT_TYPE, rate_limiter_strategy=RateLimiterStrategy.per_second(rate), batch_generator=live.columns
    )
    events = env.from_source(source, WatermarkStrategy.no_watermarks(), "live events").uid(LIVE_SOURCE_UID).set_parallelism(1)
    _totals(events).sink_to(DeltaSink(output, schema=OUTPUT_SCHEMA, partition_by="day")).name("delta: running_totals (live)").uid(LIVE_SINK_UID)


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
    parser.add_argument("--input", help="daily: the daily_events Delta table")
    parser.add_argument("--savepoint", default=None, help="restore the totals from this savepoint (e.g. the previous day's)")
    parser.add_argument("--savepoint-dir", default=None, help="where the final savepoint goes (default <warehouse>/_savepoints/running_totals)")
    parser.add_argument("--streaming", action="store_true", help="read the unbounded live events instead of one day")
    parser.add_argument("--start-day", help="--streaming: the first day of live events (the day after the savepoint's)")
    parser.add_argument("--events-per-day", type=int, default=100_000, help="--streaming: events per day of the generator")
    parser.add_argument("--rate", type=int, default=1_000, help="--streaming: events per second")
    parser.add_argument("--checkpoint-interval-ms", type=int, default=1_000, help="--streaming: checkpoint interval")
    args = parser.parse_args(argv)
    if args.streaming and not args.start_day:
        parser.error("--streaming needs --start-day")
    if not args.streaming and not (args.day and args.input):
        parser.error("a daily run needs --day and --input (or use --streaming)")
    conf = configure(args.savepoint, args.savepoint_dir, stop_at_end=not args.streaming)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    if args.streaming:
        build_live(env, args.start_day, args.events_per_day, args.rate, args.output, args.checkpoint_interval_ms)
    else:
        build_daily(env, args.day, args.input, args.output)
    env.execute(live_job_name(args.start_day) if args.streaming else JOB_NAME)


if __name__ == "__main__":
    main()
