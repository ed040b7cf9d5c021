"""OperatorChain: instantiates a vertex's chained operators and wires them (Flink: OperatorChain).

Inside the chain an operator's output calls the next operator directly; only edges that leave
the chain go through RecordWriters into result partitions. The chain may be a DAG (two-input
operators fed by two chained predecessors).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runtime.core.errors import InvalidProgramError
from runtime.core.keygroups import compute_key_group_range_for_operator_index
from runtime.core.operators import (
    OperatorContext,
    OperatorEventGateway,
    ProcessingTimeService,
    SourceOperator,
    StreamOperator,
    TaskMetrics,
)
from runtime.core.records import RecordBatch, Watermark, WatermarkStatus
from runtime.graph.job_graph import ChainedOperator
from runtime.rpc.deployment import TaskDeploymentDescriptor
from runtime.taskmanager.user_code import instantiate


def annotate(exc: BaseException, operator_name: str) -> None:
    """Remember the innermost operator an exception came from (first one wins)."""
    if not hasattr(exc, "__millrace_operator__"):
        try:
            exc.__millrace_operator__ = operator_name  # type: ignore[attr-defined]  # a marker of our own (setattr with a constant name is B010)
        except Exception:  # noqa: BLE001 - some builtins refuse attributes
            pass


class ChainingOutput:
    """Output into a chained operator: a direct call on the same thread."""

    __slots__ = ("target", "type_number", "name")

    def __init__(self, target: StreamOperator, type_number: int, name: str) -> None:
        self.target, self.type_number, self.name = target, type_number, name

    def emit(self, batch: RecordBatch) -> None:
        try:
            self.target.process_batch(batch, self.type_number)
        except BaseException as e:
            annotate(e, self.name)
            raise

    def emit_watermark(self, watermark: Watermark) -> None:
        try:
            self.target.process_watermark(watermark, self.type_number)
        except BaseException as e:
            annotate(e, self.name)
            raise

    def emit_side(self, tag: str, batch: RecordBatch) -> None:
        pass  # no consumer of that side output

    def emit_watermark_status(self, status: WatermarkStatus) -> None:
        try:
            self.target.process_watermark_status(status, self.type_number)
        except BaseException as e:
            annotate(e, self.name)
            raise


class NetworkOutput:
    """Output into a RecordWriter (a result partition leaving the chain)."""

    __slots__ = ("writer", "metrics")

    def __init__(self, writer: Any, metrics: TaskMetrics) -> None:
        self.writer, self.metrics = writer, metrics

    def emit(self, batch: RecordBatch) -> None:
        self.metrics.records_out += len(batch)
        self.writer.emit(batch)

    def emit_watermark(self, watermark: Watermark) -> None:
        self.writer.broadcast_event(watermark)

    def emit_side(self, tag: str, batch: RecordBatch) -> None:
        pass

    def emit_watermark_status(self, status: WatermarkStatus) -> None:
        self.writer.broadcast_event(status)


class BroadcastingOutput:
    __slots__ = ("outputs",)

    def __init__(self, outputs: list[Any]) -> None:
        self.outputs = outputs

    def emit(self, batch: RecordBatch) -> None:
        for o in self.outputs:
            o.emit(batch)

    def emit_watermark(self, watermark: Watermark) -> None:
        for o in self.outputs:
            o.emit_watermark(watermark)

    def emit_side(self, tag: str, batch: RecordBatch) -> None:
        pass

    def emit_watermark_status(self, status: WatermarkStatus) -> None:
        for o in self.outputs:
            o.emit_watermark_status(status)


class SideOutputsOutput:
    """An operator's main output plus its side outputs by tag (Flink: outputs selected by OutputTag);
    watermarks go to all of them."""

    __slots__ = ("main", "sides")

    def __init__(self, main: Any, sides: dict[str, Any]) -> None:
        self.main, self.sides = main, sides

    def emit(self, batch: RecordBatch) -> None:
        self.main.emit(batch)

    def emit_watermark(self, watermark: Watermark) -> None:
        self.main.emit_watermark(watermark)
        for o in self.sides.values():
            o.emit_watermark(watermark)

    def emit_side(self, tag: str, batch: RecordBatch) -> None:
        out = self.sides.get(tag)
        if out is not None:
            out.emit(batch)

    def emit_watermark_status(self, status: WatermarkStatus) -> None:
        self.main.emit_watermark_status(status)
        for o in self.sides.values():
            o.emit_watermark_status(status)


class DiscardingOutput:
    def emit(self, batch: RecordBatch) -> None:
        pass

    def emit_watermark(self, watermark: Watermark) -> None:
        pass

    def emit_side(self, tag: str, batch: RecordBatch) -> None:
        pass

    def emit_watermark_status(self, status: WatermarkStatus) -> None:
        pass


def combine_outputs(outs: list[Any]) -> Any:
    return outs[0] if len(outs) == 1 else (BroadcastingOutput(outs) if outs else DiscardingOutput())


@dataclass
class ChainMember:
    spec: ChainedOperator
    operator: StreamOperator
    # inputs still open, per input index: how many feeders (chained predecessors + network inputs)
    open_feeders: dict[int, int] = field(default_factory=dict)
    finished: bool = False


class OperatorChain:
    def __init__(
        self,
        tdd: TaskDeploymentDescriptor,
        writers: dict[str, Any],
        network_feeders: dict[tuple[int, int], int],
        processing_time_service: ProcessingTimeService,
        event_gateway_for: Callable[[ChainedOperator], OperatorEventGateway],
        metrics: TaskMetrics,
        logger: logging.LoggerAdapter,
    ) -> None:
        self.tdd = tdd
        self.metrics = metrics
        self.members: dict[int, ChainMember] = {}
        kgr = compute_key_group_range_for_operator_index(tdd.max_parallelism, tdd.parallelism, tdd.subtask_index)
        for spec in tdd.operators:
            try:
                op = instantiate(spec.operator_factory)
            except Exception as e:
                raise InvalidProgramError(
                    f"could not instantiate operator '{spec.name}' of task {tdd.task_name_with_subtask}: {e!r}"
                ) from e
            if not isinstance(op, StreamOperator):
                raise InvalidProgramError(f"operator '{spec.name}' factory returned {type(op).__name__}, not a StreamOperator")
            self.members[spec.node_id] = ChainMember(spec, op)
        # feeders per (operator, input index): chained predecessors and network inputs
        for m in self.members.values():
            for out in m.spec.chained_outputs:
                tgt = self.members[out.target_node_id]
                tgt.open_feeders[out.type_number] = tgt.open_feeders.get(out.type_number, 0) + 1
        for (node_id, type_number), n in network_feeders.items():
            tgt = self.members[node_id]
            tgt.open_feeders[type_number] = tgt.open_feeders.get(type_number, 0) + n
        # wire outputs, tail first, then setup each operator
        dataset_tags = {p.dataset_id: p.output_tag for p in tdd.produced_partitions}
        for spec in reversed(tdd.operators):
            m = self.members[spec.node_id]
            by_tag: dict[str | None, list[Any]] = {}
            for o in spec.chained_outputs:
                target = self.members[o.target_node_id]
                by_tag.setdefault(o.output_tag, []).append(ChainingOutput(target.operator, o.type_number, target.spec.name))
            for ds in spec.network_outputs:
                by_tag.setdefault(dataset_tags.get(ds), []).append(NetworkOutput(writers[ds], metrics))
            output: Any = combine_outputs(by_tag.pop(None, []))
            if by_tag:  # side outputs with consumers
                output = SideOutputsOutput(output, {tag: combine_outputs(outs) for tag, outs in by_tag.items() if tag is not None})
            ctx = OperatorContext(
                job_id=tdd.job_id,
                job_name=tdd.job_name,
                task_name=tdd.task_name,
                operator_name=spec.name,
                node_id=spec.node_id,
                uid=spec.uid,
                subtask_index=tdd.subtask_index,
                parallelism=tdd.parallelism,
                max_parallelism=tdd.max_parallelism,
                attempt_number=tdd.attempt_number,
                key_group_range=kgr,
                output=output,
                processing_time_service=processing_time_service,
                event_gateway=event_gateway_for(spec),
                config=tdd.config,
                logger=logger,
                metrics=metrics,
            )
            self._guard(spec.name, m.operator.setup, ctx)
        self.sources = [m for m in self.members.values() if isinstance(m.operator, SourceOperator)]

    @staticmethod
    def _guard(name: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except BaseException as e:
            annotate(e, name)
            raise

    def operator(self, node_id: int) -> StreamOperator:
        return self.members[node_id].operator

    def name_of(self, node_id: int) -> str:
        return self.members[node_id].spec.name

    def open(self) -> None:
        for spec in reversed(self.tdd.operators):  # tail first, so downstream is ready (Flink order)
            self._guard(spec.name, self.members[spec.node_id].operator.open)

    def end_input(self, node_id: int, type_number: int) -> None:
        """One feeder of (node, input) ended; finish operators whose inputs have all ended."""
        m = self.members[node_id]
        m.open_feeders[type_number] -= 1
        if m.open_feeders[type_number] > 0:
            return
        self._guard(m.spec.name, m.operator.end_input, type_number)
        if all(v <= 0 for v in m.open_feeders.values()):
            self.finish_operator(node_id)

    def finish_operator(self, node_id: int) -> None:
        m = self.members[node_id]
        if m.finished:
            return
        m.finished = True
        self._guard(m.spec.name, m.operator.finish)
        for out in m.spec.chained_outputs:
            self.end_input(out.target_node_id, out.type_number)

    @property
    def all_finished(self) -> bool:
        return all(m.finished for m in self.members.values())

    def close(self) -> list[BaseException]:
        errors: list[BaseException] = []
        for spec in self.tdd.operators:
            try:
                self.members[spec.node_id].operator.close()
            except BaseException as e:  # noqa: BLE001 - close every operator, report the rest
                annotate(e, spec.name)
                errors.append(e)
        return errors
