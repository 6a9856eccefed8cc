"""Hostile clients of the remote server, shared by tests/remote/test_hostile_clients.py and
benchmarks/hostile_clients.py: connections that say nothing, connections that send their
request one byte a second, and what the server's process looks like under them."""

from __future__ import annotations

import select
import socket
import threading
from pathlib import Path

# A request head that is never finished: the slow clients send it one byte at a time.
_SLOW_HEAD = b"POST /upload?name=slow.tar HTTP/1.1\r\nHost: device\r\nContent-Length: 1000000\r\nX-Pad: " + b"a" * 4096


class HostileClients:
    """``idle`` connections that send nothing and ``slow`` ones that send one byte per
    second each, kept at that number for as long as they run (a connection the server drops
    is opened again, as an attacker would). Use as a context manager."""

    def __init__(self, host: str, port: int, *, idle: int, slow: int) -> None:
        self.address = (host, port)
        self.idle, self.slow = idle, slow
        self._sockets: list[tuple[socket.socket, bool, int]] = []  # (socket, slow?, bytes sent)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._trickle, daemon=True)
        self.reopened = 0

    def __enter__(self) -> "HostileClients":
        for index in range(self.idle + self.slow):
            self._sockets.append((self._open(), index >= self.idle, 0))
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for sock, _, _ in self._sockets:
            sock.close()

    def _open(self) -> socket.socket:
        sock = socket.create_connection(self.address, timeout=10)
        sock.setblocking(False)
        return sock

    def _trickle(self) -> None:
        while not self._stop.wait(1.0):
            for index, (sock, slow, sent) in enumerate(self._sockets):
                if self._closed_by_server(sock):
                    sock.close()
                    try:
                        sock, sent = self._open(), 0
                    except OSError:
                        continue
                    self.reopened += 1
                if slow:
                    try:
                        sock.send(_SLOW_HEAD[sent % len(_SLOW_HEAD):][:1])
                        sent += 1
                    except OSError:
                        pass
                self._sockets[index] = (sock, slow, sent)

    @staticmethod
    def _closed_by_server(sock: socket.socket) -> bool:
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            return bool(readable) and sock.recv(4096, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def open_count(self) -> int:
        return sum(not self._closed_by_server(sock) for sock, _, _ in self._sockets)


def process_status(pid: int) -> dict[str, int]:
    """Threads and resident memory (KiB) of a process, from /proc."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("Threads", "VmRSS"):
            fields[name] = int(value.split()[0])
    return {"threads": fields["Threads"], "rss_kib": fields["VmRSS"]}
