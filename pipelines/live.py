"""The live running_totals job on a session cluster, its input, and its savepoint lifecycle.

- `live_events` (asset; `live_events_schedule` runs it every minute, off by default): appends the
  next events to the Delta table `<warehouse>/live_events` (pipelines/live_events.py: the daily
  events continued, from the day after the newest day of daily_events; idempotent, resumable
  appends). `python -m pipelines.live_events --rate ...` is the same appender as a long-running
  process, for a live stream at a steady rate.
- `start_live_running_totals`: submits pipelines/jobs/running_totals.py --streaming detached: a
  continuous DeltaSource following live_events, restored from the newest registered savepoint (a
  day's, or a live one), or from `restore_from` (the restore sensor passes the failed job's latest
  checkpoint). From a live savepoint or checkpoint it reads on from the positions in it (exactly
  once); from a daily savepoint of day D-1 it starts at the first version of live_events holding
  day D (or `starting_version`). Its Millrace name `running_totals_live-from-<day>` says the first
  day of its live events.
- `savepoint_live_jobs` (and the hourly `savepoint_live_jobs_schedule`): a savepoint of every
  running live job, registered; then retention: per job only the newest `keep` savepoints stay,
  the older ones are disposed (files and registry rows).
- `stop_live_with_savepoint`: stops the live job(s) with a savepoint, registered, and waits until
  the job FINISHED (the savepoint is reported before the job ended).
- `millrace_restore_sensor`: a live job found FAILED is started again from its latest checkpoint
  or savepoint, at most 3 times per hour; each restart is reported in the sensor's log and in the
  run it launches.

All use the `millrace_session` resource (a session cluster) and the savepoint registry.
No `from __future__ import annotations` here: Dagster reads the Config classes' annotations.
"""
import json
import time
from typing import Any

from dagster import (
    AssetExecutionContext,
    Config,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    Failure,
    MaterializeResult,
    OpExecutionContext,
    RunRequest,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SkipReason,
    asset,
    define_asset_job,
    job,
    op,
    schedule,
    sensor,
)
from pydantic import Field

from pipelines import live_events as events
from pipelines.assets import delta_table_metadata
from pipelines.daily_totals import EVENTS_TABLE, GROUP, TOTALS_TABLE, daily_events
from pipelines.jobs import running_totals as program
from pipelines.jobs.daily_events import day_index, day_name
from pipelines.savepoint_registry import LIVE_PREFIX, SavepointEntry, SavepointRegistry, live_partition
from resources.millrace import MillraceClusterResource
from resources.warehouse import DeltaWarehouseResource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.errors import ConfigurationError, InvalidProgramError, StorageError
from runtime.core.states import JobStatus

RESTARTS_PER_HOUR = 3
HOUR_S = 3600.0
STOP_TIMEOUT_S = 60.0  # how long a stop waits for its job to end after the savepoint
EVENTS_PER_MINUTE = 60_000  # what the schedule appends every minute: 1,000 events per second


class LiveEventsConfig(Config):
    events: int = Field(default=EVENTS_PER_MINUTE, ge=1, description="events to append, continuing where the table's appends ended")
    events_per_day: int = Field(default=100_000, ge=1, description="events in one day, as daily_events' (one value per table)")
    start_day: str = Field(
        default="", description="first append only: the first day of live events; empty: the day after the newest day of daily_events"
    )


class LiveRunningTotalsConfig(Config):
    parallelism: int = Field(default=2, ge=1, description="parallelism of the Millrace job")
    checkpoint_interval_ms: int = Field(default=10_000, ge=100, description="checkpoint interval of the live job")
    discovery_interval_ms: int = Field(default=1_000, ge=10, description="how often the job looks for new commits of live_events")
    starting_version: int | None = Field(
        default=None, ge=0,
        description="from a daily savepoint only: the version of live_events to start at; empty: the first version holding the start day's "
        "events (a live savepoint or checkpoint holds its own read positions)",
    )
    restart_attempts: int = Field(
        default=3, ge=0, description="restarts inside Millrace before the job FAILS (then the restore sensor takes over)"
    )
    source: str = Field(
        default="delta", pattern="^(delta|kafka)$",
        description="delta: follow the live_events table; kafka: read the topic events_to_kafka_job feeds",
    )
    bootstrap_servers: str = Field(default="", description="source kafka: the brokers, e.g. 127.0.0.1:9092")
    topic: str = Field(default="live_events", description="source kafka: the topic of the events")
    restore_from: str = Field(default="", description="restore from this savepoint or checkpoint; empty: the newest registered savepoint")
    start_day: str = Field(default="", description="with restore_from: the first day of the live events of the job it continues")
    reason: str = Field(default="", description="why this run starts the job (the restore sensor says which job failed)")


class LiveSavepointConfig(Config):
    keep: int = Field(default=7, ge=1, description="savepoints kept per job; older ones are disposed")
    drain: bool = Field(default=False, description="stop only: emit a final MAX watermark first (every open day is emitted)")


def live_jobs(millrace: MillraceClusterResource) -> list[dict[str, Any]]:
    """Running (not ended) live jobs of the session cluster."""
    return [
        j for j in millrace.get_client().list_jobs()
        if program.live_start_day(str(j.get("name", ""))) is not None and not JobStatus(j["state"]).is_globally_terminal
    ]


def start_point(registry: SavepointRegistry, restore_from: str, start_day: str) -> tuple[str, str]:
    """(savepoint to restore, first live day): given, or the newest registered savepoint."""
    if restore_from:
        if not start_day:
            raise Failure(description="restore_from needs start_day: the first day of live events of the job it continues")
        return restore_from, start_day
    newest = registry.newest(program.JOB_NAME, program.LIVE_JOB_NAME)
    if newest is None:
        raise Failure(description=f"no savepoint in {registry.path}: materialize running_totals for at least one day first")
    if newest.partition.startswith(LIVE_PREFIX):
        return newest.path, newest.partition[len(LIVE_PREFIX):]
    return newest.path, day_name(day_index(newest.partition) + 1)  # the day after the last daily savepoint


def newest_daily_day(warehouse: DeltaWarehouseResource) -> str | None:
    """The newest day partition of daily_events (None without the table or its days)."""
    path = warehouse.table_path(EVENTS_TABLE)
    if warehouse.table_version(path) is None:
        return None
    days = [str(f.partition_values.get("day")) for f in warehouse.snapshot(path).files]
    return max(days) if days else None


@asset(
    group_name=GROUP,
    kinds={"python", "delta"},
    deps=[daily_events],
    description="The daily events continued, appended to the Delta table live_events (the live running_totals job follows it).",
)
def live_events(context: AssetExecutionContext, config: LiveEventsConfig, warehouse: DeltaWarehouseResource) -> MaterializeResult:
    path, opts = warehouse.table_path(events.TABLE), warehouse.options()
    start_day = config.start_day or None
    if events.next_index(path, config.events_per_day, opts) is None and start_day is None:
        newest = newest_daily_day(warehouse)
        if newest is None:
            raise Failure(description=f"live_events: the first append needs start_day, or daily_events in {warehouse.table_path(EVENTS_TABLE)}")
        start_day = day_name(day_index(newest) + 1)
    try:
        appended = events.append(path, config.events, config.events_per_day, start_day, opts)
    except ConfigurationError as e:
        raise Failure(description=str(e)) from e
    first, end = appended[0].first, appended[-1].end
    context.log.info(f"{path}: events {first:,} to {end - 1:,} appended ({', '.join(f'{a.day}: version {a.version}' for a in appended)})")
    return MaterializeResult(
        metadata={
            "first_index": first, "end_index": end, "events": end - first, "days": ", ".join(a.day for a in appended),
            "versions": ", ".join(str(a.version) for a in appended), **delta_table_metadata(warehouse, path),
        }
    )


live_events_job = define_asset_job("live_events_job", selection=[live_events], description="Append the next live events.")


@schedule(
    job=live_events_job,
    cron_schedule="* * * * *",
    execution_timezone="UTC",
    default_status=DefaultScheduleStatus.STOPPED,
    description=f"Every minute: append {EVENTS_PER_MINUTE:,} live events (1,000 per second) for the live running_totals job.",
)
def live_events_schedule(context: ScheduleEvaluationContext) -> Any:
    return RunRequest(run_key=f"live-events-{context.scheduled_execution_time.isoformat()}")


@op(description="Submit the live running_totals job (following live_events) to the session cluster, restored from the newest registered savepoint.")
def start_live_running_totals(
    context: OpExecutionContext, config: LiveRunningTotalsConfig, millrace_session: MillraceClusterResource, warehouse: DeltaWarehouseResource
) -> str:
    running = live_jobs(millrace_session)
    if running:
        raise Failure(description=f"a live running_totals job is already running: {', '.join(j['jid'] + ' ' + j['name'] for j in running)}")
    if config.reason:
        context.log.warning(config.reason)
    restore, start_day = start_point(SavepointRegistry(warehouse), config.restore_from, config.start_day)
    name = program.live_job_name(start_day)
    events_path = warehouse.table_path(events.TABLE)
    kafka = config.source == "kafka"
    try:
        env = StreamExecutionEnvironment.get_execution_environment(
            program.configure(restore, warehouse.savepoint_path(program.LIVE_JOB_NAME), stop_at_end=False)
        )
        env.set_parallelism(config.parallelism)
        if config.restart_attempts:
            env.configure({"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": str(config.restart_attempts),
                           "restart-strategy.fixed-delay.delay": "1 s"})
        else:
            env.configure({"restart-strategy.type": "none"})
        if kafka:
            if not config.bootstrap_servers:
                raise InvalidProgramError("source kafka needs bootstrap_servers")
            events_path = f"kafka topic {config.topic} on {config.bootstrap_servers}"
            program.build_live_kafka(env, config.bootstrap_servers, config.topic, start_day, warehouse.table_path(TOTALS_TABLE), restore,
                                     config.checkpoint_interval_ms)
            starting = None if program.restores_kafka_offsets(restore) else -1
        else:
            events.create(events_path, warehouse.options())  # the job may start before the first append
            starting = program.live_starting_version(events_path, start_day, restore, config.starting_version)
            program.build_live(env, events_path, start_day, warehouse.table_path(TOTALS_TABLE), starting,
                               config.checkpoint_interval_ms, config.discovery_interval_ms)
    except (InvalidProgramError, StorageError) as e:
        raise Failure(description=f"cannot start {name}: {e}") from e
    if starting is None:
        reads_from = "the read positions in the restored state"
    else:
        reads_from = f"the first record of {start_day} (by Kafka timestamp)" if kafka else f"version {starting}"
    if starting is None and config.starting_version is not None:
        context.log.warning(f"starting_version {config.starting_version} ignored: {restore} holds the live job's read positions")
    submitted = millrace_session.get_client().submit(env.get_job_graph(name), detached=True, context=context)
    context.log.info(f"live job {submitted.job_id} '{name}' restored from {restore}, live events from {start_day}, {events_path} from {reads_from}")
    context.add_output_metadata({
        "millrace_job_id": submitted.job_id, "millrace_job_name": name, "restored_from": restore, "start_day": start_day,
        "live_events": events_path, "reads_from": reads_from,
    })
    return submitted.job_id


def _register(context: OpExecutionContext, registry: SavepointRegistry, job_name: str, path: str) -> SavepointEntry:
    from runtime.storage.savepoints import read_savepoint

    start = program.live_start_day(job_name)
    entry = SavepointEntry.of(program.LIVE_JOB_NAME, live_partition(start or "unknown"), read_savepoint(path))
    registry.register(entry)
    context.log.info(f"registered savepoint {entry.checkpoint_id} of '{job_name}' ({entry.state_bytes:,} bytes): {path}")
    return entry


@op(description="Take a savepoint of every running live job and register it.")
def savepoint_live(context: OpExecutionContext, millrace_session: MillraceClusterResource, warehouse: DeltaWarehouseResource) -> list[str]:
    registry = SavepointRegistry(warehouse)
    client = millrace_session.get_client()
    paths = []
    for j in live_jobs(millrace_session):
        path = client.trigger_savepoint(j["jid"], warehouse.savepoint_path(program.LIVE_JOB_NAME), context=context)
        paths.append(_register(context, registry, j["name"], path).path)
    if not paths:
        context.log.info("no live running_totals job is running: no savepoint taken")
    context.add_output_metadata({"savepoints": len(paths), "paths": "\n".join(paths) or "none"})
    return paths


def dispose_old(registry: SavepointRegistry, keep: int, log: Any) -> list[str]:
    """Per job, dispose every registered savepoint but the newest `keep` (files, then the registry row)."""
    from runtime.storage.savepoints import dispose_savepoint

    disposed = []
    for job_name in sorted({e.job for e in registry.entries()}):
        for entry in registry.entries(job_name)[keep:]:
            try:
                dispose_savepoint(entry.path)
            except StorageError as e:
                # already gone (disposed by hand) is fine; anything else keeps the row to try again
                if "holds no savepoint" not in str(e) and "cannot read" not in str(e):
                    log.warning(f"could not dispose {entry.path}: {e}")
                    continue
            registry.remove(entry)
            disposed.append(entry.path)
            log.info(f"disposed savepoint {entry.checkpoint_id} of {job_name} ({entry.partition}): {entry.path}")
    return disposed


@op(description="Retention: dispose every registered savepoint but the newest `keep` per job.")
def dispose_old_savepoints(
    context: OpExecutionContext, config: LiveSavepointConfig, warehouse: DeltaWarehouseResource, after: list[str] | None = None
) -> list[str]:
    disposed = dispose_old(SavepointRegistry(warehouse), config.keep, context.log)
    context.add_output_metadata({"disposed": len(disposed), "paths": "\n".join(disposed) or "none"})
    return disposed


@op(description="Stop every running live job with a savepoint (the job FINISHES) and register the savepoint.")
def stop_live(
    context: OpExecutionContext, config: LiveSavepointConfig, millrace_session: MillraceClusterResource, warehouse: DeltaWarehouseResource
) -> list[str]:
    registry = SavepointRegistry(warehouse)
    client = millrace_session.get_client()
    running = live_jobs(millrace_session)
    if not running:
        context.log.warning("no live running_totals job is running: nothing to stop")
    paths = []
    for j in running:
        path = client.stop_with_savepoint(j["jid"], warehouse.savepoint_path(program.LIVE_JOB_NAME), drain=config.drain, context=context)
        paths.append(_register(context, registry, j["name"], path).path)
        # the savepoint is reported before the job has ended (its tasks are still being ended): wait for
        # that, so a start right after this run does not find the job still running
        state = _wait_ended(millrace_session, j["jid"], STOP_TIMEOUT_S)
        if state != JobStatus.FINISHED.name:
            context.log.warning(f"Millrace job {j['jid']} stopped with a savepoint but is {state} (not FINISHED) after {STOP_TIMEOUT_S:.0f} s")
    context.add_output_metadata({"stopped": len(paths), "paths": "\n".join(paths) or "none"})
    return paths


def _wait_ended(millrace: MillraceClusterResource, job_id: str, timeout_s: float) -> str:
    """The job's state once it is globally terminal, or its state when `timeout_s` ran out."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = next((str(j["state"]) for j in millrace.get_client().list_jobs() if j["jid"] == job_id), None)
        if state is None:
            return "no longer listed"
        if JobStatus(state).is_globally_terminal or time.monotonic() > deadline:
            return state
        time.sleep(0.1)


@job(description="Start the live running_totals job on the session cluster from the newest registered savepoint (detached).")
def start_live_running_totals_job() -> None:
    start_live_running_totals()


@job(description="A savepoint of every running live job, registered; then retention (newest 7 per job kept).")
def savepoint_live_jobs() -> None:
    dispose_old_savepoints(after=savepoint_live())


@job(description="Stop the live running_totals job with a savepoint and register it.")
def stop_live_with_savepoint() -> None:
    stop_live()


@schedule(
    job=savepoint_live_jobs,
    cron_schedule="0 * * * *",
    execution_timezone="UTC",
    default_status=DefaultScheduleStatus.STOPPED,
    description="Every hour: a savepoint of each live Millrace job, then retention.",
)
def savepoint_live_jobs_schedule(context: ScheduleEvaluationContext) -> Any:
    return RunRequest(run_key=f"savepoints-{context.scheduled_execution_time.isoformat()}")


def restart_request(failed: dict[str, Any], restore: str, start_day: str) -> RunRequest:
    reason = f"restarting Millrace job {failed['jid']} '{failed['name']}' ({failed['state']}) from {restore}"
    return RunRequest(
        run_key=f"restore-{failed['jid']}",
        run_config={"ops": {"start_live_running_totals": {"config": {"restore_from": restore, "start_day": start_day, "reason": reason}}}},
        tags={"millrace/restored_job_id": failed["jid"], "millrace/restore_from": restore},
    )


@sensor(
    job=start_live_running_totals_job,
    minimum_interval_seconds=30,
    default_status=DefaultSensorStatus.STOPPED,
    description=f"Starts a FAILED live running_totals job again from its latest checkpoint or savepoint (at most {RESTARTS_PER_HOUR} per hour).",
)
def millrace_restore_sensor(context: SensorEvaluationContext, millrace_session: MillraceClusterResource, warehouse: DeltaWarehouseResource) -> Any:
    # cursor: {"handled": [job ids already restarted or given up], "restarts": [epoch seconds]}
    state = json.loads(context.cursor) if context.cursor else {"handled": [], "restarts": []}
    now = time.time()
    state["restarts"] = [t for t in state["restarts"] if now - t < HOUR_S]
    client = millrace_session.get_client()
    jobs = client.list_jobs()
    if any(program.live_start_day(str(j.get("name", ""))) and not JobStatus(j["state"]).is_globally_terminal for j in jobs):
        context.update_cursor(json.dumps(state))
        return SkipReason("a live running_totals job is running")
    failed = [j for j in jobs if j["state"] == JobStatus.FAILED.name and program.live_start_day(str(j.get("name", ""))) and j["jid"] not in state["handled"]]
    if not failed:
        context.update_cursor(json.dumps(state))
        return SkipReason("no failed live running_totals job")
    newest = max(failed, key=lambda j: int(j.get("start-time", j.get("start_time", 0)) or 0))
    state["handled"] = (state["handled"] + [j["jid"] for j in failed])[-100:]
    if len(state["restarts"]) >= RESTARTS_PER_HOUR:
        context.update_cursor(json.dumps(state))
        context.log.error(
            f"Millrace job {newest['jid']} '{newest['name']}' FAILED, but {RESTARTS_PER_HOUR} restarts in the last hour already: not restarting it"
        )
        return SkipReason(f"restart limit reached ({RESTARTS_PER_HOUR} per hour)")
    start_day = program.live_start_day(newest["name"]) or ""
    restore = client.latest_checkpoint_path(newest["jid"])
    if restore is None:  # it failed before its first checkpoint: the newest registered savepoint
        try:
            restore, start_day = start_point(SavepointRegistry(warehouse), "", "")
        except Failure as e:
            context.update_cursor(json.dumps(state))
            context.log.error(f"Millrace job {newest['jid']} FAILED and there is nothing to restart it from: {e.description}")
            return SkipReason("nothing to restore from")
    state["restarts"].append(now)
    context.update_cursor(json.dumps(state))
    context.log.warning(f"Millrace job {newest['jid']} '{newest['name']}' FAILED: restarting it from {restore}")
    return restart_request(newest, restore, start_day)
