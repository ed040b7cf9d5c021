"""Deployment descriptors: what the JobMaster sends a TaskExecutor to run one subtask attempt."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from runtime.graph.job_graph import ChainedOperator, PartitionerDescriptor, ResultPartitionType


class _Model(BaseModel):
    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64", extra="forbid")


class DataAddress(_Model):
    """Where a TaskManager serves its result partitions."""

    tm_id: str
    host: str
    port: int


class ResultPartitionDeploymentDescriptor(_Model):
    partition_id: str  # "<dataset_id>:<producer subtask>" -- unique per job; attempt-qualified at runtime
    dataset_id: str
    producer_node_id: int  # operator in the chain that writes it
    num_subpartitions: int
    partitioner: PartitionerDescriptor
    result_type: ResultPartitionType = ResultPartitionType.PIPELINED_BOUNDED
    consumer_max_parallelism: int = 128  # key groups -> consumer subtask for HASH
    # BLOCKING: the result's Delta table, where this producer writes its subpartitions' files
    blocking_table_uri: str | None = None
    output_tag: str | None = None  # the producer's side output it carries (None: its main output)


class BlockingFileSlice(_Model):
    """Row groups of one committed blocking result file that hold one subpartition."""

    path: str
    row_groups: list[int]


class InputChannelDeploymentDescriptor(_Model):
    partition_id: str
    producer_attempt_id: str  # the producing Execution's attempt id (a restarted producer is a new partition)
    subpartition_index: int
    producer: DataAddress | None = None  # None: a blocking result, read from its committed files
    # a committed blocking result: its table and where this subpartition is (in write order)
    blocking_table_uri: str | None = None
    blocking_files: list[BlockingFileSlice] = Field(default_factory=list)


class InputGateDeploymentDescriptor(_Model):
    dataset_id: str
    target_node_id: int  # operator in this chain that consumes it
    type_number: int = 0  # input index of that operator
    channels: list[InputChannelDeploymentDescriptor]


class TaskRestore(_Model):
    """Where a restarted or restored task finds its state (Flink: JobManagerTaskRestore)."""

    checkpoint_id: int
    # operator id -> state files (relative to the state table) of every subtask of that operator
    operator_files: dict[str, list[str]] = Field(default_factory=dict)
    # the table holding those files: a savepoint's, or None for the job's checkpoint table
    state_dir: str | None = None
    # operators of this task that the checkpoint knows; the others are new (Flink: not restored,
    # e.g. a source added to the program reads from its start)
    restored_operators: list[str] = Field(default_factory=list)
    # FLIP-147: every operator of this subtask had finished in that checkpoint (Flink: a task
    # deployed as finished): it runs none of them, ends its outputs and finishes
    deployed_as_finished: bool = False


class TaskDeploymentDescriptor(_Model):
    job_id: str
    job_name: str
    job_vertex_id: str
    task_name: str
    subtask_index: int
    parallelism: int
    max_parallelism: int
    attempt_number: int
    execution_attempt_id: str
    allocation_id: str
    operators: list[ChainedOperator]
    produced_partitions: list[ResultPartitionDeploymentDescriptor] = Field(default_factory=list)
    input_gates: list[InputGateDeploymentDescriptor] = Field(default_factory=list)
    config: dict[str, str] = Field(default_factory=dict)
    checkpoint_dir: str | None = None  # root of the job's checkpoint table: where state files go
    task_restore: TaskRestore | None = None
    job_master_token: str | None = None  # the JobMaster's fencing token (HA): the task's calls to it carry it

    @property
    def task_name_with_subtask(self) -> str:
        return f"{self.task_name} ({self.subtask_index + 1}/{self.parallelism})#{self.attempt_number}"
