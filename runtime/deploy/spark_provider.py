"""TaskManagers inside Spark executors, launched the way Ray-on-Spark launches its workers.

Each TaskManager is one long-running Spark task of a one-partition Spark job, submitted from a
background driver thread under its own job group (not barrier mode: Spark handles one lost task
without killing the others). The JobManager address and the cluster secret travel in the task
closure. Releasing a TaskManager tells it to exit and cancels its job group.
"""
from __future__ import annotations

import functools
import logging
import os
import threading
from typing import Any, Iterator

from runtime.jobmanager.resource_provider import TaskManagerSpec
from runtime.taskmanager.runner import TaskManagerConfig

log = logging.getLogger(__name__)


def _spark_task_main(cfg_json: str, _partition: Iterator[Any]) -> Iterator[str]:
    """Runs inside the Spark Python worker: become a TaskManager until released."""
    import logging as _logging

    from pyspark import TaskContext

    from runtime.taskmanager.runner import parse_config, run_task_manager

    cfg = parse_config(cfg_json)
    ctx = TaskContext.get()
    if ctx is not None and ctx.attemptNumber() > 0:
        # Spark retried the task of a TaskManager that died; the ResourceManager has declared it
        # lost and asks for a fresh one itself, so this retry ends at once
        yield f"{cfg.tm_id}: retry {ctx.attemptNumber()} not started (the TaskManager was lost)"
        return
    if ctx is not None:
        cfg.spark_executor_id = f"stage {ctx.stageId()} task {ctx.taskAttemptId()} (attempt {ctx.attemptNumber()})"
    _logging.basicConfig(level=cfg.log_level, format=f"%(asctime)s %(levelname)s [tm {cfg.tm_id}] %(name)s: %(message)s")
    cause = run_task_manager(cfg)
    yield f"{cfg.tm_id} pid {os.getpid()}: {cause}"


class SparkProvider:
    name = "Spark executors"

    def __init__(self, spark: Any, log_level: str = "INFO") -> None:
        self.spark = spark
        self.sc = spark.sparkContext
        self.log_level = log_level
        self.threads: dict[str, threading.Thread] = {}
        self.outcomes: dict[str, str] = {}
        self._reapers: list[threading.Thread] = []
        self._lock = threading.Lock()

    @staticmethod
    def job_group(tm_id: str) -> str:
        return f"millrace-{tm_id}"

    def start_task_manager(self, tm_id: str, spec: TaskManagerSpec) -> None:
        cfg = TaskManagerConfig(
            tm_id=tm_id, jobmanager_host=spec.jm_host, jobmanager_port=spec.jm_port, secret=spec.secret,
            num_slots=spec.slots_per_tm, resource_profile=spec.profile, log_level=self.log_level,
        )
        fn = functools.partial(_spark_task_main, cfg.model_dump_json())

        def submit() -> None:
            # job groups are per thread (PySpark pins Python threads to JVM threads)
            self.sc.setJobGroup(self.job_group(tm_id), f"Millrace TaskManager {tm_id}", interruptOnCancel=True)
            try:
                out = self.sc.parallelize([0], 1).mapPartitions(fn).collect()
                self.outcomes[tm_id] = out[0] if out else "ended"
            except Exception as e:  # noqa: BLE001 - cancelled on release, or the executor died
                self.outcomes[tm_id] = f"Spark job ended: {type(e).__name__}"
                log.info("Spark job of TaskManager %s ended: %s", tm_id, str(e).splitlines()[0] if str(e) else type(e).__name__)

        t = threading.Thread(target=submit, name=f"spark-tm-{tm_id}", daemon=True)
        with self._lock:
            self.threads[tm_id] = t
        t.start()
        log.info("submitted Spark job for TaskManager %s (job group %s)", tm_id, self.job_group(tm_id))

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
        # then the job group goes too; if the TaskManager was lost or stuck, this interrupts its
        # task and Spark kills the Python worker
        self.sc.cancelJobGroup(self.job_group(tm_id))
        t.join(15)

    def close(self) -> None:
        with self._lock:
            tms = list(self.threads)
        for tm_id in tms:
            self.release_task_manager(tm_id)
        for reaper in self._reapers:
            reaper.join(25)
