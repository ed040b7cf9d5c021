"""One TaskManager's data plane: partition registry, data server, client connections, flusher.

Flink: NettyShuffleEnvironment (+ NettyConnectionManager, ResultPartitionFactory,
SingleInputGateFactory).

Threading model:
  * task threads: produce through RecordWriter/ResultPartition (block on backpressure) and
    consume through InputGate.poll_next (block on the gate's condition);
  * one asyncio loop thread ("network-<tm_id>"): the data server (encodes and sends) and all
    client connections (receive raw frames; decoding happens on the consuming task thread);
  * one output-flusher thread: periodic flush of partly filled buffers (buffer timeout).
Local exchange (producer in this process) never touches the loop: element objects move from
the subpartition queue straight to the consuming task thread.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from runtime.rpc.deployment import (
    DataAddress,
    InputGateDeploymentDescriptor,
    ResultPartitionDeploymentDescriptor,
)
from runtime.taskmanager.network.blocking import BlockingInputChannel, BlockingResultPartition
from runtime.taskmanager.network.client import ConnectionManager, RemoteInputChannel
from runtime.taskmanager.network.input import InputChannel, InputGate, LocalInputChannel
from runtime.taskmanager.network.partition import ResultPartition, ResultPartitionID, ResultPartitionManager
from runtime.taskmanager.network.partitioners import create_partitioner
from runtime.taskmanager.network.server import PartitionRequestServer
from runtime.taskmanager.network.writer import OutputFlusher, RecordWriter

log = logging.getLogger(__name__)

T = TypeVar("T")


class NetworkConfig(BaseModel):
    """Data-plane settings of a TaskManager (Flink: NettyShuffleEnvironmentOptions)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    capacity_per_subpartition: int = Field(4, ge=1, description="record batches queued per subpartition before the producer blocks")
    buffer_records: int = Field(8192, ge=1, description="rows a RecordWriter coalesces per channel before sending")
    buffer_timeout_ms: int = Field(100, ge=-1, description="periodic flush interval; 0 = flush every emit, -1 = only when full")
    exclusive_credits: int = Field(2, ge=1, description="Flink: taskmanager.network.memory.buffers-per-channel")
    floating_credits: int = Field(2, ge=0, description="extra initial credit per remote channel")
    partition_request_timeout_s: float = Field(30.0, gt=0, description="how long a request waits for a partition to be registered")
    connect_timeout_s: float = Field(10.0, gt=0)

    @property
    def initial_credit(self) -> int:
        return self.exclusive_credits + self.floating_credits


class NetworkEnvironment:
    """The data plane of one TaskManager process."""

    def __init__(
        self,
        secret: str,
        tm_id: str,
        host: str = "127.0.0.1",
        port: int = 0,
        config: NetworkConfig | None = None,
    ) -> None:
        self.tm_id = tm_id
        self.host = host
        self.config = config or NetworkConfig()
        self.partition_manager = ResultPartitionManager()
        self._server = PartitionRequestServer(
            self.partition_manager, secret, host, port, self.config.partition_request_timeout_s
        )
        self._connections = ConnectionManager(secret, self.config.connect_timeout_s)
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        # one flusher thread per buffer timeout in use (jobs may set their own: execution.buffer-timeout)
        self._flushers: dict[int, OutputFlusher] = {}
        self._flushers_lock = threading.Lock()
        self._started = False
        self._shut_down = False

    # ---- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        if self._started:
            return
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"network-{self.tm_id}", daemon=True)
        self._thread.start()
        self._run(self._server.start())
        self._started = True
        log.info("network environment of %s serving on %s:%d", self.tm_id, self.host, self._server.port)

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = 30.0) -> T:
        fut: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return fut.result(timeout)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    @property
    def address(self) -> DataAddress:
        if not self._started:
            raise RuntimeError(f"network environment of {self.tm_id} is not started")
        return DataAddress(tm_id=self.tm_id, host=self.host, port=self._server.port)

    def shutdown(self) -> None:
        """Release every partition, close connections and stop the loop and flusher threads."""
        if self._shut_down:
            return
        self._shut_down = True
        self.partition_manager.release_all()
        with self._flushers_lock:
            flushers, self._flushers = list(self._flushers.values()), {}
        for flusher in flushers:
            flusher.stop()
        if self._started:
            try:
                self._run(self._server.stop(), timeout=10)
                self._run(self._connections.close(), timeout=10)
            except Exception:
                log.exception("network environment of %s: unclean shutdown", self.tm_id)
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=10)
        self._loop.close()
        log.info("network environment of %s shut down", self.tm_id)

    def __enter__(self) -> NetworkEnvironment:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # ---- producing ----------------------------------------------------------------------------
    def _flusher(self, timeout_ms: int) -> OutputFlusher | None:
        if timeout_ms <= 0:
            return None
        with self._flushers_lock:
            flusher = self._flushers.get(timeout_ms)
            if flusher is None:
                flusher = self._flushers[timeout_ms] = OutputFlusher(timeout_ms / 1000.0, name=f"output-flusher-{self.tm_id}-{timeout_ms}ms")
            return flusher

    def create_result_partition(
        self, rpdd: ResultPartitionDeploymentDescriptor, attempt_id: str, key_selector: Any, subtask_index: int = 0,
        buffer_timeout_ms: int | None = None,
    ) -> tuple[ResultPartition | BlockingResultPartition, RecordWriter]:
        """Create and register the partition one producer attempt writes, with its writer.
        `key_selector` is the unpickled selector (callable or field name) for HASH, else None.
        A blocking result (with its table) is written to files instead, and registered nowhere:
        consumers read it once it is committed. `buffer_timeout_ms`: the job's execution.buffer-timeout
        (None: this TaskManager's default; 0 flushes every batch, -1 only full buffers)."""
        timeout = self.config.buffer_timeout_ms if buffer_timeout_ms is None else buffer_timeout_ms
        partitioner = create_partitioner(
            rpdd.partitioner.kind, key_selector, rpdd.num_subpartitions, rpdd.consumer_max_parallelism
        )
        if rpdd.blocking_table_uri is not None:
            blocking = BlockingResultPartition(
                rpdd.partition_id, rpdd.dataset_id, rpdd.num_subpartitions, attempt_id, rpdd.blocking_table_uri, subtask_index
            )
            # no flusher: nobody reads the files before the producer finished
            return blocking, RecordWriter(blocking, partitioner, self.config.buffer_records)
        partition = ResultPartition(
            rpdd.partition_id, rpdd.num_subpartitions, self.config.capacity_per_subpartition, attempt_id
        )
        writer = RecordWriter(
            partition,
            partitioner,
            self.config.buffer_records,
            flusher=self._flusher(timeout),
            flush_always=timeout == 0,
        )
        self.partition_manager.register(partition)
        return partition, writer

    def release_partitions_of(self, attempt_id: str, cause: BaseException | None = None) -> int:
        """Release the partitions of one producer attempt (cancel/failover); wakes its blocked
        task thread. Returns how many were released."""
        return self.partition_manager.release_partitions_of(attempt_id, cause)

    # ---- consuming ----------------------------------------------------------------------------
    def create_input_gate(self, igdd: InputGateDeploymentDescriptor, name: str | None = None) -> InputGate:
        """An input gate whose channels have already started requesting their subpartitions."""
        if not self._started:
            raise RuntimeError(f"network environment of {self.tm_id} is not started")
        gate = InputGate(name or f"{igdd.dataset_id}->{igdd.target_node_id}/{igdd.type_number}")
        channels: list[InputChannel] = []
        for i, c in enumerate(igdd.channels):
            rpid = ResultPartitionID(c.partition_id, c.producer_attempt_id)
            if c.blocking_table_uri is not None:
                channels.append(BlockingInputChannel(gate, i, rpid, c.subpartition_index, c.blocking_table_uri, c.blocking_files))
            elif c.producer is None:
                raise ValueError(f"input channel {i} of {gate.name}: no producer address and no blocking result files")
            elif c.producer.tm_id == self.tm_id:
                channels.append(LocalInputChannel(
                    gate, i, rpid, c.subpartition_index, self.partition_manager,
                    self.config.partition_request_timeout_s,
                ))
            else:
                channels.append(RemoteInputChannel(
                    gate, i, rpid, c.subpartition_index, c.producer, self._connections, self._loop,
                    self.config.initial_credit,
                ))
        gate.set_channels(channels)
        gate.request_partitions()
        return gate
