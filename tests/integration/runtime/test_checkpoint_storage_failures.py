"""Checkpoints that fail because their storage is full leave nothing behind: no empty
`checkpoint_id=N` folder per failed checkpoint, no temp file; the job goes on (tolerated failures)."""
from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.api.common import Configuration, WatermarkStrategy
from runtime.api.connectors.base import RateLimiterStrategy
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.checkpoint import CheckpointingMode
from runtime.core.states import JobStatus
from runtime.deploy.minicluster import MiniCluster
from runtime.rpc import messages as m
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

KEYS = 10_000


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A small tmpfs, to be filled up by the test."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"a full disk is simulated with a small tmpfs, and mounting one needs root (CAP_SYS_ADMIN): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


class KeyOf:
    def __call__(self, i: int) -> tuple[int, int]:
        return (i % KEYS, 1)


def statistics(cluster: MiniCluster, job_id: str) -> dict:
    stats = cluster.dispatcher_gateway().call_sync("request_checkpoint_statistics", m.JobIdMessage(job_id=job_id), timeout=10)
    return json.loads(stats.statistics_json)


def fill(disk: Path) -> None:
    """Write a file until the disk is full: no task can write anything there any more."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
    finally:
        os.close(fd)


def test_checkpoints_failing_on_a_full_disk_leave_no_folders(mini_cluster: MiniCluster, full_disk: Path) -> None:
    conf = Configuration()
    conf.set_string("state.checkpoints.dir", str(full_disk))
    conf.set_string("execution.checkpointing.tolerable-failed-checkpoints", "1000")  # the job runs on
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    env.enable_checkpointing(100, CheckpointingMode.EXACTLY_ONCE)
    source = DataGeneratorSource(KeyOf(), 10_000_000, rate_limiter_strategy=RateLimiterStrategy.per_second(100_000))
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "records")
        .key_by(lambda r: r[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .filter(lambda r: False)
        .print()
    )
    client = mini_cluster.submit(env.get_job_graph("full disk"))
    try:
        wait_until(lambda: statistics(mini_cluster, client.job_id)["counts"]["completed"] >= 1, timeout=60, what="a completed checkpoint")
        fill(full_disk)
        failed_before = statistics(mini_cluster, client.job_id)["counts"]["failed"]
        wait_until(lambda: statistics(mini_cluster, client.job_id)["counts"]["failed"] >= failed_before + 4, timeout=120, what="four failed checkpoints")
    finally:
        client.cancel()
        wait_until(lambda: client.get_job_status() is JobStatus.CANCELED, timeout=60, what="the job CANCELED")
    stats = statistics(mini_cluster, client.job_id)
    failed = {e["id"] for e in stats["history"] if e["status"] == "FAILED"}
    full = [e["id"] for e in stats["history"] if e["status"] == "FAILED" and "No space left" in (e.get("failure_message") or "")]
    assert len(full) >= 3, stats["history"]
    table = full_disk / client.job_id
    folders = sorted(p.name for p in table.glob("checkpoint_id=*")) if table.exists() else []
    empty = [name for name in folders if not any((table / name).iterdir())]
    assert not empty, f"empty folders of failed checkpoints left behind: {empty}"
    leftover = [str(p.relative_to(full_disk)) for p in full_disk.rglob("*.inprogress")]
    leftover += [f"checkpoint_id={c}" for c in failed if (table / f"checkpoint_id={c}").exists()]
    assert not leftover, leftover
