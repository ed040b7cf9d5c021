"""Client side of cluster processes: start a JobManager process and wait until it serves; stop one.

The process runs `runtime.deploy.cluster_entrypoint` in its own session (process group), so a
terminal's Ctrl-C does not reach a session cluster and `stop` can always reach all of it. Until
it is ready it belongs to the command that starts it: interrupting that command stops it.
"""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from runtime.core.errors import MillraceError
from runtime.deploy.cluster_entrypoint import CONFIG_ENV, ClusterConfig
from runtime.deploy.cluster_file import ClusterEndpoint, cluster_file_path, process_alive, read_cluster_file, remove_cluster_file

log = logging.getLogger(__name__)

LOG_FILE_ENV = "MILLRACE_LOG_FILE"


class ClusterStartError(MillraceError):
    pass


def _log_tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def start_cluster_process(config: ClusterConfig, timeout_s: float = 180.0, inherit_output: bool = False) -> tuple[subprocess.Popen, ClusterEndpoint]:
    """Start a cluster entrypoint and return once its REST API is up and cluster.json written."""
    home = Path(config.home)
    home.mkdir(parents=True, exist_ok=True)
    path = cluster_file_path(home)
    if path.exists():
        existing = read_cluster_file(home)
        if process_alive(existing.pid):
            raise ClusterStartError(
                f"a {existing.mode} cluster is already running at {existing.url} (pid {existing.pid}); stop it first with `millrace cluster stop`"
            )
        path.unlink()  # left behind by a cluster that died
    log_path = home / f"jobmanager-{config.mode}.log"
    env = dict(os.environ)
    env[CONFIG_ENV] = config.model_dump_json()
    env[LOG_FILE_ENV] = str(log_path)
    out = open(log_path, "ab")
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "runtime.deploy.cluster_entrypoint"],
            env=env, stdin=subprocess.DEVNULL,
            stdout=None if inherit_output else out, stderr=None if inherit_output else subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        out.close()
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            if path.exists():
                try:
                    endpoint = read_cluster_file(home)
                except MillraceError:
                    endpoint = None  # being written
                if endpoint is not None and endpoint.pid == proc.pid:
                    return proc, endpoint
            code = proc.poll()
            if code is not None:
                raise ClusterStartError(
                    f"the {config.mode} cluster exited with code {code} before it was ready; its log ({log_path}) ends with:\n{_log_tail(log_path)}"
                )
            if time.monotonic() > deadline:
                raise ClusterStartError(
                    f"the {config.mode} cluster was not ready within {timeout_s:.0f}s and was stopped; "
                    f"its log ({log_path}) ends with:\n{_log_tail(log_path)}"
                )
            time.sleep(0.1)
    except BaseException:
        # Ctrl-C or SIGTERM (the CLI raises KeyboardInterrupt for both) or a start that failed:
        # the cluster runs in its own session, out of reach of the terminal's signal, so it would
        # come up and serve with nobody knowing; stop what it started so far
        abort_start(proc, home)
        raise


def abort_start(proc: subprocess.Popen, home: Path, grace_s: float = 30.0) -> None:
    """Stop a cluster process that is not ready yet: SIGTERM to it alone (its handler aborts the start
    and stops what was started, the Spark JVM included), then SIGKILL to its whole process group."""
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            stopped = wait_for_exit(proc.pid, grace_s, proc)
        except KeyboardInterrupt:  # asked again: do not wait for the orderly stop
            stopped = False
        if not stopped:
            log.warning("the cluster process %d did not stop within %.0fs of SIGTERM; killing its process group", proc.pid, grace_s)
    # whatever it left in its group (a JVM whose stop was cut short) goes with it
    _kill_group(proc.pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.wait(10)
    remove_cluster_file(proc.pid, home)


def _kill_group(pid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def wait_for_exit(pid: int, timeout_s: float, proc: subprocess.Popen | None = None) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return True
        if proc is None and not process_alive(pid):
            return True
        time.sleep(0.1)
    return False


def stop_cluster(endpoint: ClusterEndpoint, home: str | Path | None = None, timeout_s: float = 60.0, proc: subprocess.Popen | None = None) -> str:
    """Ask the cluster to stop (REST), then SIGTERM, then SIGKILL its process group; returns how it stopped."""
    from runtime.deploy.remote import rest_client

    how = "stopped"
    try:
        rest_client(endpoint, timeout=10).shutdown_cluster()
    except Exception as e:  # noqa: BLE001 - unreachable: fall back to signals
        log.warning("cluster at %s did not take the shutdown request (%s); sending SIGTERM", endpoint.url, e)
        _kill_group(endpoint.pid, signal.SIGTERM)
        how = "stopped with SIGTERM"
    if not wait_for_exit(endpoint.pid, timeout_s, proc):
        _kill_group(endpoint.pid, signal.SIGKILL)
        wait_for_exit(endpoint.pid, 10, proc)
        how = "killed (it did not stop in time)"
    # TaskManagers and the Spark JVM share the cluster's process group: nothing may outlive it
    _kill_group(endpoint.pid, signal.SIGKILL)
    if home is not None:
        remove_cluster_file(endpoint.pid, home)
    return how
