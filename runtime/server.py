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
(and, with ``--trust KEYFILE``, whose signature did) are ever run. The key authenticates
clients; it is what stands between the network and native code, so keep it secret.

Hostile clients (runtime/connections.py): a connection waits for its request head in one
selector thread, under a header deadline, and only a complete head reaches one of a fixed
number of workers, so idle and byte-per-second connections hold no thread and the thread
count stays fixed; bodies are read under an idle and a total timeout; a client address with
too many failed authentications is answered 429 for a while. ``--tls-cert``/``--tls-key``
serve over TLS (stdlib ``ssl``), so models and inputs do not cross the network in clear.

``--emulate aarch64`` (``armv7``/``arm``, ``riscv64``) makes this host the device for another
architecture through qemu-user (runtime/emulated.py): /info reports that machine, uploads
are checked against it, and each run executes the C runtime's runner under the emulator
(its per-call seconds are the emulator's, meaningless for performance).
"""

from __future__ import annotations

import argparse
import collections
import hmac
import io
import json
import platform
import signal
import ssl
import sys
import threading
import time
import warnings
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, Sequence
from urllib.parse import parse_qs, urlsplit

from .. import __version__
from ..errors import (PackageError, PackageTargetError, RemoteAuthError, RemoteConnectionError, RemoteError,
                      RemoteLimitError, RemoteRateLimitError, RemoteRunError, RemoteTimeoutError,
                      ResourceLimitError, TilecraftError)
from . import emulated, rpc
from .connections import ConnectionLimits, Gate, HeadThenSocket, Request, SocketWriter
from .host import host_cpu_flags
from .limits import parse_size
from .package import normalized_machine
from .package_signing import read_key
from .sandbox import DEFAULT_MAX_UPLOAD, DEFAULT_MEMORY_LIMIT, DEFAULT_TIMEOUT, Executor, PackageStore

# Status codes of the typed errors (the body names the class; the code is for HTTP tools).
_STATUS = ((RemoteRateLimitError, HTTPStatus.TOO_MANY_REQUESTS), (RemoteAuthError, HTTPStatus.UNAUTHORIZED), (RemoteLimitError, HTTPStatus.REQUEST_ENTITY_TOO_LARGE),
           (RemoteTimeoutError, HTTPStatus.GATEWAY_TIMEOUT), (RemoteConnectionError, HTTPStatus.REQUEST_TIMEOUT), (RemoteRunError, HTTPStatus.BAD_GATEWAY),
           (PackageTargetError, HTTPStatus.UNPROCESSABLE_ENTITY), (PackageError, HTTPStatus.BAD_REQUEST),
           (TilecraftError, HTTPStatus.BAD_REQUEST))


# Failed authentications a client address may make per AUTH_WINDOW seconds before it is
# answered 429 until its oldest failure leaves the window (--max-auth-failures).
DEFAULT_MAX_AUTH_FAILURES = 10
AUTH_WINDOW = 60.0
# Client addresses whose failures are remembered (the oldest are forgotten beyond it).
_MAX_TRACKED_ADDRESSES = 10_000


class Server(HTTPServer):
    """The HTTP server with what its handlers share: key, store, executor, seen nonces,
    failed authentications; connections pass through a :class:`Gate` (runtime/connections.py)."""

    verbose = False  # log every request (--verbose)

    def __init__(self, address: tuple[str, int], *, key: bytes | None, store: PackageStore,
                 executor: "Executor | emulated.EmulatedExecutor", limits: ConnectionLimits | None = None,
                 tls: ssl.SSLContext | None = None,
                 max_auth_failures: int = DEFAULT_MAX_AUTH_FAILURES) -> None:
        self.limits = limits or ConnectionLimits()
        self.request_queue_size = self.limits.backlog  # listen()'s backlog
        super().__init__(address, Handler)
        self.key = key
        self.store = store
        self.executor = executor
        self.tls = tls
        self.max_auth_failures = max_auth_failures
        self._nonces: dict[str, float] = {}
        self._nonce_lock = threading.Lock()
        self._failures: "collections.OrderedDict[str, collections.deque[float]]" = collections.OrderedDict()
        self._failure_lock = threading.Lock()
        self.gate = Gate(self.limits, self._serve_request, self.refusal, tls)

    def process_request(self, request: Any, client_address: Any) -> None:
        """An accepted connection goes to the gate (which never blocks), not to a thread."""
        self.gate.admit(request, client_address)

    def _serve_request(self, request: Request) -> None:
        Handler(request, request.address, self)

    def server_close(self) -> None:
        self.gate.close()
        super().server_close()

    def record_auth_failure(self, address: str) -> None:
        now = time.monotonic()
        with self._failure_lock:
            times = self._failures.pop(address, None) or collections.deque()
            times.append(now)
            while times and now - times[0] > AUTH_WINDOW:
                times.popleft()
            self._failures[address] = times
            while len(self._failures) > _MAX_TRACKED_ADDRESSES:
                self._failures.popitem(last=False)

    def refusal(self, client_address: Any) -> str | None:
        """Why ``client_address`` is refused before its request is read (too many failed
        authentications lately), or None."""
        if self.max_auth_failures <= 0:
            return None
        address = str(client_address[0]) if isinstance(client_address, tuple) and client_address else ""
        now = time.monotonic()
        with self._failure_lock:
            times = self._failures.get(address)
            while times and now - times[0] > AUTH_WINDOW:
                times.popleft()
            if not times or len(times) < self.max_auth_failures:
                return None
            wait = AUTH_WINDOW - (now - times[0])
        return (f"{len(times)} failed authentications from {address} in the last {AUTH_WINDOW:g} s: "
                f"refused for {wait:.0f} s more (check the key)")

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
        """What clients check before uploading; an emulated device reports the emulated
        machine, no CPU flags, and ``emulated: true``."""
        emulating = self.store.machine is not None
        return {"protocol": rpc.PROTOCOL_VERSION, "tilecraft_version": __version__,
                "machine": normalized_machine(self.store.machine or platform.machine()),
                "cpu_flags": [] if emulating else sorted(host_cpu_flags()), "max_upload": self.store.max_upload,
                "timeout": self.executor.timeout, "memory_limit": self.executor.memory_limit,
                "tls": self.tls is not None, "signed_packages_only": self.store.trust is not None,
                "emulated": emulating}


class Handler(BaseHTTPRequestHandler):
    server: Server
    server_version = f"tilecraft/{__version__}"
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        """Read the request from the head the gate gathered, then from the socket (whose
        idle timeout the gate's worker set); one request per connection."""
        request: Request = self.request
        self.connection = request.sock
        self.rfile = io.BufferedReader(HeadThenSocket(request.head, request.sock), 1 << 16)
        self.wfile = SocketWriter(request.sock)

    def handle(self) -> None:
        self.close_connection = True
        self.handle_one_request()

    def finish(self) -> None:
        """Nothing to flush (writes go straight to the socket); the gate's worker closes it."""


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
            try:
                self.server.authenticate(method, self.path, self.headers)
            except RemoteAuthError:
                self.server.record_auth_failure(str(self.client_address[0]))
                raise
            if urlsplit(self.path).path == "/upload":
                self.server.store.check_size(length)  # before reading the body
            elif length > self.server.store.max_upload:
                raise RemoteLimitError(f"a request of {length} bytes is above the server's limit of "
                                       f"{self.server.store.max_upload} (its --max-upload)")
            body = self._read_body(length)
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
        self.send_header("Connection", "close")  # one request per connection (the gate's)
        self.end_headers()
        self.wfile.write(answer)

    def _read_body(self, length: int) -> bytes:
        """The body's ``length`` bytes, under the idle timeout (each read; the socket's) and
        the read timeout (the whole body): a client that trickles its body loses it."""
        limits = self.server.limits
        deadline = time.monotonic() + limits.read_timeout
        body, left = bytearray(), length
        try:
            while left > 0:
                chunk = self.rfile.read1(min(left, 1 << 20))
                if not chunk:
                    raise RemoteConnectionError(f"the client closed the connection after {len(body)} of "
                                                f"{length} body bytes")
                body += chunk
                left -= len(chunk)
                if left and time.monotonic() > deadline:
                    raise RemoteTimeoutError(f"the request's body took longer than the server's read "
                                             f"timeout of {limits.read_timeout:g} s (--read-timeout)")
        except TimeoutError:
            raise RemoteTimeoutError(f"no byte of the request's body for {limits.idle_timeout:g} s "
                                     "(the server's --idle-timeout)") from None
        finally:
            if left:
                self.close_connection = True
        return bytes(body)

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
    parser.add_argument("--trust", metavar="KEYFILE",
                        help="accept only packages signed with this key (`tilecraft compile --sign`)")
    parser.add_argument("--tls-cert", metavar="PEM", help="serve over TLS with this certificate (chain)")
    parser.add_argument("--tls-key", metavar="PEM", help="the private key of --tls-cert")
    defaults = ConnectionLimits()
    parser.add_argument("--workers", type=_count("--workers"), default=defaults.workers, metavar="N",
                        help=f"threads serving complete requests (default {defaults.workers})")
    parser.add_argument("--max-connections", type=_count("--max-connections"), default=defaults.max_connections,
                        metavar="N", help="connections still sending their request head; beyond it the "
                        f"longest-waiting is dropped (default {defaults.max_connections})")
    parser.add_argument("--header-timeout", type=_seconds("--header-timeout"), default=defaults.header_timeout,
                        metavar="SECONDS", help="seconds a client has to send its request line and headers "
                        f"(default {defaults.header_timeout:g})")
    parser.add_argument("--idle-timeout", type=_seconds("--idle-timeout"), default=defaults.idle_timeout,
                        metavar="SECONDS", help="seconds without a byte while a body is read "
                        f"(default {defaults.idle_timeout:g})")
    parser.add_argument("--read-timeout", type=_seconds("--read-timeout"), default=defaults.read_timeout,
                        metavar="SECONDS", help=f"seconds to receive a whole body (default {defaults.read_timeout:g})")
    parser.add_argument("--max-auth-failures", type=int, default=DEFAULT_MAX_AUTH_FAILURES, metavar="N",
                        help=f"failed authentications per {AUTH_WINDOW:g} s before an address is answered 429 "
                        f"(default {DEFAULT_MAX_AUTH_FAILURES}; 0: no limit)")
    parser.add_argument("--emulate", metavar="ARCH",
                        help="act as a device of another architecture through qemu-user: aarch64, armv7 "
                        "(or arm), riscv64 (docs/remote.md; per-call times are the emulator's)")
    parser.add_argument("--verbose", action="store_true", help="log every request")
    return parser


def _size(text: str) -> int:
    try:
        return parse_size(text, "a size")
    except ResourceLimitError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _count(option: str) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(f"{option} must be positive (an integer), got {text!r}")
        return value
    return parse


def _seconds(option: str) -> Any:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = 0.0
        if not 0 < value < float("inf"):
            raise argparse.ArgumentTypeError(f"{option} must be positive seconds, got {text!r}")
        return value
    return parse


def tls_context(cert: str | None, key: str | None) -> ssl.SSLContext | None:
    """The server's TLS context (TLS 1.2 or later) from PEM files, or None without them;
    :class:`RemoteError` naming the file for a missing or unusable one."""
    if cert is None and key is None:
        return None
    if cert is None:
        raise RemoteError("--tls-key needs --tls-cert (the certificate it belongs to)")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise RemoteError(f"cannot use the TLS certificate {cert}" + (f" and key {key}" if key else "")
                          + f": {reason}") from None
    return context


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
    tls = tls_context(getattr(args, "tls_cert", None), getattr(args, "tls_key", None))
    defaults = ConnectionLimits()
    limits = ConnectionLimits(**{name: getattr(args, name, getattr(defaults, name))
                                 for name in ("workers", "max_connections", "header_timeout",
                                              "idle_timeout", "read_timeout")})
    trust = getattr(args, "trust", None)
    executor: Executor | emulated.EmulatedExecutor
    if getattr(args, "emulate", None):
        chosen = emulated.emulation(args.emulate)
        chosen.check()
        executor = emulated.EmulatedExecutor(chosen, emulated.build_runner(chosen), timeout=args.timeout,
                                             memory_limit=args.memory_limit)
        machine: str | None = chosen.machine
    else:
        executor, machine = Executor(timeout=args.timeout, memory_limit=args.memory_limit), None
    store = PackageStore(args.store, max_upload=args.max_upload,
                         trust=None if trust is None else read_key(trust), machine=machine)
    server = Server((args.host, args.port), key=key, store=store, executor=executor,
                    limits=limits, tls=tls,
                    max_auth_failures=getattr(args, "max_auth_failures", DEFAULT_MAX_AUTH_FAILURES))
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
    print(f"tilecraft server listening on {host}:{port} (machine {server.info()['machine']}"
          f"{' emulated by ' + server.executor.emulation.qemu if server.store.machine else ''}, "
          f"{'signed requests' if server.key else 'NO KEY'}{', TLS' if server.tls else ''}"
          f"{', signed packages only' if server.store.trust else ''})", flush=True)
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
