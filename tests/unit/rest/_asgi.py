"""Drive an ASGI app in-process (no sockets, no httpx): one request, the full response."""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


@dataclass
class AsgiResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def call(app: Any, method: str, path: str, *, token: str | None = None, body: bytes | str | None = None, headers: dict[str, str] | None = None) -> AsgiResponse:
    parts = urlsplit(path)
    raw = body.encode() if isinstance(body, str) else (body or b"")
    hdrs = {"host": "test", **(headers or {})}
    if token is not None:
        hdrs["authorization"] = f"Bearer {token}"
    if raw:
        hdrs.setdefault("content-type", "application/json")
        hdrs["content-length"] = str(len(raw))
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": parts.path, "raw_path": parts.path.encode(), "root_path": "",
        "query_string": parts.query.encode(), "headers": [(k.lower().encode(), v.encode()) for k, v in hdrs.items()],
        "client": ("127.0.0.1", 1), "server": ("test", 80),
    }
    sent: list[dict[str, Any]] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def run() -> None:
        try:
            await app(scope, receive, send)
        except Exception:  # Starlette re-raises after sending its 500 response
            if not sent:
                raise

    asyncio.run(run())
    start = next(mm for mm in sent if mm["type"] == "http.response.start")
    content = b"".join(mm.get("body", b"") for mm in sent if mm["type"] == "http.response.body")
    return AsgiResponse(start["status"], {k.decode(): v.decode() for k, v in start.get("headers", [])}, content)
