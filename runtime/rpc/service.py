"""RPC: endpoints with one main thread each, reached through gateways, over authenticated TCP.

Flink's RpcEndpoint / RpcService / RpcGateway in Python:
- An `RpcEndpoint` owns its state and runs every call on its own asyncio loop thread.
- An `RpcService` (one per process) runs the I/O loop: a TCP server and client connections.
  Every connection first passes the HMAC handshake (runtime.rpc.auth); then frames carry
  JSON-encoded pydantic messages. Connections are bidirectional: either side can call endpoints
  registered on the other, so a TaskManager needs no RPC port of its own.
- A gateway is a proxy whose methods are coroutines taking and returning pydantic messages; a
  local gateway skips serialization. Leader endpoints can require a fencing token.
- A closed connection is reported at once to `on_peer_lost` listeners (heartbeats are the backstop).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import itertools
import json
import logging
import struct
import threading
import time
import types
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, Protocol, TypeVar, cast

from pydantic import BaseModel

from runtime.core.errors import AuthenticationError, FencingTokenError, RpcError
from runtime.rpc import auth, deployment, messages

log = logging.getLogger(__name__)
T = TypeVar("T")
G = TypeVar("G", bound="RpcGateway")  # a gateway Protocol (runtime.rpc.gateways)
_RpcMethod = TypeVar("_RpcMethod", bound=Callable[..., Coroutine[Any, Any, Any]])  # an endpoint's `async def`, its signature kept

_MAX_FRAME = 512 * 1024 * 1024
DEFAULT_TIMEOUT_S = 30.0


def _message_types() -> dict[str, type[BaseModel]]:
    """Every message class by name: a frame names its payload's class (`"t"`), not its module."""
    out: dict[str, type[BaseModel]] = {}
    for mod in (messages, deployment):
        for name in dir(mod):
            obj = getattr(mod, name)
            # the messages package re-exports classes of its protocol modules (and carried types of
            # storage, which never travel as a frame's payload)
            if isinstance(obj, type) and issubclass(obj, BaseModel) and obj.__module__.startswith(mod.__name__):
                if out.get(name, obj) is not obj:
                    raise TypeError(f"two RPC message classes are named {name}: the wire could not tell them apart")
                out[name] = obj
    return out


_TYPES = _message_types()


def rpc_method(fn: _RpcMethod) -> _RpcMethod:
    """Marks an endpoint coroutine as callable through gateways (its gateway Protocol declares it too)."""
    fn.__rpc__ = True  # type: ignore[attr-defined]  # a marker on the function object, read by the dispatch table
    return fn


def rpc_methods(endpoint_class: type) -> dict[str, Callable[..., Awaitable[Any]]]:
    """The @rpc_method coroutines of an endpoint class (inherited ones too), by name."""
    methods = {name: getattr(endpoint_class, name) for name in dir(endpoint_class) if not name.startswith("_")}
    return {name: fn for name, fn in methods.items() if getattr(fn, "__rpc__", False)}


class RpcGateway(Protocol):
    """What every gateway offers besides its endpoint's methods (Flink: RpcGateway). The gateway
    Protocols (runtime.rpc.gateways) extend it; `Gateway` implements them."""

    endpoint_id: str

    def call_sync(self, method: str, arg: Any = None, timeout: float = DEFAULT_TIMEOUT_S) -> Any: ...

    def invoke(self, method: str, arg: Any = None, timeout: float = DEFAULT_TIMEOUT_S) -> Awaitable[Any]: ...


@functools.cache
def gateway_methods(protocol: type) -> Mapping[str, Callable[..., Awaitable[Any]]]:
    """The RPC methods a gateway Protocol declares: its async methods (and those of gateway Protocols
    it extends), not RpcGateway's."""
    methods: dict[str, Callable[..., Awaitable[Any]]] = {}
    for klass in reversed(protocol.__mro__):
        if klass in (object, RpcGateway) or klass.__module__ == "typing":  # Protocol, Generic
            continue
        methods.update((n, v) for n, v in vars(klass).items() if not n.startswith("_") and inspect.iscoroutinefunction(v))
    return types.MappingProxyType(methods)


def _malformed_call(frame: dict[str, Any]) -> str | None:
    """Why a call frame cannot be dispatched (None: it can)."""
    if not isinstance(frame.get("id"), (int, str)):
        return "no call id"
    if not isinstance(frame.get("ep"), str) or not isinstance(frame.get("m"), str):
        return "no endpoint or method name"
    return None

class RpcEndpoint:
    """Base class of Dispatcher, ResourceManager, JobMaster, TaskExecutor."""

    def __init__(self, rpc: RpcService, endpoint_id: str) -> None:
        self.rpc = rpc
        self.endpoint_id = endpoint_id
        self.fencing_token: str | None = None
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name=f"rpc-{endpoint_id}", daemon=True)
        self._stopped = False
        self._tasks: set[asyncio.Future] = set()

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    # lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()
        self.rpc.register_endpoint(self)
        self.run_sync(self.on_start(), timeout=DEFAULT_TIMEOUT_S)

    async def on_start(self) -> None:
        pass

    async def on_stop(self) -> None:
        pass

    def stop(self, timeout: float = 10.0) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.rpc.unregister_endpoint(self.endpoint_id)
        if self._thread.is_alive():
            try:
                self.run_sync(self._stop_on_main_thread(timeout / 2), timeout=timeout)
            except Exception:  # stopping must go on
                log.exception("%s: error while stopping", self.endpoint_id)
            self.loop.call_soon_threadsafe(self.loop.stop)
            if threading.current_thread() is not self._thread:
                self._thread.join(timeout)
                if not self._thread.is_alive():
                    self.loop.close()  # its selector's file descriptors

    async def _stop_on_main_thread(self, grace_s: float) -> None:
        await self.on_stop()
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            _, still = await asyncio.wait(pending, timeout=grace_s)
            for t in still:
                t.cancel()
            if still:
                await asyncio.wait(still, timeout=1)
        # the loop's default executor (run_in_executor) has threads of its own: end them
        await self.loop.shutdown_default_executor()

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Future[Any]:
        """Start background work on the main thread; it is awaited (then cancelled) when the endpoint stops."""
        task = asyncio.ensure_future(coro, loop=self.loop)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # main-thread helpers -----------------------------------------------------------------------
    def in_main_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def run_async(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule a coroutine on this endpoint's main thread (from any thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run_sync(self, coro: Coroutine[Any, Any, T], timeout: float | None = DEFAULT_TIMEOUT_S) -> T:
        if self.in_main_thread():
            raise RuntimeError(f"{self.endpoint_id}: run_sync from its own main thread would deadlock")
        return self.run_async(coro).result(timeout)

    def run_in_main_thread(self, fn: Callable[..., Any], *args: Any) -> None:
        """Hand `fn(*args)` to the main thread from any thread; dropped once the endpoint has stopped."""
        if self._stopped:
            return
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop closed between the check and the call
            pass

    def schedule(self, fn: Callable[[], Any], delay_s: float = 0.0) -> asyncio.TimerHandle | asyncio.Handle:
        """Run `fn` on the main thread after `delay_s` (thread-safe)."""
        if self.in_main_thread():
            return self.loop.call_later(delay_s, fn) if delay_s > 0 else self.loop.call_soon(fn)
        fut: concurrent.futures.Future = concurrent.futures.Future()

        def _arm() -> None:
            fut.set_result(self.loop.call_later(delay_s, fn))

        self.loop.call_soon_threadsafe(_arm)
        return fut.result(5)

    async def _dispatch(self, method: str, arg: Any, token: str | None) -> Any:
        if self.fencing_token is not None and token != self.fencing_token:
            raise FencingTokenError(
                f"{self.endpoint_id}: call {method} carries fencing token {token!r}, expected the current leader's"
            )
        fn = getattr(self, method, None)
        if fn is None or not getattr(fn, "__rpc__", False):
            raise RpcError(f"{self.endpoint_id} has no RPC method {method!r}")
        return await fn(arg)


class Gateway:
    """Proxy to an endpoint, implementing its gateway Protocol: `await gw.method(msg, timeout=...)`.

    `RpcService.gateway` hands it out typed as the Protocol. Only the Protocol's methods exist: a
    name it does not declare fails here, not at the endpoint. From plain threads, `sync(gw.method(msg))`
    (typed) or `gw.call_sync("method", msg)`.
    """

    def __init__(
        self, protocol: type, invoker: Callable[[str, Any, float], Awaitable[Any]], endpoint_id: str, token: str | None = None
    ) -> None:
        self._methods = frozenset(gateway_methods(protocol))
        if not self._methods:
            raise TypeError(f"{protocol.__name__} is not a gateway Protocol: it declares no async methods")
        self.protocol = protocol
        self._invoker = invoker
        self.endpoint_id = endpoint_id
        self.token = token

    def _check(self, method: str) -> None:
        if method not in self._methods:
            raise AttributeError(f"{self.protocol.__name__} has no method {method!r} (endpoint {self.endpoint_id})")

    def __getattr__(self, method: str) -> Callable[..., Awaitable[Any]]:
        if method.startswith("_"):
            raise AttributeError(method)
        self._check(method)

        def call(arg: Any = None, timeout: float = DEFAULT_TIMEOUT_S) -> Awaitable[Any]:
            return self._invoker(method, arg, timeout)

        call.__name__ = method
        return call

    def call_sync(self, method: str, arg: Any = None, timeout: float = DEFAULT_TIMEOUT_S) -> Any:
        """The call by name, waited for from a plain thread (`sync` is the typed form)."""
        self._check(method)
        return _run_anywhere(self._invoker(method, arg, timeout), timeout + 1)

    def invoke(self, method: str, arg: Any = None, timeout: float = DEFAULT_TIMEOUT_S) -> Awaitable[Any]:
        """The call by name as an awaitable (e.g. for an OrderedSender)."""
        self._check(method)
        return self._invoker(method, arg, timeout)

    def __repr__(self) -> str:
        return f"<{self.protocol.__name__} to {self.endpoint_id}>"


_bg_loop: asyncio.AbstractEventLoop | None = None
_bg_lock = threading.Lock()


def background_loop() -> asyncio.AbstractEventLoop:
    """The loop that runs calls made from plain threads (task threads, client threads)."""
    global _bg_loop
    with _bg_lock:
        if _bg_loop is None:
            _bg_loop = asyncio.new_event_loop()
            threading.Thread(target=_bg_loop.run_forever, name="rpc-callers", daemon=True).start()
        return _bg_loop


def sync(call: Awaitable[T], timeout: float | None = None) -> T:
    """Wait from a plain thread (a task, a client) for a gateway call: `sync(gw.list_jobs(m.Empty(), timeout=10))`.

    The call's own timeout bounds the wait; `timeout` only adds a bound of its own. Not from an
    endpoint's main thread (it would stop answering while it waits): there, `await` the call.
    """
    return _run_anywhere(call, timeout)


def _run_anywhere(aw: Awaitable[T], timeout: float | None) -> T:
    """Run an awaitable from a plain thread (task threads, client threads)."""

    async def _wrap() -> T:
        return await aw

    return asyncio.run_coroutine_threadsafe(_wrap(), background_loop()).result(timeout)


class Connection:
    """One authenticated, bidirectional TCP connection between two RpcServices."""

    def __init__(self, service: RpcService, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.service = service
        self.reader = reader
        self.writer = writer
        self.peer_id: str | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self.closed = False
        self.close_cause = ""
        self.hello = asyncio.get_running_loop().create_future()

    async def send(self, frame: dict[str, Any]) -> None:
        data = json.dumps(frame, separators=(",", ":")).encode()
        self.writer.write(struct.pack(">I", len(data)) + data)
        await self.writer.drain()

    async def call(self, endpoint_id: str, method: str, arg: Any, token: str | None, timeout: float) -> Any:
        if self.closed:
            raise RpcError(f"connection to {self.peer_id} is closed ({self.close_cause})")
        call_id = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._pending[call_id] = fut
        frame: dict[str, Any] = {"k": "call", "id": call_id, "ep": endpoint_id, "m": method, "tok": token}
        if arg is not None:
            frame["t"] = type(arg).__name__
            frame["a"] = arg.model_dump_json()
        try:
            await self.send(frame)
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError as e:
            raise RpcError(f"call {endpoint_id}.{method} to {self.peer_id} timed out after {timeout}s") from e
        except (ConnectionError, OSError) as e:
            raise RpcError(f"call {endpoint_id}.{method} to {self.peer_id} failed: {e}") from e
        finally:
            self._pending.pop(call_id, None)

    async def serve(self) -> None:
        try:
            while True:
                header = await self.reader.readexactly(4)
                (n,) = struct.unpack(">I", header)
                if n > _MAX_FRAME:
                    raise RpcError(f"frame of {n} bytes exceeds the limit")
                frame = json.loads(await self.reader.readexactly(n))
                if not isinstance(frame, dict):
                    raise RpcError(f"a frame must be a JSON object, got {type(frame).__name__}")
                kind = frame.get("k")
                if kind == "call":
                    problem = _malformed_call(frame)
                    if problem is None:
                        asyncio.create_task(self._handle_call(frame))
                    elif isinstance(frame.get("id"), (int, str)):  # answerable: tell the caller
                        await self.send({"k": "err", "id": frame["id"], "e": f"RpcError: malformed call: {problem}"})
                    else:  # nobody to answer: drop it (one line, no traceback)
                        log.warning("rpc connection to %s: dropped a malformed call frame: %s", self.peer_id, problem)
                elif kind == "ret":
                    fut = self._pending.get(frame["id"])
                    if fut is not None and not fut.done():
                        fut.set_result(_decode(frame.get("t"), frame.get("r")))
                elif kind == "err":
                    fut = self._pending.get(frame["id"])
                    if fut is not None and not fut.done():
                        fut.set_exception(RpcError(frame.get("e", "remote error")))
                elif kind == "hello":
                    self.peer_id = frame["node"]
                    if not self.hello.done():
                        self.hello.set_result(self.peer_id)
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as e:
            self.close_cause = f"connection closed: {type(e).__name__}"
        except Exception as e:  # noqa: BLE001 - a bad frame ends this connection only
            self.close_cause = f"protocol error: {e!r}"
            log.warning("rpc connection to %s: %s", self.peer_id, self.close_cause)
        finally:
            self._close()

    async def _handle_call(self, frame: dict[str, Any]) -> None:
        """`frame` passed _malformed_call: id, ep and m are there."""
        endpoint = self.service.endpoint(frame["ep"])
        try:
            if endpoint is None:
                raise RpcError(f"no endpoint {frame['ep']!r} on {self.service.node_id}")
            arg = _decode(frame.get("t"), frame.get("a"))
            fut = asyncio.run_coroutine_threadsafe(endpoint._dispatch(frame["m"], arg, frame.get("tok")), endpoint.loop)
            result = await asyncio.wrap_future(fut)
            reply: dict[str, Any] = {"k": "ret", "id": frame["id"]}
            if result is not None:
                reply["t"] = type(result).__name__
                reply["r"] = result.model_dump_json()
        except Exception as e:  # errors travel back to the caller
            if not isinstance(e, (RpcError,)):
                log.debug("rpc %s.%s raised", frame.get("ep"), frame.get("m"), exc_info=True)
            reply = {"k": "err", "id": frame["id"], "e": f"{type(e).__name__}: {e}"}
        try:
            await self.send(reply)
        except (ConnectionError, OSError):
            pass

    def _close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(RpcError(f"connection to {self.peer_id} lost ({self.close_cause})"))
        try:
            self.writer.close()
        except Exception:  # noqa: BLE001  # closing is best effort: the transport or its loop may already be gone
            pass
        self.service._on_connection_closed(self)

    def abort(self, cause: str) -> None:
        self.close_cause = cause
        try:
            self.writer.transport.abort()
        except Exception:  # noqa: BLE001  # aborting is best effort: the transport or its loop may already be gone
            pass


def _decode(type_name: str | None, payload: str | None) -> Any:
    if type_name is None:
        return None
    cls = _TYPES.get(type_name)
    if cls is None:
        raise RpcError(f"unknown message type {type_name!r}")
    return cls.model_validate_json(payload or "{}")


class RpcService:
    """One per process: the I/O loop, the TCP server, connections and the endpoint registry."""

    def __init__(self, secret: str, node_id: str, host: str = "127.0.0.1", port: int = 0, listen: bool = True) -> None:
        self.secret = secret
        self.node_id = node_id
        self.host = host
        self.port = port
        self.listen = listen
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=f"rpc-io-{node_id}", daemon=True)
        self._endpoints: dict[str, RpcEndpoint] = {}
        self._peers: dict[str, Connection] = {}
        self._server: asyncio.AbstractServer | None = None
        self._lost_listeners: list[Callable[[str, str], None]] = []
        self.refused_connections = 0

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def start(self) -> RpcService:
        self._thread.start()
        if self.listen:
            asyncio.run_coroutine_threadsafe(self._start_server(), self.loop).result(10)
        return self

    async def _start_server(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.port)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        try:
            await auth.server_handshake(reader, writer, self.secret)
        except AuthenticationError as e:
            self.refused_connections += 1
            log.warning("%s: refused RPC connection from %s: %s", self.node_id, peer, e)
            writer.close()
            return
        conn = Connection(self, reader, writer)
        await conn.send({"k": "hello", "node": self.node_id})
        task = asyncio.create_task(conn.serve())
        try:
            peer_id = await asyncio.wait_for(conn.hello, 10)
        except TimeoutError:
            conn.abort("no hello")
            return
        self._peers[peer_id] = conn
        await task

    def connect(self, host: str, port: int, timeout: float = 10.0) -> str:
        """Open an authenticated connection to another RpcService; returns the peer's node id."""
        try:
            return asyncio.run_coroutine_threadsafe(self._connect(host, port), self.loop).result(timeout)
        except (concurrent.futures.TimeoutError, OSError) as e:
            raise RpcError(f"could not connect to {host}:{port} within {timeout:.0f}s: {e!r}") from e

    async def _connect(self, host: str, port: int) -> str:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            await auth.client_handshake(reader, writer, self.secret)
        except AuthenticationError:
            writer.close()
            raise
        conn = Connection(self, reader, writer)
        await conn.send({"k": "hello", "node": self.node_id})
        asyncio.create_task(conn.serve())
        peer_id = await asyncio.wait_for(conn.hello, 10)
        self._peers[peer_id] = conn
        return peer_id

    # endpoints -----------------------------------------------------------------------------
    def register_endpoint(self, endpoint: RpcEndpoint) -> None:
        self._endpoints[endpoint.endpoint_id] = endpoint

    def unregister_endpoint(self, endpoint_id: str) -> None:
        self._endpoints.pop(endpoint_id, None)

    def endpoint(self, endpoint_id: str) -> RpcEndpoint | None:
        return self._endpoints.get(endpoint_id)

    # gateways ------------------------------------------------------------------------------
    # `protocol` is a gateway Protocol class; spelled Callable[..., G], not type[G], because mypy
    # refuses a Protocol where type[G] is expected ([type-abstract], python/mypy#4717)
    def gateway(self, protocol: Callable[..., G], endpoint_id: str, peer_id: str | None = None, token: str | None = None) -> G:
        """Gateway to `endpoint_id`, typed as its Protocol (runtime.rpc.gateways): in this process when
        peer_id is None, else over that peer's connection (Flink: RpcService.connect(address, clazz))."""
        if not isinstance(protocol, type):
            raise TypeError(f"a gateway needs its Protocol class, got {protocol!r}")
        if peer_id is None or peer_id == self.node_id:
            invoker = self._local_invoker(endpoint_id, token)
        else:
            invoker = self._remote_invoker(peer_id, endpoint_id, token)
        return cast(G, Gateway(protocol, invoker, endpoint_id, token))

    def _local_invoker(self, endpoint_id: str, token: str | None) -> Callable[[str, Any, float], Awaitable[Any]]:
        async def invoke(method: str, arg: Any, timeout: float) -> Any:
            ep = self._endpoints.get(endpoint_id)
            if ep is None:
                raise RpcError(f"no endpoint {endpoint_id!r} on {self.node_id}")
            fut = asyncio.run_coroutine_threadsafe(ep._dispatch(method, arg, token), ep.loop)
            try:
                return await asyncio.wait_for(asyncio.wrap_future(fut), timeout)
            except TimeoutError as e:
                raise RpcError(f"call {endpoint_id}.{method} timed out after {timeout}s") from e

        return invoke

    def _remote_invoker(self, peer_id: str, endpoint_id: str, token: str | None) -> Callable[[str, Any, float], Awaitable[Any]]:
        async def invoke(method: str, arg: Any, timeout: float) -> Any:
            conn = self._peers.get(peer_id)
            if conn is None or conn.closed:
                raise RpcError(f"no connection to {peer_id}")
            fut = asyncio.run_coroutine_threadsafe(conn.call(endpoint_id, method, arg, token, timeout), self.loop)
            try:
                # conn.call times out by itself; this bound holds even when the I/O loop has stopped
                # and never finishes `fut` (a task reporting while its TaskManager shuts down)
                return await asyncio.wait_for(asyncio.wrap_future(fut), timeout + 1)
            except TimeoutError as e:
                raise RpcError(f"call {endpoint_id}.{method} to {peer_id} timed out after {timeout}s") from e

        return invoke

    # peers -----------------------------------------------------------------------------------
    def is_connected(self, peer_id: str) -> bool:
        conn = self._peers.get(peer_id)
        return conn is not None and not conn.closed

    def on_peer_lost(self, listener: Callable[[str, str], None]) -> Callable[[], None]:
        """`listener(peer_id, cause)` is called (on the I/O thread) when a connection closes.

        Returns a function that unsubscribes the listener.
        """
        self._lost_listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._lost_listeners:
                self._lost_listeners.remove(listener)

        return unsubscribe

    def disconnect(self, peer_id: str, cause: str = "disconnected") -> None:
        conn = self._peers.get(peer_id)
        if conn is not None:
            self.loop.call_soon_threadsafe(conn.abort, cause)

    def _on_connection_closed(self, conn: Connection) -> None:
        if conn.peer_id is None or self._peers.get(conn.peer_id) is not conn:
            return
        del self._peers[conn.peer_id]
        for listener in list(self._lost_listeners):
            try:
                listener(conn.peer_id, conn.close_cause or "connection closed")
            except Exception:
                log.exception("peer-lost listener failed")

    def stop(self) -> None:
        async def _stop() -> None:
            if self._server is not None:
                self._server.close()
            for conn in list(self._peers.values()):
                conn.abort("rpc service stopped")

        if self._thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(_stop(), self.loop).result(5)
            except Exception:  # noqa: BLE001  # best effort: the loop is stopped below whatever closing the server did
                pass
            time.sleep(0.05)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(5)
            if not self._thread.is_alive():
                self.loop.close()
