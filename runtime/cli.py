"""`millrace` command line (Flink's CLI): run [-s PATH], plan, list, info, cancel, savepoint, stop, cluster start|stop|status.

`millrace run JOB.py` runs a program on the embedded default (this process is the JobManager and
Spark driver; TaskManagers run on Spark executors); with `--cluster` it submits to a session
cluster over REST; `--mode per-job` / `--mode application` start a dedicated JobManager process
for the job / for the program's main(). Arguments the CLI does not know go to the program's argv.
Errors are messages, never tracebacks; exit codes: 0 finished, 1 failed or cancelled, 2 bad input,
3 unexpected, 130 interrupted (Ctrl-C), 143 terminated (SIGTERM: the same orderly stop as Ctrl-C).
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from typing import Any

from runtime.api.execution import JobExecutionResult, JobFailure, use_executor
from runtime.core.errors import ConfigurationError, JobExecutionError, MillraceError
from runtime.core.options import checkpointing as checkpointing_options
from runtime.core.options import execution as execution_options
from runtime.core.options import logs as log_options
from runtime.core.states import JobStatus
from runtime.deploy.client_logging import configure_client_logging
from runtime.deploy.program import run_program
from runtime.graph.job_graph import JobGraph
from runtime.graph.plan import format_plan


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be: every clean-up made for Ctrl-C
    (cancel the job, stop the cluster being started, the Spark JVM) runs for it too."""


def _raise_terminated(signum: int, _frame: Any) -> None:
    raise Terminated()


class _PlanCaptured(Exception):
    """Stops the program at execute(): `millrace plan` only wants the JobGraph (Flink's ProgramAbortException)."""

    def __init__(self, job_graph: JobGraph) -> None:
        super().__init__("plan captured")
        self.job_graph = job_graph


class _PlanExecutor:
    def execute(self, job_graph: JobGraph, status_listener: Any = None, failure_listener: Any = None) -> Any:
        raise _PlanCaptured(job_graph)


class _ReportingExecutor:
    """Wraps the real executor: prints job id, plan, status changes, throughput and outputs."""

    def __init__(self, inner: Any, out: Any, detached: bool = False) -> None:
        self.inner = inner
        self.out = out
        self.detached = detached
        self.jobs: list[tuple[JobGraph, float]] = []

    def _print(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def execute(self, job_graph: JobGraph, status_listener: Any = None, failure_listener: Any = None) -> Any:
        self._print(format_plan(job_graph))
        started = time.time()
        self.jobs.append((job_graph, started))

        def on_status(job_id: str, status: JobStatus, cause: str | None) -> None:
            self._print(f"[{time.time() - started:7.2f}s] job {job_id} -> {status.name}" + (f" ({cause})" if cause else ""))
            if status_listener is not None:
                status_listener(job_id, status, cause)

        def on_failure(job_id: str, failure: JobFailure) -> None:
            # why the job restarts (or fails), as it happens: a region restart changes no job status
            self._print(f"[{time.time() - started:7.2f}s] job {job_id} failure: {failure.describe()}")
            if failure_listener is not None:
                failure_listener(job_id, failure)

        if self.detached:
            client = self.inner.execute(job_graph)
            self._print(f"Job has been submitted with JobID {client.job_id} (detached: it runs on without this client)")
            return client
        client = self.inner.execute(job_graph, on_status, on_failure)
        self._print(f"Job has been submitted with JobID {client.job_id}")
        return _ReportingClient(client, self)


class _ReportingClient:
    def __init__(self, inner: Any, reporter: _ReportingExecutor) -> None:
        self.inner = inner
        self.reporter = reporter

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def get_job_execution_result(self, timeout: float | None = None) -> JobExecutionResult:
        result = self.inner.get_job_execution_result(timeout)
        job_graph = next(jg for jg, _ in self.reporter.jobs if jg.job_id == result.job_id)
        sources = {v.name for v in job_graph.vertices if v.is_input_vertex}
        seconds = max(result.net_runtime_ms / 1000, 1e-9)
        src = sum(m["records_out"] for name, m in result.metrics.items() if name in sources)
        self.reporter._print(f"Job {result.job_id} FINISHED in {seconds:.2f}s")
        line = f"Throughput: {src:,} source records, {src / seconds:,.0f} records/s over the whole job"
        if result.running_ms:
            running = max(result.running_ms / 1000, 1e-9)
            line += f", {src / running:,.0f} records/s while its tasks ran ({running:.2f}s; the rest was TaskManager launch)"
        self.reporter._print(line)
        for name, m in result.metrics.items():
            self.reporter._print(f"  {name}: in {m['records_in']:,} out {m['records_out']:,} (parallelism {m['parallelism']})")
        for operator, acc in result.accumulators.get("operators", {}).items():
            if "delta_table" in acc:
                self.reporter._print(
                    f"Output: Delta table {acc['delta_table']} (version {acc.get('delta_version')}, "
                    f"{acc.get('delta_records', 0):,} rows in {acc.get('delta_files', 0)} files) from '{operator}'"
                )
            else:
                self.reporter._print(f"  {operator}: " + ", ".join(f"{k}={v}" for k, v in acc.items()))
        return result


def cmd_plan(args: argparse.Namespace, job_args: list[str]) -> int:
    config = _job_config(args)
    try:
        with use_executor(_PlanExecutor(), config=config):
            run_program(args.job, job_args)
    except _PlanCaptured as captured:
        from runtime.graph.plan_render import render

        print(render(captured.job_graph, args.format))
        return 0
    print("the program did not call execute(): no job to plan", file=sys.stderr)
    return 1


def _job_config(args: argparse.Namespace) -> dict[str, str]:
    config = {execution_options.PARALLELISM.key: str(args.parallelism)} if args.parallelism else {}
    for item in getattr(args, "define", None) or []:  # Flink: -Dkey=value
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigurationError(f"-D {item!r}: expected KEY=VALUE, e.g. -D jobmanager.scheduler=adaptive")
        config[key.strip()] = value.strip()
    if getattr(args, "log_propagate", False):
        config[log_options.LOG_PROPAGATE.key] = "true"
    if getattr(args, "runtime_mode", None):  # Flink: -Dexecution.runtime-mode=BATCH
        config[execution_options.RUNTIME_MODE.key] = args.runtime_mode.upper()
    if getattr(args, "from_savepoint", None):  # Flink's keys, so a program may also set them itself
        config[checkpointing_options.SAVEPOINT_PATH.key] = args.from_savepoint
        config[checkpointing_options.SAVEPOINT_IGNORE_UNCLAIMED_STATE.key] = (
            checkpointing_options.SAVEPOINT_IGNORE_UNCLAIMED_STATE.to_string(bool(args.allow_non_restored_state))
        )
    return config


def _cluster_config(args: argparse.Namespace, mode: str, home: Any, **extra: Any) -> Any:
    from runtime.deploy.cluster_entrypoint import ClusterConfig

    return ClusterConfig(
        mode=mode, home=str(home), provider=args.provider, spark_master=args.spark_master,
        task_managers=getattr(args, "taskmanagers", 1), slots_per_task_manager=args.slots_per_taskmanager,
        max_task_managers=args.max_taskmanagers, log_level=args.log_level, high_availability=_ha_settings(args),
        evenly_spread_out_slots=args.slot_placement == "spread", dynamic_slots=not args.static_slots, **extra,
    )


def _ha_settings(args: argparse.Namespace) -> Any:
    """high-availability.* from `cluster start --ha zookeeper ...` (-D high-availability.KEY=VALUE for the rest)."""
    from runtime.core.options import high_availability as ha

    config: dict[str, str] = {}
    for item in getattr(args, "define", None) or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigurationError(f"-D {item!r}: expected KEY=VALUE, e.g. -D high-availability.cluster-id=prod")
        config[key.strip()] = value.strip()
    if getattr(args, "ha", None):
        config[ha.HA_TYPE.key] = args.ha
    for flag, option in (("zookeeper_quorum", ha.ZOOKEEPER_QUORUM), ("cluster_id", ha.CLUSTER_ID), ("ha_storage_dir", ha.STORAGE_DIR)):
        if getattr(args, flag, None):
            config[option.key] = getattr(args, flag)
    return ha.HighAvailabilitySettings.from_config({k: v for k, v in config.items() if k.startswith("high-availability")})


def _run_with(executor: Any, args: argparse.Namespace, job_args: list[str]) -> int:
    reporting = _ReportingExecutor(executor, sys.stdout, detached=args.detached)
    with use_executor(reporting, config=_job_config(args), global_default=True):
        run_program(args.job, job_args)
    if not reporting.jobs:
        print("the program did not call execute(): nothing ran", file=sys.stderr)
        return 1
    return 0


def cmd_run(args: argparse.Namespace, job_args: list[str]) -> int:
    mode = args.mode or ("session" if args.cluster else "embedded")
    if mode == "embedded":
        if args.detached:
            raise MillraceError("--detached needs a cluster to leave the job with: add --cluster URL (session) or --mode per-job")
        from runtime.deploy.embedded import EmbeddedExecutor

        inner = EmbeddedExecutor(provider=args.provider, spark_master=args.spark_master, tm_log_level=args.log_level)
        return _run_with(inner, args, job_args)
    if args.cluster and mode != "session":
        raise MillraceError(f"--cluster submits to a running session cluster; --mode {mode} starts its own cluster: use one of them")
    if mode == "session":
        from runtime.deploy.cluster_file import resolve_cluster
        from runtime.deploy.remote import RestExecutor

        endpoint = resolve_cluster(args.cluster, args.token)
        return _run_with(RestExecutor(endpoint, detached=args.detached), args, job_args)
    if mode == "per-job":
        return _run_per_job(args, job_args)
    return _run_application(args, job_args)


def _dedicated_home(kind: str) -> Any:
    import uuid

    from runtime.deploy.cluster_file import millrace_home

    return millrace_home() / kind / f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def _run_per_job(args: argparse.Namespace, job_args: list[str]) -> int:
    """Flink's job cluster: a JobManager process for this one job; TaskManagers on demand; gone after it."""
    from runtime.deploy.cluster_process import start_cluster_process, stop_cluster
    from runtime.deploy.remote import RestExecutor

    home = _dedicated_home("per-job")
    print(f"Starting a per-job cluster (JobManager process, TaskManagers on {args.provider}) ...", flush=True)
    proc, endpoint = start_cluster_process(_cluster_config(args, "per-job", home))
    print(f"Per-job cluster at {endpoint.url} (pid {endpoint.pid}, cluster file {home}/cluster.json)", flush=True)
    try:
        code = _run_with(RestExecutor(endpoint, detached=args.detached), args, job_args)
    except BaseException:
        print("stopping the per-job cluster", file=sys.stderr)
        stop_cluster(endpoint, home, proc=proc)
        raise
    if args.detached:
        print(f"The per-job cluster stops by itself when the job ends; until then: millrace info JOB_ID --cluster {home}")
        return code
    stop_cluster(endpoint, home, proc=proc)
    return code


def _run_application(args: argparse.Namespace, job_args: list[str]) -> int:
    """Flink's application cluster: main() runs in the JobManager process; the client only watches."""
    from pathlib import Path

    from runtime.deploy.cluster_entrypoint import ApplicationSpec
    from runtime.deploy.cluster_process import start_cluster_process, stop_cluster
    from runtime.deploy.remote import rest_client

    program = Path(args.job)
    if not program.is_file():
        raise MillraceError(f"no such job file: {args.job}")
    home = _dedicated_home("application")
    spec = ApplicationSpec(program=str(program.resolve()), args=job_args, config=_job_config(args))
    print(f"Starting an application cluster for {program.name}: its main() runs in the JobManager ...", flush=True)
    proc, endpoint = start_cluster_process(_cluster_config(args, "application", home, application=spec))
    print(f"Application cluster at {endpoint.url} (pid {endpoint.pid}, log {endpoint.log})", flush=True)
    if args.detached:
        print(f"Detached: the cluster ends with the application; follow it with millrace list --cluster {home}")
        return 0
    client = rest_client(endpoint)
    started = time.time()
    seen: dict[str, str] = {}
    try:
        while True:
            info = client.cluster_info()
            for job in client.list_jobs():
                row = _dump(job)  # as on the wire: the state a plain string (the REST models keep enum values)
                jid, state = str(row["jid"]), str(row["state"])
                if seen.get(jid) != state:
                    print(f"[{time.time() - started:7.2f}s] job {jid} '{row.get('name', '')}' -> {state}", flush=True)
                    seen[jid] = state
            app = info.application
            if app is not None and app.status != "RUNNING":
                break
            if proc.poll() is not None:
                raise MillraceError(f"the application cluster exited (code {proc.returncode}) without reporting; see {endpoint.log}")
            time.sleep(0.3)
    except KeyboardInterrupt:
        print("interrupted: stopping the application cluster (its jobs are cancelled)", file=sys.stderr)
        stop_cluster(endpoint, home, proc=proc)
        raise
    stop_cluster(endpoint, home, proc=proc)
    if app.status == "FINISHED":
        print(f"Application FINISHED ({len(app.job_ids)} job(s)); JobManager log: {endpoint.log}")
        return 0
    print(f"\nApplication FAILED: {app.error}\nJobManager log: {endpoint.log}", file=sys.stderr)
    return 1


def _dump(model: Any) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json") if hasattr(model, "model_dump") else dict(model)


def _client(args: argparse.Namespace) -> Any:
    from runtime.deploy.cluster_file import resolve_cluster
    from runtime.deploy.remote import rest_client

    return rest_client(resolve_cluster(args.cluster, args.token))


def _ms(ms: Any) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) if isinstance(ms, (int, float)) and ms > 0 else "-"


def cmd_list(args: argparse.Namespace) -> int:
    rows = [_dump(j) for j in _client(args).list_jobs()]
    if args.running:
        rows = [r for r in rows if r.get("state") not in ("FINISHED", "FAILED", "CANCELED")]
    if not rows:
        print("No jobs.")
        return 0
    print(f"{'JOB ID':<34} {'STATUS':<11} {'STARTED':<19} {'DURATION':>9}  NAME")
    for r in sorted(rows, key=lambda r: r.get("start-time", 0)):
        print(f"{r.get('jid', ''):<34} {r.get('state', ''):<11} {_ms(r.get('start-time')):<19} {r.get('duration', 0) / 1000:>8.1f}s  {r.get('name', '')}")
    return 0


_INFO_EXCEPTIONS = 5  # newest exception history entries `millrace info` shows
_LINE_MAX = 160


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{n:,} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:,.1f} GiB"


def _duration(ms: int | None) -> str:
    if ms is None or ms < 0:
        return "-"
    return f"{ms} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def _durations(c: Any) -> str:
    """A completed checkpoint's time: acknowledged by every task, then committed to Delta."""
    acked = f"acknowledged in {_duration(c.end_to_end_duration)}"
    if c.commit_duration is None:
        return acked
    return f"{acked}, committed in {_duration(c.end_to_end_duration + c.commit_duration)}"


def _first_line(text: str) -> str:
    lines = (text or "").strip().splitlines()
    line = lines[0].strip() if lines else ""
    return line if len(line) <= _LINE_MAX else line[: _LINE_MAX - 3] + "..."


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _format_checkpoints(cp: Any) -> list[str]:
    """The Checkpoints section of `millrace info` (`cp`: rest.models.CheckpointingStatistics)."""
    settings = cp.checkpointing
    sp = cp.latest.savepoint
    savepoint = [f"  latest savepoint: #{sp.id}, {_durations(sp)}, {_size(sp.state_size)}, {sp.external_path or '-'}"] if sp is not None else []
    if not settings.enabled:
        return ["Checkpoints: disabled (enable them with env.enable_checkpointing(interval_ms))", *savepoint]
    mode = f", {settings.mode}" if settings.mode else ""
    lines = [f"Checkpoints: every {_duration(settings.interval)}{mode}, stored in {settings.path or '-'}"]
    c = cp.counts
    counts = f"  {c.completed} completed, {c.failed} failed, {c.in_progress} in progress ({c.total} triggered)"
    if c.restored:
        counts += f", restored {_plural(c.restored, 'time')}"
        if cp.latest.restored is not None:
            counts += f" (latest from #{cp.latest.restored.id})"
    lines.append(counts)
    done = cp.latest.completed
    if done is not None:
        lines.append(f"  latest completed: #{done.id}, {_durations(done)}, {_size(done.state_size)}, {done.external_path or '-'}")
    else:
        lines.append("  latest completed: none yet")
    lines.extend(savepoint)
    failed = cp.latest.failed
    if failed is not None:
        at = _ms(failed.failure_timestamp or failed.trigger_timestamp)
        lines.append(f"  last failure: #{failed.id} at {at}: {_first_line(failed.failure_message or 'no reason given')}")
    return lines


def _format_exceptions(exc: Any, job_id: str, limit: int = _INFO_EXCEPTIONS) -> list[str]:
    """The Exceptions section of `millrace info` (`exc`: rest.models.JobExceptions)."""
    strategy = exc.restart_strategy or "unknown"
    entries = exc.exception_history.entries
    head = f"Exceptions: {_plural(exc.restarts, 'restart')}, restart strategy {strategy}"
    if not entries:
        return [head + "; no failures"]
    lines = [head + "; newest first:"]
    for e in entries[:limit]:
        where = []
        if e.task_name:
            where.append(f"task {e.task_name}")
        if e.location or e.taskmanager_id:
            where.append(f"TaskManager {e.location or e.taskmanager_id}")
        line = f"  {_ms(e.timestamp)}  {e.exception_name}: {_first_line(e.message)}"
        if where:
            line += f" ({', '.join(where)})"
        if e.concurrent_exceptions:
            line += f" [+{len(e.concurrent_exceptions)} concurrent]"
        lines.append(line)
    hidden = len(entries) - limit
    if hidden > 0:
        older = f"{hidden}{'+' if exc.exception_history.truncated else ''} older"
        lines.append(f"  ... {older} (all of them: GET /jobs/{job_id}/exceptions)")
    return lines


def format_job_info(details: Any, checkpoints: Any = None, exceptions: Any = None) -> str:
    """What `millrace info` prints: the job, its vertices and subtasks, checkpoints, exceptions, root cause.

    `details`, `checkpoints` and `exceptions` are the REST models (JobDetails, CheckpointingStatistics,
    JobExceptions); `checkpoints` / `exceptions` may instead be a message saying why they are not
    available (then the section says so), or None to leave the section out.
    """
    d = _dump(details)
    lines = [f"Job {d.get('jid')} '{d.get('name')}': {d.get('state')} (started {_ms(d.get('start-time'))}, {d.get('duration', 0) / 1000:.1f}s)"]
    if d.get("scheduler", "default") != "default":
        lines.append(f"Scheduler: {d.get('scheduler')}, {d.get('scheduler-state')}")
    for v in d.get("vertices", []):
        mt = v.get("metrics", {})
        lines.append(
            f"  {v.get('name')} (parallelism {v.get('parallelism')}): {v.get('status')}, records in {mt.get('read-records', 0):,} "
            f"out {mt.get('write-records', 0):,}, bytes in {mt.get('read-bytes', 0):,} out {mt.get('write-bytes', 0):,}, "
            f"backpressure {v.get('backpressure-level', '-')}"
        )
        for st in v.get("subtasks", []):
            lines.append(f"    subtask {st.get('subtask')}: {st.get('status')} attempt {st.get('attempt')} on {st.get('taskmanager-id')} ({st.get('host')})")
    rescales = d.get("rescales") or []
    if rescales:
        lines.append(f"Rescales ({len(rescales)}, oldest first):")
        for r in rescales:
            down = f", {r['downtime'] / 1000:.2f}s down" if r.get("downtime") is not None else ""
            changes = ", ".join(f"{name} {r['from'].get(name, '?')} -> {p}" for name, p in r.get("to", {}).items())
            lines.append(f"  {_ms(r.get('timestamp'))}  {changes} ({r.get('cause')}{down})")
    regions = d.get("regions") or []
    if any(r.get("blocking-inputs") for r in regions):  # lazily scheduled (batch): where each stage is
        lines.append(f"Pipelined regions ({len(regions)}):")
        for r in regions:
            inputs = f", blocking inputs {r.get('blocking-inputs-committed')}/{r.get('blocking-inputs')} committed" if r.get("blocking-inputs") else ""
            names = ", ".join(r.get("subtasks", [])[:3]) + (f" (+{len(r['subtasks']) - 3})" if len(r.get("subtasks", [])) > 3 else "")
            lines.append(f"  region {r.get('index')}: {r.get('status')}{inputs}: {names}")
    if isinstance(checkpoints, str):
        lines.append(f"Checkpoints: unavailable ({checkpoints})")
    elif checkpoints is not None:
        lines.extend(_format_checkpoints(checkpoints))
    if isinstance(exceptions, str):
        lines.append(f"Exceptions: unavailable ({exceptions})")
    elif exceptions is not None:
        lines.extend(_format_exceptions(exceptions, str(d.get("jid"))))
    exc = d.get("root-exception") or d.get("exception")
    if exc:
        cause = str(exc if isinstance(exc, str) else exc.get("message", exc))
        lines.append("Root cause: " + cause.strip().replace("\n", "\n  "))
    return "\n".join(lines)


def _or_reason(fetch: Any) -> Any:
    """The result of `fetch()`, or why it failed (a section of `millrace info` that is not available)."""
    try:
        return fetch()
    except MillraceError as e:
        return str(e)


def cmd_info(args: argparse.Namespace) -> int:
    client = _client(args)
    details = client.job_details(args.job_id)  # an unknown job fails here: exit code 2 with the message
    checkpoints = _or_reason(lambda: client.job_checkpoints(args.job_id))
    exceptions = _or_reason(lambda: client.job_exceptions(args.job_id))
    print(format_job_info(details, checkpoints, exceptions))
    return 0


def cmd_rescale(args: argparse.Namespace) -> int:
    """Change a running job's parallelism bounds (the adaptive scheduler rescales it; Flink 1.18's
    PUT /jobs/:jobid/resource-requirements)."""
    client = _client(args)
    current = client.resource_requirements(args.job_id)
    bounds: dict[str, tuple[int, int]] = {}
    if args.parallelism is not None:
        bounds = {v: (1, args.parallelism) for v in current}
    for item in args.vertex or []:
        vid, sep, value = item.partition("=")
        lo, colon, hi = value.partition(":")
        if not sep or not lo.isdigit() or (colon and not hi.isdigit()):
            raise ConfigurationError(f"--vertex {item!r}: expected VERTEX_ID=UPPER or VERTEX_ID=LOWER:UPPER")
        bounds[vid] = (int(lo), int(hi)) if colon else (1, int(lo))
    if not bounds:
        raise ConfigurationError("rescale: give -p N (every vertex) or --vertex ID=UPPER (one vertex)")
    client.update_resource_requirements(args.job_id, bounds)
    print(f"Resource requirements of job {args.job_id}: " + ", ".join(f"{v} {lo}..{hi}" for v, (lo, hi) in bounds.items()))
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    _client(args).cancel_job(args.job_id)
    print(f"Cancellation of job {args.job_id} requested.")
    return 0


def cmd_savepoint(args: argparse.Namespace) -> int:
    """Flink: `flink savepoint JOB_ID [TARGET_DIR]` and `flink savepoint --dispose PATH`."""
    if args.dispose:
        from runtime.storage.savepoints import dispose_savepoint

        meta = dispose_savepoint(args.dispose)
        print(f"Savepoint '{args.dispose}' disposed (savepoint {meta.checkpoint_id} of job {meta.job_id}).")
        return 0
    if not args.job_id:
        raise MillraceError("millrace savepoint needs a JOB_ID (or --dispose PATH)")
    client = _client(args)
    print(f"Triggering savepoint for job {args.job_id}.", flush=True)
    trigger = client.trigger_savepoint(args.job_id, args.target_directory)
    print("Waiting for response...", flush=True)
    location = client.wait_for_savepoint(args.job_id, trigger)
    print(f"Savepoint completed. Path: {location}")
    print("You can resume your program from this savepoint with the run command.")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    """Flink: `flink stop [--savepointPath DIR] [--drain] JOB_ID`."""
    client = _client(args)
    print(f"Suspending job \"{args.job_id}\" with a {'drained ' if args.drain else ''}savepoint.", flush=True)
    trigger = client.stop_with_savepoint(args.job_id, args.savepoint_path, args.drain)
    location = client.wait_for_savepoint(args.job_id, trigger)
    print(f"Savepoint completed. Path: {location}")
    return 0


def cmd_state(args: argparse.Namespace) -> int:
    """Operator state of a checkpoint or savepoint: the operators, or one operator's keyed state."""
    from runtime.storage.state_reader import list_operators, read_keyed_state, resolve_checkpoint

    meta = resolve_checkpoint(args.path, args.checkpoint_id)
    kind = "savepoint" if meta.is_savepoint else "checkpoint"
    print(f"{kind} {meta.checkpoint_id} of job {meta.job_id} at {args.path} ({meta.state_size:,} bytes of state)")
    if args.operator is None:
        for info in list_operators(args.path, meta.checkpoint_id):
            rows = "rows counted on reading (RocksDB native)" if info.rows is None else f"{info.rows:,} rows"
            print(f"  operator {info.operator_id} (parallelism {info.parallelism}, max {info.max_parallelism}): {rows}")
            for name, (state_kind, n) in sorted(info.states.items()):
                print(f"    {name} ({state_kind}): {'native' if n is None else f'{n:,} rows'}")
        return 0
    table = read_keyed_state(args.path, args.operator, args.state, meta.checkpoint_id)
    print(f"operator {args.operator}{f', state {args.state}' if args.state else ''}: {table.num_rows:,} rows")
    for row in table.slice(0, args.limit).to_pylist():
        print("  " + ", ".join(f"{k}={v}" for k, v in row.items()))
    if table.num_rows > args.limit:
        print(f"  ... ({table.num_rows - args.limit:,} more)")
    return 0


def read_cluster_info(endpoint: Any) -> Any:
    """This JobManager's own /cluster (not the leader's: its role is what `cluster status` shows)."""
    from runtime.rest.client import RestClusterClient

    return RestClusterClient(endpoint.url, endpoint.token, timeout=10).cluster_info()


def cmd_cluster(args: argparse.Namespace) -> int:
    from runtime.deploy.cluster_file import millrace_home, process_alive, read_cluster_file
    from runtime.deploy.cluster_process import start_cluster_process, stop_cluster

    home = millrace_home(args.home)
    if args.cluster_command == "start":
        idle_timeout_s = args.idle_timeout if args.idle_timeout > 0 else None
        cfg = _cluster_config(args, "session", home, host=args.host, rest_port=args.rest_port, idle_timeout_s=idle_timeout_s)
        rm = cfg.cluster.resource_manager
        where = cfg.spark_master_url() if cfg.cluster.provider == "spark" else "local processes"
        print(f"Starting a session cluster ({rm.initial_task_managers} TaskManager(s) x {rm.slots_per_tm} slot(s) on {where}) ...", flush=True)
        _, endpoint = start_cluster_process(cfg)
        print(
            f"Session cluster running: REST API {endpoint.url}, pid {endpoint.pid}\n"
            f"Cluster file (URL and access token): {home}/cluster.json\nLog: {endpoint.log}"
        )
        return 0
    endpoint = read_cluster_file(home)
    if args.cluster_command == "scale":
        message = _client(argparse.Namespace(cluster=str(home), token=None)).scale_task_managers(args.taskmanagers)
        print(f"Session cluster at {endpoint.url}: {message}")
        return 0
    if args.cluster_command == "status":
        alive = process_alive(endpoint.pid)
        print(f"{endpoint.mode} cluster at {endpoint.url}, pid {endpoint.pid}: {'running' if alive else 'NOT running (stale cluster file)'}")
        if alive:
            ov = _dump(_client(argparse.Namespace(cluster=str(home), token=None)).overview())
            print("  " + ", ".join(f"{k}: {v}" for k, v in ov.items()))
            ha = read_cluster_info(endpoint).high_availability
            if ha is not None:
                leader = (ha.leader or {}).get("rest_url", "none elected")
                print(f"  high availability: this JobManager is the {ha.role} (session {ha.leader_session_id or '-'}), "
                      f"leader {leader}, ZooKeeper {ha.quorum} {ha.zookeeper_connection}")
        return 0 if alive else 1
    how = stop_cluster(endpoint, home)
    print(f"Session cluster at {endpoint.url} (pid {endpoint.pid}) {how}.")
    return 0


def _int_at_least(low: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    return parse


def _add_cluster_target(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cluster", default=None, help="REST URL of a running cluster, or its cluster file/folder (default: the session cluster under MILLRACE_HOME)"
    )
    p.add_argument("--token", default=None, help="access token (default: MILLRACE_TOKEN or the cluster file)")


def _add_cluster_shape(p: argparse.ArgumentParser) -> None:
    p.add_argument("--provider", choices=["spark", "local"], default="spark", help="where TaskManagers run (default: Spark executors)")
    p.add_argument("--spark-master", default=None, help="Spark master URL (default local[N])")
    p.add_argument("--slots-per-taskmanager", type=_int_at_least(1), default=1, help="task slots per TaskManager (default 1: a Python process is one core)")
    p.add_argument("--max-taskmanagers", type=_int_at_least(1), default=8, help="most TaskManagers the ResourceManager may ask for (default 8)")
    p.add_argument(
        "--slot-placement", choices=["pack", "spread"], default="pack",
        help="pack: a slot goes to the first TaskManager with room; spread: to the least used one (Flink: cluster.evenly-spread-out-slots)",
    )
    p.add_argument(
        "--static-slots", action="store_true",
        help="every slot is its TaskManager's total / its slots (default: dynamic slots cut to each slot sharing group's resources)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="millrace", description="Millrace: Flink's runtime in Python on Spark, Delta and Dagster")
    parser.add_argument(
        "--log-level", default="WARNING", type=str.upper, choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level of the runtime and its TaskManagers on stderr (default WARNING); the client's log file "
             "($MILLRACE_HOME/log/millrace-client-<host>.log) gets INFO and up",
    )
    parser.add_argument(
        "--log-propagate", action="store_true",
        help="env.log.propagate: Millrace's log records also reach the root logger's handlers (e.g. the program's logging.basicConfig)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a job program: embedded (default), on a session cluster, or on its own per-job/application cluster")
    run.add_argument("job", help="path of the Python program (PyFlink-style, calls env.execute())")
    run.add_argument("--parallelism", "-p", type=_int_at_least(1), default=None, help="default parallelism of the job")
    run.add_argument("-D", dest="define", action="append", metavar="KEY=VALUE", help="a job configuration option, e.g. -D jobmanager.scheduler=adaptive")
    run.add_argument("--runtime-mode", choices=["streaming", "batch", "automatic"], type=str.lower, default=None,
                     help="execution.runtime-mode: batch runs bounded jobs stage by stage with blocking exchanges in Delta")
    run.add_argument("--mode", choices=["embedded", "session", "per-job", "application"], default=None,
                     help="embedded: this process is the JobManager (default without --cluster); session: submit to --cluster; "
                          "per-job: a dedicated JobManager process for this job; application: main() runs in a dedicated JobManager")
    run.add_argument("--detached", "-d", action="store_true", help="submit, print the job id and return (cluster modes)")
    run.add_argument(
        "--fromSavepoint", "-s", dest="from_savepoint", default=None, metavar="PATH", help="restore the job from this savepoint (or retained checkpoint table)"
    )
    run.add_argument("--allow-non-restored-state", "--allowNonRestoredState", "-n", dest="allow_non_restored_state", action="store_true",
                     help="skip savepoint state of operators that are not in the program")
    _add_cluster_target(run)
    _add_cluster_shape(run)
    plan = sub.add_parser("plan", help="print the JobGraph of a program without running it")
    plan.add_argument("job")
    plan.add_argument(
        "--format", choices=["text", "dot", "svg", "html"], default="text",
        help="text (default), Graphviz dot, an SVG picture, or an HTML page with both picture and text",
    )
    plan.add_argument("--parallelism", "-p", type=_int_at_least(1), default=None)
    plan.add_argument("--runtime-mode", choices=["streaming", "batch", "automatic"], type=str.lower, default=None)
    lst = sub.add_parser("list", help="list the jobs of a cluster")
    lst.add_argument("--running", action="store_true", help="only jobs that have not ended")
    _add_cluster_target(lst)
    info = sub.add_parser("info", help="show a job: status, vertices, subtasks, records, backpressure, checkpoints, exceptions")
    info.add_argument("job_id")
    _add_cluster_target(info)
    rescale = sub.add_parser("rescale", help="change a running job's parallelism (jobs under the adaptive scheduler)")
    rescale.add_argument("job_id")
    rescale.add_argument("--parallelism", "-p", type=_int_at_least(1), default=None, help="every vertex's upper bound (lower bound 1)")
    rescale.add_argument("--vertex", action="append", metavar="ID=UPPER|ID=LOWER:UPPER", help="one vertex's bounds (repeatable)")
    _add_cluster_target(rescale)
    cancel = sub.add_parser("cancel", help="cancel a running job")
    cancel.add_argument("job_id")
    _add_cluster_target(cancel)
    sp = sub.add_parser("savepoint", help="take a savepoint of a running job, or dispose of one (--dispose PATH)")
    sp.add_argument("job_id", nargs="?", default=None)
    sp.add_argument(
        "target_directory", nargs="?", default=None, help="folder for the savepoint (default state.savepoints.dir, else <warehouse>/_savepoints/<job name>)"
    )
    sp.add_argument("--dispose", "-d", default=None, metavar="PATH", help="delete the savepoint at PATH")
    _add_cluster_target(sp)
    state = sub.add_parser("state", help="show the operator state in a checkpoint or savepoint (no Spark needed)")
    state.add_argument("path", help="a savepoint location or a checkpoint table (<state.checkpoints.dir>/<job id>)")
    state.add_argument("--operator", default=None, help="operator id (its uid, or the id millrace plan shows); without it: list the operators")
    state.add_argument("--state", default=None, help="only this state name")
    state.add_argument("--checkpoint-id", type=_int_at_least(0), default=None, help="default: the newest in the table")
    state.add_argument("--limit", type=_int_at_least(0), default=20, help="rows to print (default 20)")
    stop = sub.add_parser("stop", help="stop a job with a savepoint (it ends FINISHED; resume it with run -s PATH)")
    stop.add_argument("job_id")
    stop.add_argument("--savepoint-path", "--savepointPath", "-p", dest="savepoint_path", default=None, help="folder for the savepoint")
    stop.add_argument("--drain", "-d", action="store_true", help="emit a MAX watermark first, so every event-time window fires")
    _add_cluster_target(stop)
    cluster = sub.add_parser("cluster", help="start, stop or inspect a session cluster")
    csub = cluster.add_subparsers(dest="cluster_command", required=True)
    start = csub.add_parser("start", help="start a session cluster in the background")
    start.add_argument("--taskmanagers", type=_int_at_least(0), default=1, help="TaskManagers started now and kept (default 1)")
    start.add_argument("--idle-timeout", type=float, default=30.0, help="seconds before an idle TaskManager above --taskmanagers is released (0: never)")
    start.add_argument("--rest-port", type=_int_at_least(0), default=0, help="REST port (default: any free port)")
    start.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    start.add_argument("--ha", choices=["none", "zookeeper"], default=None,
                       help="high-availability.type: zookeeper elects a leader among the JobManagers started with the same --cluster-id")
    start.add_argument("--zookeeper-quorum", default=None, help="high-availability.zookeeper.quorum, e.g. 127.0.0.1:2181")
    start.add_argument("--cluster-id", default=None, help="high-availability.cluster-id (default 'default')")
    start.add_argument("--ha-storage-dir", default=None, help="high-availability.storageDir (default <warehouse>/_ha)")
    start.add_argument("-D", dest="define", action="append", metavar="KEY=VALUE", help="a high-availability.* option, e.g. "
                       "-D high-availability.zookeeper.client.session-timeout=10s")
    _add_cluster_shape(start)
    scale = csub.add_parser("scale", help="run this many TaskManagers from now on (jobs in reactive mode follow)")
    scale.add_argument("--taskmanagers", type=_int_at_least(0), required=True, help="TaskManagers the cluster runs")
    for name in ("start", "stop", "status", "scale"):
        p = {"start": start, "scale": scale}.get(name) or csub.add_parser(name, help=f"{name} the session cluster")
        p.add_argument("--home", default=None, help="folder of cluster.json (default MILLRACE_HOME or ~/.millrace)")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command not in ("run", "plan"):  # job args pass through to the program
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    # Millrace's loggers: --log-level to stderr, INFO and up to the client's log file; the root logger
    # is the program's (`millrace run` runs it in this process), as when it runs under PyFlink
    configure_client_logging(args.log_level, propagate=args.log_propagate)
    if args.log_level == "DEBUG":  # everything, every library's too
        logging.basicConfig(level=logging.DEBUG, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGTERM, _raise_terminated)
    commands = {
        "run": lambda: cmd_run(args, extra), "plan": lambda: cmd_plan(args, extra), "list": lambda: cmd_list(args),
        "info": lambda: cmd_info(args), "cancel": lambda: cmd_cancel(args), "cluster": lambda: cmd_cluster(args),
        "rescale": lambda: cmd_rescale(args),
        "savepoint": lambda: cmd_savepoint(args), "stop": lambda: cmd_stop(args), "state": lambda: cmd_state(args),
    }
    try:
        code = commands[args.command]()
    except JobExecutionError as e:
        status = "was cancelled" if " CANCELED" in str(e).split(":")[0] else "failed"
        print(f"\nJob {status}: {e}", file=sys.stderr)
        code = 1
    except MillraceError as e:  # a user error: a message, never a traceback
        print(f"error: {e}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt as e:
        terminated = isinstance(e, Terminated)
        print("terminated" if terminated else "interrupted", file=sys.stderr)
        # the embedded run's Spark JVM ignores SIGINT (PySpark starts it so): stop it, or it outlives us
        from runtime.deploy.spark_session import kill_spark_jvms

        kill_spark_jvms()
        code = 128 + (signal.SIGTERM if terminated else signal.SIGINT)
    except Exception as e:  # e.g. Spark/Java failing to start: say what, keep the trace for DEBUG
        logging.getLogger("millrace.cli").debug("unexpected error", exc_info=True)
        print(f"error: {type(e).__name__}: {e}\n(run with --log-level DEBUG for the full traceback)", file=sys.stderr)
        code = 3
    sys.exit(code)


if __name__ == "__main__":
    main()
