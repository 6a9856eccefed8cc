"""The C runtime (runtime/c_api) and the deploy examples (examples/deploy), built with the
host C and C++ compilers and run against the Python loader's results.

Every program here is built by the project's own Makefiles, as a user builds them, and
runs in a subprocess: a crash or abort in the C runtime fails the test instead of the
test process. The bad-input driver (probe.c) is built with AddressSanitizer and
UndefinedBehaviorSanitizer where the compiler has them, so a bad package that makes the
runtime read out of bounds or leak fails too, not only one that crashes it.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

from package_archives import MATMUL, read_members, write_members

import tilecraft
from tilecraft.errors import PackageError, PackageSignatureError, PackageTargetError
from tilecraft.runtime.package_signing import sign_package

ROOT = Path(tilecraft.__file__).resolve().parent
RUNTIME = ROOT / "runtime" / "c_api"
DEPLOY = ROOT / "examples" / "deploy"
HERE = Path(__file__).resolve().parent

# Status codes of tilecraft_runtime.h.
OK, IO, PACKAGE, TARGET, SIGNATURE, ARGUMENT_TYPE, ARGUMENT_VALUE, BUFFER_TOO_SMALL = 0, 2, 3, 4, 5, 7, 8, 9
RUNTIME_CHECK, UNSUPPORTED = 10, 6

pytestmark = pytest.mark.skipif(not all(shutil.which(tool) for tool in ("cc", "c++", "make", "nm")),
                                reason="needs the host C and C++ compilers, make and nm")


def _run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=300, **kwargs)


def _load_prepare():
    spec = importlib.util.spec_from_file_location("prepare_digits", DEPLOY / "prepare_digits.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def build(tmp_path_factory) -> Path:
    """The runtime libraries and the examples, by examples/deploy/Makefile (which builds
    the runtime by runtime/c_api/Makefile), then the test drivers against them."""
    directory = tmp_path_factory.mktemp("deploy-build")
    made = _run(["make", "-C", DEPLOY, f"BUILD={directory}"])
    assert made.returncode == 0, made.stderr
    library = directory / "runtime" / "libtilecraft_runtime.a"
    shared = _run(["make", "-C", RUNTIME, f"BUILD={directory / 'runtime'}"])
    assert shared.returncode == 0, shared.stderr
    sanitized = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g"]
    sources = [RUNTIME / name for name in ("tilecraft_runtime.c", "json.c", "sha256.c")]
    probe = _run(["cc", "-O1", *sanitized, f"-I{RUNTIME}", HERE / "probe.c", *sources, "-o", directory / "probe",
                  "-ldl", "-lpthread"])
    if probe.returncode != 0:  # no sanitizer runtime: the plain build still catches crashes
        probe = _run(["cc", "-O1", f"-I{RUNTIME}", HERE / "probe.c", library, "-o", directory / "probe", "-ldl",
                      "-lpthread"])
    assert probe.returncode == 0, probe.stderr
    runner = _run(["cc", "-O1", *sanitized, f"-I{RUNTIME}", HERE / "runner.c", *sources, "-o", directory / "runner",
                   "-ldl", "-lpthread"])
    if runner.returncode != 0:
        runner = _run(["cc", "-O1", f"-I{RUNTIME}", HERE / "runner.c", library, "-o", directory / "runner", "-ldl",
                       "-lpthread"])
    assert runner.returncode == 0, runner.stderr
    threads = _run(["cc", "-O2", "-Wall", "-Wextra", f"-I{RUNTIME}", HERE / "threads.c", library, "-o",
                    directory / "threads", "-ldl", "-lpthread"])
    assert threads.returncode == 0, threads.stderr
    return directory


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> dict[str, Path]:
    """The digits package (dynamic batch) and the held-out split as raw files."""
    return _load_prepare().prepare(tmp_path_factory.mktemp("deploy-digits"))


@pytest.fixture(scope="module")
def python_logits(digits) -> np.ndarray:
    images = np.fromfile(digits["images"], dtype="<f4").reshape(-1, 1, 16, 16)
    return tilecraft.runtime.load(digits["package"])(images)


def _accuracy(stdout: str) -> float:
    match = re.search(r"accuracy: ([0-9.]+)", stdout)
    assert match, stdout
    return float(match.group(1))


@pytest.mark.parametrize("program", ["classify_digits", "classify_digits_cpp"])
def test_examples_classify_the_digits_as_python_does(build, digits, python_logits, program, tmp_path):
    logits_path = tmp_path / "logits.f32"
    result = _run([build / program, digits["package"], digits["images"], digits["labels"], logits_path])
    assert result.returncode == 0, result.stderr
    logits = np.fromfile(logits_path, dtype="<f4").reshape(python_logits.shape)
    labels = np.fromfile(digits["labels"], dtype=np.uint8)
    # The same code on the same inputs; the C example runs batches of 64, Python one of 360.
    np.testing.assert_allclose(logits, python_logits, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(logits.argmax(1), python_logits.argmax(1))
    python_accuracy = float(np.mean(python_logits.argmax(1) == labels))
    assert _accuracy(result.stdout) == pytest.approx(python_accuracy, abs=1e-4)
    assert python_accuracy > 0.9


def test_example_runs_the_extracted_folder_and_the_shared_library(build, digits, python_logits, tmp_path):
    folder = tmp_path / "unpacked"
    folder.mkdir()
    with tarfile.open(digits["package"]) as archive:
        archive.extractall(folder, filter="data")
    # A package path ending in .so: the library alone, its manifest compiled in (what
    # export_library writes), in one compile.
    shared = tmp_path / "digits.so"
    tilecraft.compile(tilecraft.load(_load_prepare().MODEL), target="llvm", package_path=shared, keep_ir=False)
    for package in (folder, shared):
        logits_path = tmp_path / f"{Path(package).name}.f32"
        result = _run([build / "classify_digits", package, digits["images"], digits["labels"], logits_path])
        assert result.returncode == 0, result.stderr
        logits = np.fromfile(logits_path, dtype="<f4").reshape(python_logits.shape)
        np.testing.assert_allclose(logits, python_logits, rtol=1e-5, atol=1e-5)


def test_one_model_from_four_threads_without_mismatch(build, digits):
    result = _run([build / "threads", digits["package"], digits["images"], 4, 60])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "mismatches 0 calls 240 failures 0" in result.stdout


def _probe(build: Path, package: Path, *options: str) -> tuple[int, str]:
    """The status code and message of opening (and, with -s, running) ``package``."""
    result = _run([build / "probe", *options, package])
    assert result.returncode == 0, f"the C runtime crashed or aborted:\n{result.stdout}\n{result.stderr}"
    statuses = [int(line.split()[1]) for line in result.stdout.splitlines() if line.startswith("status ")]
    assert statuses, result.stdout
    failures = [code for code in statuses if code != OK]
    return (failures[0] if failures else OK), result.stdout


def test_lists_inputs_and_outputs_with_dynamic_dims(build, digits):
    status, output = _probe(build, digits["package"])
    assert status == OK
    assert "input input float32 -1 1 16 16" in output
    assert "output logits float32 -1 10" in output


# ---- bad packages: each one an error code, as the Python loader refuses it ----------------

def _edit_manifest(path: Path, target: Path, edit) -> Path:
    members = read_members(path)
    manifest = json.loads(members["manifest.json"])
    edit(manifest)
    members["manifest.json"] = json.dumps(manifest, indent=2).encode()
    return write_members(target, members)


def _truncated(source: Path, target: Path) -> Path:
    data = source.read_bytes()
    target.write_bytes(data[: len(data) // 2])
    return target


def _flipped_library(source: Path, target: Path) -> Path:
    members = read_members(source)
    library = bytearray(members["model.so"])
    library[len(library) // 2] ^= 0xFF
    members["model.so"] = bytes(library)
    return write_members(target, members)


def _extra_member(source: Path, target: Path) -> Path:
    members = read_members(source)
    members["../escape.sh"] = b"#!/bin/sh\n"
    return write_members(target, members)


def _garbage(source: Path, target: Path) -> Path:
    target.write_bytes(b"\x7fELF not a package" * 100)
    return target


def _bad_json(source: Path, target: Path) -> Path:
    members = read_members(source)
    members["manifest.json"] = b"[" * 100000  # deeper than any parser's stack should go
    return write_members(target, members)


def _shape_edit(manifest):
    manifest["inputs"][0]["shape"] = [None, 1, 32, 32]  # hash of model.so still right


def _machine_edit(manifest):
    manifest["machine"] = "aarch64" if os.uname().machine != "aarch64" else "x86_64"
    manifest["target"] = "llvm -mtriple=other"


def _cpu_flag_edit(manifest):
    manifest["required_cpu_flags"] = ["no_such_cpu_feature"]


def _format_edit(manifest):
    manifest["format_version"] = 99


def _listed_member_edit(manifest):
    manifest["sha256"]["libextra.so"] = "0" * 64


BAD_PACKAGES = [
    ("truncated", _truncated, PACKAGE, "truncated", PackageError),
    ("garbage", _garbage, PACKAGE, "not a tilecraft package", PackageError),
    ("tampered library", _flipped_library, PACKAGE, "model.so is corrupted", PackageError),
    ("unexpected member", _extra_member, PACKAGE, "unexpected archive member '../escape.sh'", PackageError),
    ("manifest not json", _bad_json, PACKAGE, "not valid JSON", PackageError),
    ("tampered manifest", lambda s, t: _edit_manifest(s, t, _shape_edit), PACKAGE,
     "does not match the call contract", PackageError),
    ("wrong architecture", lambda s, t: _edit_manifest(s, t, _machine_edit), TARGET, "this machine is",
     PackageTargetError),
    ("missing cpu feature", lambda s, t: _edit_manifest(s, t, _cpu_flag_edit), TARGET,
     "no_such_cpu_feature, which this CPU lacks", PackageTargetError),
    ("format version", lambda s, t: _edit_manifest(s, t, _format_edit), PACKAGE, "package format 99", PackageError),
    # a member the manifest hashes is absent (an archive cut at a member boundary reads as a tar)
    ("incomplete", lambda s, t: _edit_manifest(s, t, _listed_member_edit), PACKAGE,
     "truncated or incomplete: the manifest lists libextra.so", PackageError),
]


@pytest.mark.parametrize("make, status, message, python_error", [case[1:] for case in BAD_PACKAGES],
                         ids=[case[0] for case in BAD_PACKAGES])
def test_bad_packages_give_error_codes_as_python_refuses_them(build, digits, tmp_path, make, status, message,
                                                              python_error):
    bad = make(digits["package"], tmp_path / "bad.tar")
    got, output = _probe(build, bad, "-s", "2,1,16,16")
    assert got == status, output
    assert message in output
    with pytest.raises(python_error):
        tilecraft.runtime.load(bad)


def test_missing_file_is_an_io_error(build, tmp_path):
    status, output = _probe(build, tmp_path / "nowhere.tar")
    assert status == IO and "nowhere.tar" in output


@pytest.mark.parametrize("options, status, message", [
    (["-s", "2,1,16,15"], ARGUMENT_VALUE, "dimension 3 is 15, must be 16"),
    (["-s", "2,1,16"], ARGUMENT_VALUE, "expected rank 4"),
    (["-s", "2,1,16,16", "-t", "int32"], ARGUMENT_TYPE, "expected dtype float32, got int32"),
    (["-s", "2,1,16,16", "-t", "float64"], ARGUMENT_TYPE, "expected dtype float32, got float64"),
    (["-s", "2,1,16,16", "-i", "100"], BUFFER_TOO_SMALL, "needs 2048 bytes, the buffer has 100"),
    (["-s", "2,1,16,16", "-o", "40"], BUFFER_TOO_SMALL, "has shape (2, 10) this call: 80 bytes"),
    (["-s", "-2,1,16,16"], ARGUMENT_VALUE, "negative dimension"),
    (["-s", "0,1,16,16"], OK, "ran: output shape 0 10"),
], ids=["shape", "rank", "int32", "float64", "small input", "small output", "negative", "empty batch"])
def test_bad_arguments_give_error_codes(build, digits, options, status, message):
    got, output = _probe(build, digits["package"], *options)
    assert got == status, output
    assert message in output


# ---- signatures -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def signed(digits, tmp_path_factory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("deploy-signed")
    key, other = directory / "key.hex", directory / "other.hex"
    key.write_text("11" * 32 + "\n")
    other.write_text("22" * 32 + "\n")
    package = directory / "signed.tar"
    shutil.copyfile(digits["package"], package)
    sign_package(package, key)
    return {"key": key, "other": other, "package": package, "unsigned": digits["package"]}


def test_signed_package_opens_with_its_key(build, signed):
    status, output = _probe(build, signed["package"], "-k", signed["key"], "-s", "1,1,16,16")
    assert status == OK and "ran: output shape 1 10" in output, output


def _appended(source: Path, target: Path) -> Path:
    """A member added after signing (tarfile appends it where the end blocks were)."""
    shutil.copyfile(source, target)
    with tarfile.open(target, "a") as archive:
        info = tarfile.TarInfo("libextra.so")
        info.size = 4
        archive.addfile(info, io.BytesIO(b"\0\0\0\0"))
    return target


def _resigned_manifest(source: Path, target: Path) -> Path:
    """The manifest changed after signing, everything else as it was."""
    members = read_members(source)
    members["manifest.json"] = members["manifest.json"].replace(b'"opt_level": 3', b'"opt_level": 2')
    return write_members(target, members)


@pytest.mark.parametrize("case, message", [
    ("other key", "signed with another key"),
    ("unsigned", "the package is not signed"),
    ("member added", "is not the archive's last member"),
    ("manifest changed", "changed after signing"),
    ("bad key file", "has 3 bytes; a key needs at least 16"),
])
def test_signature_failures_give_the_signature_code(build, signed, tmp_path, case, message):
    package, key = signed["package"], signed["key"]
    if case == "other key":
        key = signed["other"]
    elif case == "unsigned":
        package = signed["unsigned"]
    elif case == "member added":
        package = _appended(package, tmp_path / "added.tar")
    elif case == "manifest changed":
        package = _resigned_manifest(package, tmp_path / "changed.tar")
    elif case == "bad key file":
        key = tmp_path / "short.key"
        key.write_bytes(b"abc")
    status, output = _probe(build, package, "-k", key)
    assert status == SIGNATURE, output
    assert message in output
    with pytest.raises(PackageSignatureError):
        tilecraft.runtime.load(package, trust=key)


def test_runtime_library_exports_only_its_api(build):
    """The shared library exports the tilecraft_* functions of the header and nothing of its
    JSON or SHA-256 code, which a host program may well define itself."""
    result = _run(["nm", "-D", "--defined-only", build / "runtime" / "libtilecraft_runtime.so"])
    assert result.returncode == 0, result.stderr
    exported = {line.split()[-1] for line in result.stdout.splitlines() if " T " in line}
    header = (RUNTIME / "tilecraft_runtime.h").read_text()
    declared = set(re.findall(r"\b(tilecraft_[a-z_]+)\(", header))
    assert exported == declared


def test_a_failed_runtime_check_is_an_error_code_with_its_message(build, tmp_path):
    """A Gather of constant rows at an index out of range: the package's own check fires
    (docs/robustness.md) and the C runtime turns it into a status and the check's message,
    as the Python loader raises IndexOutOfRangeError."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Gather", ["data", "idx"], ["y"], name="g")], "gather",
        [helper.make_tensor_value_info("idx", TensorProto.INT64, ["n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])],
        initializer=[helper.make_tensor("data", TensorProto.FLOAT, [5, 3], np.arange(15, dtype=np.float32))])
    path = tmp_path / "gather.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    package = tmp_path / "gather.tar"
    tilecraft.compile(tilecraft.load(path), package_path=package, keep_ir=False)
    status, output = _probe(build, package, "-s", "2", "-f", "4")
    assert status == OK and "ran: output shape 2 3" in output, output
    status, output = _probe(build, package, "-s", "2", "-f", "9")
    assert status == RUNTIME_CHECK, output
    assert "index check failed: Gather node 'g': index 9 out of range for axis 0 of size 5" in output


def test_runtime_cross_builds_for_aarch64(tmp_path):
    """The runtime is portable C: its Makefile builds it with a cross compiler (zig's, from
    the ``cross`` extra), checked by the ELF header's machine field (183: AArch64)."""
    if importlib.util.find_spec("ziglang") is None:
        pytest.skip("needs the ziglang wheel (pip install -e '.[cross]')")
    compiler = tmp_path / "aarch64-cc"
    compiler.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m ziglang cc -target aarch64-linux-gnu "$@"\n')
    archiver = tmp_path / "ar"
    archiver.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m ziglang ar "$@"\n')
    compiler.chmod(0o755)
    archiver.chmod(0o755)
    made = _run(["make", "-C", RUNTIME, f"CC={compiler}", f"AR={archiver}", f"BUILD={tmp_path / 'build'}"])
    assert made.returncode == 0, made.stderr
    header = (tmp_path / "build" / "libtilecraft_runtime.so").read_bytes()[:20]
    assert header[:4] == b"\x7fELF" and header[4] == 2  # 64-bit
    assert int.from_bytes(header[18:20], "little") == 183


@pytest.fixture(scope="module")
def several(tmp_path_factory) -> Path:
    """A package of two inputs (their first dims tied: an Add of both) and four outputs of
    three dtypes and ranks 2, 2, 0 and 2, the last an int32 Cast."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["sum"], name="add"),
         helper.make_node("Mul", ["a", "b"], ["product"], name="mul"),
         helper.make_node("ReduceSum", ["a"], ["total"], name="total", keepdims=0),
         helper.make_node("Cast", ["b"], ["rounded"], name="cast", to=TensorProto.INT32)], "several",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["n", 3]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, ["n", 3])],
        [helper.make_tensor_value_info("sum", TensorProto.FLOAT, ["n", 3]),
         helper.make_tensor_value_info("product", TensorProto.FLOAT, ["n", 3]),
         helper.make_tensor_value_info("total", TensorProto.FLOAT, []),
         helper.make_tensor_value_info("rounded", TensorProto.INT32, ["n", 3])])
    directory = tmp_path_factory.mktemp("deploy-several")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), directory / "several.onnx")
    package = directory / "several.tar"
    tilecraft.compile(tilecraft.load(directory / "several.onnx"), package_path=package, keep_ir=False)
    return package


def _run_raw(build: Path, package: Path, directory: Path, arrays, *options: str) -> tuple[str, list]:
    """Run ``package`` on ``arrays`` with runner.c; its stdout and the outputs it wrote."""
    specs = []
    for index, array in enumerate(arrays):
        path = directory / f"input{index}.bin"
        array.tofile(path)
        specs.append(f"{path}:{','.join(str(d) for d in array.shape)}")
    result = _run([build / "runner", *options, package, directory, *specs])
    assert result.returncode == 0, f"the C runtime crashed or aborted:\n{result.stdout}\n{result.stderr}"
    return result.stdout, sorted(directory.glob("output*.bin"))


def test_several_inputs_and_outputs_match_python_after_growing_the_buffers(build, several, tmp_path):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 3)).astype(np.float32)
    b = (rng.standard_normal((5, 3)) * 10).astype(np.float32)
    expected = tilecraft.runtime.load(several)(a, b)
    stdout, files = _run_raw(build, several, tmp_path, [a, b])
    # 16 bytes of room at first: the dynamic outputs do not fit, run says which shape they
    # have, and the second call fits (docs/deploy.md).
    assert "retries 1" in stdout, stdout
    assert "output 0 5 3\noutput 1 5 3\noutput 2\noutput 3 5 3" in stdout, stdout
    for want, path in zip(expected, files):
        got = np.fromfile(path, dtype=want.dtype).reshape(want.shape)
        np.testing.assert_array_equal(got, want)


def test_dims_that_must_agree_are_checked_before_the_call(build, several, tmp_path):
    a, b = np.zeros((2, 3), np.float32), np.zeros((3, 3), np.float32)
    stdout, _ = _run_raw(build, several, tmp_path, [a, b], "-r", "4096")
    assert f"status {ARGUMENT_VALUE} " in stdout, stdout
    assert "argument 'b': got shape (3, 3) (dimension 0 is 3; it must equal dimension 0 of argument 'a' (2))" in stdout


# ---- fuzzing: manifests of the wrong types, and mutated archives ---------------------------

MANIFEST_EDITS = {
    "inputs not objects": lambda m: m.update(inputs=[1, 2]),
    "shape of strings": lambda m: m["inputs"][0].update(shape=["n", "1"]),
    "negative dim": lambda m: m["inputs"][0].update(shape=[-3, 1, 16, 16]),
    "rank 40": lambda m: m["inputs"][0].update(shape=[1] * 40),
    "dtype object": lambda m: m["inputs"][0].update(dtype="object"),
    "scalar input": lambda m: m["inputs"][0].update(shape=None),
    "hash not a string": lambda m: m["sha256"].update({"model.so": 5}),
    "symbol a list": lambda m: m.update(symbol=["_mlir_ciface_main"]),
    "equal dims out of range": lambda m: m.update(equal_dims=[{"members": [[0, 99], [0, 0]], "size": None}]),
    "equal dims of strings": lambda m: m.update(equal_dims=[{"members": [["a", "b"]], "size": "x"}]),
    "checks not strings": lambda m: m.update(runtime_checks=[1, 2]),
    "libraries of numbers": lambda m: m.update(libraries={"system": [1], "bundled": [2]}),
    "missing bundled library": lambda m: m.update(libraries={"system": [], "bundled": ["libgone.so"]}),
    "no manifest fields": lambda m: [m.pop(k) for k in list(m) if k not in ("format", "format_version")],
    "manifest a list": None,
}


@pytest.mark.parametrize("edit", list(MANIFEST_EDITS), ids=list(MANIFEST_EDITS))
def test_manifests_of_the_wrong_types_are_refused_without_a_crash(build, digits, tmp_path, edit):
    members = read_members(digits["package"])
    if MANIFEST_EDITS[edit] is None:
        members["manifest.json"] = b'["tilecraft-package"]'
    else:
        manifest = json.loads(members["manifest.json"])
        MANIFEST_EDITS[edit](manifest)
        members["manifest.json"] = json.dumps(manifest).encode()
    status, output = _probe(build, write_members(tmp_path / "bad.tar", members), "-s", "2,1,16,16")
    assert status in (PACKAGE, UNSUPPORTED), output


def test_mutated_archives_never_crash_the_runtime(build, digits, tmp_path):
    """Bytes flipped in the tar headers and the manifest, anywhere, and cuts at random
    lengths: each one opens or fails with a status (the sanitized probe catches a bad read)."""
    original = digits["package"].read_bytes()
    manifest_end = 1024 + len(read_members(digits["package"])["manifest.json"]) + 1024
    rng = np.random.default_rng(46)
    statuses = set()
    for case in range(36):
        data = bytearray(original)
        if case % 3 == 0:
            data = data[: int(rng.integers(1, len(data)))]
        else:
            limit = manifest_end if case % 3 == 1 else len(data)
            for _ in range(int(rng.integers(1, 4))):
                data[int(rng.integers(0, limit))] ^= 1 << int(rng.integers(0, 8))
        path = tmp_path / f"mutant{case}.tar"
        path.write_bytes(bytes(data))
        status, _ = _probe(build, path)
        statuses.add(status)
    assert statuses <= {OK, PACKAGE, TARGET}, statuses
    assert PACKAGE in statuses


AARCH64_SYSROOT = Path("/usr/aarch64-linux-gnu")


@pytest.mark.slow
def test_an_aarch64_package_runs_through_the_aarch64_runtime_under_qemu(tmp_path):
    """The whole deploy path on another architecture: a package compiled for AArch64 (two
    threads planned: its parallel loops run on the package's async runtime), the runtime
    and runner.c cross-compiled, run under qemu-aarch64, checked against numpy."""
    from tilecraft.compiler.package import c_compiler
    from tilecraft.errors import ToolchainError

    qemu = shutil.which("qemu-aarch64")
    if qemu is None or not (AARCH64_SYSROOT / "lib" / "libc.so.6").exists():
        pytest.skip("needs Debian's qemu-user and libc6-arm64-cross")
    target = tilecraft.Target(mtriple="aarch64-linux-gnu", num_threads=2)
    try:
        compiler = c_compiler(target)
    except ToolchainError as error:
        pytest.skip(f"no AArch64 cross toolchain: {error}")
    package = tmp_path / "mm.tar"
    tilecraft.compile(MATMUL, target=target, package_path=package)
    runner = tmp_path / "runner-aarch64"
    sources = [RUNTIME / name for name in ("tilecraft_runtime.c", "json.c", "sha256.c")]
    built = _run([*compiler, "-O2", "-std=c11", f"-I{RUNTIME}", HERE / "runner.c", *sources, "-o", runner, "-ldl",
                  "-lpthread"])
    assert built.returncode == 0, built.stderr
    rng = np.random.default_rng(1)
    a = rng.standard_normal((96, 128)).astype(np.float32)
    b = rng.standard_normal((128, 80)).astype(np.float32)
    specs = []
    for index, array in enumerate((a, b)):
        array.tofile(tmp_path / f"input{index}.bin")
        specs.append(f"{tmp_path / f'input{index}.bin'}:{','.join(map(str, array.shape))}")
    result = _run([qemu, "-L", AARCH64_SYSROOT, runner, "-r", str(96 * 80 * 4), package, tmp_path, *specs],
                  env={**os.environ, "TMPDIR": str(tmp_path)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "retries 0\noutput 0 96 80" in result.stdout, result.stdout
    got = np.fromfile(tmp_path / "output0.bin", dtype=np.float32).reshape(96, 80)
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)
