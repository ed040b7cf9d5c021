"""TaskManagers inside Spark executors, launched the way Ray-on-Spark launches its workers.

Each TaskManager is one long-running Spark task of a one-partition Spark job, submitted from a
background driver thread under its own job group (not barrier mode: Spark handles one lost task
without killing the others). The JobManager address and the cluster secret travel in the task
closure. Releasing a TaskManager tells it to exit and cancels its job group.
"""
from __future__ import annotations

import functools
import logging
import math
import os
import threading
from collections.abc import Iterator
from typing import Any

from runtime.jobmanager.resource_provider import TaskManagerSpec, TerminationHandler
from runtime.taskmanager.memory import TaskManagerMemoryConfig
from runtime.taskmanager.runner import TaskManagerConfig

log = logging.getLogger(__name__)


def _spark_task_main(cfg_json: str, _partition: Iterator[Any]) -> Iterator[str]:
    """Runs inside the Spark Python worker: become a TaskManager until released."""
    import logging as _logging

    from pyspark import TaskContext

    from runtime.deploy.spark_executor import UNKNOWN_EXECUTOR_ID, current_spark_executor, describe_executor
    from runtime.taskmanager.runner import parse_config, run_task_manager

    cfg = parse_config(cfg_json)
    ctx = TaskContext.get()
    if ctx is not None and ctx.attemptNumber() > 0:
        # Spark retried the task of a TaskManager that died; the ResourceManager has declared it
        # lost and asks for a fresh one itself, so this retry ends at once
        yield f"{cfg.tm_id}: retry {ctx.attemptNumber()} not started (the TaskManager was lost)"
        return
    # which executor this is (from the executor JVM's command line: PySpark does not tell a
    # worker), kept parseable for the REST API: "executor 1 on 127.0.0.1 (stage 3 task 7 attempt 0)"
    where = current_spark_executor()
    if ctx is not None:
        cfg.spark_executor_id = describe_executor(where, ctx.stageId(), ctx.taskAttemptId(), ctx.attemptNumber())
    else:
        cfg.spark_executor_id = describe_executor(where)
    on_cluster = not where.is_driver and where.executor_id != UNKNOWN_EXECUTOR_ID
    if on_cluster and where.host not in ("localhost", "127.0.0.1", "::1") and cfg.bind_host in ("127.0.0.1", "localhost"):
        # an executor on another host: a loopback data port would be unreachable from the others
        cfg.bind_host = where.host
    _logging.basicConfig(level=cfg.log_level, format=f"%(asctime)s %(levelname)s [tm {cfg.tm_id}] %(name)s: %(message)s")
    cause = run_task_manager(cfg)
    yield f"{cfg.tm_id} pid {os.getpid()}: {cause}"


def spark_failure_summary(e: BaseException, limit: int = 400) -> str:
    """The telling line of a Spark job failure (a Py4J error starts with 'An error occurred while calling ...')."""
    lines = [ln.strip(" :\t") for ln in str(e).splitlines() if ln.strip(" :\t")]
    telling = next((ln for ln in lines if "Exception:" in ln or "Error:" in ln), lines[0] if lines else type(e).__name__)
    return telling[:limit]


def task_cpus(cpu_cores: float) -> int:
    """Whole CPUs Spark reserves for a TaskManager of `cpu_cores` (Spark counts task CPUs in integers)."""
    return max(1, math.ceil(cpu_cores - 1e-9))


class SparkProvider:
    name = "Spark executors"

    def __init__(self, spark: Any, log_level: str = "INFO", memory: TaskManagerMemoryConfig | None = None) -> None:
        self.spark = spark
        self.sc = spark.sparkContext
        self.log_level = log_level
        self.memory = memory or TaskManagerMemoryConfig()  # each TaskManager's budget: its profile + this overhead
        self.threads: dict[str, threading.Thread] = {}
        self.outcomes: dict[str, str] = {}
        self._reapers: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._stage_profiles: dict[int, Any] = {}  # task CPUs -> pyspark ResourceProfile
        self._on_terminated: TerminationHandler | None = None

    def set_termination_handler(self, handler: TerminationHandler) -> None:
        self._on_terminated = handler

    @staticmethod
    def job_group(tm_id: str) -> str:
        return f"millrace-{tm_id}"

    def start_task_manager(self, tm_id: str, spec: TaskManagerSpec) -> None:
        cfg = TaskManagerConfig(
            tm_id=tm_id, jobmanager_host=spec.jm_host, jobmanager_port=spec.jm_port, secret=spec.secret,
            num_slots=spec.num_slots, resource_profile=spec.profile, log_level=self.log_level, memory=self.memory,
        )
        fn = functools.partial(_spark_task_main, cfg.model_dump_json())
        cpus = task_cpus(spec.profile.cpu_cores)

        def submit() -> None:
            # job groups are per thread (PySpark pins Python threads to JVM threads)
            self.sc.setJobGroup(self.job_group(tm_id), f"Millrace TaskManager {tm_id}", interruptOnCancel=True)
            try:
                rdd = self._reserve_cpus(self.sc.parallelize([0], 1), tm_id, cpus)
                out = rdd.mapPartitions(fn).collect()
                self.outcomes[tm_id] = out[0] if out else "ended"
            except Exception as e:  # noqa: BLE001 - cancelled on release, or the executor died
                summary = spark_failure_summary(e)
                self.outcomes[tm_id] = f"Spark job ended: {summary}"
                log.info("Spark job of TaskManager %s ended: %s", tm_id, summary)
            with self._lock:
                ours = self.threads.get(tm_id) is threading.current_thread()  # released ones were popped first
            if ours and self._on_terminated is not None:
                self._on_terminated(tm_id, f"its Spark task ended ({self.outcomes[tm_id]})")

        t = threading.Thread(target=submit, name=f"spark-tm-{tm_id}", daemon=True)
        with self._lock:
            self.threads[tm_id] = t
        t.start()
        log.info("submitted Spark job for TaskManager %s (job group %s)", tm_id, self.job_group(tm_id))

    def _reserve_cpus(self, rdd: Any, tm_id: str, cpus: int) -> Any:
        """Make Spark reserve the TaskManager's CPUs for its task (a stage-level task resource profile).

        Spark schedules a task onto an executor with that many free cores (standalone, YARN and
        Kubernetes support task-only profiles without dynamic allocation since Spark 3.4/3.5).
        Local mode has one executor and no per-task CPU accounting for custom profiles: the
        TaskManager runs anyway and shares the driver's cores.
        """
        if cpus <= self._default_task_cpus():
            return rdd
        master = str(self.sc.master)
        if master == "local" or master.startswith("local["):  # not local-cluster[...], which is standalone-like
            log.info(
                "TaskManager %s wants %d CPUs: Spark local mode cannot reserve CPUs per task, it shares the local cores", tm_id, cpus
            )
            return rdd
        try:
            return rdd.withResources(self._stage_profile(cpus))
        except Exception as e:  # noqa: BLE001 - e.g. a cluster manager without stage-level scheduling
            log.warning(
                "TaskManager %s: Spark refused a stage-level profile of %d task CPUs (%s); it starts without reserved CPUs",
                tm_id, cpus, str(e).splitlines()[0] if str(e) else type(e).__name__,
            )
            return rdd

    def _default_task_cpus(self) -> int:
        try:
            return int(self.sc.getConf().get("spark.task.cpus", "1"))
        except (TypeError, ValueError):
            return 1

    def _stage_profile(self, cpus: int) -> Any:
        """One pyspark ResourceProfile per CPU count (Spark registers each profile it sees)."""
        with self._lock:
            profile = self._stage_profiles.get(cpus)
            if profile is None:
                from pyspark.resource import ResourceProfileBuilder, TaskResourceRequests

                profile = ResourceProfileBuilder().require(TaskResourceRequests().cpus(cpus)).build
                self._stage_profiles[cpus] = profile
            return profile

    def describe(self, tm_id: str) -> str:
        return f"Spark job group {self.job_group(tm_id)}"

    def release_task_manager(self, tm_id: str) -> None:
        """Non-blocking (called on the ResourceManager's main thread): a reaper waits, then cancels."""
        with self._lock:
            t = self.threads.pop(tm_id, None)
        if t is None:
            return
        reaper = threading.Thread(target=self._reap, args=(tm_id, t), name=f"reap-{tm_id}", daemon=True)
        self._reapers.append(reaper)
        reaper.start()

    def _reap(self, tm_id: str, t: threading.Thread, grace_s: float = 5.0) -> None:
        t.join(grace_s)  # a released TaskManager exits by itself and its Spark task completes
        if not t.is_alive():
            return  # its Spark job ended with it (cancelling the group now only makes Spark warn)
        # lost or stuck: cancelling the job group interrupts its task and Spark kills the Python worker
        self.sc.cancelJobGroup(self.job_group(tm_id))
        t.join(15)

    def close(self) -> None:
        with self._lock:
            tms = list(self.threads)
        for tm_id in tms:
            self.release_task_manager(tm_id)
        for reaper in self._reapers:
            reaper.join(25)
