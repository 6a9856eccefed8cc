"""Remote runs: the server (runtime/server.py) in a subprocess on a free port, sessions
(tilecraft.remote), `tilecraft run --remote`, the tuner's remote runner, and the refusals:
wrong key, tampered or foreign package, oversized upload, crashing and hanging packages,
bad addresses."""

from __future__ import annotations

import http.client
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import mlir_text
import numpy as np
import pytest

import tilecraft
import tilecraft.remote
from tilecraft.errors import (PackageError, PackageTargetError, RemoteAddressError, RemoteAuthError,
                              RemoteConnectionError, RemoteLimitError, RemoteRunError,
                              RemoteTimeoutError)
from tilecraft.runtime import rpc
from tilecraft.tools.cli import run_cli

KEY = "test-key-0123456789"
MATRIX = "memref<?x?xf32>"
BAD_C = r"""
#include <stdint.h>
typedef struct { float *allocated, *aligned; int64_t offset, sizes[2], strides[2]; } M2;
void crash(M2 *x, M2 *out) { volatile int *p = 0; *p = 1; }
void hang(M2 *x, M2 *out) { for (volatile int64_t i = 0; ; ++i) {} }
"""


SERVER = (sys.executable, "-m", "tilecraft.runtime.server")


def start_server(*arguments: str, key: str | None = KEY, entry=SERVER) -> tuple[subprocess.Popen, int]:
    """``python -m tilecraft.runtime.server`` (or ``entry``) on a free port; returns the
    process and port."""
    environment = {k: v for k, v in os.environ.items() if k != rpc.KEY_ENVIRONMENT}
    command = [*entry, "--host", "127.0.0.1", "--port", "0", *(("--key", key) if key else ()), *arguments]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=environment)
    line = process.stdout.readline()
    if "listening on" not in line:
        process.kill()
        raise AssertionError(f"the server did not start: {line}{process.stderr.read()}")
    return process, int(line.split("listening on ")[1].split()[0].rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def server():
    process, port = start_server("--timeout", "20", "--max-upload", "64M")
    yield port
    process.terminate()
    process.wait(timeout=30)


@pytest.fixture(scope="module")
def packages(tmp_path_factory) -> dict[str, Path]:
    """A matmul package; packages whose extern segfaults or never returns."""
    folder = tmp_path_factory.mktemp("packages")
    paths = {"mm": folder / "mm.tar"}
    tilecraft.compile(mlir_text.matmul(16, 24, 32), package_path=paths["mm"])
    (folder / "bad.c").write_text(BAD_C)
    library = folder / "libbad.so"
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", str(folder / "bad.c"), "-o", str(library)], check=True)
    for name in ("crash", "hang"):
        tilecraft.extern.register_c(name, library, inputs=[MATRIX], outputs=[MATRIX])
        try:
            source = f"""
            func.func private @{name}(tensor<4x4xf32>) -> tensor<4x4xf32>
            func.func @main(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {{
              %r = func.call @{name}(%x) : (tensor<4x4xf32>) -> tensor<4x4xf32>
              return %r : tensor<4x4xf32>
            }}"""
            paths[name] = folder / f"{name}.tar"
            tilecraft.compile(source, package_path=paths[name])
        finally:
            tilecraft.extern.unregister(name)
    return paths


def inputs_of(path: Path, rng) -> dict[str, np.ndarray]:
    package = tilecraft.runtime.load(path)
    return {s.name: rng.random(s.shape).astype(s.dtype) for s in package.signature.arguments}


def rewrite_member(source: Path, target: Path, name: str, change) -> Path:
    """A copy of the package ``source`` with member ``name`` replaced by ``change(bytes)``."""
    with tarfile.open(source) as archive:
        members = [(m, archive.extractfile(m).read()) for m in archive.getmembers()]
    with tarfile.open(target, "w") as archive:
        for member, data in members:
            data = change(data) if member.name == name else data
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
    return target


# ---- the server -------------------------------------------------------------------------

def test_upload_run_and_time_match_the_local_run(server, packages, rng):
    inputs = inputs_of(packages["mm"], rng)
    local = tilecraft.run(packages["mm"], inputs)
    with tilecraft.remote.connect("127.0.0.1", server, key=KEY) as session:
        assert session.info()["machine"] in ("x86_64", "aarch64")
        package = session.upload(packages["mm"])
        outputs = session.run(package, inputs)
        assert list(outputs) == list(local.outputs)
        for name in outputs:
            np.testing.assert_array_equal(outputs[name], local.outputs[name])
        timed = session.time(package, inputs, repeat=4, number=2)
        assert len(timed.timing.per_call) == 4 and all(t > 0 for t in timed.timing.per_call)
        assert "median (ms)" in timed.format_times()
        np.testing.assert_array_equal(timed.outputs["result0"], local.outputs["result0"])


def test_wrong_or_missing_key_is_refused(server):
    with pytest.raises(RemoteAuthError, match="key differs"):
        tilecraft.remote.connect(f"127.0.0.1:{server}", key="not-the-key")
    with pytest.raises(RemoteAuthError, match="not signed"):
        tilecraft.remote.connect(f"remote://127.0.0.1:{server}", key=None)


def test_a_replayed_request_is_refused(server):
    headers = rpc.sign(KEY.encode(), "GET", "/info", b"")
    for expected in (200, 401):
        connection = http.client.HTTPConnection("127.0.0.1", server, timeout=10)
        connection.request("GET", "/info", headers=headers)
        response = connection.getresponse()
        body = response.read()
        connection.close()
        assert response.status == expected, body
    assert json.loads(body)["error"] == "RemoteAuthError" and b"replayed" in body


def test_a_body_other_than_the_signed_one_is_refused(server, packages):
    path = "/upload?name=mm.tar"
    body = packages["mm"].read_bytes()
    headers = rpc.sign(KEY.encode(), "POST", path, body)
    connection = http.client.HTTPConnection("127.0.0.1", server, timeout=10)
    connection.request("POST", path, body=body[:-1] + bytes([body[-1] ^ 1]), headers=headers)
    response = connection.getresponse()
    answer = json.loads(response.read())
    connection.close()
    assert response.status == 401 and answer["error"] == "RemoteAuthError", answer
    assert "not the one its signature covers" in answer["message"]


def test_answers_are_signed_and_an_altered_answer_is_refused(server):
    headers = rpc.sign(KEY.encode(), "GET", "/info", b"")
    connection = http.client.HTTPConnection("127.0.0.1", server, timeout=10)
    connection.request("GET", "/info", headers=headers)
    response = connection.getresponse()
    body, given = response.read(), response.getheader(rpc.SIGNATURE_HEADER)
    connection.close()
    rpc.check_answer(KEY.encode(), headers, 200, body, given, "server")  # genuine: accepted
    altered = body.replace(b'"protocol"', b'"protocoL"')
    for answer, signature in ((altered, given), (body, None), (body, "0" * 64)):
        with pytest.raises(RemoteAuthError, match="answer is not signed with the shared key"):
            rpc.check_answer(KEY.encode(), headers, 200, answer, signature, "server")


def test_tampered_foreign_and_non_packages_are_refused(server, packages, tmp_path):
    session = tilecraft.remote.connect("127.0.0.1", server, key=KEY)
    flipped = rewrite_member(packages["mm"], tmp_path / "tampered.tar", "model.so",
                             lambda data: data[:-100] + bytes([data[-100] ^ 1]) + data[-99:])
    with pytest.raises(PackageError, match=r"tampered.tar: model.so is corrupted"):
        session.upload(flipped)

    def other_machine(data: bytes) -> bytes:
        manifest = json.loads(data)
        manifest["machine"] = "riscv64" if manifest["machine"] != "riscv64" else "x86_64"
        return json.dumps(manifest).encode()

    foreign = rewrite_member(packages["mm"], tmp_path / "foreign.tar", "manifest.json", other_machine)
    with pytest.raises(PackageTargetError, match=r"\(riscv64\); this machine is (x86_64|aarch64)"):
        session.upload(foreign)
    (tmp_path / "notes.txt").write_text("not a package")
    with pytest.raises(PackageError, match="notes.txt: not a tilecraft package"):
        session.upload(tmp_path / "notes.txt")
    with pytest.raises(PackageError, match="no such package file"):
        session.upload(tmp_path / "missing.tar")
    with pytest.raises(PackageError, match="upload it first"):
        session.run(tilecraft.remote.RemotePackage("0" * 64, "never.tar"))


def test_an_oversized_upload_is_refused_before_it_is_read(server, packages):
    # What the server does itself (a client that skips the size check), signed, unsigned, or
    # with made-up signature headers (checked before the body is read, which never comes):
    path = "/upload?name=huge.tar"
    forged = {h: v[:-1] + ("0" if v[-1] != "0" else "1") if h == rpc.SIGNATURE_HEADER else v
              for h, v in rpc.sign(KEY.encode(), "POST", path, b"").items()}
    for headers, status, error, message in (
            (rpc.sign(KEY.encode(), "POST", path, b""), 413, "RemoteLimitError", "above the server's limit of 67108864"),
            ({}, 401, "RemoteAuthError", "the request is not signed"),
            (forged, 401, "RemoteAuthError", "signature is wrong")):
        connection = http.client.HTTPConnection("127.0.0.1", server, timeout=10)
        connection.putrequest("POST", path)
        connection.putheader("Content-Length", str(1 << 40))
        for header, value in headers.items():
            connection.putheader(header, value)
        connection.endheaders()  # and no body: the answer comes before it would be read
        response = connection.getresponse()
        body = json.loads(response.read())
        connection.close()
        assert response.status == status and body["error"] == error and message in body["message"], body
    # The session checks the server's limit first:
    small, port = start_server("--max-upload", "1K")
    try:
        with pytest.raises(RemoteLimitError, match="above the server's upload limit of 1024"):
            tilecraft.remote.connect("127.0.0.1", port, key=KEY).upload(packages["mm"])
    finally:
        small.terminate()
        small.wait(timeout=30)


def test_the_server_survives_crashing_and_hanging_packages(server, packages, rng):
    session = tilecraft.remote.connect("127.0.0.1", server, key=KEY)
    with pytest.raises(RemoteRunError, match="died of SIGSEGV"):
        session.run(session.upload(packages["crash"]))
    with pytest.raises(RemoteTimeoutError, match="time limit of 2 s"):
        session.run(session.upload(packages["hang"]), timeout=2)
    inputs = inputs_of(packages["mm"], rng)
    outputs = session.run(packages["mm"], inputs)  # a path: uploaded first
    np.testing.assert_array_equal(outputs["result0"], tilecraft.run(packages["mm"], inputs).outputs["result0"])


def test_the_server_needs_a_key_or_an_explicit_opt_out():
    environment = {k: v for k, v in os.environ.items() if k != rpc.KEY_ENVIRONMENT}
    done = subprocess.run([sys.executable, "-m", "tilecraft.runtime.server", "--port", "0"],
                          capture_output=True, text=True, timeout=60, env=environment)
    assert done.returncode == 1 and "no key: pass --key or set TILECRAFT_RPC_KEY" in done.stderr
    process, port = start_server("--insecure-no-key", key=None)
    try:
        assert tilecraft.remote.connect("127.0.0.1", port).info()["protocol"] == rpc.PROTOCOL_VERSION
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    assert "without a key" in stderr


@pytest.mark.parametrize("address, error, message", [
    ("device", RemoteAddressError, "not a server address: expected HOST:PORT"),
    ("device:99999", RemoteAddressError, "port 99999 is outside 1-65535"),
    ("http://device:80", RemoteAddressError, "not a server address"),
    ("127.0.0.1:1", RemoteConnectionError, "cannot reach the tilecraft server at 127.0.0.1:1"),
    ("no-such-host.invalid:9090", RemoteConnectionError, "cannot reach the tilecraft server at no-such-host"),
])
def test_bad_addresses_are_typed_errors(address, error, message):
    with pytest.raises(error, match=message):
        tilecraft.remote.connect(address, key=KEY, connect_timeout=5)


# ---- the local session ------------------------------------------------------------------

def test_local_session_runs_like_the_server(packages, rng):
    inputs = inputs_of(packages["mm"], rng)
    with tilecraft.remote.LocalSession(timeout=20) as session:
        package = session.upload(packages["mm"])
        result = session.time(package, inputs, repeat=3)
        np.testing.assert_array_equal(result.outputs["result0"],
                                      tilecraft.run(packages["mm"], inputs).outputs["result0"])
        assert len(result.timing.per_call) == 3
        with pytest.raises(RemoteRunError, match="SIGSEGV"):
            session.run(packages["crash"])
        waiting = session._executor._waiting  # the waiting run process dies while idle:
        waiting.kill()
        waiting.wait()
        assert session.run(package, inputs)["result0"].shape == (16, 24)  # a fresh one runs
        with pytest.raises(tilecraft.ArgumentTypeError, match="array of Python objects cannot be sent"):
            session.run(package, {"arg0": np.array([None, 1], dtype=object)})
    with tilecraft.remote.LocalSession(max_upload=1000) as session:
        with pytest.raises(RemoteLimitError, match="above the server's limit of 1000"):
            session.upload(packages["mm"])


def test_a_run_past_the_memory_limit_is_a_typed_error(tmp_path):
    big = tmp_path / "big.tar"  # a 512 MiB result under a 256 MiB limit
    tilecraft.compile("""
    func.func @big(%x: tensor<4xf32>) -> tensor<8192x16384xf32> {
      %one = arith.constant 1.0 : f32
      %e = tensor.empty() : tensor<8192x16384xf32>
      %f = linalg.fill ins(%one : f32) outs(%e : tensor<8192x16384xf32>) -> tensor<8192x16384xf32>
      return %f : tensor<8192x16384xf32>
    }""", package_path=big)
    with tilecraft.remote.LocalSession(memory_limit=256 << 20) as session:
        with pytest.raises(RemoteRunError, match="limit of 268435456 bytes"):
            session.run(big)


# ---- the command line -------------------------------------------------------------------

def test_cli_run_remote_prints_the_time_table(server, packages, tmp_path, capsys, rng):
    inputs = inputs_of(packages["mm"], rng)
    np.savez(tmp_path / "in.npz", **inputs)
    code = run_cli(["run", str(packages["mm"]), "--remote", f"127.0.0.1:{server}", "--key", KEY,
                    "--inputs", str(tmp_path / "in.npz"), "--output", str(tmp_path / "out.npz"),
                    "--print-time", "--repeat", "3"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "uploaded mm.tar" in captured.out
    assert "Execution time summary:" in captured.out and "median (ms)" in captured.out
    with np.load(tmp_path / "out.npz") as out:
        np.testing.assert_array_equal(out["result0"], tilecraft.run(packages["mm"], inputs).outputs["result0"])


@pytest.mark.parametrize("remote, message", [
    ("nowhere", "not a server address"),
    ("127.0.0.1:1", "cannot reach the tilecraft server"),
])
def test_cli_run_remote_errors_are_one_line(packages, capsys, remote, message):
    assert run_cli(["run", str(packages["mm"]), "--remote", remote, "--key", KEY]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tilecraft: error: ") and message in err and len(err.strip().splitlines()) == 1


def test_cli_run_remote_refuses_a_non_package(server, tmp_path, capsys):
    (tmp_path / "x.tar").write_bytes(b"\0" * 10)
    assert run_cli(["run", str(tmp_path / "x.tar"), "--remote", f"127.0.0.1:{server}", "--key", KEY]) == 1
    assert "x.tar: not a tilecraft package" in capsys.readouterr().err


# ---- the tuner --------------------------------------------------------------------------

MATMUL_32 = """
func.func @mm(%a: tensor<32x64xf32>, %b: tensor<64x32xf32>) -> tensor<32x32xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<32x32xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<32x32xf32>) -> tensor<32x32xf32>
  %c = linalg.matmul ins(%a, %b : tensor<32x64xf32>, tensor<64x32xf32>)
                     outs(%init : tensor<32x32xf32>) -> tensor<32x32xf32>
  return %c : tensor<32x32xf32>
}
"""


def test_tuning_with_the_remote_runner_records_device_times(server, tmp_path):
    records = tmp_path / "remote.jsonl"
    result = tilecraft.tune(MATMUL_32, "llvm", trials=3, tuning_records=records, tuner="random",
                            timeout=120, batch_size=2, validate_top=0, progress=False,
                            remote=f"remote://127.0.0.1:{server}", remote_key=KEY)
    lines = tilecraft.tuning.load_records(records, target="llvm")
    assert len(lines) == 3 and lines[0].tuner == "default" and lines[0].ok
    assert all(r.ok for r in lines), [r.error for r in lines if not r.ok]
    assert result.tasks[0].best_gflops > 0 and result.default_seconds is None  # no local end-to-end


def test_the_remote_runner_needs_a_reachable_server(tmp_path):
    with pytest.raises(RemoteAddressError):
        tilecraft.tune(MATMUL_32, "llvm", trials=1, tuning_records=tmp_path / "r.jsonl", remote="nowhere")
    with pytest.raises(RemoteConnectionError, match="127.0.0.1:1"):
        tilecraft.tune(MATMUL_32, "llvm", trials=1, tuning_records=tmp_path / "r.jsonl",
                       remote="127.0.0.1:1", progress=False)


def test_tilecraft_serve_is_the_same_server(packages, rng):
    process, port = start_server(entry=(sys.executable, "-m", "tilecraft.tools.cli", "serve"))
    try:
        inputs = inputs_of(packages["mm"], rng)
        outputs = tilecraft.remote.connect("127.0.0.1", port, key=KEY).run(packages["mm"], inputs)
        np.testing.assert_array_equal(outputs["result0"], tilecraft.run(packages["mm"], inputs).outputs["result0"])
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_cli_serve_and_tune_runner_arguments(tmp_path, capsys):
    environment_key = os.environ.pop(rpc.KEY_ENVIRONMENT, None)
    try:
        assert run_cli(["serve", "--port", "0"]) == 1
        assert "no key: pass --key" in capsys.readouterr().err
    finally:
        if environment_key is not None:
            os.environ[rpc.KEY_ENVIRONMENT] = environment_key
    (tmp_path / "mm.mlir").write_text(MATMUL_32)
    assert run_cli(["tune", str(tmp_path / "mm.mlir"), "-o", str(tmp_path / "r.jsonl"),
                    "--runner", "remote:/nowhere"]) == 1
    assert "not a server address" in capsys.readouterr().err


# ---- runtime only, other machines -------------------------------------------------------

SITE = """
import importlib.abc, os, sys
with open(os.environ["TILECRAFT_TEST_LOG"], "a") as log:
    log.write(f"runtime-only process {os.getpid()}\\n")

class NoCompiler(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("mlir", "onnx", "torch") or name.startswith(
                ("tilecraft.compiler", "tilecraft.pipelines", "tilecraft.frontend")):
            with open(os.environ["TILECRAFT_TEST_LOG"], "a") as log:
                log.write(f"blocked {name}\\n")
            raise ImportError(f"{name} is blocked on this runtime-only device")
        return None

sys.meta_path.insert(0, NoCompiler())
"""


def test_the_server_runs_with_the_runtime_only(packages, tmp_path, rng, monkeypatch):
    """The server and the child that runs a package import neither MLIR nor the compiler
    (a sitecustomize on the path blocks them in both processes and logs each process)."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SITE)
    log = tmp_path / "imports.log"
    monkeypatch.setenv("TILECRAFT_TEST_LOG", str(log))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (str(tmp_path / "site"), os.environ.get("PYTHONPATH")) if p))
    process, port = start_server()
    try:
        inputs = inputs_of(packages["mm"], rng)
        outputs = tilecraft.remote.connect("127.0.0.1", port, key=KEY).run(packages["mm"], inputs)
        np.testing.assert_array_equal(outputs["result0"], tilecraft.run(packages["mm"], inputs).outputs["result0"])
    finally:
        process.terminate()
        process.wait(timeout=30)
    lines = log.read_text().splitlines()
    assert sum(line.startswith("runtime-only process") for line in lines) >= 2  # server + child
    assert not [line for line in lines if line.startswith("blocked")], lines


def test_a_cross_compiled_package_is_refused_naming_both_architectures(server, tmp_path):
    from tilecraft.compiler.package import c_compiler
    from tilecraft.errors import ToolchainError

    other = "x86_64" if tilecraft.runtime.package.normalized_machine(os.uname().machine) == "aarch64" else "aarch64"
    target = f"llvm -mtriple={other}-linux-gnu"
    try:
        c_compiler(tilecraft.Target.parse(target))
    except ToolchainError as error:
        pytest.skip(f"no {other} cross toolchain: {error}")
    path = tmp_path / f"mm-{other}.tar"
    tilecraft.compile(MATMUL_32, target=target, package_path=path)
    session = tilecraft.remote.connect("127.0.0.1", server, key=KEY)
    with pytest.raises(PackageTargetError, match=rf"built for target '{target}' \({other}\); this machine is "):
        session.upload(path)
