"""The consuming side of the data plane over TCP: connections and the remote input channel.

Flink: NettyClient / PartitionRequestClientFactory / NettyPartitionRequestClient,
CreditBasedPartitionRequestClientHandler and RemoteInputChannel.

Connection sharing (like Flink's PartitionRequestClientFactory): one authenticated TCP
connection per (this process, producer data address), shared by every remote channel of every
gate of this TaskManager that reads from that producer TaskManager; frames carry a receiver id.
Losing the connection fails every channel on it that has not yet received its EndOfPartition.

Credit-based flow control: a channel announces `initial_credit` with its request and one more
credit each time the task thread takes a record batch out of its queue, so at most
`initial_credit` undelivered batches ever sit in a channel's queue. Events (watermarks, checkpoint
barriers, EndOfPartition) cost no credit: the server sends one as soon as it is at the head of
the subpartition, so a barrier is never held back behind a missing credit.

A channel blocked in its InputGate for checkpoint alignment is simply not read by the task
thread, so it returns no credit: the producer gets to send at most its remaining credit, then its
subpartition fills and its task thread blocks (backpressure) until the alignment ends.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from collections import deque

from runtime.core.errors import AuthenticationError
from runtime.core.records import StreamElement
from runtime.rpc.auth import client_handshake
from runtime.rpc.deployment import DataAddress
from runtime.taskmanager.network import protocol as P
from runtime.taskmanager.network.errors import (
    PartitionConnectionError,
    PartitionError,
    PartitionNotFoundError,
    PartitionReleasedError,
    ProducerFailedError,
)
from runtime.taskmanager.network.input import InputChannel, InputGate
from runtime.taskmanager.network.partition import ResultPartitionID
from runtime.taskmanager.network.serialization import CODE_END_OF_PARTITION, decode, is_data

log = logging.getLogger(__name__)

STREAM_LIMIT = 8 * 1024 * 1024
DEFAULT_CONNECT_TIMEOUT_S = 10.0

_ERRORS: dict[str, type[PartitionError]] = {
    P.ERROR_NOT_FOUND: PartitionNotFoundError,
    P.ERROR_PRODUCER_FAILED: ProducerFailedError,
    P.ERROR_RELEASED: PartitionReleasedError,
}


class _ClientConnection:
    """Flink: NettyPartitionRequestClient + CreditBasedPartitionRequestClientHandler."""

    def __init__(self, address: DataAddress, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.address = address
        self.reader = reader
        self.writer = writer
        self.receivers: dict[int, RemoteInputChannel] = {}
        self._ids = itertools.count(1)
        self.closed = False
        self.read_task: asyncio.Task[None] | None = None

    def request(self, ch: RemoteInputChannel) -> int:
        rid = next(self._ids)
        self.receivers[rid] = ch
        req = P.PartitionRequest(ch.rpid.partition_id, ch.rpid.producer_attempt_id, ch.subpartition, ch.initial_credit)
        payload = req.to_bytes()
        self.writer.write(P.frame_header(P.MSG_PARTITION_REQUEST, rid, len(payload)) + payload)
        return rid

    def add_credit(self, rid: int, credit: int) -> None:
        if not self.closed and rid in self.receivers:
            self.writer.write(P.frame_header(P.MSG_ADD_CREDIT, rid, P.CREDIT.size) + P.CREDIT.pack(credit))

    def cancel(self, rid: int) -> None:
        if self.receivers.pop(rid, None) is not None and not self.closed:
            self.writer.write(P.frame_header(P.MSG_CANCEL_REQUEST, rid, 0))

    async def read_loop(self) -> None:
        cause: BaseException | None = None
        try:
            while True:
                msg, rid, payload = await P.read_frame(self.reader)
                ch = self.receivers.get(rid)
                if msg == P.MSG_BUFFER:
                    if ch is None:
                        continue  # canceled channel: drop late buffers
                    if payload[0] == CODE_END_OF_PARTITION:
                        del self.receivers[rid]  # why: a later connection loss must not fail it
                    ch._on_buffer(payload)
                elif msg == P.MSG_ERROR:
                    kind, message = P.parse_error(payload)
                    if ch is not None:
                        del self.receivers[rid]
                        ch.notify_error(_ERRORS.get(kind, PartitionError)(message, ch.rpid.partition_id))
                else:
                    raise ValueError(f"unexpected message type {msg} from {self.address.tm_id}")
        except asyncio.CancelledError:
            cause = ConnectionError("connection closed locally")
            raise
        except (asyncio.IncompleteReadError, ConnectionError) as e:
            cause = e
        except Exception as e:  # malformed frame: treat like a broken connection
            log.exception("data connection to %s broken", self.address)
            cause = e
        finally:
            self.closed = True
            self.writer.close()
            for ch in list(self.receivers.values()):
                ch.notify_error(PartitionConnectionError(
                    f"connection to TaskManager {self.address.tm_id} at {self.address.host}:"
                    f"{self.address.port} lost while reading partition {ch.rpid} "
                    f"(subpartition {ch.subpartition}): {cause!r}",
                    ch.rpid.partition_id,
                ))
            self.receivers.clear()


class ConnectionManager:
    """Flink: PartitionRequestClientFactory -- one shared connection per producer address.
    All methods run on the network loop thread."""

    def __init__(self, secret: str, connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S) -> None:
        self._secret = secret
        self._timeout = connect_timeout_s
        self._conns: dict[tuple[str, int], asyncio.Future[_ClientConnection]] = {}

    async def get(self, address: DataAddress) -> _ClientConnection:
        key = (address.host, address.port)
        fut = self._conns.get(key)
        if fut is not None and fut.done() and (fut.exception() is not None or fut.result().closed):
            fut = None
        if fut is None:
            fut = asyncio.get_running_loop().create_future()
            self._conns[key] = fut
            try:
                fut.set_result(await self._connect(address))
            except BaseException as e:
                fut.set_exception(e)
                fut.exception()  # why: mark retrieved, the caller gets it below
                self._conns.pop(key, None)
                raise
        return await asyncio.shield(fut)

    async def _connect(self, address: DataAddress) -> _ClientConnection:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(address.host, address.port, limit=STREAM_LIMIT), self._timeout
        )
        try:
            await client_handshake(reader, writer, self._secret)
        except BaseException:
            writer.close()
            raise
        conn = _ClientConnection(address, reader, writer)
        conn.read_task = asyncio.create_task(conn.read_loop())
        log.debug("data connection to %s established", address)
        return conn

    async def close(self) -> None:
        conns = [f.result() for f in self._conns.values() if f.done() and not f.cancelled() and f.exception() is None]
        self._conns.clear()
        for c in conns:
            if c.read_task is not None:
                c.read_task.cancel()
        await asyncio.gather(*(c.read_task for c in conns if c.read_task is not None), return_exceptions=True)


class RemoteInputChannel(InputChannel):
    """Flink: RemoteInputChannel -- receives encoded buffers from a producer TaskManager;
    decodes them on the task thread (keeping the loop thread free) and returns credit."""

    def __init__(
        self,
        gate: InputGate,
        index: int,
        rpid: ResultPartitionID,
        subpartition: int,
        producer: DataAddress,
        connections: ConnectionManager,
        loop: asyncio.AbstractEventLoop,
        initial_credit: int,
    ) -> None:
        super().__init__(gate, index, rpid, subpartition)
        if initial_credit < 1:
            raise ValueError(f"initial credit must be >= 1, got {initial_credit}")
        self.producer = producer
        self.initial_credit = initial_credit
        self._connections = connections
        self._loop = loop
        self._lock = threading.Lock()
        self._queue: deque[bytes] = deque()
        self._unannounced_credit = 0
        self._conn: _ClientConnection | None = None
        self._rid: int | None = None
        self._closed = False

    # ---- loop thread --------------------------------------------------------------------------
    async def _request(self) -> None:
        try:
            conn = await self._connections.get(self.producer)
        except (TimeoutError, AuthenticationError, OSError) as e:
            self.notify_error(PartitionConnectionError(
                f"cannot connect to TaskManager {self.producer.tm_id} at {self.producer.host}:"
                f"{self.producer.port} to read partition {self.rpid} (subpartition "
                f"{self.subpartition}): {e!r}",
                self.rpid.partition_id,
            ))
            return
        if self._closed:
            return
        self._conn = conn
        self._rid = conn.request(self)

    def _on_buffer(self, payload: bytes) -> None:
        with self._lock:
            was_empty = not self._queue
            self._queue.append(payload)
        if was_empty:
            self.notify_available()

    def _send_credit(self) -> None:
        with self._lock:
            credit, self._unannounced_credit = self._unannounced_credit, 0
        if credit and self._conn is not None and self._rid is not None:
            self._conn.add_credit(self._rid, credit)

    def _cancel(self) -> None:
        if self._conn is not None and self._rid is not None:
            self._conn.cancel(self._rid)

    # ---- any thread ---------------------------------------------------------------------------
    def request(self) -> None:
        asyncio.run_coroutine_threadsafe(self._request(), self._loop)

    # ---- task thread --------------------------------------------------------------------------
    def get_next(self) -> tuple[StreamElement | None, bool]:
        with self._lock:
            if not self._queue:
                return None, False
            payload = self._queue.popleft()
            more = bool(self._queue)
        element = decode(payload)
        if is_data(element):
            with self._lock:
                self._unannounced_credit += 1
                first = self._unannounced_credit == 1
            if first:  # why: one loop hop per burst of consumed buffers, not one per buffer
                try:
                    self._loop.call_soon_threadsafe(self._send_credit)
                except RuntimeError:
                    pass  # network environment shut down
        return element, more

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._lock:
            self._queue.clear()
        try:
            self._loop.call_soon_threadsafe(self._cancel)
        except RuntimeError:
            pass
