"""Length-prefixed frames over a pipe, between the service and a worker process of its own (the
import parser, interop/parse_worker.py; the queue's computation, capacity/queue_worker.py): each
frame is 4 bytes of length (big-endian) then the body. A worker answers READY once it can serve."""
from __future__ import annotations

import struct
from typing import BinaryIO

HEADER = struct.Struct(">I")
READY = b"ready"


def read_frame(stream: BinaryIO) -> bytes | None:
    """The next frame's body; None at the end of the stream or on a cut frame."""
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    (size,) = HEADER.unpack(head)
    body = stream.read(size)
    return body if len(body) == size else None


def write_frame(stream: BinaryIO, body: bytes) -> None:
    stream.write(HEADER.pack(len(body)) + body)
    stream.flush()
