"""A TaskManager exits when its parent process (a Spark worker, in production) dies."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from runtime.deploy.minicluster import MiniCluster
from runtime.taskmanager.runner import CONFIG_ENV, TaskManagerConfig


def test_task_manager_exits_when_its_parent_dies(mini_cluster: MiniCluster) -> None:
    host, port = mini_cluster.address
    cfg = TaskManagerConfig(tm_id="orphan-tm", jobmanager_host=host, jobmanager_port=port, secret=mini_cluster.secret, log_level="WARNING")
    parent_code = textwrap.dedent(
        """
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-m", "runtime.taskmanager.runner"])
        print(child.pid, flush=True)
        time.sleep(600)
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", parent_code], env=dict(os.environ, **{CONFIG_ENV: cfg.model_dump_json()}), stdout=subprocess.PIPE, text=True
    )
    child_pid = int(parent.stdout.readline())
    try:
        mini_cluster.wait_for_task_managers(1, timeout=30)  # registered: it is alive and connected
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(5)
        deadline = time.monotonic() + 10
        while True:
            try:
                os.kill(child_pid, 0)
                with open(f"/proc/{child_pid}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                        break
            except (ProcessLookupError, FileNotFoundError):
                break
            assert time.monotonic() < deadline, "the TaskManager outlived its parent"
            time.sleep(0.1)
        # and the ResourceManager noticed it is gone
        deadline = time.monotonic() + 10
        while mini_cluster.task_managers():
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        try:
            os.kill(child_pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
