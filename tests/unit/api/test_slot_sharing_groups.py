"""SlotSharingGroup's builder (PyFlink's names) checks each value, and env.register_slot_sharing_group
gives a group named by operators its resources."""
from __future__ import annotations

import pytest

from runtime.api.datastream import SlotSharingGroup, StreamExecutionEnvironment
from runtime.core.errors import InvalidProgramError
from runtime.graph.job_graph import ResourceSpec

pytestmark = pytest.mark.unit


def test_the_builder_takes_sizes_in_mb_or_with_units_and_refuses_what_is_not_a_resource() -> None:
    g = (SlotSharingGroup.builder("g").set_cpu_cores(1.5).set_task_heap_memory("1.5 gb").set_managed_memory("256 mb")
         .set_task_off_heap_memory_mb(64).build())
    assert g.to_resources() == ResourceSpec(cpu_cores=1.5, task_heap_mb=1536, managed_memory_mb=256, task_off_heap_mb=64)
    for bad, why in [
        (lambda b: b.set_cpu_cores(-0.5), "set_cpu_cores(-0.5): the CPU cores must be a number above 0"),
        (lambda b: b.set_cpu_cores(float("nan")), "the CPU cores must be a number above 0"),
        (lambda b: b.set_task_heap_memory_mb(0), "set_task_heap_memory_mb(0): the size must be above 0"),
        (lambda b: b.set_managed_memory_mb(-1), "set_managed_memory_mb(-1): the size must be 0 or more"),
        (lambda b: b.set_task_heap_memory("12 parsecs"), "not a memory size"),
        (lambda b: b.set_task_heap_memory("100 kb"), "below 1 MB"),
        (lambda b: b.set_task_heap_memory(True), "a memory size is a number of MB"),
        (lambda b: b.set_task_heap_memory_mb(256).build(), "build() needs set_cpu_cores(...) and set_task_heap_memory_mb(...)"),
    ]:
        with pytest.raises(InvalidProgramError) as e:
            bad(SlotSharingGroup.builder("g"))
        assert why in str(e.value) and "SlotSharingGroup 'g'" in str(e.value)
    with pytest.raises(InvalidProgramError, match="the name must be a non-empty string"):
        SlotSharingGroup.builder(" ")


def test_a_registered_group_gives_its_resources_to_the_operators_that_name_it() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    heavy = SlotSharingGroup.builder("heavy").set_cpu_cores(2.0).set_task_heap_memory_mb(1024).build()
    env.register_slot_sharing_group(heavy)
    env.from_collection([1, 2]).map(lambda x: x).slot_sharing_group("heavy").print()
    assert env.get_job_graph("j").group_resources()["heavy"] == ResourceSpec(cpu_cores=2.0, task_heap_mb=1024)

    other = StreamExecutionEnvironment.get_execution_environment()
    other.register_slot_sharing_group(heavy)
    light = SlotSharingGroup.builder("heavy").set_cpu_cores(0.5).set_task_heap_memory_mb(128).build()
    other.from_collection([1, 2]).map(lambda x: x).slot_sharing_group(light).print()
    with pytest.raises(InvalidProgramError, match="slot sharing group 'heavy' is registered with .* but operator 'Map' joins it with"):
        other.get_job_graph("j")
