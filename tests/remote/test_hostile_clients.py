"""The remote server under hostile clients (issue 48): idle and byte-per-second connections
neither delay a legitimate run nor add threads; heads have a deadline and a size limit;
failed authentications are rate-limited; TLS; only signed packages with ``--trust``.
The 500-connection case is in the slow tier (benchmarks/hostile_clients.py prints RSS over
10,000 requests)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

import numpy as np
import pytest

import mlir_text
import tilecraft
import tilecraft.remote
from hostile import HostileClients, process_status
from test_remote import KEY, SERVER, start_server
from tilecraft.errors import (PackageSignatureError, RemoteAuthError, RemoteConnectionError,
                              RemoteRateLimitError)
from tilecraft.runtime.package_signing import generate_key, sign_package
from tilecraft.tools.cli import run_cli

WORKERS = 3


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    path = tmp_path_factory.mktemp("hostile") / "mm.tar"
    tilecraft.compile(mlir_text.matmul(8, 8, 8), package_path=path)
    return path


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    process.communicate(timeout=30)


def legitimate_run(port: int, package, rng, **connect) -> float:
    """Seconds for connect + upload + run, checked against a local run."""
    a, b = rng.random((8, 8)).astype(np.float32), rng.random((8, 8)).astype(np.float32)
    start = time.perf_counter()
    session = tilecraft.remote.connect("127.0.0.1", port, key=KEY, **connect)
    outputs = session.run(session.upload(package), {"arg0": a, "arg1": b})
    seconds = time.perf_counter() - start
    np.testing.assert_allclose(outputs["result0"], a @ b, rtol=1e-5)
    return seconds


@pytest.mark.parametrize("connections", [
    100, pytest.param(500, marks=pytest.mark.slow)])
def test_idle_and_slow_clients_neither_delay_a_run_nor_add_threads(package, rng, connections):
    process, port = start_server("--workers", str(WORKERS), "--header-timeout", "4")
    try:
        legitimate_run(port, package, rng)  # warm: the run process has started
        threads = process_status(process.pid)["threads"]
        with HostileClients("127.0.0.1", port, idle=connections // 2, slow=connections // 2) as hostile:
            time.sleep(2.0)  # every connection open, the slow ones trickling
            seconds = [legitimate_run(port, package, rng) for _ in range(3)]
            assert max(seconds) < 5.0, seconds
            assert process_status(process.pid)["threads"] == threads
            time.sleep(4.0)  # past the header deadline: every hostile connection was dropped once
            assert hostile.reopened >= connections
            assert legitimate_run(port, package, rng) < 5.0
            assert process_status(process.pid)["threads"] == threads
        assert threads <= WORKERS + 3  # main, the gate, the workers (and the interpreter's own)
    finally:
        stop(process)


def test_heads_have_a_deadline_and_a_size_limit():
    process, port = start_server("--header-timeout", "1")
    try:
        stalled = socket.create_connection(("127.0.0.1", port), timeout=10)
        stalled.sendall(b"GET /info HTTP/1.1\r\n")
        started = time.monotonic()
        assert stalled.recv(100) == b""  # closed by the server, unanswered
        assert 0.5 < time.monotonic() - started < 5
        large = socket.create_connection(("127.0.0.1", port), timeout=10)
        large.sendall(b"GET /info HTTP/1.1\r\nX-Pad: " + b"a" * (70 << 10) + b"\r\n\r\n")
        answer = large.recv(1000)
        assert answer.startswith(b"HTTP/1.1 431") and b"head above 65536 bytes" in answer
    finally:
        stop(process)


def test_failed_authentications_are_rate_limited():
    process, port = start_server("--max-auth-failures", "3")
    try:
        for _ in range(3):
            with pytest.raises(RemoteAuthError, match="key differs"):
                tilecraft.remote.connect("127.0.0.1", port, key="not-the-key")
        for key in ("not-the-key", KEY):  # the right key too: the address is refused for now
            with pytest.raises(RemoteRateLimitError, match=r"3 failed authentications from 127.0.0.1 .*refused for"):
                tilecraft.remote.connect("127.0.0.1", port, key=key)
    finally:
        stop(process)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 and another one (a CA that did not issue it)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (it makes the test certificates)")
    folder = tmp_path_factory.mktemp("tls")
    for name in ("server", "stranger"):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", str(folder / f"{name}.key"), "-out", str(folder / f"{name}.pem")],
                       check=True, capture_output=True)
    return folder


def test_tls_serves_trusted_clients_only(certificates, package, rng, capsys):
    process, port = start_server("--tls-cert", str(certificates / "server.pem"),
                                 "--tls-key", str(certificates / "server.key"))
    try:
        with HostileClients("127.0.0.1", port, idle=20, slow=20):  # stalled before the handshake
            time.sleep(1.5)
            assert legitimate_run(port, package, rng, tls_ca=certificates / "server.pem") < 5.0
        session = tilecraft.remote.connect("127.0.0.1", port, key=KEY, tls_ca=certificates / "server.pem")
        assert session.info()["tls"] is True
        with pytest.raises(RemoteAuthError, match="is not the one --tls-ca trusts: certificate verify failed"):
            tilecraft.remote.connect("127.0.0.1", port, key=KEY, tls_ca=certificates / "stranger.pem")
        with pytest.raises(RemoteConnectionError, match="cannot reach the tilecraft server"):
            tilecraft.remote.connect("127.0.0.1", port, key=KEY, connect_timeout=5)  # plain HTTP
        capsys.readouterr()
        assert run_cli(["run", str(package), "--remote", f"127.0.0.1:{port}", "--key", KEY,
                        "--tls-ca", str(certificates / "server.pem")]) == 0
        assert "result0: float32 [8, 8]" in capsys.readouterr().out
    finally:
        stop(process)


def test_tls_and_connection_options_are_checked(certificates, tmp_path, capsys):
    for arguments, message in (
            (["--tls-key", str(certificates / "server.key")], "--tls-key needs --tls-cert"),
            (["--tls-cert", str(tmp_path / "missing.pem")], "cannot use the TLS certificate"),
            (["--tls-cert", str(certificates / "server.pem"), "--tls-key", str(certificates / "stranger.key")],
             "cannot use the TLS certificate")):
        done = subprocess.run([*SERVER, "--port", "0", "--key", KEY, *arguments],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 1 and message in done.stderr, done.stderr
    for option in ("--workers", "--max-connections", "--header-timeout"):
        with pytest.raises(SystemExit):
            run_cli(["serve", option, "0"])
        assert f"{option} must be positive" in capsys.readouterr().err
    with pytest.raises(tilecraft.errors.RemoteError, match="cannot use .* as the TLS CA"):
        tilecraft.remote.connect("127.0.0.1", 9, tls_ca=tmp_path / "missing.pem")


def test_a_trusting_server_keeps_signed_packages_only(package, tmp_path, rng):
    key = generate_key(tmp_path / "package.key")
    signed = tmp_path / "signed.tar"
    signed.write_bytes(package.read_bytes())
    sign_package(signed, key)
    process, port = start_server("--trust", str(key))
    try:
        session = tilecraft.remote.connect("127.0.0.1", port, key=KEY)
        assert session.info()["signed_packages_only"] is True
        with pytest.raises(PackageSignatureError, match="mm.tar: the package is not signed"):
            session.upload(package)
        assert legitimate_run(port, signed, rng) < 5.0
    finally:
        stop(process)
