"""Builds TaskDeploymentDescriptors from the ExecutionGraph and the slot assignment."""
from __future__ import annotations

from runtime.graph.execution_graph import Execution, ExecutionGraph, ExecutionVertex
from runtime.graph.job_graph import ResultPartitionType
from runtime.jobmanager.scheduler.partition_tracker import BlockingPartitionTracker
from runtime.jobmanager.slot_pool import PhysicalSlot
from runtime.rpc.deployment import (
    InputChannelDeploymentDescriptor,
    InputGateDeploymentDescriptor,
    ResultPartitionDeploymentDescriptor,
    TaskDeploymentDescriptor,
)


def build_tdd(
    eg: ExecutionGraph, ev: ExecutionVertex, placement: dict, config: dict[str, str], partitions: BlockingPartitionTracker | None = None,
    execution: Execution | None = None,
) -> TaskDeploymentDescriptor:
    """`partitions`: where blocking results are written and which files a consumer reads (None: no
    blocking exchanges; every channel reads from its producer's TaskManager). `execution`: the attempt
    to deploy with its assigned slot (a speculative one); None: the current attempt in `placement`."""
    jv = ev.job_vertex
    ex = execution or ev.current_execution
    slot: PhysicalSlot = placement[ev.id] if execution is None else execution.assigned_resource  # type: ignore[assignment]  # a speculative attempt's assigned_resource is its PhysicalSlot
    produced = []
    for ds in jv.produced_datasets:
        part = ev.produced_partitions[ds.id]
        result = eg.results[ds.id]
        produced.append(
            ResultPartitionDeploymentDescriptor(
                partition_id=part.partition_id,
                dataset_id=ds.id,
                producer_node_id=ds.producer_node_id,
                num_subpartitions=part.num_subpartitions,
                partitioner=ds.partitioner,
                result_type=ds.result_type,
                consumer_max_parallelism=result.consumer_max_parallelism,
                output_tag=ds.output_tag,
                blocking_table_uri=(
                    partitions.table_uri(ds.id) if partitions is not None and ds.result_type is ResultPartitionType.BLOCKING else None
                ),
            )
        )
    gates = []
    for ci in ev.consumed_inputs:
        channels = []
        for cp in ci.partitions:
            if partitions is not None and eg.partition(cp.partition_id).result_type is ResultPartitionType.BLOCKING:
                channels.append(
                    InputChannelDeploymentDescriptor(
                        partition_id=cp.partition_id,
                        producer_attempt_id=partitions.committed_attempt(cp.partition_id),
                        subpartition_index=cp.subpartition_index,
                        blocking_table_uri=partitions.table_uri(ci.dataset_id),
                        blocking_files=partitions.files_of(cp.partition_id, cp.subpartition_index),
                    )
                )
                continue
            producer = eg.vertex(cp.producer)
            pslot: PhysicalSlot = placement[cp.producer]
            channels.append(
                InputChannelDeploymentDescriptor(
                    partition_id=cp.partition_id,
                    producer_attempt_id=producer.current_execution.attempt_id,
                    subpartition_index=cp.subpartition_index,
                    producer=pslot.data_address,
                )
            )
        gates.append(
            InputGateDeploymentDescriptor(
                dataset_id=ci.dataset_id, target_node_id=ci.target_node_id, type_number=ci.type_number, channels=channels
            )
        )
    return TaskDeploymentDescriptor(
        job_id=eg.job_id,
        job_name=eg.job_name,
        job_vertex_id=jv.id,
        task_name=jv.name,
        subtask_index=ev.subtask_index,
        parallelism=jv.parallelism,
        max_parallelism=jv.max_parallelism,
        attempt_number=ex.attempt_number,
        execution_attempt_id=ex.attempt_id,
        allocation_id=slot.allocation_id,
        operators=jv.operators,
        produced_partitions=produced,
        input_gates=gates,
        config=config,
    )
