"""Fine-grained resources (docs/cluster.md, "The resource model"): dynamic slots cut from a
TaskManager's resources to each slot sharing group's profile and given back when freed, spread
and pack placement, refusals of what no TaskManager can hold, and a slot's task heap enforced
for its own job only. Local-process TaskManagers behind the REST API."""
from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.api.common import RestartStrategies, WatermarkStrategy
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import SlotSharingGroup, StreamExecutionEnvironment
from runtime.api.execution import use_executor
from runtime.core.errors import JobExecutionError
from runtime.core.states import JobStatus
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig
from runtime.graph.job_graph import JobGraph
from runtime.rpc.messages import ResourceProfile
from runtime.taskmanager.memory import TaskManagerMemoryConfig
from tests.integration.rest.conftest import TOKEN, RestCluster, serve_rest
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

TM_LOG_LEVEL = os.environ.get("MILLRACE_TM_LOG_LEVEL", "WARNING")
LARGE = ResourceProfile(cpu_cores=4, task_heap_mb=2048, managed_memory_mb=512)  # 4 default slots of 1 CPU, 512 MB, 128 MB


def group(name: str, cpu: float, heap_mb: int, managed_mb: int = 0) -> SlotSharingGroup:
    return SlotSharingGroup.builder(name).set_cpu_cores(cpu).set_task_heap_memory_mb(heap_mb).set_managed_memory_mb(managed_mb).build()


def gated_job(name: str, gate: Path, ssg: SlotSharingGroup | None = None, parallelism: int = 1) -> JobGraph:
    """A whole job in one slot sharing group; its map waits for `gate` to exist."""
    gate_path = str(gate)

    def wait_for_gate(x: int) -> int:
        deadline = time.monotonic() + 60
        while not os.path.exists(gate_path) and time.monotonic() < deadline:
            time.sleep(0.02)
        return x

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    src = env.from_collection(list(range(4)))
    if ssg is not None:
        src = src.slot_sharing_group(ssg)
    src.rebalance().map(wait_for_gate).print()
    return env.get_job_graph(name)


@pytest.fixture
def large_tm() -> Iterator[RestCluster]:
    """One TaskManager of 4 CPU, 2048 MB task heap, 512 MB managed, and never a second one."""
    c = MiniCluster(MiniClusterConfig(
        provider="local", task_manager_profile=LARGE, max_task_manager_profile=LARGE, slots_per_task_manager=4,
        initial_task_managers=1, min_task_managers=1, max_task_managers=1, tm_log_level=TM_LOG_LEVEL,
    )).start()
    try:
        c.wait_for_task_managers(1)
        with serve_rest(c) as rc:
            yield rc
    finally:
        c.close()


def get(rc: RestCluster, path: str) -> Any:
    req = urllib.request.Request(rc.url + path, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def tm_view(rc: RestCluster) -> dict[str, Any]:
    [tm] = get(rc, "/taskmanagers")["taskmanagers"]
    return get(rc, f"/taskmanagers/{tm['id']}")


def map_running(client: Any, job_id: str) -> bool:
    """The gated map's subtask runs (a job is RUNNING already while its tasks wait for slots)."""
    return any(v.name.startswith("Map") and v.tasks.get("RUNNING") == 1 for v in client.job_details(job_id).vertices)


def finished(client: Any, job_id: str) -> JobStatus:
    """The job's terminal status (the REST result call waits ~5 s server-side per ask)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        result = client.job_result(job_id)
        if result.status.is_globally_terminal:
            return result.status
    raise AssertionError(f"job {job_id} did not end within 60 s")


def resource(cpu: float, heap: int, managed: int) -> dict[str, Any]:
    return {"cpuCores": cpu, "taskHeapMemory": heap, "taskOffHeapMemory": 0, "managedMemory": managed}


def test_two_jobs_share_one_large_task_manager_in_dynamic_slots_and_a_third_fits_into_what_the_first_freed(
    large_tm: RestCluster, tmp_path: Path,
) -> None:
    rc, client = large_tm, large_tm.client()
    gate_a, gate_b, gate_c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    job_a = client.submit_job(gated_job("a", gate_a, group("a", 2.0, 1024, 256)))
    job_b = client.submit_job(gated_job("b", gate_b, group("b", 1.0, 512, 128)))
    wait_until(lambda: len(tm_view(rc)["allocatedSlots"]) == 2, timeout=30, what="both jobs hold a slot", interval=0.05)
    wait_until(lambda: all(map_running(client, j) for j in (job_a, job_b)), timeout=30, what="both jobs' maps RUNNING")

    tm = tm_view(rc)
    assert tm["dynamicSlots"] is True and tm["totalResource"] == resource(4.0, 2048, 512)
    slots = {s["jobId"]: s["resource"] for s in tm["allocatedSlots"]}
    assert slots == {job_a: resource(2.0, 1024, 256), job_b: resource(1.0, 512, 128)}  # exactly what each group asked
    assert tm["freeResource"] == resource(1.0, 512, 128)  # the remainder
    assert tm["allocatedResource"] == resource(3.0, 1536, 384)
    # the jobs show their group's requirement
    vertices = client.job_details(job_a).vertices
    assert {(v.slot_sharing_group, v.slot_sharing_group_resource.cpu_cores if v.slot_sharing_group_resource else None) for v in vertices} == {("a", 2.0)}

    # a third job needs 2 CPU: it waits until the first one gives its slot back, then takes its place
    job_c = client.submit_job(gated_job("c", gate_c, group("c", 2.0, 1024, 256)))
    sm = large_tm.cluster.resource_manager.slot_manager
    wait_until(lambda: job_c in sm.requirements and sm.requirements[job_c].missing == 1, timeout=30,
               what="job c's requirement declared and left unserved")
    assert len(tm_view(rc)["allocatedSlots"]) == 2 and not map_running(client, job_c)
    gate_a.touch()
    assert finished(client, job_a) is JobStatus.FINISHED
    wait_until(lambda: map_running(client, job_c), timeout=30, what="job c running in what a freed")
    tm = tm_view(rc)
    assert {s["jobId"]: s["resource"] for s in tm["allocatedSlots"]} == {job_b: resource(1.0, 512, 128), job_c: resource(2.0, 1024, 256)}
    assert tm["freeResource"] == resource(1.0, 512, 128)
    gate_b.touch()
    gate_c.touch()
    for j in (job_b, job_c):
        assert finished(client, j) is JobStatus.FINISHED
    wait_until(lambda: tm_view(rc)["freeResource"] == resource(4.0, 2048, 512), timeout=30, what="everything given back")
    assert large_tm.cluster.resource_manager._tm_seq == 1  # one TaskManager served all three


def test_a_group_larger_than_any_task_manager_is_refused_with_400_and_bad_specs_fail_at_build(large_tm: RestCluster, tmp_path: Path) -> None:
    too_big = gated_job("too big", tmp_path / "never", group("huge", 6.0, 1024))
    req = urllib.request.Request(
        large_tm.url + "/jobs", data=too_big.model_dump_json().encode(), method="POST",
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, timeout=30)
    assert info.value.code == 400
    text = " ".join(json.loads(info.value.read())["errors"])
    for part in ("'huge'", "6 CPU", "1024 MB task heap", LARGE.describe()):  # the group, its requirement, the largest TaskManager
        assert part in text, f"{part!r} missing from: {text}"
    for bad, why in [
        (lambda b: b.set_cpu_cores(0), "set_cpu_cores(0): the CPU cores must be a number above 0"),
        (lambda b: b.set_task_heap_memory_mb(-1), "set_task_heap_memory_mb(-1): the size must be above 0"),
        (lambda b: b.set_task_heap_memory("3 parsecs"), "not a memory size; use a number of MB or a size with one of the units"),
        (lambda b: b.set_cpu_cores(1.0).build(), "build() needs set_cpu_cores(...) and set_task_heap_memory_mb(...)"),
    ]:
        with pytest.raises(Exception, match=None) as err:
            bad(SlotSharingGroup.builder("g"))
        assert type(err.value).__name__ == "InvalidProgramError" and why in str(err.value), str(err.value)


def _placement(spread: bool, tmp_path: Path) -> list[int]:
    """Slots per TaskManager for a job of 2 default-slot subtasks on 2 TaskManagers of 2 slots each."""
    c = MiniCluster(MiniClusterConfig(
        provider="local", slots_per_task_manager=2, initial_task_managers=2, min_task_managers=2, max_task_managers=2,
        evenly_spread_out_slots=spread, tm_log_level=TM_LOG_LEVEL,
    )).start()
    try:
        c.wait_for_task_managers(2)
        gate = tmp_path / f"gate-{spread}"
        client = c.submit(gated_job("placed", gate, parallelism=2))
        wait_until(lambda: sum(t.slots_free for t in c.task_managers()) == 2, timeout=30, what="the job's 2 slots", interval=0.05)
        layout = sorted((len(t.slots) for t in c.task_managers()), reverse=True)
        gate.touch()
        assert client.wait_result_message(timeout=60).status is JobStatus.FINISHED
        return layout
    finally:
        c.close()


def test_pack_fills_the_first_task_manager_and_spread_puts_one_slot_on_each(tmp_path: Path) -> None:
    assert _placement(False, tmp_path) == [2, 0]  # packing: the first TaskManager with room
    assert _placement(True, tmp_path) == [1, 1]  # cluster.evenly-spread-out-slots: the least used one


def test_a_task_over_its_slots_heap_budget_fails_only_its_own_job(tmp_path: Path) -> None:
    """One TaskManager runs a job whose group declared 96 MB of task heap and holds more, and another
    job in another slot: the first fails naming its slot, operator and budget; the second finishes,
    its output whole."""
    c = MiniCluster(MiniClusterConfig(
        provider="local", task_manager_profile=ResourceProfile(cpu_cores=2, task_heap_mb=1024, managed_memory_mb=64), slots_per_task_manager=2,
        initial_task_managers=1, min_task_managers=1, max_task_managers=1, tm_log_level=TM_LOG_LEVEL,
        task_manager_memory=TaskManagerMemoryConfig(framework_overhead_mb=256, check_interval_s=0.05),
    )).start()
    try:
        c.wait_for_task_managers(1)
        gate = tmp_path / "other"
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(1)
        other = env.from_collection(list(range(200))).map(_wait_for(gate)).map(lambda x: x * 3)
        with use_executor(c.executor()):
            results = other.execute_and_collect("other job", limit=None)  # runs while the hoarding job hoards

            hoarder = StreamExecutionEnvironment.get_execution_environment()
            hoarder.set_parallelism(1)
            src = DataGeneratorSource(lambda i: i, 60, batch_size=1)
            hoarder.from_source(src, WatermarkStrategy.no_watermarks(), "numbers").slot_sharing_group(group("hoard", 1.0, 96)) \
                .map(_Hoard()).name("hoarding map").print()
            hoarder.set_restart_strategy(RestartStrategies.no_restart())
            with pytest.raises(JobExecutionError) as info:
                hoarder.execute("hoarding job")
            gate.touch()
            assert sorted(results) == [x * 3 for x in range(200)]  # the other slot's job: finished, output whole
        err = info.value
        assert err.cause_info is not None and err.cause_info.type_name == "SlotHeapExceededError", str(err)
        text = str(err)
        for part in ("slot ", "task heap budget of 96 MB", "operator 'hoarding map'"):
            assert part in text, f"{part!r} missing from: {text}"
        [tm] = c.task_managers()
        assert c.resource_manager._tm_seq == 1 and tm.tm_id in text  # the TaskManager went on: no replacement
    finally:
        c.close()


def _wait_for(gate: Path) -> Any:
    path = str(gate)

    def wait(x: int) -> int:
        deadline = time.monotonic() + 60
        while x == 0 and not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.02)
        return x

    return wait


class _Hoard:
    """A map keeping 8 MB per record in its own state: ~480 MB over 60 records, far over 96 MB."""

    def __init__(self) -> None:
        self.kept: list[bytes] = []

    def __call__(self, x: int) -> int:
        self.kept.append(b"x" * (8 << 20))
        time.sleep(0.03)
        return x
