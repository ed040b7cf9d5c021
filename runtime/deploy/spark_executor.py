"""Which Spark executor a TaskManager runs in, found by walking up the process tree.

PySpark gives a Python worker no executor id (TaskContext has stage, partition and attempt only),
but the worker is a grandchild of its executor's JVM (python worker <- pyspark daemon <- JVM) and
that JVM's command line says it all:

- on a cluster: `... org.apache.spark.executor.CoarseGrainedExecutorBackend --driver-url ...
  --executor-id 1 --hostname 127.0.0.1 ...` (YARN's and Kubernetes' backends take the same flags);
- in local mode the tasks run in the driver JVM (`org.apache.spark.deploy.SparkSubmit ...`), whose
  executor Spark itself calls "driver".

The walk is a pure function over injected readers, so it is unit-tested with fake command lines.
The result is kept in a parseable one-line form ("executor 1 on 127.0.0.1 (stage 3 task 7
attempt 0)") in the TaskManager's `spark_executor_id`; `parse_executor_description` reads it back.
"""
from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable

from pydantic import BaseModel, Field

DRIVER_EXECUTOR_ID = "driver"  # Spark's own id for the driver's executor (SparkContext.DRIVER_IDENTIFIER)
UNKNOWN_EXECUTOR_ID = "unknown"
_MAX_DEPTH = 16  # python worker -> daemon -> JVM is 2 steps; container init wrappers add a few

CmdlineReader = Callable[[int], list[str] | None]
ParentReader = Callable[[int], int | None]


class SparkExecutorLocation(BaseModel):
    """Where a Spark task runs: executor id ("driver" in local mode), its host and JVM pid."""

    executor_id: str = Field(description='Spark executor id, "driver" in local mode, "unknown" if not found')
    host: str = Field(description="the executor's --hostname, or the driver host / this machine's name")
    jvm_pid: int | None = Field(None, description="pid of the executor's (or driver's) JVM")

    @property
    def is_driver(self) -> bool:
        return self.executor_id == DRIVER_EXECUTOR_ID


def _flag(argv: list[str], name: str) -> str | None:
    """Value of `--name value` or `--name=value` in argv."""
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg[len(name) + 1:]
    return None


def _driver_host(argv: list[str]) -> str | None:
    """spark.driver.host from SparkSubmit's `--conf k=v` or a `-Dspark.driver.host=` JVM option."""
    for i, arg in enumerate(argv):
        conf = argv[i + 1] if arg == "--conf" and i + 1 < len(argv) else arg[len("-D"):] if arg.startswith("-D") else None
        if conf is not None and conf.startswith("spark.driver.host="):
            return conf.split("=", 1)[1]
    return None


def _is_java(argv: list[str]) -> bool:
    return bool(argv) and os.path.basename(argv[0]) in ("java", "java.exe")


def classify_jvm(argv: list[str], default_host: str) -> SparkExecutorLocation | None:
    """The executor a JVM command line stands for, or None if it is neither an executor nor a driver."""
    if not _is_java(argv):
        return None
    executor_id = _flag(argv, "--executor-id")
    if executor_id is not None and any(a.endswith("ExecutorBackend") for a in argv):
        return SparkExecutorLocation(executor_id=executor_id, host=_flag(argv, "--hostname") or default_host)
    if "org.apache.spark.deploy.SparkSubmit" in argv:
        return SparkExecutorLocation(executor_id=DRIVER_EXECUTOR_ID, host=_driver_host(argv) or default_host)
    return None


def find_spark_executor(
    pid: int,
    read_cmdline: CmdlineReader,
    read_parent: ParentReader,
    default_host: str = "localhost",
) -> SparkExecutorLocation:
    """Walk from `pid` up through its ancestors to the first Spark executor or driver JVM."""
    seen: set[int] = set()
    current: int | None = pid
    for _ in range(_MAX_DEPTH):
        if current is None or current <= 1 or current in seen:
            break
        seen.add(current)
        argv = read_cmdline(current)
        if argv:
            found = classify_jvm(argv, default_host)
            if found is not None:
                return found.model_copy(update={"jvm_pid": current})
        current = read_parent(current)
    return SparkExecutorLocation(executor_id=UNKNOWN_EXECUTOR_ID, host=default_host)


def proc_cmdline(pid: int) -> list[str] | None:
    """argv of a process from /proc (None if it is gone or unreadable)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def proc_parent(pid: int) -> int | None:
    """Parent pid from /proc/<pid>/stat (the command name may hold spaces and parentheses)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def current_spark_executor(pid: int | None = None) -> SparkExecutorLocation:
    """The executor this process (a PySpark worker) runs in, from /proc."""
    return find_spark_executor(pid or os.getpid(), proc_cmdline, proc_parent, default_host=socket.gethostname())


def describe_executor(location: SparkExecutorLocation, stage_id: int | None = None, task_attempt_id: int | None = None, attempt: int | None = None) -> str:
    """One line for logs, the REST API and `parse_executor_description`."""
    text = f"executor {location.executor_id} on {location.host}"
    if stage_id is not None:
        text += f" (stage {stage_id} task {task_attempt_id} attempt {attempt})"
    return text


_DESCRIPTION = re.compile(r"^executor (?P<executor_id>\S+) on (?P<host>\S+)")


def parse_executor_description(text: str | None) -> SparkExecutorLocation | None:
    """Read `describe_executor`'s line back (None for anything else, e.g. a local-process TaskManager)."""
    if not text:
        return None
    match = _DESCRIPTION.match(text)
    if match is None:
        return None
    return SparkExecutorLocation(executor_id=match["executor_id"], host=match["host"])
