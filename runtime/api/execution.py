"""The seam between the API and whoever runs the job (Flink's PipelineExecutor / JobClient).

`StreamExecutionEnvironment.execute()` compiles the program to a JobGraph and hands it to the
current executor:
- one installed with `use_executor(...)` (tests, the CLI, the Dagster resources), the way
  Flink's TestStreamEnvironment.setAsContext does; otherwise
- the executor of the `execution.target` named in the job config (default "embedded"), made by
  a PipelineExecutorFactory found by name (Flink's PipelineExecutorServiceLoader): factories
  registered with `register_executor_factory(...)`, then the entry points of the group
  `millrace.executors` (pyproject.toml). The API never imports the deploy layer itself: it
  plugs in through that entry point.
"""
from __future__ import annotations

import contextlib
import contextvars
import threading
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Protocol, runtime_checkable

from runtime.core.errors import ConfigurationError
from runtime.core.options import deployment as deployment_options
from runtime.core.states import JobStatus
from runtime.graph.job_graph import JobGraph

# the option's key and default under their old names (declared in runtime.core.options.deployment)
EXECUTION_TARGET_KEY = deployment_options.EXECUTION_TARGET.key
DEFAULT_EXECUTION_TARGET = deployment_options.DEFAULT_EXECUTION_TARGET
EXECUTOR_ENTRY_POINT_GROUP = "millrace.executors"


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


@dataclass(frozen=True)
class JobFailure:
    """One failure a running job handled (restarted from, or failed by), as an attached client sees it."""

    timestamp_ms: int
    exception: str  # the exception's type name
    message: str
    operator: str | None = None
    task: str | None = None  # "<vertex> (i/p)#attempt"; None for a job-wide failure
    task_manager: str | None = None
    concurrent: int = 0  # other failures that came with it

    def describe(self) -> str:
        """One line: exception, first line of the message, operator, task (subtask), TaskManager."""
        lines = self.message.strip().splitlines()
        text = f"{self.exception}: {lines[0].strip() if lines else ''}"
        where = [f"operator '{self.operator}'"] if self.operator else []
        if self.task:
            where.append(f"task {self.task}")
        if self.task_manager:
            where.append(f"TaskManager {self.task_manager}")
        if where:
            text += f" ({', '.join(where)})"
        return text + (f" [+{self.concurrent} concurrent]" if self.concurrent else "")


FailureListener = Callable[[str, JobFailure], None]  # (job_id, failure), oldest first, each once


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
    def execute(
        self, job_graph: JobGraph, status_listener: StatusListener | None = None, failure_listener: FailureListener | None = None
    ) -> JobClient: ...


_current: contextvars.ContextVar[PipelineExecutor | None] = contextvars.ContextVar("millrace_executor", default=None)
_global: list[PipelineExecutor] = []
# the default is read-only: one object shared by every context that never set a configuration
_context_config: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar("millrace_config", default=types.MappingProxyType({}))


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


@runtime_checkable
class PipelineExecutorFactory(Protocol):
    """Makes the executor for one `execution.target` (Flink's PipelineExecutorFactory)."""

    def get_executor(self, config: Mapping[str, str]) -> PipelineExecutor: ...


# execution.target name -> factory (or a zero-argument callable returning one, e.g. its class)
_registered: dict[str, Any] = {}
_registry_lock = threading.Lock()


def register_executor_factory(name: str, factory: Any) -> None:
    """Make `execution.target: <name>` use `factory` (a PipelineExecutorFactory, or a class /
    zero-argument callable that returns one). Wins over an entry point of the same name."""
    if not isinstance(name, str) or not name.strip():
        raise ConfigurationError(f"executor factory name must be a non-empty string, got {name!r}")
    with _registry_lock:
        _registered[name.strip().lower()] = factory


def unregister_executor_factory(name: str) -> None:
    with _registry_lock:
        _registered.pop(name.strip().lower(), None)


def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name.strip().lower(): ep for ep in metadata.entry_points(group=EXECUTOR_ENTRY_POINT_GROUP)}


def known_execution_targets() -> list[str]:
    """Every `execution.target` name that resolves: registered factories and entry points."""
    with _registry_lock:
        names = set(_registered)
    return sorted(names | set(_entry_points()))


def _as_factory(obj: Any, name: str, origin: str) -> PipelineExecutorFactory:
    factory = obj
    if isinstance(obj, type) or (callable(obj) and not isinstance(obj, PipelineExecutorFactory)):
        factory = obj()  # a class, or a function returning the factory
    if not isinstance(factory, PipelineExecutorFactory):
        raise ConfigurationError(
            f"{EXECUTION_TARGET_KEY}: {name!r} ({origin}) is a {type(factory).__name__}, not a "
            "PipelineExecutorFactory (an object with get_executor(config))"
        )
    return factory


def executor_factory(name: str) -> PipelineExecutorFactory:
    """The factory for `execution.target: <name>`; ConfigurationError listing the known targets."""
    key = (name or "").strip().lower()
    with _registry_lock:
        registered = _registered.get(key)
    if registered is not None:
        return _as_factory(registered, key, "registered")
    eps = _entry_points()
    ep = eps.get(key)
    if ep is None:
        known = known_execution_targets()
        hint = (
            f"known targets: {', '.join(known)}"
            if known
            else f"no executors are known: the entry points of group {EXECUTOR_ENTRY_POINT_GROUP!r} are missing "
            "(install Millrace, e.g. `pip install -e .`)"
        )
        raise ConfigurationError(f"{EXECUTION_TARGET_KEY}: unknown target {name!r}; {hint}")
    try:
        loaded = ep.load()
    except Exception as e:  # a broken plugin must name itself
        raise ConfigurationError(
            f"{EXECUTION_TARGET_KEY}: the executor factory {ep.value!r} for target {key!r} failed to load: "
            f"{type(e).__name__}: {e}"
        ) from e
    return _as_factory(loaded, key, ep.value)


def current_executor(config: Mapping[str, str]) -> PipelineExecutor:
    """The executor installed with use_executor(), else the one `execution.target` names."""
    ex = _current.get() or (_global[-1] if _global else None)
    if ex is not None:
        return ex
    target = deployment_options.EXECUTION_TARGET.get(config)
    return executor_factory(target).get_executor(config)
