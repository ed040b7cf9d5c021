"""TaskManagers as plain local subprocesses (tests, machines without Spark)."""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable

from runtime.jobmanager.resource_provider import TaskManagerSpec, TerminationHandler
from runtime.taskmanager.memory import TaskManagerMemoryConfig
from runtime.taskmanager.runner import CONFIG_ENV, TaskManagerConfig

log = logging.getLogger(__name__)


class LocalProcessProvider:
    name = "local processes"

    def __init__(self, log_level: str = "INFO", memory: TaskManagerMemoryConfig | None = None) -> None:
        self.log_level = log_level
        self.memory = memory or TaskManagerMemoryConfig()  # each TaskManager's budget: its profile + this overhead
        self.command = [sys.executable, "-m", "runtime.taskmanager.runner"]  # reads its config from CONFIG_ENV
        self.processes: dict[str, subprocess.Popen] = {}
        self._reapers: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._on_terminated: TerminationHandler | None = None
        # settable (tests): adjusts each TaskManager's config before it starts, e.g. one slow TaskManager
        self.configure: Callable[[TaskManagerConfig], TaskManagerConfig] | None = None

    def set_termination_handler(self, handler: TerminationHandler) -> None:
        self._on_terminated = handler

    def start_task_manager(self, tm_id: str, spec: TaskManagerSpec) -> None:
        cfg = TaskManagerConfig(
            tm_id=tm_id, jobmanager_host=spec.jm_host, jobmanager_port=spec.jm_port, secret=spec.secret,
            num_slots=spec.num_slots, resource_profile=spec.profile, log_level=self.log_level, memory=self.memory,
        )
        if self.configure is not None:
            cfg = self.configure(cfg)
        # a local process reserves nothing: the profile is what the TaskManager reports and its
        # slots are matched by; the operating system shares the CPUs
        env = dict(os.environ)
        env[CONFIG_ENV] = cfg.model_dump_json()  # env, not argv: the secret stays out of `ps`
        proc = subprocess.Popen(self.command, env=env, start_new_session=True)
        with self._lock:
            self.processes[tm_id] = proc
        threading.Thread(target=self._watch, args=(tm_id, proc), name=f"watch-{tm_id}", daemon=True).start()
        log.info("started TaskManager %s as process %d (%d slots, %s)", tm_id, proc.pid, spec.num_slots, spec.profile.describe())

    def _watch(self, tm_id: str, proc: subprocess.Popen) -> None:
        """Report a process that exits while still ours (released ones were popped first)."""
        code = proc.wait()
        with self._lock:
            ours = self.processes.get(tm_id) is proc
        if ours and self._on_terminated is not None:
            self._on_terminated(tm_id, f"process {proc.pid} {describe_exit(code)}")

    def pid_of(self, tm_id: str) -> int | None:
        p = self.processes.get(tm_id)
        return p.pid if p else None

    def describe(self, tm_id: str) -> str:
        pid = self.pid_of(tm_id)
        return f"local process {pid}" if pid else "local process"

    def release_task_manager(self, tm_id: str) -> None:
        """Non-blocking (called on the ResourceManager's main thread): a reaper waits, then kills."""
        with self._lock:
            proc = self.processes.pop(tm_id, None)
        if proc is None:
            return
        reaper = threading.Thread(target=self._reap, args=(proc,), name=f"reap-{tm_id}", daemon=True)
        self._reapers.append(reaper)
        reaper.start()

    @staticmethod
    def _reap(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
        try:
            proc.wait(grace_s)  # a released TaskManager exits by itself
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)  # frozen or stuck in user code
            proc.wait(5)

    def close(self) -> None:
        with self._lock:
            procs = list(self.processes.items())
            self.processes.clear()
        for _, proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for _, proc in procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        for reaper in self._reapers:
            reaper.join(15)


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"
