"""Wire format of the data plane (after the runtime.rpc.auth handshake).

Flink: NettyMessage (PartitionRequest, AddCredit, CancelPartitionRequest, BufferResponse,
ErrorResponse). Every frame is

    [payload length u64][message type u8][receiver id u32][payload]

`receiver id` names the consumer's input channel on the (shared) connection; 0xFFFFFFFF means
the whole connection. Control payloads are JSON or a u32 -- the server never unpickles anything;
BUFFER payloads are runtime.taskmanager.network.serialization frames, decoded by the consumer.
"""
from __future__ import annotations

import asyncio
import json
import struct
from dataclasses import asdict, dataclass
from typing import Any

HEADER = struct.Struct("<QBI")
CREDIT = struct.Struct("<I")
CONNECTION_RECEIVER = 0xFFFFFFFF

# consumer -> producer
MSG_PARTITION_REQUEST = 1
MSG_ADD_CREDIT = 2
MSG_CANCEL_REQUEST = 3
# producer -> consumer
MSG_BUFFER = 10
MSG_ERROR = 11

MAX_CONTROL_PAYLOAD = 64 * 1024  # the server refuses larger client frames

ERROR_NOT_FOUND = "not_found"
ERROR_PRODUCER_FAILED = "producer_failed"
ERROR_RELEASED = "released"
ERROR_OTHER = "error"


@dataclass(frozen=True, slots=True)
class PartitionRequest:
    partition_id: str
    producer_attempt_id: str
    subpartition: int
    initial_credit: int

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> PartitionRequest:
        d: dict[str, Any] = json.loads(data)
        req = cls(
            partition_id=str(d["partition_id"]),
            producer_attempt_id=str(d["producer_attempt_id"]),
            subpartition=int(d["subpartition"]),
            initial_credit=int(d["initial_credit"]),
        )
        if req.subpartition < 0 or req.initial_credit < 0:
            raise ValueError(f"malformed partition request {d}")
        return req


def error_payload(kind: str, message: str) -> bytes:
    return json.dumps({"kind": kind, "message": message}).encode()


def parse_error(data: bytes) -> tuple[str, str]:
    d = json.loads(data)
    return str(d.get("kind", ERROR_OTHER)), str(d.get("message", ""))


def frame_header(msg_type: int, receiver: int, payload_len: int) -> bytes:
    return HEADER.pack(payload_len, msg_type, receiver)


async def read_frame(reader: asyncio.StreamReader, max_payload: int | None = None) -> tuple[int, int, bytes]:
    """(message type, receiver id, payload); raises IncompleteReadError at EOF."""
    head = await reader.readexactly(HEADER.size)
    length, msg_type, receiver = HEADER.unpack(head)
    if max_payload is not None and length > max_payload:
        raise ValueError(f"frame of {length} bytes exceeds the limit of {max_payload}")
    payload = await reader.readexactly(length) if length else b""
    return msg_type, receiver, payload
