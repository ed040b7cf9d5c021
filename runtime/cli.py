"""`millrace` command line: run and plan dataflow programs.

`millrace run JOB.py [--parallelism N] [--provider spark|local] [job args...]` runs the program on
the embedded default (this process is the JobManager and Spark driver; TaskManagers run on Spark
executors). `millrace plan JOB.py` prints the JobGraph without running anything. Arguments the
CLI does not know are passed to the program as its sys.argv.
"""
from __future__ import annotations

import argparse
import logging
import runpy
import sys
import time
from pathlib import Path
from typing import Any

from runtime.api.execution import JobExecutionResult, use_executor
from runtime.core.errors import JobExecutionError, MillraceError
from runtime.core.states import JobStatus
from runtime.graph.job_graph import JobGraph
from runtime.graph.plan import format_plan


class _PlanCaptured(Exception):
    """Stops the program at execute(): `millrace plan` only wants the JobGraph (Flink's ProgramAbortException)."""

    def __init__(self, job_graph: JobGraph) -> None:
        super().__init__("plan captured")
        self.job_graph = job_graph


class _PlanExecutor:
    def execute(self, job_graph: JobGraph, status_listener: Any = None) -> Any:
        raise _PlanCaptured(job_graph)


class _ReportingExecutor:
    """Wraps the real executor: prints job id, plan, status changes, throughput and outputs."""

    def __init__(self, inner: Any, out: Any) -> None:
        self.inner = inner
        self.out = out
        self.jobs: list[tuple[JobGraph, float]] = []

    def _print(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def execute(self, job_graph: JobGraph, status_listener: Any = None) -> Any:
        self._print(format_plan(job_graph))
        started = time.time()
        self.jobs.append((job_graph, started))

        def on_status(job_id: str, status: JobStatus, cause: str | None) -> None:
            self._print(f"[{time.time() - started:7.2f}s] job {job_id} -> {status.name}" + (f" ({cause})" if cause else ""))
            if status_listener is not None:
                status_listener(job_id, status, cause)

        client = self.inner.execute(job_graph, on_status)
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


def _run_program(path: str, argv: list[str]) -> None:
    program = Path(path)
    if not program.is_file():
        raise MillraceError(f"no such job file: {path}")
    sys.argv = [str(program)] + argv
    sys.path.insert(0, str(program.parent.resolve()))
    runpy.run_path(str(program), run_name="__main__")


def cmd_plan(args: argparse.Namespace, job_args: list[str]) -> int:
    config = {"parallelism.default": str(args.parallelism)} if args.parallelism else {}
    try:
        with use_executor(_PlanExecutor(), config=config):
            _run_program(args.job, job_args)
    except _PlanCaptured as captured:
        print(format_plan(captured.job_graph))
        return 0
    print("the program did not call execute(): no job to plan", file=sys.stderr)
    return 1


def cmd_run(args: argparse.Namespace, job_args: list[str]) -> int:
    from runtime.deploy.embedded import EmbeddedExecutor

    config: dict[str, str] = {}
    if args.parallelism:
        config["parallelism.default"] = str(args.parallelism)
    inner = EmbeddedExecutor(provider=args.provider, spark_master=args.spark_master, tm_log_level=args.log_level)
    executor = _ReportingExecutor(inner, sys.stdout)
    with use_executor(executor, config=config, global_default=True):
        _run_program(args.job, job_args)
    if not executor.jobs:
        print("the program did not call execute(): nothing ran", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="millrace", description="Millrace: Flink's runtime in Python on Spark, Delta and Dagster")
    parser.add_argument(
        "--log-level", default="WARNING", type=str.upper, choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level of the runtime and its TaskManagers (default WARNING)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a job program on the embedded cluster")
    run.add_argument("job", help="path of the Python program (PyFlink-style, calls env.execute())")
    run.add_argument("--parallelism", "-p", type=int, default=None, help="default parallelism of the job")
    run.add_argument("--provider", choices=["spark", "local"], default="spark", help="where TaskManagers run (default: Spark executors)")
    run.add_argument("--spark-master", default=None, help="Spark master URL (default local[N] sized to the job)")
    plan = sub.add_parser("plan", help="print the JobGraph of a program without running it")
    plan.add_argument("job")
    plan.add_argument("--parallelism", "-p", type=int, default=None)
    args, job_args = parser.parse_known_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        code = cmd_run(args, job_args) if args.command == "run" else cmd_plan(args, job_args)
    except JobExecutionError as e:
        print(f"\nJob failed: {e}", file=sys.stderr)
        code = 1
    except MillraceError as e:  # a user error: a message, never a traceback
        print(f"error: {e}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        code = 130
    except Exception as e:  # noqa: BLE001 - e.g. Spark/Java failing to start: say what, keep the trace for DEBUG
        logging.getLogger("millrace.cli").debug("unexpected error", exc_info=True)
        print(f"error: {type(e).__name__}: {e}\n(run with --log-level DEBUG for the full traceback)", file=sys.stderr)
        code = 3
    sys.exit(code)


if __name__ == "__main__":
    main()
