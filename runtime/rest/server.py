"""RestServer: uvicorn serving the REST app on a background thread of the JobManager process."""
from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

import uvicorn

from runtime.core.errors import MillraceError

log = logging.getLogger(__name__)


class RestServer:
    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        self.app = app
        self.host = host
        self._requested_port = port
        self._port: int | None = None
        self._sock: socket.socket | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise MillraceError("the REST server is not started")
        return self._port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout: float = 30.0) -> RestServer:
        """Bind, serve on a background thread, and return once connections are accepted."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self._requested_port))
        except OSError as e:
            sock.close()
            raise MillraceError(
                f"the REST API cannot listen on {self.host}:{self._requested_port}: {e.strerror or e}; "
                "choose another port (0 picks a free one)"
            ) from e
        self._sock = sock
        self._port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=3,
            # bound the request line and headers (a longer path still reaches the app, which answers
            # 414 in the API's error shape); bodies are limited by the app's middleware
            h11_max_incomplete_event_size=256 * 1024,
            http="h11",  # httptools refuses long request lines itself, in plain text; h11 obeys the bound above
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._serve, name=f"rest-{self._port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if self._error is not None or not self._thread.is_alive():
                self._close_socket()
                raise MillraceError(f"the REST API on {self.host}:{self._port} did not start: {self._error!r}")
            if time.monotonic() > deadline:
                self.stop()
                raise MillraceError(f"the REST API on {self.host}:{self._port} did not start within {timeout:.0f}s")
            time.sleep(0.01)
        log.info("[REST] serving on %s", self.url)
        return self

    def _serve(self) -> None:
        assert self._server is not None and self._sock is not None
        try:
            self._server.run(sockets=[self._sock])
        except BaseException as e:  # noqa: BLE001 - uvicorn exits via SystemExit on startup failures
            self._error = e
            log.error("[REST] server on port %s stopped: %r", self._port, e)

    def stop(self, timeout: float = 10.0) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None and self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("[REST] server on port %s did not stop within %.0fs", self._port, timeout)
        self._close_socket()

    def _close_socket(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
            self._sock = None

    def __enter__(self) -> RestServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
