"""The data server: serves this TaskManager's result subpartitions to remote consumers.

Flink: NettyServer + PartitionRequestServerHandler + PartitionRequestQueue +
CreditBasedSequenceNumberingViewReader. Runs on the NetworkEnvironment's asyncio loop thread.

Per connection, a reader per requested subpartition holds the consumer's credit; the connection
sends round-robin from the readers that are available (have data and credit, or an event
next). A record batch costs one credit, events are free (like Flink's event buffers). Without
credit nothing more is taken from the subpartition, so it fills up to its capacity and the
producing task thread blocks in ResultPartition.add: that is the backpressure path.
"""
from __future__ import annotations

import asyncio
import logging
from collections import deque

from runtime.core.errors import AuthenticationError
from runtime.core.records import EndOfPartition, RecordBatch
from runtime.rpc.auth import server_handshake
from runtime.taskmanager.network import protocol as P
from runtime.taskmanager.network.errors import (
    PartitionError,
    PartitionNotFoundError,
    PartitionReleasedError,
    ProducerFailedError,
)
from runtime.taskmanager.network.partition import ResultPartitionID, ResultPartitionManager, SubpartitionView
from runtime.taskmanager.network.serialization import encode_parts

log = logging.getLogger(__name__)

STREAM_LIMIT = 8 * 1024 * 1024  # asyncio StreamReader buffer before pausing the socket


def _error_kind(e: BaseException) -> str:
    if isinstance(e, PartitionNotFoundError):
        return P.ERROR_NOT_FOUND
    if isinstance(e, ProducerFailedError):
        return P.ERROR_PRODUCER_FAILED
    if isinstance(e, PartitionReleasedError):
        return P.ERROR_RELEASED
    return P.ERROR_OTHER


class _ViewReader:
    """Flink: CreditBasedSequenceNumberingViewReader -- one requested subpartition."""

    __slots__ = ("receiver", "request", "credit", "view", "queued", "closed", "open_task")

    def __init__(self, receiver: int, request: P.PartitionRequest) -> None:
        self.receiver = receiver
        self.request = request
        self.credit = request.initial_credit
        self.view: SubpartitionView | None = None
        self.queued = False
        self.closed = False
        self.open_task: asyncio.Task[None] | None = None


class _ServerConnection:
    """One authenticated consumer connection (shared by all its channels to this TaskManager)."""

    def __init__(
        self,
        server: PartitionRequestServer,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        self.loop = asyncio.get_running_loop()
        self.peer = writer.get_extra_info("peername")
        self.readers: dict[int, _ViewReader] = {}
        self.available: deque[_ViewReader] = deque()
        self.wakeup = asyncio.Event()
        self.closed = False

    # ---- availability (loop thread) -----------------------------------------------------------
    def enqueue(self, r: _ViewReader) -> None:
        if r.queued or r.closed or self.closed:
            return
        r.queued = True
        self.available.append(r)
        self.wakeup.set()

    def _listener_for(self, r: _ViewReader):
        loop = self.loop

        def on_available() -> None:  # producer thread: hop onto the loop
            try:
                loop.call_soon_threadsafe(self.enqueue, r)
            except RuntimeError:
                pass  # loop closed: the server is shutting down

        return on_available

    # ---- inbound ------------------------------------------------------------------------------
    async def run(self) -> None:
        sender = asyncio.create_task(self._send_loop())
        try:
            while True:
                msg, receiver, payload = await P.read_frame(self.reader, P.MAX_CONTROL_PAYLOAD)
                if msg == P.MSG_PARTITION_REQUEST:
                    self._on_request(receiver, P.PartitionRequest.from_bytes(payload))
                elif msg == P.MSG_ADD_CREDIT:
                    r = self.readers.get(receiver)
                    if r is not None:
                        r.credit += P.CREDIT.unpack(payload)[0]
                        self.enqueue(r)
                elif msg == P.MSG_CANCEL_REQUEST:
                    self._close_reader(receiver)
                else:
                    raise ValueError(f"unexpected message type {msg}")
        except (asyncio.IncompleteReadError, ConnectionError):
            log.debug("consumer %s disconnected", self.peer)
        except Exception as e:  # noqa: BLE001 - any failure of one connection only closes it; its consumer sees the channel fail
            log.warning("closing data connection from %s: %r", self.peer, e)
        finally:
            self.closed = True
            sender.cancel()
            for rid in list(self.readers):
                self._close_reader(rid)
            self.writer.close()

    def _on_request(self, receiver: int, req: P.PartitionRequest) -> None:
        if receiver in self.readers:
            raise ValueError(f"receiver id {receiver} requested twice on one connection")
        r = _ViewReader(receiver, req)
        self.readers[receiver] = r
        r.open_task = asyncio.create_task(self._open(r))

    async def _open(self, r: _ViewReader) -> None:
        rpid = ResultPartitionID(r.request.partition_id, r.request.producer_attempt_id)
        try:
            partition = await self.server.manager.wait_for(rpid, self.server.request_timeout_s)
            if r.closed:
                return
            view = partition.create_view(r.request.subpartition, self._listener_for(r))
        except PartitionError as e:
            self._send_error(r, e)
            return
        r.view = view
        log.debug("serving %s[%d] to %s", rpid, r.request.subpartition, self.peer)
        if view.is_available(r.credit > 0):
            self.enqueue(r)

    def _close_reader(self, receiver: int) -> None:
        r = self.readers.pop(receiver, None)
        if r is None:
            return
        r.closed = True
        if r.open_task is not None and not r.open_task.done():
            r.open_task.cancel()
        if r.view is not None:
            r.view.release()

    # ---- outbound -----------------------------------------------------------------------------
    def _send_error(self, r: _ViewReader, e: BaseException) -> None:
        if not self.closed:
            payload = P.error_payload(_error_kind(e), str(e))
            self.writer.write(P.frame_header(P.MSG_ERROR, r.receiver, len(payload)) + payload)
        self._close_reader(r.receiver)

    async def _send_loop(self) -> None:
        writer = self.writer
        try:
            while True:
                if not self.available:
                    self.wakeup.clear()
                    await self.wakeup.wait()
                    continue
                r = self.available.popleft()
                r.queued = False
                if r.closed or r.view is None:
                    continue
                try:
                    element, more = r.view.poll(r.credit > 0)
                except PartitionError as e:
                    self._send_error(r, e)
                    continue
                if element is None:
                    continue  # no credit (re-enqueued when credit arrives) or drained
                if isinstance(element, RecordBatch):
                    r.credit -= 1
                try:
                    parts = encode_parts(element)
                except Exception as e:
                    log.exception("cannot serialize an element of %s", r.request.partition_id)
                    self._send_error(r, PartitionError(
                        f"producer of partition {r.request.partition_id} emitted an element that "
                        f"cannot be serialized: {e!r}", r.request.partition_id))
                    continue
                size = sum(len(p) if isinstance(p, bytes) else p.nbytes for p in parts)
                writer.writelines([P.frame_header(P.MSG_BUFFER, r.receiver, size), *parts])
                if type(element) is EndOfPartition:
                    self.readers.pop(r.receiver, None)
                    r.closed = True
                elif more:
                    self.enqueue(r)
                await writer.drain()  # why: returns at once unless the socket buffer is full
        except (ConnectionError, asyncio.CancelledError):
            pass


class PartitionRequestServer:
    """Flink: NettyServer -- accepts consumer connections; authenticates before anything else."""

    def __init__(
        self,
        manager: ResultPartitionManager,
        secret: str,
        host: str = "127.0.0.1",
        port: int = 0,
        request_timeout_s: float = 30.0,
    ) -> None:
        self.manager = manager
        self._secret = secret
        self.host = host
        self.port = port
        self.request_timeout_s = request_timeout_s
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, self.host, self.port, limit=STREAM_LIMIT)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("data server listening on %s:%d", self.host, self.port)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        try:
            try:
                await server_handshake(reader, writer, self._secret)
            except (AuthenticationError, ConnectionError) as e:
                log.warning("refused data connection from %s: %s", peer, e)
                writer.close()
                return
            await _ServerConnection(self, reader, writer).run()
        except asyncio.CancelledError:
            pass  # why: stop() cancels handlers; asyncio's stream callback must not see it raised
        finally:
            self._connections.discard(task)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in list(self._connections):
            t.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
