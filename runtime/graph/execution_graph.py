"""ExecutionGraph: the JobGraph expanded to subtasks, attempts and intermediate result partitions.

Topology only (no scheduling): port of Flink's DefaultExecutionGraph / ExecutionJobVertex /
ExecutionVertex / Execution / IntermediateResult(Partition), with edges built like
EdgeManagerBuildUtil.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from runtime.core.errors import IllegalStateTransitionError
from runtime.core.keygroups import compute_key_group_range_for_operator_index
from runtime.core.state_machine import StateMachine
from runtime.core.states import EXECUTION_TRANSITIONS, ExecutionState, execution_state_machine
from runtime.graph.job_graph import (
    DistributionPattern,
    IntermediateDataSet,
    JobEdge,
    JobGraph,
    JobVertex,
    ResultPartitionType,
)

if TYPE_CHECKING:
    from runtime.graph.regions import PipelinedRegion

Clock = Callable[[], float]


@dataclass(frozen=True, order=True)
class ExecutionVertexID:
    """Flink's ExecutionVertexID: one subtask of one job vertex."""

    job_vertex_id: str
    subtask_index: int

    def __str__(self) -> str:
        return f"{self.job_vertex_id}_{self.subtask_index}"


@dataclass(frozen=True)
class ConsumedPartition:
    """One input channel: which partition, who produces it, which of its subpartitions we read."""

    partition_id: str
    producer: ExecutionVertexID
    subpartition_index: int


@dataclass
class ConsumedInput:
    """One input gate of a subtask: everything it reads from one dataset (one JobEdge)."""

    dataset_id: str
    target_node_id: int
    type_number: int
    partitions: list[ConsumedPartition] = field(default_factory=list)


@dataclass
class IntermediateResultPartition:
    """Flink's IntermediateResultPartition: what one producer subtask writes for one dataset."""

    partition_id: str
    dataset_id: str
    producer: ExecutionVertexID
    result_type: ResultPartitionType
    num_subpartitions: int = 0
    consumers: list[ExecutionVertexID] = field(default_factory=list)


@dataclass
class IntermediateResult:
    """Flink's IntermediateResult: all partitions of one IntermediateDataSet."""

    dataset: IntermediateDataSet
    producer_job_vertex_id: str
    partitions: list[IntermediateResultPartition]
    consumer_max_parallelism: int = 128  # key groups for HASH (the consumer vertex's max parallelism)

    @property
    def id(self) -> str:
        return self.dataset.id

    @property
    def result_type(self) -> ResultPartitionType:
        return self.dataset.result_type


def partition_id_of(dataset_id: str, producer_subtask: int) -> str:
    return f"{dataset_id}:{producer_subtask}"


class Execution:
    """Flink's Execution: one attempt of one subtask, with its ExecutionState machine."""

    def __init__(self, vertex_id: ExecutionVertexID, attempt_number: int, what: str, clock: Clock = time.time) -> None:
        self.vertex_id = vertex_id
        self.attempt_id: str = uuid.uuid4().hex
        self.attempt_number = attempt_number
        self._clock = clock
        self._what = f"{what} attempt #{attempt_number}"
        self._machine = execution_state_machine(self._what)
        self.state_timestamps: dict[ExecutionState, float] = {ExecutionState.CREATED: clock()}
        self.assigned_resource: object | None = None  # set by the scheduler (slot / address): opaque here
        self.failure_info: object | None = None

    @property
    def state(self) -> ExecutionState:
        return self._machine.state

    def can_transition(self, to: ExecutionState) -> bool:
        return self._machine.can_transition(to)

    def transition_state(self, to: ExecutionState) -> ExecutionState:
        """Move to `to` (raises IllegalStateTransitionError on an illegal move); returns the old state."""
        previous = self._machine.transition(to)
        self.state_timestamps[to] = self._clock()
        return previous

    def recover_as_finished(self) -> None:
        """Batch job recovery (Flink: Execution#recoverExecution, FLIP-383): the subtask's results were
        committed under a JobManager before this one, so this attempt, never deployed, is FINISHED
        without running: no new attempt, no deployment, no transition through the running states."""
        if self.state is not ExecutionState.CREATED:
            raise IllegalStateTransitionError(f"{self._what}: only a created attempt is recovered as FINISHED, it is {self.state.name}")
        self._machine = StateMachine(ExecutionState.FINISHED, EXECUTION_TRANSITIONS, self._what)
        self.state_timestamps[ExecutionState.FINISHED] = self._clock()

    def fail(self, failure_info: object) -> None:
        self.failure_info = failure_info
        self.transition_state(ExecutionState.FAILED)

    def __repr__(self) -> str:
        return f"Execution({self.vertex_id}, #{self.attempt_number}, {self.state.name})"


class ExecutionVertex:
    """Flink's ExecutionVertex: one subtask; keeps its current and prior attempts."""

    def __init__(self, job_vertex: JobVertex, subtask_index: int, clock: Clock = time.time) -> None:
        self.id = ExecutionVertexID(job_vertex.id, subtask_index)
        self.job_vertex = job_vertex
        self.subtask_index = subtask_index
        self.parallelism = job_vertex.parallelism
        self._clock = clock
        self.produced_partitions: dict[str, IntermediateResultPartition] = {}
        self.consumed_inputs: list[ConsumedInput] = []
        self.prior_executions: list[Execution] = []
        self.current_execution = Execution(self.id, 0, self.task_name_with_subtask, clock)
        # speculative execution (Flink: SpeculativeExecutionVertex): further attempts running at the
        # same time as the current one; the first to finish becomes the current one
        self.speculative_executions: list[Execution] = []

    @property
    def task_name_with_subtask(self) -> str:
        return f"{self.job_vertex.name} ({self.subtask_index + 1}/{self.parallelism})"

    @property
    def execution_state(self) -> ExecutionState:
        return self.current_execution.state

    def current_executions(self) -> list[Execution]:
        """The current attempt and the speculative ones running beside it."""
        return [self.current_execution, *self.speculative_executions]

    def execution(self, attempt_id: str) -> Execution | None:
        """One of the current attempts by id (None: an attempt of an earlier restart, or unknown)."""
        for ex in self.current_executions():
            if ex.attempt_id == attempt_id:
                return ex
        return None

    def all_attempts_ended(self) -> bool:
        return all(ex.state.is_terminal for ex in self.current_executions())

    def _next_attempt_number(self) -> int:
        return 1 + max(ex.attempt_number for ex in self.current_executions())

    def add_speculative_execution(self) -> Execution:
        """Another attempt of this subtask, run beside the current one (Flink: createNewSpeculativeExecution)."""
        if self.current_execution.state.is_terminal:
            raise IllegalStateTransitionError(
                f"{self.task_name_with_subtask}: no speculative attempt for attempt #{self.current_execution.attempt_number}, "
                f"which is already {self.current_execution.state.name}"
            )
        ex = Execution(self.id, self._next_attempt_number(), self.task_name_with_subtask, self._clock)
        self.speculative_executions.append(ex)
        return ex

    def make_current(self, ex: Execution) -> list[Execution]:
        """`ex` (a speculative attempt) becomes the current attempt, e.g. it finished first; returns the
        others, which stay listed as speculative until they ended (the caller cancels them)."""
        if ex is self.current_execution:
            return list(self.speculative_executions)
        others = [self.current_execution, *(e for e in self.speculative_executions if e is not ex)]
        self.current_execution = ex
        self.speculative_executions = others
        return others

    def reset_for_new_execution(self) -> Execution:
        """A fresh attempt (Flink's ExecutionVertex.resetForNewExecution); the old ones must be over."""
        for old in self.current_executions():
            if not old.state.is_terminal:
                raise IllegalStateTransitionError(
                    f"{self.task_name_with_subtask}: cannot start a new attempt while attempt "
                    f"#{old.attempt_number} is {old.state.name}; cancel it first"
                )
        number = self._next_attempt_number()
        self.prior_executions.extend(sorted(self.current_executions(), key=lambda e: e.attempt_number))
        self.speculative_executions = []
        self.current_execution = Execution(self.id, number, self.task_name_with_subtask, self._clock)
        return self.current_execution

    def consumed_partitions(self) -> Iterator[ConsumedPartition]:
        for ci in self.consumed_inputs:
            yield from ci.partitions

    def __repr__(self) -> str:
        return f"ExecutionVertex({self.task_name_with_subtask}, {self.execution_state.name})"


class ExecutionJobVertex:
    """Flink's ExecutionJobVertex: a JobVertex and its parallel subtasks."""

    def __init__(self, job_vertex: JobVertex, clock: Clock = time.time) -> None:
        self.job_vertex = job_vertex
        self.task_vertices = [ExecutionVertex(job_vertex, i, clock) for i in range(job_vertex.parallelism)]

    @property
    def id(self) -> str:
        return self.job_vertex.id

    @property
    def name(self) -> str:
        return self.job_vertex.name

    @property
    def parallelism(self) -> int:
        return self.job_vertex.parallelism

    @property
    def max_parallelism(self) -> int:
        return self.job_vertex.max_parallelism


class ExecutionGraph:
    """The parallel topology of a job (Flink's DefaultExecutionGraph, without scheduling)."""

    def __init__(self, job_graph: JobGraph, clock: Clock = time.time) -> None:
        self.job_graph = job_graph
        self.job_vertices: list[ExecutionJobVertex] = [
            ExecutionJobVertex(jv, clock) for jv in job_graph.topological_vertices()
        ]
        self._job_vertices = {ejv.id: ejv for ejv in self.job_vertices}
        self._vertices: dict[ExecutionVertexID, ExecutionVertex] = {
            ev.id: ev for ejv in self.job_vertices for ev in ejv.task_vertices
        }
        self.results: dict[str, IntermediateResult] = {}
        self._partitions: dict[str, IntermediateResultPartition] = {}
        self._regions: list[PipelinedRegion] | None = None
        self._region_of: dict[ExecutionVertexID, PipelinedRegion] | None = None
        self._attach()

    @property
    def job_id(self) -> str:
        return self.job_graph.job_id

    @property
    def job_name(self) -> str:
        return self.job_graph.job_name

    def job_vertex(self, job_vertex_id: str) -> ExecutionJobVertex:
        return self._job_vertices[job_vertex_id]

    def vertex(self, vertex_id: ExecutionVertexID) -> ExecutionVertex:
        return self._vertices[vertex_id]

    def all_vertices(self) -> list[ExecutionVertex]:
        """All subtasks, job vertices in topological order, subtasks by index."""
        return [ev for ejv in self.job_vertices for ev in ejv.task_vertices]

    def partition(self, partition_id: str) -> IntermediateResultPartition:
        return self._partitions[partition_id]

    @property
    def regions(self) -> list[PipelinedRegion]:
        if self._regions is None:
            from runtime.graph.regions import compute_regions  # regions imports this module

            self._regions = compute_regions(self)
            self._region_of = {v: r for r in self._regions for v in r.vertices}
        return self._regions

    def region_of(self, vertex_id: ExecutionVertexID) -> PipelinedRegion:
        self.regions  # noqa: B018 -- computes lazily
        assert self._region_of is not None
        return self._region_of[vertex_id]

    # -- construction (Flink's DefaultExecutionGraph.attachJobGraph + EdgeManagerBuildUtil) --

    def _attach(self) -> None:
        for ejv in self.job_vertices:
            for ds in ejv.job_vertex.produced_datasets:
                partitions = [
                    IntermediateResultPartition(
                        partition_id=partition_id_of(ds.id, ev.subtask_index),
                        dataset_id=ds.id,
                        producer=ev.id,
                        result_type=ds.result_type,
                    )
                    for ev in ejv.task_vertices
                ]
                consumer_edges = self.job_graph.consumers_of(ds.id)
                consumer_max = (
                    self._job_vertices[consumer_edges[0].target_vertex_id].max_parallelism if consumer_edges else 128
                )
                self.results[ds.id] = IntermediateResult(ds, ejv.id, partitions, consumer_max)
                for ev, p in zip(ejv.task_vertices, partitions):
                    ev.produced_partitions[ds.id] = p
                    self._partitions[p.partition_id] = p
        for ejv in self.job_vertices:
            for edge in ejv.job_vertex.inputs:
                self._connect(ejv, edge)

    def _connect(self, consumer: ExecutionJobVertex, edge: JobEdge) -> None:
        result = self.results.get(edge.dataset_id)
        if result is None:
            raise ValueError(
                f"job {self.job_id}: vertex '{consumer.name}' consumes dataset {edge.dataset_id} that no vertex produces"
            )
        inputs = [ConsumedInput(edge.dataset_id, edge.target_node_id, edge.type_number) for _ in consumer.task_vertices]
        for ev, ci in zip(consumer.task_vertices, inputs):
            ev.consumed_inputs.append(ci)
        if edge.distribution_pattern is DistributionPattern.ALL_TO_ALL and consumer.job_vertex.dynamic_parallelism:
            _connect_key_group_ranges(consumer.task_vertices, result, inputs, consumer.max_parallelism)
        elif edge.distribution_pattern is DistributionPattern.ALL_TO_ALL:
            _connect_all_to_all(consumer.task_vertices, result, inputs)
        else:
            _connect_pointwise(consumer.task_vertices, result, inputs)

    def set_parallelism(self, job_vertex_id: str, parallelism: int) -> None:
        """Adaptive batch: give a vertex whose parallelism is decided at runtime (JobVertex.dynamic_parallelism)
        its parallelism, before any of its subtasks was scheduled (Flink: initializing a dynamic
        ExecutionJobVertex). Its subtasks are created anew and read their key-group ranges."""
        ejv = self._job_vertices[job_vertex_id]
        jv = ejv.job_vertex
        if not jv.dynamic_parallelism:
            raise ValueError(f"job {self.job_id}: the parallelism of vertex '{jv.name}' is not decided at runtime")
        if jv.produced_datasets:
            raise ValueError(f"job {self.job_id}: vertex '{jv.name}' produces results; only a last stage is rescaled here")
        if not 1 <= parallelism <= jv.max_parallelism:
            raise ValueError(f"job {self.job_id}: vertex '{jv.name}': parallelism {parallelism} not in 1..{jv.max_parallelism}")
        if any(ev.execution_state is not ExecutionState.CREATED for ev in ejv.task_vertices):
            raise ValueError(f"job {self.job_id}: vertex '{jv.name}' has started: its parallelism is fixed")
        old = {ev.id for ev in ejv.task_vertices}
        for vid in old:
            del self._vertices[vid]
        for edge in jv.inputs:
            for p in self.results[edge.dataset_id].partitions:
                p.consumers = [c for c in p.consumers if c not in old]
        jv.parallelism = parallelism
        clock = ejv.task_vertices[0]._clock if ejv.task_vertices else time.time
        ejv.task_vertices = [ExecutionVertex(jv, i, clock) for i in range(parallelism)]
        self._vertices.update((ev.id, ev) for ev in ejv.task_vertices)
        for edge in jv.inputs:
            self._connect(ejv, edge)
        self._regions = self._region_of = None


def _set_subpartitions(partition: IntermediateResultPartition, n: int) -> None:
    # a partition read through several JobEdges must be laid out the same way for all of them
    if partition.num_subpartitions not in (0, n):
        raise ValueError(
            f"partition {partition.partition_id} is consumed with {partition.num_subpartitions} and {n} "
            "subpartitions: all consumers of a dataset need the same parallelism"
        )
    partition.num_subpartitions = n


def _connect_all_to_all(
    consumers: list[ExecutionVertex], result: IntermediateResult, inputs: list[ConsumedInput]
) -> None:
    """EdgeManagerBuildUtil.connectAllToAll: consumer i reads subpartition i of every partition."""
    for p in result.partitions:
        _set_subpartitions(p, len(consumers))
        p.consumers.extend(ev.id for ev in consumers)
    for ev, ci in zip(consumers, inputs):
        ci.partitions.extend(ConsumedPartition(p.partition_id, p.producer, ev.subtask_index) for p in result.partitions)


def _connect_key_group_ranges(
    consumers: list[ExecutionVertex], result: IntermediateResult, inputs: list[ConsumedInput], max_parallelism: int
) -> None:
    """A consumer whose parallelism is decided at runtime: every producer writes one subpartition per
    key group (max parallelism), and consumer i reads the subpartitions of its key-group range, so
    any parallelism reads the same data (Flink's adaptive batch: subpartition ranges)."""
    n = len(consumers)
    for p in result.partitions:
        _set_subpartitions(p, max_parallelism)
        p.consumers.extend(ev.id for ev in consumers)
    for ev, ci in zip(consumers, inputs):
        key_groups = compute_key_group_range_for_operator_index(max_parallelism, n, ev.subtask_index)
        ci.partitions.extend(ConsumedPartition(p.partition_id, p.producer, kg) for p in result.partitions for kg in key_groups)


def _connect_pointwise(
    consumers: list[ExecutionVertex], result: IntermediateResult, inputs: list[ConsumedInput]
) -> None:
    """EdgeManagerBuildUtil.connectPointwise, with Flink's integer range formulas."""
    partitions = result.partitions
    source_count, target_count = len(partitions), len(consumers)
    if source_count == target_count:
        for p, ev, ci in zip(partitions, consumers, inputs):
            _set_subpartitions(p, 1)
            p.consumers.append(ev.id)
            ci.partitions.append(ConsumedPartition(p.partition_id, p.producer, 0))
    elif source_count > target_count:
        # each consumer reads a contiguous range of producers, subpartition 0 of each
        for index, (ev, ci) in enumerate(zip(consumers, inputs)):
            start = index * source_count // target_count
            end = (index + 1) * source_count // target_count
            for p in partitions[start:end]:
                _set_subpartitions(p, 1)
                p.consumers.append(ev.id)
                ci.partitions.append(ConsumedPartition(p.partition_id, p.producer, 0))
    else:
        # each producer feeds a contiguous range of consumers, one subpartition per consumer
        for num, p in enumerate(partitions):
            start = (num * target_count + source_count - 1) // source_count
            end = ((num + 1) * target_count + source_count - 1) // source_count
            _set_subpartitions(p, end - start)
            for position, i in enumerate(range(start, end)):
                p.consumers.append(consumers[i].id)
                inputs[i].partitions.append(ConsumedPartition(p.partition_id, p.producer, position))
