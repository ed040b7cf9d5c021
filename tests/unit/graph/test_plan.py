from __future__ import annotations

import json

import pytest

from runtime.graph.job_graph_builder import build_job_graph
from runtime.graph.plan import format_plan, plan_summary
from runtime.graph.stream_graph_generator import generate_stream_graph
from tests.graph_builders import key_by, one, sink, source

pytestmark = pytest.mark.unit


def windowed_sum(mode: str = "STREAMING"):
    s = source("Source: events")
    ts = one(one(s, "Map"), "Timestamps/Watermarks")
    w = one(key_by(ts, "k"), "Window(TumblingEventTimeWindows(1000 ms))", keyed=True)
    return build_job_graph(generate_stream_graph([sink(w, "Sink: delta")], "windowed_sum", 2, runtime_mode=mode))


def test_format_plan() -> None:
    jg = windowed_sum()
    ids = [op.operator_id for v in jg.topological_vertices() for op in v.operators]
    assert format_plan(jg) == (
        "Job 'windowed_sum' (STREAMING), 2 slots needed\n"
        "  slot sharing group 'default': 2 default slots (no resources declared)\n"
        "  [1] Source: events -> Map -> Timestamps/Watermarks   parallelism 2, slot sharing group 'default'\n"
        f"      operator 'Source: events': id {ids[0]} (generated)\n"
        f"      operator 'Map': id {ids[1]} (generated)\n"
        f"      operator 'Timestamps/Watermarks': id {ids[2]} (generated)\n"
        "  [2] Window(TumblingEventTimeWindows(1000 ms)) -> Sink: delta   parallelism 2, slot sharing group 'default'\n"
        f"      operator 'Window(TumblingEventTimeWindows(1000 ms))': id {ids[3]} (generated)\n"
        f"      operator 'Sink: delta': id {ids[4]} (generated)\n"
        "      <- [1] HASH"
    )
    assert len(set(ids)) == 5 and all(len(i) == 32 for i in ids)


def test_format_plan_batch_marks_blocking_and_regions() -> None:
    text = format_plan(windowed_sum("BATCH"))
    assert text.startswith("Job 'windowed_sum' (BATCH)") and "<- [1] HASH (blocking)" in text
    assert text.endswith("Pipelined regions (scheduled lazily from the sources; blocking results in Delta):\n"
                         "  region 1: vertices [1]\n  region 2: vertices [2]")
    assert plan_summary(windowed_sum("BATCH"))["regions"] == [{"number": 1, "vertices": [1]}, {"number": 2, "vertices": [2]}]
    # adaptive batch decides the window stage's parallelism (the user set none); the source's is the default
    assert "Window(TumblingEventTimeWindows(1000 ms)) -> Sink: delta   parallelism from the data, at most 2" in text
    assert [v["dynamic_parallelism"] for v in plan_summary(windowed_sum("BATCH"))["vertices"]] == [False, True]
    assert [v["dynamic_parallelism"] for v in plan_summary(windowed_sum())["vertices"]] == [False, False]
    # streaming: one region (the hash exchange is pipelined), not listed in the text
    assert plan_summary(windowed_sum())["regions"] == [{"number": 1, "vertices": [1, 2]}]
    assert "regions" not in format_plan(windowed_sum())


def test_plan_summary() -> None:
    jg = windowed_sum()
    s = plan_summary(jg)
    json.dumps(s)  # JSON-friendly
    assert (s["job_name"], s["job_id"], s["job_type"], s["slots_required"]) == ("windowed_sum", jg.job_id, "STREAMING", 2)
    first, second = s["vertices"]
    assert first["operators"] == ["Source: events", "Map", "Timestamps/Watermarks"]
    assert (second["parallelism"], second["max_parallelism"], second["slot_sharing_group"]) == (2, 128, "default")
    (inp,) = second["inputs"]
    assert inp["partitioner"] == "hash" and inp["source_vertex"] == 1
    assert inp["source_vertex_name"] == "Source: events -> Map -> Timestamps/Watermarks"


def test_the_plan_prints_each_groups_requirement_and_its_slots() -> None:
    from runtime.api.datastream import SlotSharingGroup, StreamExecutionEnvironment
    from runtime.graph.plan import plan_summary

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(3)
    heavy = SlotSharingGroup.builder("heavy").set_cpu_cores(2.0).set_task_heap_memory("1 gb").set_managed_memory_mb(256).build()
    env.from_collection([1, 2]).set_parallelism(1).map(lambda x: x).slot_sharing_group(heavy).print()
    jg = env.get_job_graph("grouped")
    text = format_plan(jg)
    assert text.splitlines()[:3] == [
        "Job 'grouped' (STREAMING), 4 slots needed",
        "  slot sharing group 'default': 1 default slot (no resources declared)",
        "  slot sharing group 'heavy': 3 slots of 2 CPU, 1024 MB task heap, 256 MB managed memory",
    ]
    assert plan_summary(jg)["slot_sharing_groups"][1] == {
        "name": "heavy", "slots": 3, "resources": {"cpu_cores": 2.0, "task_heap_mb": 1024, "managed_memory_mb": 256, "task_off_heap_mb": None},
    }


def test_the_plan_pictures_have_one_node_per_chain_and_one_edge_per_input(capsys: pytest.CaptureFixture[str]) -> None:
    from runtime.cli import main
    from runtime.graph.plan_render import to_dot, to_html, to_svg

    jg = windowed_sum()
    svg = to_svg(jg)
    assert svg.startswith("<svg") and svg.count('<g class="node"') == len(jg.vertices) == 2
    assert svg.count('class="edge"') == 1 and "HASH" in svg and "parallelism 2" in svg
    dot = to_dot(jg)
    assert dot.startswith('digraph "windowed_sum"') and dot.count("->") >= 1 and 'label="HASH"' in dot
    assert "<svg" in to_html(jg) and "slot sharing group &#x27;default&#x27;" in to_html(jg)
    # the command line: millrace plan JOB.py --format svg
    with pytest.raises(SystemExit) as exit_code:
        main(["plan", "pipelines/jobs/windowed_sum.py", "--format", "svg", "--output", "/nonexistent"])
    assert exit_code.value.code == 0
    printed = capsys.readouterr().out
    assert printed.startswith("<svg") and printed.count('<g class="node"') == 2
