"""``tilecraft.remote``: upload, run and time packages on another machine (TVM's ``rpc``).

    import tilecraft.remote
    session = tilecraft.remote.connect("device", 9090, key="...")   # rpc.connect
    package = session.upload("model.tar")
    outputs = session.run(package, {"input": x})        # dict of numpy arrays
    result = session.time(package, repeat=20)           # RunResult: outputs + timing
    print(result.format_times())                         # tvmc's table

The device runs ``python -m tilecraft.runtime.server`` (runtime/server.py).
:class:`LocalSession` (TVM's ``rpc.LocalSession``) has the same methods and runs packages on
this machine through the same sandbox (a child process per run, with a time and a memory
limit) without a network or a key: tests and scripts that take a session work with both.

Why in runtime/ (numpy and the standard library only): the tuner's remote runner
(tuning/measure_remote.py) measures through it, and a device may drive another.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlencode

import numpy as np

from ..errors import PackageError, RemoteAuthError, RemoteConnectionError, RemoteError, RemoteLimitError
from . import rpc
from .run import RunResult, load_inputs
from .sandbox import DEFAULT_MEMORY_LIMIT, DEFAULT_TIMEOUT, Executor, PackageStore
from .timing import Timing

# Seconds to wait for a connection, and beyond a run's own time limit for its answer.
CONNECT_TIMEOUT = 10.0
ANSWER_MARGIN = 30.0
# Seconds the server may take to receive and verify an upload before we give up on it.
UPLOAD_TIMEOUT = 600.0


@dataclass(frozen=True)
class RemotePackage:
    """A package uploaded to a session: its id on the server and the file it came from."""

    id: str
    name: str

    def __str__(self) -> str:
        return f"{self.name} ({self.id[:12]})"


class Session:
    """What every session offers; subclasses move bytes (:meth:`_upload`, :meth:`_run`)."""

    where = "session"

    def upload(self, path: "str | os.PathLike[str]") -> RemotePackage:
        """Send a package; the server verifies it (integrity, architecture) and keeps it."""
        path = Path(path)
        if not path.is_file():
            raise PackageError(f"{path}: no such package file")
        data = path.read_bytes()
        return RemotePackage(self._upload(data, path.name), path.name)

    def run(self, package: "RemotePackage | str | os.PathLike[str]",
            inputs: "Mapping[str, np.ndarray] | str | os.PathLike[str] | None" = None, *,
            timeout: float | None = None) -> dict[str, np.ndarray]:
        """Outputs by name of one run (``inputs``: arrays by name, an ``.npz`` path, or
        ``None`` for the seeded random inputs ``tilecraft run`` uses)."""
        return self.time(package, inputs, repeat=0, timeout=timeout).outputs

    def time(self, package: "RemotePackage | str | os.PathLike[str]",
             inputs: "Mapping[str, np.ndarray] | str | os.PathLike[str] | None" = None, *,
             repeat: int = 10, number: int = 1, min_repeat_ms: float = 0.0,
             timeout: float | None = None) -> RunResult:
        """Run once, then time ``repeat`` measurements of ``number`` calls on the device (TVM's
        ``time_evaluator``); returns outputs and :class:`Timing` as :func:`tilecraft.run` does."""
        for name, value in (("repeat", repeat), ("number", number)):
            if not isinstance(value, int) or isinstance(value, bool) or value < (0 if name == "repeat" else 1):
                raise RemoteLimitError(f"{name} must be an integer >= {0 if name == 'repeat' else 1}, got {value!r}")
        if not isinstance(package, RemotePackage):
            package = self.upload(package)
        if inputs is not None and not isinstance(inputs, Mapping):
            inputs = load_inputs(inputs)
        meta, arrays = self._run(package.id, None if inputs is None else {k: np.asarray(v) for k, v in inputs.items()},
                                 {"repeat": repeat, "number": number, "min_repeat_ms": float(min_repeat_ms),
                                  "timeout": timeout})
        outputs = dict(zip(meta.get("outputs") or [], arrays))
        per_call = meta.get("per_call")
        return RunResult(outputs, Timing(tuple(float(t) for t in per_call)) if per_call else None)

    def _upload(self, data: bytes, name: str) -> str:
        raise NotImplementedError

    def _run(self, ident: str, inputs: Mapping[str, np.ndarray] | None,
             parameters: Mapping[str, Any]) -> tuple[dict[str, Any], list[np.ndarray]]:
        raise NotImplementedError

    def close(self) -> None:
        """Forget the session (a local one removes its packages)."""

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RemoteSession(Session):
    """A connection to a tilecraft server (made by :func:`connect`)."""

    def __init__(self, address: rpc.Address, key: bytes | None, *, connect_timeout: float = CONNECT_TIMEOUT,
                 tls_ca: "str | os.PathLike[str] | None" = None) -> None:
        self.address = address
        self.where = f"server {address}"
        self._key = key
        self._connect_timeout = connect_timeout
        self._info: dict[str, Any] | None = None
        self._tls = None if tls_ca is None else client_tls_context(tls_ca)

    def info(self) -> dict[str, Any]:
        """The server's machine, CPU flags and limits (also checks the key)."""
        if self._info is None:
            status, body = self._request("GET", "/info", b"", self._connect_timeout)
            try:
                self._info = json.loads(body)
            except ValueError:
                raise RemoteConnectionError(f"{self.where}: answered /info with something other than JSON") from None
        return self._info

    def _upload(self, data: bytes, name: str) -> str:
        limit = self.info().get("max_upload")
        if isinstance(limit, int) and len(data) > limit:
            raise RemoteLimitError(f"{self.where}: {name} is {len(data)} bytes, above the server's "
                                   f"upload limit of {limit} (its --max-upload)")
        _, body = self._request("POST", "/upload?" + urlencode({"name": name}), data, UPLOAD_TIMEOUT)
        return str(json.loads(body)["package"])

    def _run(self, ident: str, inputs: Mapping[str, np.ndarray] | None,
             parameters: Mapping[str, Any]) -> tuple[dict[str, Any], list[np.ndarray]]:
        names = None if inputs is None else list(inputs)
        body = rpc.encode({"inputs": names, **parameters}, [inputs[n] for n in names] if names else [])
        server_limit = float(self.info().get("timeout") or DEFAULT_TIMEOUT)
        wait = min(parameters.get("timeout") or server_limit, server_limit) + ANSWER_MARGIN
        _, answer = self._request("POST", "/run?" + urlencode({"package": ident}), body, wait)
        return rpc.decode(answer, f"answer of {self.where}")

    def _request(self, method: str, path: str, body: bytes, timeout: float | None) -> tuple[int, bytes]:
        headers = {"Content-Length": str(len(body)), **rpc.sign(self._key, method, path, body)}
        if self._tls is None:
            connection = http.client.HTTPConnection(self.address.host, self.address.port, timeout=self._connect_timeout)
        else:
            connection = http.client.HTTPSConnection(self.address.host, self.address.port,
                                                     timeout=self._connect_timeout, context=self._tls)
        try:
            connection.connect()
            connection.sock.settimeout(timeout)
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            answer = response.read()
        except ssl.SSLCertVerificationError as error:
            raise RemoteAuthError(f"the tilecraft server at {self.address} is not the one --tls-ca trusts: "
                                  f"certificate verify failed ({error.verify_message or error})") from None
        except (socket.gaierror, ConnectionError, TimeoutError, OSError, http.client.HTTPException) as error:
            reason = error.strerror if isinstance(error, OSError) and error.strerror else (str(error) or type(error).__name__)
            raise RemoteConnectionError(f"cannot reach the tilecraft server at {self.address}: {reason}") from None
        finally:
            connection.close()
        if response.status != 200:
            raise rpc.error_from_json(answer, response.status, self.where)
        rpc.check_answer(self._key, headers, response.status, answer,
                         response.getheader(rpc.SIGNATURE_HEADER), self.where)
        return response.status, answer


class LocalSession(Session):
    """TVM's ``rpc.LocalSession``: the session API on this machine, through the server's
    sandbox (verified uploads, a child process per run with a time and memory limit)."""

    where = "local session"

    def __init__(self, *, timeout: float = DEFAULT_TIMEOUT, memory_limit: int = DEFAULT_MEMORY_LIMIT,
                 max_upload: int | None = None) -> None:
        self._store = PackageStore(**({} if max_upload is None else {"max_upload": max_upload}))
        self._executor = Executor(timeout=timeout, memory_limit=memory_limit)

    def _upload(self, data: bytes, name: str) -> str:
        return self._store.add(data, name)

    def _run(self, ident: str, inputs: Mapping[str, np.ndarray] | None,
             parameters: Mapping[str, Any]) -> tuple[dict[str, Any], list[np.ndarray]]:
        return self._executor.run(self._store.path(ident), inputs, repeat=parameters["repeat"],
                                  number=parameters["number"], min_repeat_ms=parameters["min_repeat_ms"],
                                  timeout=parameters["timeout"])

    def close(self) -> None:
        self._executor.close()
        self._store.close()


def client_tls_context(ca: "str | os.PathLike[str]") -> ssl.SSLContext:
    """A client TLS context that trusts the certificates ``ca`` (a PEM file: the CA that
    issued the server's certificate, or a self-signed certificate itself) and checks the
    server's name against them; :class:`RemoteError` for an unusable file."""
    try:
        context = ssl.create_default_context(cafile=os.fspath(ca))
    except (OSError, ssl.SSLError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise RemoteError(f"cannot use {ca} as the TLS CA (--tls-ca): {reason}") from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def connect(host: str, port: int | None = None, *, key: "str | bytes | None" = None,
            connect_timeout: float = CONNECT_TIMEOUT,
            tls_ca: "str | os.PathLike[str] | None" = None) -> RemoteSession:
    """A session with the server at ``host:port`` (TVM's ``rpc.connect``); ``host`` may be
    ``"HOST:PORT"`` with no ``port``. ``key``: the server's shared key (default
    ``$TILECRAFT_RPC_KEY``). ``tls_ca``: connect over TLS, trusting the server certificates
    this PEM file vouches for (a server started with ``--tls-cert``). Checks the address and
    the key at once: a wrong key raises :class:`RemoteAuthError`, an unreachable server
    :class:`RemoteConnectionError`."""
    if port is None:
        address = rpc.Address.parse(host)
    else:
        if isinstance(port, bool) or not isinstance(port, int):
            raise rpc.RemoteAddressError(f"port must be an integer, got {port!r}")
        address = rpc.Address.parse(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
    session = RemoteSession(address, rpc.key_bytes(key), connect_timeout=connect_timeout, tls_ca=tls_ca)
    session.info()
    return session


__all__ = ["LocalSession", "RemotePackage", "RemoteSession", "Session", "connect"]
