"""The remote-run server a device runs: ``python -m tilecraft.runtime.server --port 9090``
(or ``tilecraft serve``), TVM's ``rpc_server`` for tilecraft packages.

It needs numpy and the tilecraft runtime only (no MLIR, no compiler): clients compile, the
device uploads, runs and times. Endpoints (protocol in runtime/rpc.py):

==================  ====================================================================
``GET /info``       the server's machine, CPU flags, limits and protocol version
``POST /upload``    body: a package (``model.tar``); verified, stored; returns its id
``POST /run``       ``?package=<id>``; body: inputs (rpc message, or empty for seeded
                    random inputs) and ``repeat``/``number``/``min_repeat_ms``/``timeout``;
                    returns the outputs and per-call seconds
==================  ====================================================================

Safety: every request must be signed with the shared key (HMAC, constant-time compare,
bounded clock skew, no replayed nonce), checked before its body is read; with no key the server refuses to start unless
``--insecure-no-key``. An upload above ``--max-upload`` is refused before it is read. Each
run happens in a child process with ``--timeout`` and ``--memory-limit``
(runtime/sandbox.py); only packages whose integrity and architecture checks passed at upload
are ever run. The key authenticates clients; it is what stands between the network and
native code, so keep it secret and the server off untrusted networks.
"""

from __future__ import annotations

import argparse
import hmac
import json
import platform
import signal
import sys
import threading
import time
import warnings
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Sequence
from urllib.parse import parse_qs, urlsplit

from .. import __version__
from ..errors import (PackageError, PackageTargetError, RemoteAuthError, RemoteError,
                      RemoteLimitError, RemoteRunError, RemoteTimeoutError, ResourceLimitError,
                      TilecraftError)
from . import rpc
from .host import host_cpu_flags
from .limits import parse_size
from .package import normalized_machine
from .sandbox import DEFAULT_MAX_UPLOAD, DEFAULT_MEMORY_LIMIT, DEFAULT_TIMEOUT, Executor, PackageStore

# Status codes of the typed errors (the body names the class; the code is for HTTP tools).
_STATUS = ((RemoteAuthError, HTTPStatus.UNAUTHORIZED), (RemoteLimitError, HTTPStatus.REQUEST_ENTITY_TOO_LARGE),
           (RemoteTimeoutError, HTTPStatus.GATEWAY_TIMEOUT), (RemoteRunError, HTTPStatus.BAD_GATEWAY),
           (PackageTargetError, HTTPStatus.UNPROCESSABLE_ENTITY), (PackageError, HTTPStatus.BAD_REQUEST),
           (TilecraftError, HTTPStatus.BAD_REQUEST))


class Server(ThreadingHTTPServer):
    """The HTTP server with what its handlers share: key, store, executor, seen nonces."""

    daemon_threads = True
    verbose = False  # log every request (--verbose)

    def __init__(self, address: tuple[str, int], *, key: bytes | None, store: PackageStore,
                 executor: Executor) -> None:
        super().__init__(address, Handler)
        self.key = key
        self.store = store
        self.executor = executor
        self._nonces: dict[str, float] = {}
        self._nonce_lock = threading.Lock()

    def authenticate(self, method: str, path: str, headers: Any) -> None:
        """:class:`RemoteAuthError` unless the request carries a valid, fresh signature.
        Checked from the headers alone, before the body is read: the signature covers the
        body's hash (``X-Tilecraft-Body-SHA256``), which :meth:`check_body` compares with
        the body once read. A stranger's request costs no more than its headers."""
        if self.key is None:
            return
        fields = (rpc.TIME_HEADER, rpc.NONCE_HEADER, rpc.BODY_HASH_HEADER, rpc.SIGNATURE_HEADER)
        if not all(headers.get(h) for h in fields):
            raise RemoteAuthError("the request is not signed: this server needs the shared key "
                                  f"(connect with key=..., --key or {rpc.KEY_ENVIRONMENT}) and a client "
                                  f"of protocol {rpc.PROTOCOL_VERSION}")
        timestamp, nonce, digest, given = (headers.get(h, "") for h in fields)
        expected = rpc.signature(self.key, method, path, timestamp, nonce, digest)
        if not hmac.compare_digest(expected.encode(), given.encode()):
            raise RemoteAuthError("the request's signature is wrong: the client's key differs from the server's")
        try:
            skew = abs(time.time() - float(timestamp))
        except ValueError:
            skew = float("inf")
        if not skew <= rpc.MAX_CLOCK_SKEW:
            raise RemoteAuthError(f"the request is stale or from the future ({rpc.TIME_HEADER} "
                                  f"{timestamp[:40]}): check both clocks")
        now = time.time()
        with self._nonce_lock:
            self._nonces = {n: t for n, t in self._nonces.items() if now - t <= 2 * rpc.MAX_CLOCK_SKEW}
            if nonce in self._nonces:
                raise RemoteAuthError("the request was already served (a replayed nonce)")
            self._nonces[nonce] = now

    def check_body(self, headers: Any, body: bytes) -> None:
        """:class:`RemoteAuthError` when the body read is not the one the client signed."""
        if self.key is None:
            return
        if not hmac.compare_digest(rpc.body_hash(body).encode(), headers.get(rpc.BODY_HASH_HEADER, "").encode()):
            raise RemoteAuthError("the request's body is not the one its signature covers "
                                  "(altered on the way, or cut short)")

    def info(self) -> dict[str, Any]:
        return {"protocol": rpc.PROTOCOL_VERSION, "tilecraft_version": __version__,
                "machine": normalized_machine(platform.machine()),
                "cpu_flags": sorted(host_cpu_flags()), "max_upload": self.store.max_upload,
                "timeout": self.executor.timeout, "memory_limit": self.executor.memory_limit}


class Handler(BaseHTTPRequestHandler):
    server: Server
    server_version = f"tilecraft/{__version__}"
    protocol_version = "HTTP/1.1"
    timeout = 120  # seconds a client may stall mid-request before its thread gives up

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        if self.server.verbose:
            super().log_message(format, *args)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._serve("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._serve("POST")

    def _serve(self, method: str) -> None:
        try:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if length < 0:
                self.close_connection = True
                raise RemoteError("the request's Content-Length is not a byte count")
            # A request not signed with the key is refused before its body is read (no memory
            # for strangers); the body is checked against its signed hash once read.
            self.server.authenticate(method, self.path, self.headers)
            if urlsplit(self.path).path == "/upload":
                self.server.store.check_size(length)  # before reading the body
            elif length > self.server.store.max_upload:
                raise RemoteLimitError(f"a request of {length} bytes is above the server's limit of "
                                       f"{self.server.store.max_upload} (its --max-upload)")
            body = self.rfile.read(length) if length else b""
            self.server.check_body(self.headers, body)
            status, answer, kind = self._route(method, body)
        except TilecraftError as error:
            status = next(code for cls, code in _STATUS if isinstance(error, cls))
            answer, kind = rpc.error_to_json(error), "application/json"
            if isinstance(error, (RemoteLimitError, RemoteAuthError)):
                self.close_connection = True  # an unread body must not be taken for a request
        except Exception as error:  # noqa: BLE001 - a bug here must not stop the server
            status = HTTPStatus.INTERNAL_SERVER_ERROR
            answer = rpc.error_to_json(RemoteError(f"server error: {type(error).__name__}: {error}"))
            kind = "application/json"
        self.send_response(status)
        nonce = self.headers.get(rpc.NONCE_HEADER)
        if self.server.key is not None and status == HTTPStatus.OK and nonce:
            self.send_header(rpc.SIGNATURE_HEADER, rpc.answer_signature(self.server.key, nonce, status, answer))
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(answer)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(answer)

    def _route(self, method: str, body: bytes) -> tuple[int, bytes, str]:
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        if (method, parts.path) == ("GET", "/info"):
            return HTTPStatus.OK, json.dumps(self.server.info()).encode(), "application/json"
        if (method, parts.path) == ("POST", "/upload"):
            ident = self.server.store.add(body, query.get("name", "package")[:200])
            return HTTPStatus.OK, json.dumps({"package": ident}).encode(), "application/json"
        if (method, parts.path) == ("POST", "/run"):
            package = self.server.store.path(query.get("package", ""))
            meta, arrays = rpc.decode(body, "run request") if body else ({}, [])
            names = meta.get("inputs")
            inputs = None if names is None else dict(zip(names, arrays))
            try:
                repeat, number = int(meta.get("repeat", 0)), int(meta.get("number", 1))
                min_repeat_ms = float(meta.get("min_repeat_ms", 0.0))
                timeout = None if meta.get("timeout") is None else float(meta["timeout"])
            except (TypeError, ValueError) as error:
                raise RemoteError(f"malformed run parameters ({error})") from None
            result_meta, outputs = self.server.executor.run(
                package, inputs, repeat=repeat, number=number, min_repeat_ms=min_repeat_ms, timeout=timeout)
            return HTTPStatus.OK, rpc.encode(result_meta, outputs), "application/octet-stream"
        raise RemoteError(f"no endpoint {method} {parts.path[:100]}")


# ---- command line -----------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The server's options, shared by ``python -m tilecraft.runtime.server`` and
    ``tilecraft serve``."""
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    parser.add_argument("--port", type=int, default=rpc.DEFAULT_PORT,
                        help=f"port to listen on; 0 picks a free one (default {rpc.DEFAULT_PORT})")
    parser.add_argument("--key", help=f"the shared key clients sign requests with (default: ${rpc.KEY_ENVIRONMENT})")
    parser.add_argument("--insecure-no-key", action="store_true",
                        help="serve without a key: anyone who reaches the port runs native code")
    parser.add_argument("--max-upload", type=_size, default=DEFAULT_MAX_UPLOAD, metavar="SIZE",
                        help="largest package accepted, e.g. 512M (default 1G)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"seconds one run may take before its process is killed (default {DEFAULT_TIMEOUT:g})")
    parser.add_argument("--memory-limit", type=_size, default=DEFAULT_MEMORY_LIMIT, metavar="SIZE",
                        help="address-space limit of a run's process, e.g. 4G (default 8G)")
    parser.add_argument("--store", metavar="DIR", help="folder for uploaded packages (default: a temporary one)")
    parser.add_argument("--verbose", action="store_true", help="log every request")
    return parser


def _size(text: str) -> int:
    try:
        return parse_size(text, "a size")
    except ResourceLimitError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def make_server(args: argparse.Namespace) -> Server:
    """The configured, bound server (not yet serving); :class:`RemoteAuthError` when there
    is no key and ``--insecure-no-key`` was not given."""
    key = rpc.key_bytes(args.key)
    if key is None and not args.insecure_no_key:
        raise RemoteAuthError(f"no key: pass --key or set {rpc.KEY_ENVIRONMENT} (clients sign requests "
                              "with it); --insecure-no-key serves anyone who reaches the port")
    if key is None:
        warnings.warn("tilecraft server without a key: anyone who reaches the port can run native code "
                      "on this machine", RuntimeWarning, stacklevel=2)
    if not 0 < args.timeout < float("inf"):
        raise RemoteLimitError(f"--timeout must be positive seconds, got {args.timeout}")
    store = PackageStore(args.store, max_upload=args.max_upload)
    server = Server((args.host, args.port), key=key, store=store,
                    executor=Executor(timeout=args.timeout, memory_limit=args.memory_limit))
    server.verbose = args.verbose
    return server


def serve(args: argparse.Namespace) -> int:
    """Serve until interrupted; prints the address it listens on first (``port 0`` picks a
    free port: a script reads it from that line)."""
    server = make_server(args)
    if threading.current_thread() is threading.main_thread():
        # `kill` (SIGTERM) ends the server like Ctrl-C: the package store is removed.
        signal.signal(signal.SIGTERM, _interrupt)
    host, port = server.server_address[:2]
    print(f"tilecraft server listening on {host}:{port} (machine {server.info()['machine']}, "
          f"{'signed requests' if server.key else 'NO KEY'})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        server.executor.close()
        server.store.close()
    return 0


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    parser = add_arguments(argparse.ArgumentParser(
        prog="python -m tilecraft.runtime.server",
        description="Serve remote runs of tilecraft packages (needs numpy and the tilecraft runtime only)."))
    args = parser.parse_args(argv)
    try:
        return serve(args)
    except (TilecraftError, OSError) as error:
        print(f"tilecraft server: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
