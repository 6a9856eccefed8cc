"""The remote server's front door: connections wait here, in one thread, until their request
line and headers have arrived; only then does a worker of a fixed pool take them.

Why: ``ThreadingHTTPServer`` gives every connection a thread at once. Five hundred clients
that connect and say nothing (or one byte a second) then hold five hundred threads, each
waiting on ``recv``, and a legitimate request waits behind them or the process runs out of
threads. Here an idle or slow connection costs a file descriptor and a small buffer in a
selector, and has :attr:`ConnectionLimits.header_timeout` seconds to send its whole head;
past that, or past :attr:`ConnectionLimits.max_header_bytes`, it is closed. When more than
:attr:`ConnectionLimits.max_connections` are open, the one that has waited longest is
dropped for the newcomer. Workers (:attr:`ConnectionLimits.workers`, started once) take
complete heads from a queue of :attr:`ConnectionLimits.queue` places; a full queue is
answered ``503`` at once. The server's thread count is therefore fixed: the accepting
thread, this one, and the workers.

TLS (``ssl``, optional): the handshake happens here too, without blocking, under the same
header deadline, so a client that opens TLS and stalls costs no more than a plain one.

A client refused for failed authentications (:meth:`Gate.refuse`, the server's rate limit)
is answered ``429`` here, before it reaches a worker.

Standard library only (the server runs where only numpy and the runtime are installed).
"""

from __future__ import annotations

import collections
import io
import json
import queue
import selectors
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Callable

# The end of a request's head.
_HEAD_END = b"\r\n\r\n"


@dataclass(frozen=True)
class ConnectionLimits:
    """The front door's limits (each a ``tilecraft serve`` option, docs/remote.md)."""

    workers: int = 4                    # threads serving complete requests
    queue: int = 64                     # complete requests waiting for a worker
    max_connections: int = 1000         # open connections still sending their head
    header_timeout: float = 10.0        # seconds to send the request line and headers
    idle_timeout: float = 30.0          # seconds without a byte while the body is read
    read_timeout: float = 600.0         # seconds to send a whole body
    max_header_bytes: int = 64 << 10    # bytes of request line and headers
    backlog: int = 1024                 # the listening socket's accept queue


class PendingConnection:
    """A connection whose head has not fully arrived: its socket, the bytes so far, when it
    must be complete."""

    __slots__ = ("sock", "address", "head", "deadline", "handshaking")

    def __init__(self, sock: socket.socket, address: tuple, deadline: float, handshaking: bool) -> None:
        self.sock = sock
        self.address = address
        self.head = bytearray()
        self.deadline = deadline
        self.handshaking = handshaking


class Request:
    """A connection with a complete head, as a worker receives it (``Handler.request``)."""

    __slots__ = ("sock", "address", "head")

    def __init__(self, sock: socket.socket, address: tuple, head: bytes) -> None:
        self.sock = sock
        self.address = address
        self.head = head


class HeadThenSocket(io.RawIOBase):
    """A raw stream that yields the head already read, then the socket's bytes (what
    ``http.server`` reads the request from: ``io.BufferedReader(HeadThenSocket(...))``)."""

    def __init__(self, head: bytes, sock: socket.socket) -> None:
        self._head = memoryview(head)
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: "bytearray | memoryview") -> int:
        if self._head:
            count = min(len(buffer), len(self._head))
            buffer[:count] = self._head[:count]
            self._head = self._head[count:]
            return count
        return self._sock.recv_into(buffer)


class SocketWriter(io.BufferedIOBase):
    """Writes go straight to the socket, whole (``sendall``)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def writable(self) -> bool:
        return True

    def write(self, data: "bytes | bytearray | memoryview") -> int:
        self._sock.sendall(data)
        return len(data)


def _canned(status: int, reason: str, message: str) -> bytes:
    """A complete ``Connection: close`` answer with a tilecraft error body (sent without
    blocking from the gate thread)."""
    body = json.dumps({"error": "RemoteLimitError" if status != 429 else "RemoteRateLimitError",
                       "message": message}).encode()
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body


class Gate:
    """The thread that gathers heads and the workers that serve them (see the module
    docstring). ``serve(request)`` is called on a worker for each complete head; ``refused
    (address)`` returns a reason to answer 429 instead (the server's rate limit), or None."""

    def __init__(self, limits: ConnectionLimits, serve: Callable[[Request], None],
                 refused: Callable[[tuple], "str | None"], tls: ssl.SSLContext | None = None) -> None:
        self.limits = limits
        self._serve = serve
        self._refused = refused
        self._tls = tls
        self._selector = selectors.DefaultSelector()
        self._pending: "collections.OrderedDict[int, PendingConnection]" = collections.OrderedDict()
        self._arrivals: "collections.deque[tuple[socket.socket, tuple]]" = collections.deque()
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._wake_reader.setblocking(False)
        self._wake_writer.setblocking(False)
        self._selector.register(self._wake_reader, selectors.EVENT_READ, None)
        self._ready: "queue.Queue[Request | None]" = queue.Queue(maxsize=limits.queue)
        self._closed = threading.Event()
        self.dropped = collections.Counter()  # why connections were closed unserved (for tests, --verbose)
        self._thread = threading.Thread(target=self._gather, name="tilecraft-gate", daemon=True)
        self._workers = [threading.Thread(target=self._work, name=f"tilecraft-worker-{i}", daemon=True)
                         for i in range(limits.workers)]
        self._thread.start()
        for worker in self._workers:
            worker.start()

    # ---- called by the accepting thread --------------------------------------------------

    def admit(self, sock: socket.socket, address: tuple) -> None:
        """Take a freshly accepted connection (never blocks)."""
        self._arrivals.append((sock, address))
        self._wake()

    def close(self) -> None:
        """Stop gathering and serving; close every waiting connection."""
        self._closed.set()
        self._wake()
        for _ in self._workers:
            try:
                self._ready.put(None, timeout=1)
            except queue.Full:
                break
        self._thread.join(timeout=5)

    def _wake(self) -> None:
        """Interrupt the gate thread's wait (a byte on its wake-up socket)."""
        try:
            self._wake_writer.send(b"\0")
        except OSError:
            pass  # its buffer is full: a wake-up is already pending

    # ---- the gate thread -----------------------------------------------------------------

    def _gather(self) -> None:
        while not self._closed.is_set():
            try:
                self._gather_once()
            except Exception:  # noqa: BLE001 - a bug here must not stop the front door
                self.dropped["gate error"] += 1
        for connection in list(self._pending.values()):
            self._drop(connection, "shutdown")
        self._selector.close()

    def _gather_once(self) -> None:
        """One turn: wait for readable connections (or the next deadline), read, admit, expire."""
        now = time.monotonic()
        # Arrival order is deadline order (one header_timeout for all): the first is next.
        wait = (next(iter(self._pending.values())).deadline if self._pending else now + 1.0) - now
        for key, _ in self._selector.select(timeout=max(0.0, min(wait, 1.0))):
            if key.data is None:
                self._drain_wakeups()
            else:
                self._on_ready(key.data)
        self._take_arrivals()
        self._expire(time.monotonic())

    def _drain_wakeups(self) -> None:
        try:
            while self._wake_reader.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def _take_arrivals(self) -> None:
        while self._arrivals:
            sock, address = self._arrivals.popleft()
            while len(self._pending) >= self.limits.max_connections:
                # The connection that has waited longest goes: a client still silent after
                # everyone else is the likeliest to be hostile, and never a fresh request.
                _, oldest = self._pending.popitem(last=False)
                self._drop(oldest, "over max connections", pending=False)
            reason = self._refused(address)
            if reason is not None:
                self._answer_and_close(sock, _canned(429, "Too Many Requests", reason))
                self.dropped["rate limited"] += 1
                continue
            try:
                sock.setblocking(False)
                if self._tls is not None:
                    sock = self._tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
            except (OSError, ValueError):
                _close(sock)
                continue
            connection = PendingConnection(sock, address, time.monotonic() + self.limits.header_timeout,
                                           handshaking=self._tls is not None)
            self._pending[sock.fileno()] = connection
            self._selector.register(sock, selectors.EVENT_READ, connection)
            if connection.handshaking:
                self._on_ready(connection)  # the ClientHello may be there already

    def _on_ready(self, connection: PendingConnection) -> None:
        sock = connection.sock
        if connection.handshaking:
            try:
                sock.do_handshake()
            except ssl.SSLWantReadError:
                self._selector.modify(sock, selectors.EVENT_READ, connection)
                return
            except ssl.SSLWantWriteError:
                self._selector.modify(sock, selectors.EVENT_WRITE, connection)
                return
            except (ssl.SSLError, OSError):
                self._drop(connection, "TLS handshake failed")
                return
            connection.handshaking = False
            self._selector.modify(sock, selectors.EVENT_READ, connection)
        while True:
            try:
                data = sock.recv(self.limits.max_header_bytes + 1 - len(connection.head))
            except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return
            except (ssl.SSLError, OSError):
                self._drop(connection, "read error")
                return
            if not data:
                self._drop(connection, "closed by the client")
                return
            connection.head += data
            if _HEAD_END in connection.head:
                self._hand_over(connection)
                return
            if len(connection.head) > self.limits.max_header_bytes:
                self._answer_and_close(sock, _canned(431, "Request Header Fields Too Large",
                                                     f"a request head above {self.limits.max_header_bytes} bytes"))
                self._forget(connection)
                self.dropped["head too large"] += 1
                return
            if not (isinstance(sock, ssl.SSLSocket) and sock.pending()):
                return

    def _hand_over(self, connection: PendingConnection) -> None:
        self._forget(connection)
        try:
            connection.sock.setblocking(True)
            self._ready.put_nowait(Request(connection.sock, connection.address, bytes(connection.head)))
        except queue.Full:
            self._answer_and_close(connection.sock, _canned(
                503, "Service Unavailable", f"the server is busy ({self.limits.queue} requests waiting): retry"))
            self.dropped["queue full"] += 1
        except OSError:
            _close(connection.sock)

    def _expire(self, now: float) -> None:
        while self._pending:
            first = next(iter(self._pending.values()))
            if first.deadline > now:
                return
            self._drop(first, "header timeout")

    def _forget(self, connection: PendingConnection) -> None:
        self._pending.pop(connection.sock.fileno(), None)
        try:
            self._selector.unregister(connection.sock)
        except (KeyError, ValueError):
            pass

    def _drop(self, connection: PendingConnection, why: str, *, pending: bool = True) -> None:
        if pending:
            self._pending.pop(connection.sock.fileno(), None)
        try:
            self._selector.unregister(connection.sock)
        except (KeyError, ValueError):
            pass
        _close(connection.sock)
        self.dropped[why] += 1

    def _answer_and_close(self, sock: socket.socket, answer: bytes) -> None:
        try:
            sock.setblocking(False)
            sock.send(answer)  # a few hundred bytes: fits any socket buffer
        except (OSError, ValueError):
            pass
        _close(sock)

    # ---- the workers ---------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            request = self._ready.get()
            if request is None or self._closed.is_set():
                if request is not None:
                    _close(request.sock)
                return
            try:
                request.sock.settimeout(self.limits.idle_timeout)
                self._serve(request)
            except Exception:  # noqa: BLE001 - one broken connection must not end a worker
                pass
            finally:
                _close(request.sock)


def _close(sock: socket.socket) -> None:
    """End a connection as ``socketserver`` does: our side's FIN after what was sent."""
    try:
        sock.shutdown(socket.SHUT_WR)
    except (OSError, ValueError):
        pass
    try:
        sock.close()
    except OSError:
        pass
