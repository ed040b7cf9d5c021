"""A synchronous single-process executor for unit tests: every vertex at parallelism 1 (or the
subtasks of a vertex run one after another is NOT supported), operators wired directly.

Implements runtime.api.execution.PipelineExecutor / JobClient just enough for env.execute() and
execute_and_collect() to run a small program end to end without a cluster.
"""
from __future__ import annotations

from typing import Any

import cloudpickle

from runtime.api.execution import JobExecutionResult
from runtime.api.operators.base import InputStatus
from runtime.core.operators import FixedCoordinatorContext
from runtime.core.records import MAX_TIMESTAMP, RecordBatch, Watermark
from runtime.core.states import JobStatus
from runtime.graph.job_graph import JobGraph
from tests.harness import make_context


class _Gateway:
    def __init__(self, coordinator: Any) -> None:
        self.coordinator = coordinator

    def send_event_to_coordinator(self, event: Any) -> None:
        self.coordinator.handle_event_from_operator(0, 0, event)


def deliver_events(coordinator: Any, op: Any) -> None:
    """The coordinator's events to its (one) subtask, as the TaskExecutor would deliver them."""
    if coordinator is None:
        return
    sent = coordinator.context.sent
    while sent:
        _subtask, _attempt, event = sent.pop(0)
        op.handle_operator_event(event)


class _FanOut:
    def __init__(self) -> None:
        self.targets: list[tuple[Any, int, str | None]] = []  # (operator, input, side output tag or None)

    def emit(self, batch: RecordBatch) -> None:
        self.emit_side(None, batch)

    def emit_side(self, tag: str | None, batch: RecordBatch) -> None:
        for op, i, t in self.targets:
            if t == tag:
                op.process_batch(batch, i)

    def emit_watermark(self, watermark: Watermark) -> None:
        for op, i, _t in self.targets:
            op.process_watermark(watermark, i)


class LocalClient:
    def __init__(self, job_id: str, name: str, coordinators: dict[int, Any], status: JobStatus, meta: dict) -> None:
        self._job_id = job_id
        self.name = name
        self.coordinators = coordinators
        self.status = status
        self.meta = meta

    @property
    def job_id(self) -> str:
        return self._job_id

    def get_job_status(self) -> JobStatus:
        return self.status

    def get_job_execution_result(self, timeout: float | None = None) -> JobExecutionResult:
        return JobExecutionResult(self._job_id, self.name, self.status, accumulators=self.meta)

    def cancel(self) -> None:
        pass

    def send_coordination_request(self, node_id: int, request: Any) -> Any:
        return self.coordinators[node_id].handle_coordination_request(request)

    def close(self) -> None:
        pass


class LocalExecutor:
    def __init__(self) -> None:
        self.job_graphs: list[JobGraph] = []

    def execute(self, job_graph: JobGraph, status_listener: Any = None, failure_listener: Any = None) -> LocalClient:
        self.job_graphs.append(job_graph)
        ops: dict[int, Any] = {}
        outs: dict[int, _FanOut] = {}
        coords: dict[int, Any] = {}
        chained = []
        for v in job_graph.vertices:
            assert v.parallelism == 1, "LocalExecutor runs parallelism 1 only"
            for c in v.operators:
                op = cloudpickle.loads(c.operator_factory)()
                out = _FanOut()
                gw = None
                if c.coordinator_provider is not None:
                    coords[c.node_id] = cloudpickle.loads(c.coordinator_provider).create(FixedCoordinatorContext(job_graph.job_id, c.name, 1, c.operator_id))
                    coords[c.node_id].start()
                    gw = _Gateway(coords[c.node_id])
                ctx = make_context(name=c.name, task_name=c.name, gateway=gw, max_parallelism=v.max_parallelism)
                ctx.output = out
                ctx.config = dict(job_graph.config)
                op.setup(ctx)
                ops[c.node_id], outs[c.node_id] = op, out
                chained.append(c)
        for c in chained:
            for co in c.chained_outputs:
                outs[c.node_id].targets.append((ops[co.target_node_id], co.type_number, co.output_tag))
            tags = {d.id: d.output_tag for v in job_graph.vertices for d in v.produced_datasets}
            for ds in c.network_outputs:
                for e in job_graph.consumers_of(ds):
                    outs[c.node_id].targets.append((ops[e.target_node_id], e.type_number, tags.get(ds)))
        for op in ops.values():
            op.open()
        for c in chained:
            if c.is_source:
                deliver_events(coords.get(c.node_id), ops[c.node_id])
                while ops[c.node_id].emit_next() is not InputStatus.END_OF_INPUT:
                    deliver_events(coords.get(c.node_id), ops[c.node_id])
                ops[c.node_id].output.emit_watermark(Watermark(MAX_TIMESTAMP))  # as the task does at a source's end
        for v in job_graph.topological_vertices():
            for c in v.operators:
                if not c.is_source:
                    for i in range(c.num_inputs):
                        ops[c.node_id].end_input(i)
                ops[c.node_id].finish()
        for op in ops.values():
            op.close()
        meta: dict[str, Any] = {}
        for co in coords.values():
            meta.update(co.on_job_finished() or {})
        return LocalClient(job_graph.job_id, job_graph.job_name, coords, JobStatus.FINISHED, meta)
