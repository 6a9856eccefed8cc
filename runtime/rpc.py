"""The remote-run protocol shared by the server (runtime/server.py) and its clients
(runtime/remote.py): addresses, request signatures, and the message format.

Why HTTP from the standard library: a device runs the server with numpy and the tilecraft
runtime only, and every request is one upload or one run (no streaming, no calls into the
server's objects), which ``http.server`` / ``http.client`` carry without another dependency.

**Signatures.** Client and server share a key (``--key`` or ``TILECRAFT_RPC_KEY``). A request
carries ``X-Tilecraft-Time`` (Unix seconds), ``X-Tilecraft-Nonce`` (random hex),
``X-Tilecraft-Body-SHA256`` (the SHA-256 of the body, hex) and ``X-Tilecraft-Signature``: the
HMAC-SHA256 of method, path with query, time, nonce and that body hash. The server checks the
signature from the headers alone, before it reads the body (so a stranger's upload costs it
no memory), then checks that the body it read has the signed hash. It compares with
:func:`hmac.compare_digest` (constant time), refuses a time more than :data:`MAX_CLOCK_SKEW`
seconds off, and a nonce seen before (a replayed request). A successful answer is signed back (the HMAC of status, the request's
nonce and the answer's body hash, in ``X-Tilecraft-Signature``), so a client takes no result
that was altered on the way or sent by anyone without the key.

**Messages.** A run's inputs and its outputs travel as one body: an 8-byte little-endian
length, that many bytes of JSON (names, parameters, timings), then an ``.npz`` archive of the
arrays in order (read with ``allow_pickle=False``: a message never carries Python objects).
An error is a JSON body ``{"error": <TilecraftError subclass name>, "message": ...}`` with a
4xx/5xx status; the client raises the same class (:func:`error_from_json`).
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import os
import re
import secrets
import struct
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .. import errors
from ..errors import RemoteAddressError, RemoteConnectionError, RemoteError, TilecraftError

# 2: the body's hash travels in its own header, signed, so the signature is checked before
# the body is read.
PROTOCOL_VERSION = 2
KEY_ENVIRONMENT = "TILECRAFT_RPC_KEY"
TIME_HEADER = "X-Tilecraft-Time"
NONCE_HEADER = "X-Tilecraft-Nonce"
BODY_HASH_HEADER = "X-Tilecraft-Body-SHA256"
SIGNATURE_HEADER = "X-Tilecraft-Signature"
# Seconds a signed request stays valid; the server remembers nonces this long.
MAX_CLOCK_SKEW = 300.0
DEFAULT_PORT = 9090
_ADDRESS = re.compile(r"(?:remote://)?(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9_.-]+)):(?P<port>\d+)/?$")
_LENGTH = struct.Struct("<Q")


@dataclass(frozen=True)
class Address:
    """A server's host and port (``HOST:PORT``, ``[::1]:PORT``, ``remote://HOST:PORT``)."""

    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> "Address":
        match = _ADDRESS.match(text.strip()) if isinstance(text, str) else None
        if match is None:
            raise RemoteAddressError(f"{text!r} is not a server address: expected HOST:PORT, "
                                     "e.g. 192.168.1.20:9090 or remote://device:9090")
        port = int(match.group("port"))
        if not 0 < port < 65536:
            raise RemoteAddressError(f"{text!r}: port {port} is outside 1-65535")
        return cls(match.group("v6") or match.group("host"), port)

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def key_bytes(key: "str | bytes | None") -> bytes | None:
    """The shared key as bytes; ``None`` (or empty) reads ``TILECRAFT_RPC_KEY``; ``None``
    when neither gives one."""
    if key is None or key == "" or key == b"":
        key = os.environ.get(KEY_ENVIRONMENT) or None
    if key is None:
        return None
    return key.encode() if isinstance(key, str) else bytes(key)


def body_hash(body: bytes) -> str:
    """The SHA-256 (hex) a signature covers in place of the body itself."""
    return hashlib.sha256(body).hexdigest()


def signature(key: bytes, method: str, path: str, timestamp: str, nonce: str, digest: str) -> str:
    """HMAC-SHA256 (hex) of one request, ``digest`` being its body's :func:`body_hash`; see
    the module docstring."""
    message = "\n".join((method.upper(), path, timestamp, nonce, digest))
    return hmac.new(key, message.encode(), hashlib.sha256).hexdigest()


def sign(key: bytes | None, method: str, path: str, body: bytes) -> dict[str, str]:
    """The headers that authenticate a request (none without a key)."""
    if key is None:
        return {}
    timestamp, nonce, digest = f"{time.time():.3f}", secrets.token_hex(16), body_hash(body)
    return {TIME_HEADER: timestamp, NONCE_HEADER: nonce, BODY_HASH_HEADER: digest,
            SIGNATURE_HEADER: signature(key, method, path, timestamp, nonce, digest)}


def answer_signature(key: bytes, nonce: str, status: int, body: bytes) -> str:
    """HMAC-SHA256 (hex) of an answer, bound to the request's nonce: a client that signed
    its request knows the answer came from a holder of the key, for this request."""
    return signature(key, "ANSWER", str(int(status)), "", nonce, body_hash(body))


def check_answer(key: bytes | None, request_headers: Mapping[str, str], status: int, body: bytes,
                 given: str | None, where: str) -> None:
    """:class:`RemoteAuthError` unless a successful answer to a signed request carries the
    server's signature (a forged or altered result is not taken)."""
    if key is None or status != 200:
        return
    expected = answer_signature(key, request_headers[NONCE_HEADER], status, body)
    if not given or not hmac.compare_digest(expected.encode(), given.encode()):
        raise errors.RemoteAuthError(f"{where}: the answer is not signed with the shared key "
                                     "(altered on the way, or not from the server)")


# ---- messages ---------------------------------------------------------------------------

def encode(meta: Mapping[str, Any], arrays: Sequence[np.ndarray] = ()) -> bytes:
    """One message: JSON ``meta`` and ``arrays`` in order (see the module docstring)."""
    header = json.dumps(dict(meta)).encode()
    arrays = [np.asarray(a) for a in arrays]
    for array in arrays:
        if array.dtype.hasobject:  # would be pickled, and the other side loads no pickles
            raise errors.ArgumentTypeError(f"an array of Python objects cannot be sent ({array.dtype}): "
                                           "pass numeric numpy arrays")
    stream = io.BytesIO()
    np.savez(stream, *arrays)
    return _LENGTH.pack(len(header)) + header + stream.getvalue()


def decode(data: bytes, what: str = "message") -> tuple[dict[str, Any], list[np.ndarray]]:
    """The inverse of :func:`encode`; :class:`RemoteConnectionError` for a malformed one."""
    try:
        (length,) = _LENGTH.unpack_from(data)
        meta = json.loads(data[_LENGTH.size:_LENGTH.size + length])
        with np.load(io.BytesIO(data[_LENGTH.size + length:]), allow_pickle=False) as archive:
            arrays = [archive[f"arr_{i}"] for i in range(len(archive.files))]
    except (struct.error, ValueError, KeyError, OSError, EOFError) as error:
        raise RemoteConnectionError(f"malformed {what} ({type(error).__name__}: {error})") from None
    if not isinstance(meta, dict):
        raise RemoteConnectionError(f"malformed {what} (its header is not a JSON object)")
    return meta, arrays


def error_to_json(error: BaseException) -> bytes:
    name = type(error).__name__ if isinstance(error, TilecraftError) else "RemoteError"
    return json.dumps({"error": name, "message": str(error)}).encode()


def error_from_json(data: bytes, status: int, where: str) -> TilecraftError:
    """The typed error a server's error response describes, prefixed with ``where`` (when
    given): the class of the same name in tilecraft.errors (any other name: RemoteError)."""
    prefix = f"{where}: " if where else ""
    try:
        body = json.loads(data)
        name, message = str(body["error"]), str(body["message"])
    except (ValueError, KeyError, TypeError):
        text = data[:200].decode("utf-8", "replace").strip()
        return RemoteConnectionError(f"{prefix}HTTP {status} without a tilecraft error ({text!r})")
    kind = getattr(errors, name, None)
    if not (isinstance(kind, type) and issubclass(kind, TilecraftError)) or kind is errors.CompileError:
        kind = RemoteError
    try:
        return kind(prefix + message)
    except TypeError:  # a class with other constructor arguments
        return RemoteError(prefix + message)
