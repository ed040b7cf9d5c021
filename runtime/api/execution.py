"""The seam between the API and whoever runs the job (Flink's PipelineExecutor / JobClient).

`StreamExecutionEnvironment.execute()` compiles the program to a JobGraph and hands it to the
current executor. By default that is the embedded mini cluster (runtime.deploy.embedded);
tests, the CLI and the Dagster resources install another one with `use_executor(...)`, the way
Flink's TestStreamEnvironment.setAsContext does.
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Protocol

from runtime.core.states import JobStatus
from runtime.graph.job_graph import JobGraph


@dataclass
class JobExecutionResult:
    job_id: str
    job_name: str
    status: JobStatus
    net_runtime_ms: int = 0
    running_ms: int | None = None  # first task RUNNING -> end (no slot or TaskManager wait)
    accumulators: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)

    def get_job_id(self) -> str:
        return self.job_id

    def get_net_runtime(self) -> int:
        return self.net_runtime_ms

    def get_accumulator_result(self, name: str) -> Any:
        return self.accumulators.get(name)

    def get_all_accumulator_results(self) -> dict[str, Any]:
        return dict(self.accumulators)

    def is_job_execution_result(self) -> bool:
        return True


StatusListener = Callable[[str, JobStatus, "str | None"], None]  # (job_id, status, cause)


class JobClient(Protocol):
    @property
    def job_id(self) -> str: ...

    def get_job_status(self) -> JobStatus: ...

    def get_job_execution_result(self, timeout: float | None = None) -> JobExecutionResult:
        """Wait for the end; raises JobExecutionError (with the task's cause) unless FINISHED."""
        ...

    def cancel(self) -> None: ...

    def send_coordination_request(self, node_id: int, request: Any) -> Any: ...

    def close(self) -> None: ...


class PipelineExecutor(Protocol):
    def execute(self, job_graph: JobGraph, status_listener: StatusListener | None = None) -> JobClient: ...


_current: contextvars.ContextVar[PipelineExecutor | None] = contextvars.ContextVar("millrace_executor", default=None)
_global: list[PipelineExecutor] = []
_context_config: contextvars.ContextVar[dict[str, str]] = contextvars.ContextVar("millrace_config", default={})


@contextlib.contextmanager
def use_executor(
    executor: PipelineExecutor, *, config: dict[str, str] | None = None, global_default: bool = False
) -> Iterator[PipelineExecutor]:
    """Run `env.execute()` calls inside the block on `executor`.

    `config` (e.g. {"parallelism.default": "2"} from `millrace run --parallelism 2`) is the base
    configuration of environments created inside the block; the program's own settings win.
    `global_default=True` also applies to threads started inside the block.
    """
    token = _current.set(executor)
    ctoken = _context_config.set(dict(config or {}))
    if global_default:
        _global.append(executor)
    try:
        yield executor
    finally:
        _current.reset(token)
        _context_config.reset(ctoken)
        if global_default:
            _global.remove(executor)


def context_config() -> dict[str, str]:
    """Configuration installed by the runner (CLI, tests, Dagster) for environments created now."""
    return dict(_context_config.get())


def current_executor(config: dict[str, str]) -> PipelineExecutor:
    ex = _current.get() or (_global[-1] if _global else None)
    if ex is not None:
        return ex
    from runtime.deploy.embedded import EmbeddedExecutor  # lazy: the API must not need Spark

    return EmbeddedExecutor.from_config(config)
