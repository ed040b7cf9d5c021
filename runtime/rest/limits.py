"""Request limits checked before a route runs (Flink: rest.server.max-content-length).

A pure ASGI middleware, so nothing is read that is not allowed:
- a body larger than `max_content_length` gets 413 - from its Content-Length header before any of
  it is read, or, for a chunked body, as soon as the bytes received pass the limit (the rest is
  never buffered);
- a body sent as anything but JSON gets 415;
- a request path longer than MAX_PATH_CHARS gets 414.
Every refusal has the API's error shape: `{"errors": [message]}`.
"""
from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

DEFAULT_MAX_CONTENT_LENGTH = 104_857_600  # Flink's rest.server.max-content-length: 100 MiB
MAX_PATH_CHARS = 8192

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class _TooLarge(Exception):
    pass


async def _refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps({"errors": [message]}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


class RequestLimitsMiddleware:
    def __init__(self, app: Any, max_content_length: int = DEFAULT_MAX_CONTENT_LENGTH) -> None:
        self.app = app
        self.max_content_length = max_content_length

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("raw_path") or scope.get("path", "").encode()
        if len(path) > MAX_PATH_CHARS:
            await _refuse(send, 414, f"the request path is {len(path)} characters long; at most {MAX_PATH_CHARS} are accepted")
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        limit = self.max_content_length
        length = headers.get(b"content-length")
        chunked = b"chunked" in headers.get(b"transfer-encoding", b"").lower()
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                await _refuse(send, 400, f"Content-Length {length.decode(errors='replace')!r} is not a number")
                return
            if declared > limit:
                await _refuse(send, 413, f"the request body is {declared} bytes; at most {limit} are accepted (rest.server.max-content-length)")
                return
        has_body = chunked or (length is not None and int(length) > 0)
        if has_body and scope.get("method") in ("POST", "PUT", "PATCH"):
            content_type = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
            # the dashboard's login page posts an HTML form (its one non-JSON body)
            form_login = path == b"/login" and content_type == b"application/x-www-form-urlencoded"
            if content_type != b"application/json" and not form_login:
                shown = content_type.decode(errors="replace") or "none"
                await _refuse(send, 415, f"the request body must be JSON: send 'Content-Type: application/json' (got {shown})")
                return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message.get("type") == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _TooLarge()
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message.get("type") == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                await _refuse(send, 413, f"the request body is larger than {limit} bytes, the most accepted (rest.server.max-content-length)")
