"""Fine-grained resources on a session cluster whose TaskManagers are Spark tasks (issue 30): two
jobs with different slot sharing group profiles share one TaskManager in dynamic slots, REST
showing both slots and the free remainder; a third job fits into what the first freed; a group
bigger than that TaskManager gets a new one of its shape, started as another Spark task."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime.rpc.messages import ResourceProfile
from tests.integration.cluster.conftest import SessionCluster, millrace, stop_session_cluster
from tests.integration.runtime.test_fine_grained_resources import finished, gated_job, group, map_running, resource
from tests.waiting import wait_until


def _slots(client: Any, tm_id: str) -> dict[str, dict[str, Any]]:
    tm = next(t for t in client.task_managers() if t.id == tm_id).model_dump(by_alias=True)
    return {s["jobId"]: s["resource"] for s in tm["allocatedSlots"]}


def test_jobs_share_a_spark_task_manager_in_dynamic_slots_and_a_bigger_group_gets_a_task_manager_of_its_shape(spark, tmp_path: Path) -> None:
    home = tmp_path / "home"
    # one TaskManager of 4 default slots: 4 CPU, 2048 MB task heap, 512 MB managed memory
    started = millrace(home, "cluster", "start", "--taskmanagers", "1", "--slots-per-taskmanager", "4", "--max-taskmanagers", "2", timeout=240)
    assert started.returncode == 0, started.stdout + started.stderr
    cluster = SessionCluster(home)
    client = cluster.client()
    try:
        wait_until(lambda: len(client.task_managers()) == 1, timeout=120, what="the TaskManager on Spark")
        [tm] = client.task_managers()
        assert tm.spark_executor_id and tm.model_dump(by_alias=True)["dynamicSlots"] is True
        gates = {n: tmp_path / n for n in "abcd"}
        job_a = client.submit_job(gated_job("a", gates["a"], group("a", 2.0, 1024, 256)))
        job_b = client.submit_job(gated_job("b", gates["b"], group("b", 1.0, 512, 128)))
        wait_until(lambda: all(map_running(client, j) for j in (job_a, job_b)), timeout=120, what="both jobs running")
        assert _slots(client, tm.id) == {job_a: resource(2.0, 1024, 256), job_b: resource(1.0, 512, 128)}
        free = next(t for t in client.task_managers() if t.id == tm.id).model_dump(by_alias=True)["freeResource"]
        assert free == resource(1.0, 512, 128)

        # c needs 2 CPU: it runs once a gives its slot back, on the same TaskManager
        job_c = client.submit_job(gated_job("c", gates["c"], group("c", 2.0, 1024, 256)))
        gates["a"].touch()
        assert finished(client, job_a).value == "FINISHED"
        wait_until(lambda: map_running(client, job_c), timeout=120, what="job c running in what a freed")
        assert _slots(client, tm.id) == {job_b: resource(1.0, 512, 128), job_c: resource(2.0, 1024, 256)}

        # d needs more task heap than the default TaskManager has: a TaskManager of its shape
        job_d = client.submit_job(gated_job("d", gates["d"], group("d", 1.0, 3072)))
        wait_until(lambda: map_running(client, job_d), timeout=180, what="job d running on a new TaskManager")
        [shaped] = [t for t in client.task_managers() if t.id != tm.id]
        assert shaped.spark_executor_id  # another Spark task
        total = ResourceProfile.model_validate({
            "cpu_cores": shaped.total_resource.cpu_cores, "task_heap_mb": shaped.total_resource.task_heap_memory,
            "managed_memory_mb": shaped.total_resource.managed_memory,
        })
        assert total.task_heap_mb == 3072 and ResourceProfile(cpu_cores=1.0, task_heap_mb=3072, managed_memory_mb=0).fits_in(total)
        assert _slots(client, shaped.id) == {job_d: resource(1.0, 3072, 0)}
        for name in "bcd":
            gates[name].touch()
        for j in (job_b, job_c, job_d):
            assert finished(client, j).value == "FINISHED"
    finally:
        stop = stop_session_cluster(cluster)
    assert stop.returncode == 0, stop.stdout + stop.stderr

