"""An emulated device (runtime/emulated.py): ``tilecraft serve --emulate ARCH`` on a free
port runs cross-compiled packages under qemu-user through the C runtime's runner; the
outputs match the host build of the same model; a package for another architecture is
refused at upload; an unknown architecture or a missing emulator is a typed error at start."""

from __future__ import annotations

import argparse
import dataclasses
import shutil
from pathlib import Path

import mlir_text
import numpy as np
import pytest

import tilecraft
import tilecraft.remote
from test_remote import KEY, start_server
from tilecraft.errors import (ArgumentTypeError, ArgumentValueError, OptionError, PackageTargetError,
                              RemoteTimeoutError, ToolchainError)
from tilecraft.runtime import emulated
from tilecraft.runtime import server as server_module
from tilecraft.tools.cli import run_cli

# The triples users type for each emulated architecture (tests/package/test_cross_triples.py).
TRIPLES = {"aarch64": "aarch64-linux-gnu", "armv7l": "armv7l-linux-gnueabihf",
           "riscv64": "riscv64-linux-gnu -mabi=lp64d"}
MODEL = mlir_text.matmul(16, 24, 32)


def _skip_without(arch: str) -> emulated.Emulation:
    chosen = emulated.emulation(arch)
    try:
        chosen.check()
    except ToolchainError as error:
        pytest.skip(f"no emulator for {arch}: {error}")
    return chosen


@pytest.fixture(scope="module")
def host_package(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("host") / "mm.tar"
    tilecraft.compile(MODEL, package_path=path)
    return path


@pytest.fixture(scope="module", params=sorted(TRIPLES))
def device(request, tmp_path_factory) -> tuple[str, int, Path]:
    """(architecture, port of a server emulating it, a package cross-compiled for it)."""
    arch = request.param
    _skip_without(arch)
    package = tmp_path_factory.mktemp(f"cross-{arch}") / "mm.tar"
    try:
        tilecraft.compile(MODEL, target=f"llvm -mtriple={TRIPLES[arch]}", package_path=package)
    except ToolchainError as error:
        pytest.skip(f"no {arch} cross toolchain: {error}")
    process, port = start_server("--emulate", arch, "--timeout", "60")
    yield arch, port, package
    process.terminate()
    process.wait(timeout=30)


@pytest.mark.slow
def test_a_cross_package_runs_on_the_emulated_device_as_the_host_build_does(device, host_package, rng):
    arch, port, package = device
    local_package = tilecraft.runtime.load(host_package)
    inputs = {s.name: rng.random(s.shape).astype(s.dtype) for s in local_package.signature.arguments}
    local = tilecraft.run(local_package, inputs)
    with tilecraft.remote.connect("127.0.0.1", port, key=KEY) as session:
        info = session.info()
        assert info["machine"] == arch and info["emulated"] is True and info["cpu_flags"] == []
        uploaded = session.upload(package)
        outputs = session.run(uploaded, inputs)
        assert list(outputs) == list(local.outputs)
        np.testing.assert_allclose(outputs["result0"], local.outputs["result0"], rtol=1e-5, atol=1e-5)
        timed = session.time(uploaded, inputs, repeat=3, number=2)
        assert len(timed.timing.per_call) == 3 and all(t > 0 for t in timed.timing.per_call)
        # No inputs: the seeded random inputs `tilecraft run` uses, generated from the manifest.
        seeded = session.run(uploaded)
        np.testing.assert_allclose(seeded["result0"], tilecraft.run(local_package).outputs["result0"],
                                   rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_a_host_package_is_refused_by_the_emulated_device(device, host_package):
    arch, port, _ = device
    with tilecraft.remote.connect("127.0.0.1", port, key=KEY) as session:
        with pytest.raises(PackageTargetError, match=rf"this machine is {arch} \(emulated\)"):
            session.upload(host_package)


@pytest.mark.slow
def test_cli_run_remote_on_the_emulated_aarch64_device(device, host_package, tmp_path, capsys, rng):
    arch, port, package = device
    if arch != "aarch64":
        pytest.skip("the command line is checked once")
    inputs = {s.name: rng.random(s.shape).astype(s.dtype)
              for s in tilecraft.runtime.load(host_package).signature.arguments}
    np.savez(tmp_path / "in.npz", **inputs)
    code = run_cli(["run", str(package), "--remote", f"127.0.0.1:{port}", "--key", KEY, "--inputs",
                    str(tmp_path / "in.npz"), "--output", str(tmp_path / "out.npz"), "--print-time", "--repeat", "2"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "uploaded mm.tar" in captured.out and "(aarch64)" in captured.out
    with np.load(tmp_path / "out.npz") as out:
        np.testing.assert_allclose(out["result0"], tilecraft.run(host_package, inputs).outputs["result0"],
                                   rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_bad_inputs_and_a_time_limit_give_typed_errors_and_the_device_serves_on(device, rng):
    """The C runtime's status codes come back as Python's typed errors; a run past the time
    limit is killed (the emulator's whole process group)."""
    arch, port, package = device
    if arch != "aarch64":
        pytest.skip("checked on one architecture")
    with tilecraft.remote.connect("127.0.0.1", port, key=KEY) as session:
        uploaded = session.upload(package)
        good = session.run(uploaded)  # seeded inputs, from the manifest
        names = [f"arg{i}" for i in range(2)]
        shapes = [(16, 32), (32, 24)]
        wrong_shape = {n: rng.random((s[0] + 1, s[1])).astype(np.float32) for n, s in zip(names, shapes)}
        with pytest.raises(ArgumentValueError, match="arg0"):
            session.run(uploaded, wrong_shape)
        with pytest.raises(ArgumentTypeError, match="arg0.*float32"):
            session.run(uploaded, {n: np.zeros(s, np.float64) for n, s in zip(names, shapes)})
        with pytest.raises(ArgumentValueError, match="missing"):
            session.run(uploaded, {"arg0": np.zeros(shapes[0], np.float32)})
        with pytest.raises(RemoteTimeoutError, match="time limit"):
            session.time(uploaded, repeat=1000, min_repeat_ms=1000, timeout=0.5)
        np.testing.assert_array_equal(session.run(uploaded)["result0"], good["result0"])


# ---- refusals at start (no server, no emulator run) --------------------------------------

def _arguments(*argv: str) -> argparse.Namespace:
    return server_module.add_arguments(argparse.ArgumentParser()).parse_args(
        ["--key", KEY, "--host", "127.0.0.1", "--port", "0", *argv])


def test_an_unknown_architecture_is_an_option_error():
    with pytest.raises(OptionError, match="--emulate 'sparc'.*aarch64.*riscv64"):
        server_module.make_server(_arguments("--emulate", "sparc"))


@pytest.mark.parametrize("name, machine", [("arm64", "aarch64"), ("arm", "armv7l"), ("armv7", "armv7l"),
                                           ("RISCV64", "riscv64")])
def test_the_architecture_names_users_type(name, machine):
    assert emulated.emulation(name).machine == machine


def test_a_missing_emulator_names_what_to_install(tmp_path):
    absent = dataclasses.replace(emulated.emulation("aarch64"), qemu="qemu-absent-for-this-test",
                                 sysroot=tmp_path / "no-sysroot")
    with pytest.raises(ToolchainError, match=r"qemu-absent-for-this-test .*sysroot.*make emulators"):
        absent.check()


def test_serve_reports_a_missing_emulator_as_a_one_line_error(monkeypatch, capsys):
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    assert run_cli(["serve", "--key", KEY, "--port", "0", "--emulate", "riscv64"]) == 1
    err = capsys.readouterr().err
    assert "qemu-riscv64" in err and "make emulators" in err and len(err.strip().splitlines()) == 1
