"""Request limits of the REST API: oversized bodies refused while streaming (413), non-JSON bodies
(415), overlong paths (414), all in the API's error shape and before anything is buffered."""
from __future__ import annotations

import json
import socket
from collections.abc import Iterable, Iterator

import pytest

from runtime.deploy.minicluster import MiniCluster
from runtime.rest.app import create_app
from runtime.rest.server import RestServer
from tests.integration.rest.conftest import TOKEN, TestingClusterHooks

pytestmark = pytest.mark.integration

LIMIT = 8 * 1024 * 1024


@pytest.fixture
def small_limit_server(mini_cluster: MiniCluster) -> Iterator[RestServer]:
    app = create_app(mini_cluster.dispatcher_gateway(), mini_cluster.resource_manager_gateway(), TOKEN, TestingClusterHooks(), max_content_length=LIMIT)
    server = RestServer(app, host="127.0.0.1", port=0).start()
    try:
        yield server
    finally:
        server.stop()


def _exchange(server: RestServer, head: str, body_chunks: Iterable[bytes] = ()) -> tuple[int, dict]:
    """Send a raw request (stop sending once the server answers or closes) and parse the answer."""
    s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    try:
        s.sendall(head.encode())
        try:
            for chunk in body_chunks:
                s.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered early and closed: what we wanted
        data = b""
        while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < int(
            dict(line.split(b": ", 1) for line in data.split(b"\r\n\r\n")[0].split(b"\r\n")[1:]).get(b"content-length", b"0")
        ):
            more = s.recv(65536)
            if not more:
                break
            data += more
    finally:
        s.close()
    status = int(data.split(b" ", 2)[1])
    return status, json.loads(data.split(b"\r\n\r\n", 1)[1] or b"null")


def _chunked(total: int, piece: int = 1 << 20) -> Iterator[bytes]:
    sent = 0
    block = b"x" * piece
    while sent < total:
        yield f"{piece:x}\r\n".encode() + block + b"\r\n"
        sent += piece
    yield b"0\r\n\r\n"


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


def test_a_chunked_600_mb_body_is_refused_after_the_limit_and_memory_stays_flat(small_limit_server: RestServer) -> None:
    before = _rss_mb()
    head = (f"POST /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n")
    status, body = _exchange(small_limit_server, head, _chunked(600 * 1024 * 1024))
    assert status == 413 and "max-content-length" in body["errors"][0]
    assert _rss_mb() - before < 64, (before, _rss_mb())  # at most the limit was buffered, never 600 MB


def test_a_declared_oversized_body_is_refused_before_it_is_read(small_limit_server: RestServer) -> None:
    head = (f"POST /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {600 * 1024 * 1024}\r\n\r\n")
    status, body = _exchange(small_limit_server, head)
    assert status == 413 and f"{600 * 1024 * 1024} bytes" in body["errors"][0]


def test_a_body_that_is_not_json_gets_415_and_a_long_path_414_in_the_error_shape(small_limit_server: RestServer) -> None:
    form = b"a=1"
    status, body = _exchange(small_limit_server, f"POST /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
                             f"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {len(form)}\r\n\r\n", iter([form]))
    assert status == 415 and "application/json" in body["errors"][0]
    status, body = _exchange(small_limit_server, f"GET /jobs/{'a' * 100_000} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n")
    assert status == 414 and "100006 characters" in body["errors"][0]
    # within the limits the API answers as before (here: 404 for an unknown job, JSON)
    status, body = _exchange(small_limit_server, f"GET /jobs/{'f' * 32} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n")
    assert status == 404 and body["errors"]
