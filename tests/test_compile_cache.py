"""The persistent compile cache (compiler/cache.py) and the compile's progress line
(compiler/progress.py): hits and misses, corrupt entries, concurrent writers, the size
bound, the switches, and the progress output."""

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from tilecraft.compiler import cache as compile_cache
from tilecraft.compiler import progress as compile_progress
from tilecraft.errors import IndexOutOfRangeError, OptionError
from tilecraft.compiler.options import CompileOptions
from tilecraft.runtime.native import cache_dir

REPO = Path(__file__).resolve().parents[1]


def small_cnn(seed: int = 0) -> onnx.ModelProto:
    """A conv + ReLU + classifier net (weights from ``seed``): a few kernels, quick to compile."""
    rng = np.random.default_rng(seed)
    weights = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w"),
               numpy_helper.from_array(rng.standard_normal((8,)).astype(np.float32), "b"),
               numpy_helper.from_array(rng.standard_normal((8 * 4 * 4, 5)).astype(np.float32), "fc")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"]),
             helper.make_node("MatMul", ["f", "fc"], ["y"])]
    graph = helper.make_graph(nodes, "small_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def reference(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(model).run(None, {"x": x})[0]


@pytest.fixture
def cache_folder(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(folder))
    monkeypatch.delenv(compile_cache.SIZE_ENV, raising=False)
    return folder


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "small.onnx"
    onnx.save(small_cnn(), path)
    return path


@pytest.fixture
def x():
    return np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)


def entry_folders(folder: Path) -> list[Path]:
    compiled = folder / "compiled"
    return sorted(p for p in compiled.iterdir() if not p.name.startswith(".")) if compiled.is_dir() else []


def test_second_compile_is_a_hit_with_the_same_results(cache_folder, model_file, x):
    first = tilecraft.compile(str(model_file), cache=True)
    assert first.cache_status == "miss"
    compile_cache.wait_for_stores()  # stored on a thread of its own
    [entry] = entry_folders(cache_folder)
    assert {"entry.json", "model.so", "model.o"} <= {p.name for p in entry.iterdir()}

    second = tilecraft.compile(str(model_file), cache=True)
    assert second.cache_status == "hit"
    assert set(second.compile_seconds) == {"cache"}
    assert second.cached_compile_seconds["jit"] == pytest.approx(first.compile_seconds["jit"])
    expected = reference(small_cnn(), x)
    np.testing.assert_allclose(second(x), expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(second(x), first(x))  # the very same machine code
    # What a compiled module offers is there on a hit too.
    assert second.stages == first.stages and second.ir("schedule") == first.ir("schedule")
    assert second.kernel_count == first.kernel_count and second.signature == first.signature
    dumped = cache_folder / "dumped.o"
    second.dump_object_file(dumped)
    assert dumped.read_bytes()[:4] == b"\x7fELF"
    # A proto with the same bytes (and a module from tilecraft.load) hits the same entry.
    assert tilecraft.compile(small_cnn(), cache=True).cache_status == "hit"
    assert len(entry_folders(cache_folder)) == 1


def test_a_hit_runs_the_run_time_checks(cache_folder, tmp_path):
    """The checks' reporter is linked into the cached library: a failing check still raises."""
    data = helper.make_tensor_value_info("data", TensorProto.FLOAT, [5, 3])
    indices = helper.make_tensor_value_info("i", TensorProto.INT64, ["n"])
    graph = helper.make_graph([helper.make_node("Gather", ["data", "i"], ["y"], name="g", axis=0)], "gather",
                              [data, indices], [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])])
    path = tmp_path / "gather.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    table = np.arange(15, dtype=np.float32).reshape(5, 3)
    tilecraft.compile(str(path), cache=True, specialize_shapes=0)
    hit = tilecraft.compile(str(path), cache=True, specialize_shapes=0)
    assert hit.cache_status == "hit"
    np.testing.assert_array_equal(hit(table, np.array([4, 1])), table[[4, 1]])
    with pytest.raises(IndexOutOfRangeError, match="Gather node 'g': index 7 out of range"):
        hit(table, np.array([0, 7]))
    np.testing.assert_array_equal(hit(table, np.array([2])), table[[2]])  # the report was taken


def test_an_mlir_source_hits_by_its_module(cache_folder):
    text = textwrap.dedent("""
        func.func @add(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
          %e = tensor.empty() : tensor<4xf32>
          %r = linalg.add ins(%a, %b : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
          return %r : tensor<4xf32>
        }""")
    assert tilecraft.compile(text, cache=True).cache_status == "miss"
    hit = tilecraft.compile(text, cache=True)
    assert hit.cache_status == "hit"
    a = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(hit(a, a), 2 * a)


def test_each_changed_input_misses(cache_folder, model_file, tmp_path, monkeypatch):
    tilecraft.compile(str(model_file), cache=True)
    other_weights = tmp_path / "other.onnx"
    onnx.save(small_cnn(seed=1), other_weights)
    assert tilecraft.compile(str(other_weights), cache=True).cache_status == "miss"
    assert tilecraft.compile(str(model_file), cache=True, opt_level=2).cache_status == "miss"
    assert tilecraft.compile(str(model_file), cache=True, fast_math=True).cache_status == "miss"
    compile_cache.wait_for_stores()
    assert len(entry_folders(cache_folder)) == 4

    # The key's other inputs, without compiling: each one changed gives another key.
    digest = "0" * 64
    base = CompileOptions()
    key = compile_cache.cache_key(digest, base)
    assert compile_cache.cache_key(digest, CompileOptions()) == key
    assert compile_cache.cache_key("1" * 64, base) != key
    changed = [CompileOptions(runtime_checks=False), CompileOptions(keep_ir=False), CompileOptions(entry="main"),
               CompileOptions(shape_dict={"x": [2, 3, 8, 8]}), CompileOptions(target="llvm -mcpu=znver4"),
               CompileOptions(offload=["blas"])]
    assert all(compile_cache.cache_key(digest, options) != key for options in changed)
    monkeypatch.setenv("TILECRAFT_NUM_THREADS", "1")  # the target's threads, and a setting
    assert compile_cache.cache_key(digest, CompileOptions()) != key
    monkeypatch.delenv("TILECRAFT_NUM_THREADS")
    monkeypatch.setattr(compile_cache, "__version__", "999.0")
    assert compile_cache.cache_key(digest, base) != key
    monkeypatch.undo()
    monkeypatch.setattr(compile_cache, "_code_digest", lambda: "edited source")
    assert compile_cache.cache_key(digest, base) != key
    monkeypatch.undo()
    monkeypatch.setattr(compile_cache, "_distribution_version", lambda name: "23.0")
    assert compile_cache.cache_key(digest, base) != key


def test_the_code_digest_covers_every_compiler_package():
    """An edit to any module that shapes compiled code misses the cache: the emitters (ir/),
    targets, TOPI and the builder included (ir/ was once left out and an edited emitter
    was served stale code); tests and benchmarks are not code of the compiler."""
    root = Path(compile_cache.__file__).resolve().parent.parent
    names = {str(p.relative_to(root)) for p in compile_cache.code_files()}
    for module in ("ir/conv.py", "ir/reduction.py", "frontend/onnx/ops/nn.py", "pipelines/vector/row_chains.py",
                   "schedule/conv_plan.py", "targets/__init__.py", "topi/__init__.py", "runtime/async_runtime.c",
                   "__init__.py", "errors.py"):
        assert module in names, module
    assert not any(name.startswith(("tests/", "benchmarks/", "examples/", ".venv/")) for name in names)


@pytest.mark.parametrize("damage", ["library", "object", "entry", "truncated"])
def test_a_corrupt_entry_is_recompiled(cache_folder, model_file, x, damage):
    tilecraft.compile(str(model_file), cache=True)
    compile_cache.wait_for_stores()
    [entry] = entry_folders(cache_folder)
    if damage == "library":
        data = bytearray((entry / "model.so").read_bytes())
        data[len(data) // 2] ^= 0xFF
        (entry / "model.so").write_bytes(bytes(data))
    elif damage == "object":
        (entry / "model.o").write_bytes(b"not an object")
    elif damage == "entry":
        (entry / "entry.json").write_text("{ not json")
    else:
        (entry / "model.so").write_bytes((entry / "model.so").read_bytes()[:100])
    again = tilecraft.compile(str(model_file), cache=True)
    assert again.cache_status == "miss"  # detected, deleted, compiled and stored anew
    np.testing.assert_allclose(again(x), reference(small_cnn(), x), rtol=1e-4, atol=1e-4)
    assert tilecraft.compile(str(model_file), cache=True).cache_status == "hit"


@pytest.mark.slow
def test_concurrent_writers_leave_one_good_entry(cache_folder, model_file, x):
    script = textwrap.dedent(f"""
        import numpy as np, tilecraft
        m = tilecraft.compile({str(model_file)!r}, cache=True)
        x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
        np.save({str(cache_folder.parent)!r} + f"/out-{{__import__('os').getpid()}}.npy", m(x))
        print(m.cache_status)
        """)
    environment = {**os.environ, "TILECRAFT_CACHE_DIR": str(cache_folder), "PYTHONPATH": str(REPO.parent)}
    writers = [subprocess.Popen([sys.executable, "-c", script], env=environment, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for _ in range(3)]
    results = [writer.communicate(timeout=600) for writer in writers]
    assert all(writer.returncode == 0 for writer in writers), [err[-2000:] for _, err in results]
    assert len(entry_folders(cache_folder)) == 1
    assert not [p for p in (cache_folder / "compiled").iterdir() if p.name.startswith(".tmp-")]
    expected = reference(small_cnn(), x)
    for output in cache_folder.parent.glob("out-*.npy"):
        np.testing.assert_allclose(np.load(output), expected, rtol=1e-4, atol=1e-4)
    hit = tilecraft.compile(str(model_file), cache=True)
    assert hit.cache_status == "hit"
    np.testing.assert_allclose(hit(x), expected, rtol=1e-4, atol=1e-4)


def _fake_entry(root: Path, name: str, size: int, used: float) -> Path:
    entry = root / "compiled" / name
    entry.mkdir(parents=True)
    (entry / "model.so").write_bytes(b"\0" * size)
    (entry / "entry.json").write_text(json.dumps({"key": name}))
    os.utime(entry / "entry.json", (used, used))
    return entry


def test_the_size_bound_evicts_least_recently_used(cache_folder, model_file, monkeypatch):
    for index, name in enumerate(["oldest", "middle", "newest"]):
        _fake_entry(cache_folder, name, 1000, used=1_000_000 + index)
    assert compile_cache.evict(2500) == 1
    assert [p.name for p in entry_folders(cache_folder)] == ["middle", "newest"]
    # A real store under a bound below one entry's size keeps only what was just used.
    monkeypatch.setenv(compile_cache.SIZE_ENV, "0.001")
    compiled = tilecraft.compile(str(model_file), cache=True)
    assert compiled.cache_status == "miss"
    compile_cache.wait_for_stores()
    assert entry_folders(cache_folder) == []
    monkeypatch.setenv(compile_cache.SIZE_ENV, "a lot")
    with pytest.raises(OptionError, match=compile_cache.SIZE_ENV):
        tilecraft.compile(str(model_file), cache=True)  # refused before compiling


def test_a_hit_refreshes_the_entry_for_eviction(cache_folder, model_file):
    tilecraft.compile(str(model_file), cache=True)
    compile_cache.wait_for_stores()
    [entry] = entry_folders(cache_folder)
    os.utime(entry / "entry.json", (1_000_000, 1_000_000))
    _fake_entry(cache_folder, "other", 10, used=2_000_000)
    assert tilecraft.compile(str(model_file), cache=True).cache_status == "hit"
    compile_cache.evict(compile_cache.entries()[-1][2])  # room for the newest entry only
    assert entry_folders(cache_folder) == [entry]


def test_the_switches(cache_folder, model_file, monkeypatch):
    assert os.environ["TILECRAFT_COMPILE_CACHE"] == "0"  # tests/conftest.py: off by default
    assert tilecraft.compile(str(model_file)).cache_status == "off"
    assert entry_folders(cache_folder) == []
    monkeypatch.setenv("TILECRAFT_COMPILE_CACHE", "1")
    assert tilecraft.compile(str(model_file)).cache_status == "miss"
    assert tilecraft.compile(str(model_file), cache=False).cache_status == "off"
    compile_cache.wait_for_stores()
    assert len(entry_folders(cache_folder)) == 1
    with pytest.raises(OptionError, match="cache"):
        CompileOptions(cache="yes")
    with pytest.raises(OptionError, match="verbose"):
        CompileOptions(verbose=1)


def test_the_cache_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "explicit"
    assert compile_cache.compiled_dir() == tmp_path / "explicit" / "compiled"
    monkeypatch.delenv("TILECRAFT_CACHE_DIR")
    assert cache_dir() == tmp_path / "xdg" / "tilecraft"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == Path.home() / ".cache" / "tilecraft"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_lines_on_a_terminal_only():
    steps = ["graph", "schedule", "jit"]
    terminal = _Terminal()
    shown = compile_progress.CompileProgress("net.onnx", steps, enabled=True, stream=terminal)
    shown.started -= 10  # a slow compile
    shown.step_done("graph")
    shown.step_done("schedule", kernels=12)
    shown.finish()
    text = terminal.getvalue()
    assert "[tilecraft] compiling net.onnx: schedule (1/3 steps done)" in text
    assert "jit (2/3 steps done, 12 kernels)" in text
    assert "done (3/3 steps done, 12 kernels)" in text and text.endswith("\n")

    quick = _Terminal()
    progress = compile_progress.CompileProgress("net.onnx", steps, enabled=True, stream=quick)
    progress.step_done("graph")
    progress.finish()
    assert quick.getvalue() == ""  # under SHOW_AFTER_S: silent
    for stream, enabled in ((io.StringIO(), True), (_Terminal(), False)):
        progress = compile_progress.CompileProgress("net.onnx", steps, enabled=enabled, stream=stream)
        progress.started -= 10
        progress.step_done("graph")
        progress.finish(failed=True)
        assert stream.getvalue() == ""


def test_a_compile_shows_its_stages(model_file, monkeypatch):
    terminal = _Terminal()
    monkeypatch.setattr(compile_progress, "SHOW_AFTER_S", 0.0)
    monkeypatch.setattr(sys, "stderr", terminal)
    tilecraft.compile(str(model_file))
    text = terminal.getvalue()
    assert f"compiling {model_file}: schedule" in text and ": jit (" in text and " kernels)" in text
    assert text.endswith("\n")
    quiet = _Terminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    tilecraft.compile(str(model_file), verbose=False)
    assert quiet.getvalue() == ""


def test_the_command_line_switch():
    from tilecraft.tools.cli import _compile_options, build_parser

    parser = build_parser()
    assert _compile_options(parser.parse_args(["bench", "m.onnx", "--no-cache"])).cache is False
    assert _compile_options(parser.parse_args(["bench", "m.onnx"])).cache is None  # the default: on


def test_every_compile_option_is_keyed_or_left_out_on_purpose():
    """A new CompileOptions field that changes the code must enter the key (a stale entry
    would otherwise serve a build without it): each field is in one list or the other."""
    from dataclasses import fields

    from tilecraft.compiler.cache import KEYED_OPTIONS, UNKEYED_OPTIONS

    names = {f.name for f in fields(tilecraft.CompileOptions)}
    assert names == set(KEYED_OPTIONS) | set(UNKEYED_OPTIONS)
    assert not set(KEYED_OPTIONS) & set(UNKEYED_OPTIONS)


def test_a_hit_exports_a_package(cache_folder, model_file, x, tmp_path):
    """The cache keeps machine code, not IR: export_library on a hit compiles the model again
    (uncached) and writes the package from that."""
    tilecraft.compile(str(model_file), cache=True)
    compile_cache.wait_for_stores()
    hit = tilecraft.compile(str(model_file), cache=True)
    assert hit.cache_status == "hit"
    package = hit.export_library(tmp_path / "model.tar")
    np.testing.assert_allclose(tilecraft.runtime.load_module(package)(x), hit(x), rtol=1e-5, atol=1e-6)
