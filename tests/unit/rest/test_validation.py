"""JobGraph checks before submission: every inconsistency is a ValueError naming the problem."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from runtime.api.datastream import StreamExecutionEnvironment
from runtime.graph.job_graph import JobGraph
from runtime.graph.validation import JobGraphValidationError, validate_job_graph


def _real_graph() -> JobGraph:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.from_collection([1, 2, 3]).map(lambda x: (x % 2, x)).key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).print()
    return env.get_job_graph("valid")


def test_a_compiled_program_is_valid() -> None:
    validate_job_graph(_real_graph())


def _edit(fn: Callable[[dict[str, Any]], None]) -> JobGraph:
    data = _real_graph().model_dump()
    fn(data)
    return JobGraph.model_validate(data)


def _last_with_inputs(d: dict[str, Any]) -> dict[str, Any]:
    return next(v for v in reversed(d["vertices"]) if v["inputs"])


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: d.update(vertices=[]), "has no vertices"),
        (lambda d: d["vertices"][0].update(parallelism=0), "parallelism 0"),
        (lambda d: d["vertices"][0].update(parallelism=10**18), "parallelism 1000000000000000000"),
        (lambda d: d["vertices"][0].update(max_parallelism=10**9), "max_parallelism 1000000000"),
        (lambda d: d["vertices"][0].update(operators=[]), "has no operators"),
        (lambda d: d["vertices"][1].update(id=d["vertices"][0]["id"]), "used twice"),
        (lambda d: _last_with_inputs(d)["inputs"][0].update(source_vertex_id="nowhere"), "unknown vertex 'nowhere'"),
        (lambda d: _last_with_inputs(d)["inputs"][0].update(dataset_id="ds-x"), "input dataset 'ds-x'"),
        (lambda d: _last_with_inputs(d)["inputs"][0].update(target_node_id=999), "targets node 999"),
        (lambda d: d["vertices"][0]["operators"][0].update(network_outputs=["ds-x"]), "writes dataset 'ds-x'"),
        (lambda d: d.update(job_id=" "), "job_id must not be empty"),
    ],
)
def test_inconsistent_graphs_are_refused_with_the_reason(edit: Callable[[dict[str, Any]], None], expected: str) -> None:
    with pytest.raises(JobGraphValidationError) as info:
        validate_job_graph(_edit(edit))
    assert expected in str(info.value)
    assert isinstance(info.value, ValueError)


def test_a_cycle_is_refused() -> None:
    def make_cycle(d: dict[str, Any]) -> None:
        first, last = d["vertices"][0], _last_with_inputs(d)
        ds = {"id": "back", "producer_vertex_id": last["id"], "producer_node_id": last["operators"][0]["node_id"], "partitioner": {"kind": "forward"}}
        last["produced_datasets"].append(ds)
        first["inputs"].append(
            {"dataset_id": "back", "source_vertex_id": last["id"], "target_vertex_id": first["id"], "target_node_id": first["operators"][0]["node_id"],
             "distribution_pattern": "POINTWISE", "partitioner": "forward"}
        )

    with pytest.raises(JobGraphValidationError, match="cycle"):
        validate_job_graph(_edit(make_cycle))
