"""Mutual challenge-response authentication with the per-cluster secret (HMAC-SHA256).

Every connection (RPC and data plane) runs this before anything else: tasks carry pickled code,
so a peer that cannot prove it knows the secret is refused and disconnected.
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import secrets

from runtime.core.errors import AuthenticationError

_MAGIC = b"MLRC1"
_NONCE = 32
_MAC = 32
HANDSHAKE_TIMEOUT_S = 10.0


def new_cluster_secret() -> str:
    return secrets.token_hex(32)


def _mac(secret: str, role: bytes, nonce: bytes) -> bytes:
    return hmac.new(secret.encode(), role + nonce, hashlib.sha256).digest()


async def _read(reader: asyncio.StreamReader, n: int) -> bytes:
    try:
        return await asyncio.wait_for(reader.readexactly(n), HANDSHAKE_TIMEOUT_S)
    except (TimeoutError, asyncio.IncompleteReadError, ConnectionError) as e:
        raise AuthenticationError(f"peer closed or stalled during the authentication handshake: {e!r}") from e


async def server_handshake(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, secret: str) -> None:
    """Server side: challenge the client, verify its MAC, then prove ourselves."""
    server_nonce = os.urandom(_NONCE)
    writer.write(_MAGIC + server_nonce)
    await writer.drain()
    data = await _read(reader, len(_MAGIC) + _MAC + _NONCE)
    if data[: len(_MAGIC)] != _MAGIC:
        raise AuthenticationError("peer does not speak the Millrace protocol")
    client_mac = data[len(_MAGIC) : len(_MAGIC) + _MAC]
    client_nonce = data[len(_MAGIC) + _MAC :]
    if not hmac.compare_digest(client_mac, _mac(secret, b"client", server_nonce)):
        raise AuthenticationError("peer failed authentication: wrong cluster secret")
    writer.write(_mac(secret, b"server", client_nonce))
    await writer.drain()


async def client_handshake(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, secret: str) -> None:
    """Client side: answer the server's challenge and check the server knows the secret too."""
    data = await _read(reader, len(_MAGIC) + _NONCE)
    if data[: len(_MAGIC)] != _MAGIC:
        raise AuthenticationError("server does not speak the Millrace protocol")
    server_nonce = data[len(_MAGIC) :]
    client_nonce = os.urandom(_NONCE)
    writer.write(_MAGIC + _mac(secret, b"client", server_nonce) + client_nonce)
    await writer.drain()
    server_mac = await _read(reader, _MAC)
    if not hmac.compare_digest(server_mac, _mac(secret, b"server", client_nonce)):
        raise AuthenticationError("server failed authentication: wrong cluster secret")
