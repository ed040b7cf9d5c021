"""The JobManager process of a session, per-job or application cluster (Flink: ClusterEntrypoint).

It starts the Spark driver (TaskManagers run on its executors), the Dispatcher and ResourceManager,
and the REST API, then writes `cluster.json` (URL, token, pid) so clients find it.

- session: runs until `DELETE /cluster`, SIGTERM or SIGINT; TaskManagers are started up front.
- per-job: serves one job; TaskManagers are requested on demand; shuts down once that job ended
  and its client fetched the result (or after a grace period, for detached clients).
- application: runs the program's main() here, in the JobManager process (Flink's
  ApplicationClusterEntryPoint); the cluster lives as long as the application.

Started by `millrace cluster start` / `millrace run --mode per-job|application` as
`python -m runtime.deploy.cluster_entrypoint` with its config in MILLRACE_CLUSTER_CONFIG.
"""
from __future__ import annotations

import logging
import os
import secrets
import signal
import sys
import threading
import time
import traceback
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from runtime.api.execution import use_executor
from runtime.core.gc_tuning import GcConfig, tune_gc
from runtime.core.options.high_availability import HighAvailabilitySettings
from runtime.core.states import JobStatus
from runtime.deploy.cluster_file import ClusterEndpoint, HaClientSettings, remove_cluster_file, write_cluster_file
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig
from runtime.deploy.program import run_program
from runtime.rpc import messages as m

log = logging.getLogger("millrace.cluster")

CONFIG_ENV = "MILLRACE_CLUSTER_CONFIG"
Mode = Literal["session", "per-job", "application"]


class ApplicationSpec(BaseModel):
    program: str = Field(description="path of the Python program whose main runs in the JobManager")
    args: list[str] = Field(default_factory=list)
    config: dict[str, str] = Field(default_factory=dict, description="job configuration, e.g. parallelism.default")


# what a session cluster gets unless told otherwise: one TaskManager started up front and kept, at
# most 8, the ones above the minimum released after 30 s idle (Flink: resourcemanager.taskmanager-timeout)
DEFAULT_MAX_TASK_MANAGERS = 8
SESSION_CLUSTER_DEFAULTS: dict[str, Any] = {
    "provider": "spark",
    "resource_manager": {
        "initial_task_managers": 1, "min_task_managers": 1, "max_task_managers": DEFAULT_MAX_TASK_MANAGERS, "idle_timeout_s": 30.0,
    },
}

# the flat names ClusterConfig took before the JobManager and its TaskManagers were one nested
# MiniClusterConfig (the CLI and benchmarks pass them): flat name -> MiniClusterConfig field
FLAT_CLUSTER_FIELDS = {"provider": "provider", "host": "host", "rpc_port": "port", "task_manager_memory": "task_manager_memory"}
# flat names of the ResourceManager's settings: `task_managers` is the session's minimum, started up front
FLAT_CLUSTER_RESOURCE_MANAGER_FIELDS = {
    "slots_per_task_manager": "slots_per_tm", "max_task_managers": "max_task_managers", "idle_timeout_s": "idle_timeout_s",
    "evenly_spread_out_slots": "evenly_spread_out_slots", "dynamic_slots": "dynamic_slots",
}


def _as_dict(value: Any) -> dict[str, Any]:
    return value.model_dump() if isinstance(value, BaseModel) else dict(value or {})


class ClusterConfig(BaseModel):
    """Everything `millrace cluster start` / `run --mode ...` can set, with the defaults a session gets.

    The JobManager and its TaskManagers are one nested MiniClusterConfig (`cluster`), handed to the
    MiniCluster whole; the flat names the CLI uses (provider, host, rpc_port, task_managers,
    slots_per_task_manager, max_task_managers, idle_timeout_s, task_manager_memory, log_level) are
    still accepted and land in it.
    """

    mode: Mode = "session"
    home: str = Field(description="folder of cluster.json and the log")
    spark_master: str | None = Field(None, description="Spark master URL; default local[max_task_managers]")
    rest_port: int = Field(0, ge=0, le=65535, description="0 = any free port")
    rest_max_content_length: int = Field(
        104_857_600, ge=1024, description="largest request body the REST API accepts, in bytes (Flink: rest.server.max-content-length)"
    )
    log_level: str = Field("INFO", description="the JobManager process's log level (and the TaskManagers' unless cluster.tm_log_level is set)")
    result_grace_s: float = Field(10.0, description="per-job/application: how long the REST API outlives the work when nobody fetches the result")
    application: ApplicationSpec | None = None
    high_availability: HighAvailabilitySettings = Field(
        default_factory=HighAvailabilitySettings, description="high-availability.*: a leader elected through ZooKeeper, standbys, recovery"
    )
    cluster: MiniClusterConfig = Field(
        default_factory=lambda: MiniClusterConfig.model_validate(SESSION_CLUSTER_DEFAULTS),
        description="the JobManager (its RPC address: also the REST API's and the Spark driver's) and its TaskManagers; "
        "per-job and application clusters start none up front and keep none idle",
    )

    @model_validator(mode="before")
    @classmethod
    def _nest_flat_fields(cls, data: Any) -> Any:
        """The flat names into `cluster`, over the session defaults (and over a `cluster` given too)."""
        if not isinstance(data, dict):
            return data
        out = dict(data)
        given = _as_dict(out.pop("cluster", None))
        cluster = {**SESSION_CLUSTER_DEFAULTS, **given}
        rm = {**SESSION_CLUSTER_DEFAULTS["resource_manager"], **_as_dict(given.get("resource_manager"))}
        for flat, field in FLAT_CLUSTER_FIELDS.items():
            if flat in out:
                cluster[field] = out.pop(flat)
        for flat, field in FLAT_CLUSTER_RESOURCE_MANAGER_FIELDS.items():
            if flat in out:
                rm[field] = out.pop(flat)
        if "task_managers" in out:  # a session's TaskManagers: started up front, and never fewer
            rm["initial_task_managers"] = rm["min_task_managers"] = out.pop("task_managers")
        if "log_level" in out and "tm_log_level" not in given:
            cluster["tm_log_level"] = out["log_level"]
        out["cluster"] = {**cluster, "resource_manager": rm}
        return out

    @model_validator(mode="after")
    def _ha_fits_the_mode(self) -> ClusterConfig:
        if self.mode == "application" and self.high_availability.enabled:
            raise ValueError(
                "high availability is not supported in application mode: a JobManager that takes over would run the "
                "program's main() again and submit its jobs anew; run the program on an HA session or per-job cluster"
            )
        return self

    @property
    def max_task_managers(self) -> int:
        cap = self.cluster.resource_manager.max_task_managers
        return DEFAULT_MAX_TASK_MANAGERS if cap is None else cap

    def spark_master_url(self) -> str:
        return self.spark_master or f"local[{max(2, self.max_task_managers)}]"


class _Hooks:
    """What the REST API asks of the cluster (info, shutdown) and what the lifecycle watches."""

    def __init__(self, config: ClusterConfig) -> None:
        self.config = config
        self.started_at_ms = int(time.time() * 1000)
        self.stop_requested = threading.Event()
        self.application_status: str | None = "RUNNING" if config.mode == "application" else None
        self.application_error: str | None = None
        self.application_jobs: list[str] = []

    ha: Any = None  # ZooKeeperHaServices, once started

    def info(self) -> Any:
        from runtime.rest.models import ApplicationStatus, ClusterInfo, HighAvailabilityInfo
        from runtime.version import __version__

        app = None
        if self.application_status is not None:
            app = ApplicationStatus(status=self.application_status, error=self.application_error, job_ids=list(self.application_jobs))
        ha = None if self.ha is None else HighAvailabilityInfo.model_validate(self.ha.describe())
        return ClusterInfo(
            mode=self.config.mode, started_at_ms=self.started_at_ms, pid=os.getpid(), millrace_version=__version__, application=app,
            high_availability=ha,
        )

    def shutdown(self) -> None:
        log.info("[cluster] shutdown requested")
        self.stop_requested.set()


class _RecordingExecutor:
    """Application mode: jobs go to this process's Dispatcher; their ids are recorded for clients."""

    def __init__(self, cluster: MiniCluster, hooks: _Hooks) -> None:
        self.cluster, self.hooks = cluster, hooks

    def execute(self, job_graph: Any, status_listener: Any = None, failure_listener: Any = None) -> Any:
        client = self.cluster.submit(job_graph, status_listener, failure_listener)
        self.hooks.application_jobs.append(client.job_id)
        log.info("[cluster] application submitted job %s '%s'", client.job_id, job_graph.job_name)
        return client


class ClusterEntrypoint:
    def __init__(self, config: ClusterConfig) -> None:
        self.config = config
        self.hooks = _Hooks(config)
        self.token = secrets.token_urlsafe(32)
        self.spark: Any = None
        self.cluster: MiniCluster | None = None
        self.rest: Any = None
        self.ha: Any = None  # ZooKeeperHaServices with high availability
        self._spark_starting = False  # a stop signal now aborts the Spark start at once

    def install_signal_handlers(self) -> None:
        """SIGTERM and SIGINT (`millrace cluster stop`'s fallback, Ctrl-C, an aborted `cluster start`)
        stop the cluster in order. Installed again once Spark is up: PySpark's SparkContext takes
        SIGINT over with a handler that cancels every Spark job, i.e. kills the TaskManagers under
        running jobs (they would fail instead of being cancelled)."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_stop_signal)

    def _on_stop_signal(self, _signum: int, _frame: Any) -> None:
        self.hooks.shutdown()
        if self._spark_starting:
            # starting Spark takes seconds; its JVM ignores SIGINT and only build_spark_session's
            # clean-up stops it while it starts (the rest of the start checks stop_requested)
            raise KeyboardInterrupt

    def _stop_if_requested(self) -> None:
        if self.hooks.stop_requested.is_set():
            raise KeyboardInterrupt

    def _start_ha(self) -> None:
        """Before anything else: an unreachable ZooKeeper fails the start within its connection
        timeout, naming the quorum. The JobManagers of one HA cluster share one REST token (kept in
        the HA storage dir, readable by its owner only), so a client's token works on any leader."""
        from runtime.ha.services import ZooKeeperHaServices

        warehouse = os.environ.get("MILLRACE_WAREHOUSE") or os.path.join(os.getcwd(), "warehouse")
        self.ha = ZooKeeperHaServices(self.config.high_availability, warehouse)
        self.hooks.ha = self.ha
        self.token = shared_token(os.path.join(self.ha.storage_dir, self.config.high_availability.cluster_id, "rest-token"))
        log.info("[cluster] high availability: ZooKeeper %s, cluster %s, stores in %s",
                 self.config.high_availability.quorum, self.config.high_availability.cluster_path, self.ha.storage_dir)

    def start(self) -> ClusterEndpoint:
        from runtime.rest.app import create_app
        from runtime.rest.server import RestServer

        cfg = self.config
        if cfg.high_availability.enabled:
            self._start_ha()
        if cfg.cluster.provider == "spark":
            from runtime.deploy.spark_session import SparkSessionConfig, build_spark_session

            started = time.monotonic()
            self._stop_if_requested()
            self._spark_starting = True
            try:
                self.spark = build_spark_session(
                    SparkSessionConfig(master=cfg.spark_master_url(), app_name=f"millrace-{cfg.mode}-cluster", driver_host=cfg.cluster.host)
                )
            finally:
                self._spark_starting = False
            self.install_signal_handlers()
            log.info("[cluster] Spark driver up on %s in %.1fs", cfg.spark_master_url(), time.monotonic() - started)
            self._stop_if_requested()
        # session mode pre-starts TaskManagers and keeps them; per-job/application ask on demand
        cluster = cfg.cluster if cfg.mode == "session" else cfg.cluster.with_task_managers_on_demand()
        self.cluster = MiniCluster(cluster, spark=self.spark, ha=None if self.ha is None else self.ha.dispatcher_services()).start()
        app = create_app(self.cluster.dispatcher_gateway(), self.cluster.resource_manager_gateway(), self.token, self.hooks,
                         max_content_length=cfg.rest_max_content_length)
        self.rest = RestServer(app, host=cfg.cluster.host, port=cfg.rest_port).start()
        ha_client = None
        if self.ha is not None:
            ha_client = HaClientSettings(quorum=cfg.high_availability.quorum or "", cluster_path=cfg.high_availability.cluster_path)
        endpoint = ClusterEndpoint(
            url=self.rest.url, token=self.token, pid=os.getpid(), mode=cfg.mode, log=os.environ.get("MILLRACE_LOG_FILE"),
            started_at_ms=self.hooks.started_at_ms, ha=ha_client,
        )
        self._stop_if_requested()  # never announce a cluster that is about to stop
        if self.ha is not None:  # a contender once it serves: elected, it recovers the stores' jobs at once
            assert self.cluster.dispatcher is not None
            self.ha.start_election(self.cluster.dispatcher, self.rest.url)
        write_cluster_file(endpoint, cfg.home)
        log.info("[cluster] %s cluster ready: REST API at %s, JobManager RPC at %s:%d", cfg.mode, self.rest.url, *self.cluster.address)
        return endpoint

    # --- lifecycles -------------------------------------------------------------------------------
    def run(self) -> int:
        if self.config.mode == "session":
            self.hooks.stop_requested.wait()
            return 0
        if self.config.mode == "per-job":
            return self._serve_one_job()
        return self._run_application()

    def _jobs(self) -> list[m.JobOverview]:
        assert self.cluster is not None
        return self.cluster.dispatcher_gateway().call_sync("list_jobs", m.Empty()).jobs

    def _serve_one_job(self) -> int:
        while not self.hooks.stop_requested.wait(0.2):
            jobs = self._jobs()
            if jobs and all(j.status.is_globally_terminal for j in jobs):
                status = jobs[0].status
                log.info("[cluster] per-job cluster: job %s ended %s", jobs[0].job_id, status.name)
                self._linger()
                return 0 if status is JobStatus.FINISHED else 1
        return 0

    def _run_application(self) -> int:
        spec = self.config.application
        assert spec is not None
        log.info("[cluster] application %s %s: main() runs in the JobManager (pid %d)", spec.program, " ".join(spec.args), os.getpid())
        # main() runs on its own thread so a stop request (SIGTERM, DELETE /cluster) is still heard
        main_thread = threading.Thread(target=self._application_main, args=(spec,), name="application-main", daemon=True)
        main_thread.start()
        while main_thread.is_alive() and not self.hooks.stop_requested.wait(0.2):
            pass
        if main_thread.is_alive():
            self.hooks.application_status = "FAILED"
            self.hooks.application_error = "the cluster was stopped before the application ended"
            return 1
        self._linger()
        return 0 if self.hooks.application_status == "FINISHED" else 1

    def _application_main(self, spec: ApplicationSpec) -> None:
        assert self.cluster is not None
        try:
            with use_executor(_RecordingExecutor(self.cluster, self.hooks), config=spec.config, global_default=True):
                run_program(spec.program, spec.args)
            self.hooks.application_status = "FINISHED"
        except BaseException as e:  # noqa: BLE001 - the application's failure is its result, reported to clients
            self.hooks.application_error = f"{type(e).__name__}: {e}"
            self.hooks.application_status = "FAILED"
            log.error("[cluster] application failed:\n%s", traceback.format_exc())
        log.info("[cluster] application %s", self.hooks.application_status)

    def _linger(self) -> None:
        """Keep the REST API up a little so an attached client can read the outcome (it then says stop)."""
        self.hooks.stop_requested.wait(self.config.result_grace_s)

    def close(self) -> None:
        """Stop everything this process started, also after a failed or interrupted start; each step
        runs even when one before it failed (e.g. Spark's JVM already killed by a SIGTERM to the group)."""
        self._spark_starting = False
        self.install_signal_handlers()  # a second Ctrl-C must not cut the clean-up short (PySpark's handler would)
        remove_cluster_file(os.getpid(), self.config.home)
        # the JobManager before Spark: it cancels running jobs and waits for them, on live TaskManagers;
        # with HA it suspends them, and leaves the election right after, so a standby takes over at once
        dispatcher = self.cluster.dispatcher if self.cluster is not None else None
        steps: tuple[tuple[str, Any, str], ...] = (("REST API", self.rest, "stop"),)
        if self.ha is not None:
            steps += (("Dispatcher", dispatcher, "stop"), ("leader election", self.ha, "close"))
        steps += (("JobManager", self.cluster, "close"), ("Spark session", self.spark, "stop"))
        for name, part, method in steps:
            if part is None:
                continue
            try:
                getattr(part, method)()
            except Exception as e:  # the next steps must still run
                log.warning("[cluster] stopping the %s failed: %s", name, e, exc_info=log.isEnabledFor(logging.DEBUG))
        if self.config.cluster.provider == "spark":
            from runtime.deploy.spark_session import kill_spark_jvms

            # the JVM lives on after spark.stop() until this process exits (or for good, if its
            # start was interrupted): end it here, so nothing outlives the cluster process
            kill_spark_jvms()
        log.info("[cluster] stopped")


def shared_token(path: str) -> str:
    """The token in `path`, created (0600, exclusively: two JobManagers starting at once agree) if absent."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        for _ in range(50):  # the other JobManager may be writing it right now
            with open(path) as f:
                token = f.read().strip()
            if token:
                return token
            time.sleep(0.05)
        raise RuntimeError(f"the HA cluster's token file {path} is empty") from None
    token = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w") as f:
        f.write(token)
    return token


def main() -> None:
    raw = os.environ.pop(CONFIG_ENV, None)
    if raw is None:
        print(f"{CONFIG_ENV} is not set: start clusters with `millrace cluster start`", file=sys.stderr)
        sys.exit(2)
    config = ClusterConfig.model_validate_json(raw)
    logging.basicConfig(level=config.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    tune_gc(GcConfig())  # the JobManager's process
    entrypoint = ClusterEntrypoint(config)
    entrypoint.install_signal_handlers()
    code = 1
    try:
        entrypoint.start()
        code = entrypoint.run()
    except KeyboardInterrupt:  # a stop signal while the cluster started
        log.warning("[cluster] stopped while starting (stop requested)")
    except Exception:  # the log is where the cluster's operator looks
        log.exception("[cluster] failed")
    finally:
        entrypoint.close()
    sys.exit(code)


if __name__ == "__main__":
    main()
