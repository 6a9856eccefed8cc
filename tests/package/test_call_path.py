"""The per-call path of packages and JIT'ed modules (runtime/memref.py's CallFrame): reused
frames for well-formed calls, the full checks for everything else, results owned once.

No timings here: what is checked is which path a call takes (the number of times the full
check ``EntrySignature.bind`` runs, the number of frames made) and that every bad input is
still refused with its typed error after warm calls took the reused frames."""

from __future__ import annotations

import threading

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilecraft  # noqa: E402
from tilecraft.errors import ArgumentTypeError, ArgumentValueError, ResourceLimitError  # noqa: E402
from tilecraft.runtime import memref  # noqa: E402
from tilecraft.runtime.signature import EntrySignature  # noqa: E402

SHAPE = [1, 16]


def _model(inputs: int, outputs: int) -> "onnx.ModelProto":
    """``y{i} = x{2i} + x{2i+1}`` for ``outputs`` pairs of [1, 16] f32 inputs."""
    ins = [helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, SHAPE) for i in range(inputs)]
    outs = [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, SHAPE) for i in range(outputs)]
    nodes = [helper.make_node("Add", [f"x{2 * i}", f"x{2 * i + 1}"], [f"y{i}"]) for i in range(outputs)]
    return helper.make_model(helper.make_graph(nodes, "adds", ins, outs),
                             opset_imports=[helper.make_opsetid("", 17)])


def _twice_model() -> "onnx.ModelProto":
    """One sum returned as two outputs (an Identity of it): one buffer, two results."""
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, SHAPE) for n in ("a", "b")]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, SHAPE) for n in ("s", "t")]
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Identity", ["s"], ["t"])]
    return helper.make_model(helper.make_graph(nodes, "twice", ins, outs),
                             opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    """The one-Add and the eight-input, four-output package, loaded, and the JIT'ed
    eight-input module."""
    folder = tmp_path_factory.mktemp("calls")
    loaded = {}
    for name, model in (("add", _model(2, 1)), ("multi", _model(8, 4)), ("twice", _twice_model())):
        path = folder / f"{name}.tar"
        tilecraft.compile(tilecraft.load(model), package_path=path)
        loaded[name] = tilecraft.runtime.load(path)
    loaded["jit"] = tilecraft.compile(tilecraft.load(_model(8, 4)))
    return loaded


@pytest.fixture
def binds(monkeypatch):
    """How many calls took the full path (``EntrySignature.bind``)."""
    count = [0]
    original = EntrySignature.bind

    def counting(self, args, kwargs):
        count[0] += 1
        return original(self, args, kwargs)

    monkeypatch.setattr(EntrySignature, "bind", counting)
    return count


class _Subclass(np.ndarray):
    """An ndarray subclass: accepted, through the full check."""


def _inputs(count: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(SHAPE).astype(np.float32) for _ in range(count)]


def test_the_array_data_pointer_is_read_in_place_here():
    """On CPython the fast path exists (else every test below only tests the full path)."""
    assert memref._DATA_FIELD is not None
    x = np.arange(10, dtype=np.float32)[3:]
    assert memref._read_pointer(id(x) + memref._DATA_FIELD).value == x.ctypes.data


@pytest.mark.parametrize("patch", ["numpy 3", "free-threaded", "pypy"])
def test_an_unknown_layout_takes_the_public_path(monkeypatch, patch):
    """Where the version check does not know the array layout, no in-place read: ``None``."""
    if patch == "numpy 3":
        monkeypatch.setattr(memref.np, "__version__", "3.0.0")
    elif patch == "free-threaded":
        monkeypatch.setattr(memref.sysconfig, "get_config_var",
                            lambda name: 1 if name == "Py_GIL_DISABLED" else None)
    else:
        monkeypatch.setattr(memref.sys, "implementation", type("Implementation", (), {"name": "pypy"})())
    assert memref._data_field_offset() is None


def test_without_the_in_place_read_every_call_takes_the_full_path_and_is_right(monkeypatch, binds):
    monkeypatch.setattr(memref, "_DATA_FIELD", None)
    module = tilecraft.compile(tilecraft.load(_model(2, 1)))
    x = _inputs(2)
    for _ in range(3):
        np.testing.assert_array_equal(module(*x), x[0] + x[1])
    assert binds[0] == 3


@pytest.mark.parametrize("name", ["multi", "jit"])
def test_well_formed_calls_reuse_one_frame_and_skip_the_full_check(packages, binds, name):
    module = packages[name]
    xs = _inputs(8)
    names = [f"x{i}" for i in range(8)]
    expected = tuple(xs[2 * i] + xs[2 * i + 1] for i in range(4))
    for call in range(20):
        results = module(*xs) if call % 2 else module(**dict(zip(names, xs)))
        for got, want in zip(results, expected):
            np.testing.assert_array_equal(got, want)
    assert binds[0] == 0
    assert len(module._frame._spare if name != "jit" else module._function._frame._spare) == 1


def test_results_are_fresh_writable_arrays_that_outlive_the_frame(packages):
    add = packages["add"]
    x, y = _inputs(2)
    first = add(x, y)
    second = add(y, y)
    assert first.flags.writeable and first.flags.c_contiguous and first.shape == tuple(SHAPE)
    assert not np.shares_memory(first, second)
    first += 1  # the caller owns it: writing it changes nothing else
    np.testing.assert_array_equal(add(x, y), x + y)
    np.testing.assert_array_equal(first, x + y + 1)
    np.testing.assert_array_equal(second, y + y)
    view = add(x, y)[0, 4:]
    np.testing.assert_array_equal(view, (x + y)[0, 4:])  # the block lives as long as a view of it


def test_one_buffer_returned_twice_is_owned_once(packages):
    twice = packages["twice"]
    a, b = _inputs(2)
    for _ in range(50):  # a double free would abort the process
        s, t = twice(a, b)
        np.testing.assert_array_equal(s, a + b)
        np.testing.assert_array_equal(t, a + b)
        assert not np.shares_memory(s, t)


def test_results_that_are_an_input_or_a_constant_are_the_caller_s_own(tmp_path):
    """An Identity of the input and one of a weight, beside a sum: each result a fresh
    array the caller may write, on the reused frames of the package and of the JIT."""
    table = np.arange(16, dtype=np.float32).reshape(SHAPE)
    nodes = [helper.make_node("Identity", ["x"], ["same"]), helper.make_node("Identity", ["c"], ["const"]),
             helper.make_node("Add", ["x", "c"], ["sum"])]
    graph = helper.make_graph(
        nodes, "aliases", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, SHAPE) for n in ("same", "const", "sum")],
        [numpy_helper.from_array(table, "c")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    tilecraft.compile(tilecraft.load(model), package_path=tmp_path / "aliases.tar")
    x = _inputs(1)[0]
    for module in (tilecraft.runtime.load(tmp_path / "aliases.tar"), tilecraft.compile(tilecraft.load(model))):
        for _ in range(20):
            same, const, total = module(x)
            assert not np.shares_memory(same, x)
            np.testing.assert_array_equal(same, x)
            np.testing.assert_array_equal(const, table)
            np.testing.assert_array_equal(total, x + table)
            same += 1  # written by the caller: the next call's results are unchanged
            const += 1


@pytest.mark.parametrize("name", ["add", "jit"])
def test_every_bad_input_is_refused_after_warm_calls(packages, binds, name):
    """Good and bad calls alternate, so each bad one meets a frame reused by a good one."""
    module = packages[name]
    count = 2 if name == "add" else 8
    xs = _inputs(count)
    good = xs[0] + xs[1]
    first = lambda results: results if name == "add" else results[0]  # noqa: E731
    x = xs[0]
    rest = xs[1:]
    bad_calls = [
        (ArgumentTypeError, "dtype", lambda: module(x.astype(np.float64), *rest)),
        (ArgumentTypeError, "dtype", lambda: module(x.astype(">f4"), *rest)),
        (ArgumentValueError, "shape", lambda: module(np.zeros((1, 8), np.float32), *rest)),
        (ArgumentValueError, "rank", lambda: module(x.reshape(16), *rest)),
        (ArgumentValueError, "rank", lambda: module(x.reshape(1, 1, 16), *rest)),
        (ArgumentValueError, "takes|missing", lambda: module(*rest)),
        (ArgumentValueError, "takes", lambda: module(x, *rest, x)),
        (ArgumentTypeError, "numpy array", lambda: module(list(x), *rest)),
        (ArgumentTypeError, "numpy array", lambda: module(float(x[0, 0]), *rest)),
        (ArgumentTypeError, "no argument", lambda: module(**{"x0": x, "nope": x},
                                                             **{f"x{i}": v for i, v in enumerate(rest, 1)})),
        (ArgumentTypeError, "given twice", lambda: module(x, *rest[:-1], x0=x)),
    ]
    for error, message, call in bad_calls:
        np.testing.assert_array_equal(first(module(*xs)), good)
        before = binds[0]
        with pytest.raises(error, match=message):
            call()
        assert binds[0] == before + 1  # refused by the full check, not by native code
    np.testing.assert_array_equal(first(module(*xs)), good)


@pytest.mark.parametrize("name", ["add", "jit"])
def test_views_and_odd_arrays_take_the_full_path_and_stay_correct(packages, binds, name):
    """A strided view, a C-ordered array with other strides, an unaligned view and an
    ndarray subclass are not what the frame expects: the full path copies or accepts them.
    A read-only array is (inputs are never written)."""
    module = packages[name]
    count = 2 if name == "add" else 8
    xs = _inputs(count)
    first = lambda results: results if name == "add" else results[0]  # noqa: E731
    x = xs[0]
    strided = np.repeat(x, 2, axis=1)[:, ::2]
    # C-ordered by numpy's rule (a dim of extent 1 has any stride), not by its strides
    odd_strides = np.lib.stride_tricks.as_strided(x, shape=x.shape, strides=(4, 4))
    assert odd_strides.flags.c_contiguous
    raw = np.zeros(16 * 4 + 1, np.uint8)
    unaligned = raw[1:].view(np.float32).reshape(SHAPE)
    unaligned[...] = x
    readonly = x.copy()
    readonly.flags.writeable = False
    subclass = x.view(_Subclass)
    for odd in (strided, odd_strides, unaligned, readonly, subclass):
        before = binds[0]
        got = first(module(odd, *xs[1:]))
        np.testing.assert_array_equal(np.asarray(got), x + xs[1])
        fast = odd is readonly  # a read-only array of the right layout is fine as is
        assert binds[0] == before + (0 if fast else 1)


def test_output_memory_budget_is_checked_on_the_reused_frames(packages, monkeypatch):
    add = packages["add"]
    x, y = _inputs(2)
    np.testing.assert_array_equal(add(x, y), x + y)
    monkeypatch.setenv("TILECRAFT_MEMORY_BUDGET", "32")  # the [1, 16] f32 output is 64 bytes
    with pytest.raises(ResourceLimitError, match="output 'y0'"):
        add(x, y)
    monkeypatch.delenv("TILECRAFT_MEMORY_BUDGET")
    np.testing.assert_array_equal(add(x, y), x + y)


def test_threads_calling_at_once_each_get_their_own_frame(packages):
    multi = packages["multi"]
    failures = []

    def worker(seed: int) -> None:
        xs = _inputs(8, seed)
        expected = [xs[2 * i] + xs[2 * i + 1] for i in range(4)]
        for _ in range(300):
            for got, want in zip(multi(*xs), expected):
                if not np.array_equal(got, want):
                    failures.append(seed)
                    return

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert 1 <= len(multi._frame._spare) <= len(threads)
