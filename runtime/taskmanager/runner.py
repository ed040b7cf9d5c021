"""TaskManager process entry: connect to the JobManager, serve data, run tasks until told to stop.

The same code runs as a local subprocess (`python -m runtime.taskmanager.runner`) and inside a
Spark task (runtime.deploy.spark_provider). It exits when released, when its JobManager is gone,
or when its parent process (a Spark worker) dies.
"""
from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from runtime.core.errors import ConfigurationError
from runtime.core.gc_tuning import GcConfig, tune_gc
from runtime.rpc.messages import ResourceProfile
from runtime.taskmanager.memory import TaskManagerMemoryConfig, start_watchdog

log = logging.getLogger(__name__)

CONFIG_ENV = "MILLRACE_TM_CONFIG"


class TaskManagerConfig(BaseModel):
    """Everything a TaskManager needs; travels in the Spark task closure or an env variable."""

    tm_id: str
    jobmanager_host: str
    jobmanager_port: int
    secret: str = Field(repr=False)
    num_slots: int = 1
    bind_host: str = "127.0.0.1"
    resource_profile: ResourceProfile = Field(default_factory=ResourceProfile)
    watch_parent: bool = True
    spark_executor_id: str | None = None
    log_level: str = "INFO"
    # testing: every task waits this long once RUNNING, as on a slow machine (speculative execution tests)
    testing_task_delay_s: float = Field(0.0, ge=0)
    # what tasks print goes to the JobManager (the client's stdout when embedded; REST otherwise)
    forward_stdout: bool = True
    memory: TaskManagerMemoryConfig = Field(default_factory=TaskManagerMemoryConfig)
    gc: GcConfig = Field(default_factory=GcConfig)


# imported inside connector/operator functions (kept out of the client's import path), loaded up front
# here; runtime.state.rocksdb: a restore from a native RocksDB checkpoint (rocksdict, ~10 ms);
# runtime.storage.state_files: a writer cleaning up after a cancelled savepoint (storage.savepoints)
_LAZY_LIBRARIES = (
    "pyarrow", "pyarrow.fs", "pyarrow.parquet", "pyarrow.compute", "pyarrow.json", "deltalake", "runtime.state.rocksdb", "runtime.storage.state_files",
)


_OPERATOR_MODULES = ("runtime.api.common", "runtime.api.datastream")
_OPERATOR_PACKAGES = ("runtime.api.operators", "runtime.api.connectors")  # and every module in them


def _preload_operator_modules() -> None:
    """Import the API's operator and connector modules before any task arrives.

    Otherwise the first tasks of a fresh TaskManager import them from several task threads at
    once, and Python's import locks can raise `_DeadlockError` between modules that import each
    other (seen as "could not instantiate operator 'Map'"). The same goes for the libraries the
    connectors import lazily: two Delta sink subtasks opening at once on a fresh TaskManager saw
    "cannot import name 'BuildInfo' from partially initialized module 'pyarrow.lib'". Costs
    ~0.3 s once per TaskManager (pyarrow and deltalake ~0.1 s of it).
    """
    import importlib
    import pkgutil

    for library in _LAZY_LIBRARIES:
        importlib.import_module(library)
    # The operators a task runs are the job's code, loaded when its deployment is unpickled (Flink:
    # the user-code class loader), not a dependency of the TaskManager: it names them only here.
    for module in _OPERATOR_MODULES:
        importlib.import_module(module)
    for package in _OPERATOR_PACKAGES:
        pkg = importlib.import_module(package)
        for info in pkgutil.iter_modules(pkg.__path__, package + "."):
            importlib.import_module(info.name)


def run_task_manager(cfg: TaskManagerConfig) -> str:
    """Run until terminated; returns the termination cause."""
    from runtime.rpc.service import RpcService
    from runtime.taskmanager.network import NetworkEnvironment
    from runtime.taskmanager.task_executor import TaskExecutor

    parent = os.getppid()
    _preload_operator_modules()
    tune_gc(cfg.gc)
    # measured after the imports: raises ConfigurationError if the process alone exceeds the budget
    watchdog = start_watchdog(cfg.tm_id, cfg.resource_profile, cfg.memory)
    rpc = RpcService(cfg.secret, cfg.tm_id, host=cfg.bind_host, listen=False).start()
    network = NetworkEnvironment(cfg.secret, cfg.tm_id, host=cfg.bind_host)
    network.start()
    te: TaskExecutor | None = None
    log_forwarder: tuple[logging.Handler, Any] | None = None
    try:
        jm_peer = rpc.connect(cfg.jobmanager_host, cfg.jobmanager_port)
        te = TaskExecutor(
            rpc, cfg.tm_id, jm_peer, network, cfg.num_slots, cfg.resource_profile, cfg.spark_executor_id
        )
        te.task_start_delay_s = cfg.testing_task_delay_s
        te.memory_watchdog = watchdog
        if cfg.forward_stdout:
            te.stdout = _forward_stdout(te, cfg.tm_id)
            log_forwarder = _forward_log(te, cfg.tm_id)
        te.start()
        while not te.terminated.wait(0.5):
            if cfg.watch_parent and os.getppid() != parent:
                te.terminate(f"parent process {parent} died")
        cause = te.termination_cause
        # let cancelled tasks unwind before the process goes away
        deadline = time.monotonic() + 5
        while te.tasks and time.monotonic() < deadline:
            time.sleep(0.05)
        return cause
    finally:
        if te is not None and te.stdout is not None:
            from runtime.taskmanager.stdout import uninstall

            uninstall(te.stdout)  # ships what is left
            if log_forwarder is not None:
                logging.getLogger().removeHandler(log_forwarder[0])
                log_forwarder[1].close()
        if te is not None:
            te.stop()
        network.shutdown()
        rpc.stop()
        if te is not None and te.fatal:
            # a task thread is stuck in user code: only ending the process stops it (also inside
            # a Spark worker, which Spark then replaces)
            logging.shutdown()
            _flush_std_streams()
            os._exit(1)


def _forward_stdout(te: Any, tm_id: str) -> Any:
    from runtime.rpc.messages import TaskManagerStdout
    from runtime.taskmanager.stdout import install

    rm = te._rm
    return install(lambda text: rm.call_sync("task_manager_stdout", TaskManagerStdout(tm_id=tm_id, text=text), timeout=10))


def _forward_log(te: Any, tm_id: str) -> tuple[logging.Handler, Any]:
    """The TaskManager's log records (INFO and up) to the ResourceManager too (REST /taskmanagers/{id}/log)."""
    from runtime.rpc.messages import TaskManagerStdout
    from runtime.taskmanager.stdout import StdoutForwarder

    rm = te._rm
    forwarder = StdoutForwarder(
        lambda text: rm.call_sync("task_manager_stdout", TaskManagerStdout(tm_id=tm_id, text=text, stream="log"), timeout=10),
        interval_s=0.5, fallback=sys.__stderr__,
    )
    handler = logging.StreamHandler(forwarder)
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    # the forwarders' own threads never log into a forwarder (a full buffer would wait for itself)
    handler.addFilter(lambda record: record.threadName != "stdout-forwarder")
    logging.getLogger().addHandler(handler)
    # a forked snapshot writer has no forwarder thread, and the forwarder's lock may have been held
    # at the fork (logging resets its own locks in the child, not this one): the child logs to stderr only
    os.register_at_fork(after_in_child=lambda: logging.getLogger().removeHandler(handler))
    return handler, forwarder


def _flush_std_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed pipe must not stop the exit
            pass


def parse_config(raw: str) -> TaskManagerConfig:
    """Validate a TaskManager config without ever echoing it (it holds the cluster secret)."""
    try:
        return TaskManagerConfig.model_validate_json(raw)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'config'}: {err['msg']}" for err in e.errors())
        raise ConfigurationError(
            f"invalid TaskManager config ({problems}); do the JobManager and TaskManager run the same Millrace version?"
        ) from None


def main() -> None:
    raw = os.environ.pop(CONFIG_ENV, None)  # popped: processes started by user code must not inherit the secret
    if not raw:
        sys.exit(f"{CONFIG_ENV} is not set: a TaskManager needs its config (JobManager address, secret)")
    try:
        cfg = parse_config(raw)
    except ConfigurationError as e:
        sys.exit(str(e))
    logging.basicConfig(
        level=cfg.log_level,
        format=f"%(asctime)s %(levelname)s [tm {cfg.tm_id}] %(name)s: %(message)s",
    )
    try:
        cause = run_task_manager(cfg)
    except ConfigurationError as e:
        log.error("TaskManager %s cannot start: %s", cfg.tm_id, e)
        logging.shutdown()
        sys.exit(str(e))
    log.info("TaskManager %s exits: %s", cfg.tm_id, cause)
    logging.shutdown()
    _flush_std_streams()  # os._exit skips it: what user code printed would be lost
    os._exit(0)  # task threads stuck in user code must not keep the process alive


if __name__ == "__main__":
    main()
