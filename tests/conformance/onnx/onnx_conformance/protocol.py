"""Messages between the pool and its workers: an 8-byte length, then a pickle.

The worker answers on a duplicate of its original stdout and points fd 1 at stderr, so a
stray ``print`` (or native code writing to stdout) cannot corrupt the channel.
"""

from __future__ import annotations

import os
import pickle
import struct
import sys
from typing import Any, BinaryIO, Callable

HEADER = struct.Struct(">Q")

# First message of every worker: imports done, ready for a task (so slow start-up is never
# charged to a case's timeout).
READY = "ready"


def encode(message: Any) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(body)) + body


class Decoder:
    """Splits a byte stream (fed in arbitrary chunks) into messages."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        self._buffer += data
        messages = []
        while len(self._buffer) >= HEADER.size:
            (length,) = HEADER.unpack_from(self._buffer)
            end = HEADER.size + length
            if len(self._buffer) < end:
                break
            messages.append(pickle.loads(bytes(self._buffer[HEADER.size:end])))
            del self._buffer[:end]
        return messages


def _read_exactly(stream: BinaryIO, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = stream.read(size - len(chunks))
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)


def read_message(stream: BinaryIO) -> Any | None:
    """The next message on ``stream``, or ``None`` at end of file."""
    header = _read_exactly(stream, HEADER.size)
    if header is None:
        return None
    (length,) = HEADER.unpack(header)
    body = _read_exactly(stream, length)
    return None if body is None else pickle.loads(body)


def serve(handle: Callable[[Any], Any]) -> None:
    """The worker loop: answer each task read from stdin with ``handle(task)`` until EOF."""
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    requests = sys.stdin.buffer
    channel.write(encode(READY))
    while True:
        task = read_message(requests)
        if task is None:
            return
        reply = handle(task)
        sys.stdout.flush()
        sys.stderr.flush()
        channel.write(encode(reply))
