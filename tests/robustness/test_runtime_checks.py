"""Run-time checks in generated code (issue 17, class 3; docs/robustness.md, "Run-time
checks"): out-of-range indices, dynamic dims that disagree through reshapes and slices, and
huge dynamic allocations raise a typed error from the JIT and from a package run in a fresh
process, never garbage of the declared shape."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper
from onnx.reference import ReferenceEvaluator

import tilecraft
from tilecraft.errors import (
    AllocationLimitError,
    IndexOutOfRangeError,
    ResourceLimitError,
    RuntimeCheckError,
    ShapeMismatchError,
)


def _model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "m", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _info(name, element, shape):
    return helper.make_tensor_value_info(name, element, shape)


def gather_model(op="Gather", **attributes):
    return _model([helper.make_node(op, ["data", "idx"], ["y"], name="g", **attributes)],
                  [_info("data", T.FLOAT, [5, 3]), _info("idx", T.INT64, ["n", 3] if op != "Gather" else ["n"])],
                  [_info("y", T.FLOAT, ["n", 3])])


def reshape_model():
    """x: [N] reshaped to [-1, 2], added to y: [M, 2]: needs N even and N / 2 == M."""
    return _model([helper.make_node("Reshape", ["x", "s"], ["r"], name="r"),
                   helper.make_node("Add", ["r", "y"], ["z"], name="add")],
                  [_info("x", T.FLOAT, ["N"]), _info("y", T.FLOAT, ["M", 2])],
                  [_info("z", T.FLOAT, ["K", 2])],
                  [helper.make_tensor("s", T.INT64, [2], [-1, 2])])


def slice_model():
    """x[1:] + y: needs len(x) - 1 == len(y)."""
    return _model([helper.make_node("Slice", ["x", "starts", "ends"], ["s"], name="sl"),
                   helper.make_node("Add", ["s", "y"], ["z"], name="add")],
                  [_info("x", T.FLOAT, ["N"]), _info("y", T.FLOAT, ["M"])],
                  [_info("z", T.FLOAT, ["K"])],
                  [helper.make_tensor("starts", T.INT64, [1], [1]),
                   helper.make_tensor("ends", T.INT64, [1], [1 << 62])])


def fill_model():
    """A ConstantOfShape whose shape is an input, summed: its buffer size is known per call."""
    return _model([helper.make_node("ConstantOfShape", ["shape"], ["c"], name="fill",
                                    value=helper.make_tensor("v", T.FLOAT, [1], [1.0])),
                   helper.make_node("ReduceSum", ["c"], ["z"], name="sum", keepdims=0)],
                  [_info("shape", T.INT64, [2])], [_info("z", T.FLOAT, [])])


DATA = np.arange(15, dtype=np.float32).reshape(5, 3)


@pytest.fixture(scope="module")
def gather():
    return tilecraft.compile(gather_model())


def test_gather_in_range_matches_onnx(gather):
    idx = np.array([0, 4, -1, -5])
    np.testing.assert_array_equal(gather(DATA, idx), DATA[idx])


@pytest.mark.parametrize("bad", [5, 7, -6, 1 << 40])
def test_gather_index_out_of_range_raises(gather, bad):
    with pytest.raises(IndexOutOfRangeError, match=rf"Gather node 'g': index {bad} out of range for axis 0 of size 5"):
        gather(DATA, np.array([0, bad, 1]))
    np.testing.assert_array_equal(gather(DATA, np.array([1])), DATA[[1]])  # the status was cleared


def test_the_error_family():
    assert issubclass(IndexOutOfRangeError, RuntimeCheckError) and issubclass(IndexOutOfRangeError, IndexError)
    assert issubclass(ShapeMismatchError, ValueError)
    assert issubclass(AllocationLimitError, ResourceLimitError)


def _scatter_nd_model():
    return _model([helper.make_node("ScatterND", ["data", "idx", "upd"], ["y"], name="s")],
                  [_info("data", T.FLOAT, [5, 3]), _info("idx", T.INT64, ["n", 1]), _info("upd", T.FLOAT, ["n", 3])],
                  [_info("y", T.FLOAT, [5, 3])])


def _scatter_elements_model():
    return _model([helper.make_node("ScatterElements", ["data", "idx", "upd"], ["y"], name="s", axis=1)],
                  [_info("data", T.FLOAT, [5, 3]), _info("idx", T.INT64, ["n", 2]), _info("upd", T.FLOAT, ["n", 2])],
                  [_info("y", T.FLOAT, [5, 3])])


CASES = {
    # name: (model, good inputs, bad inputs, message fragment)
    "GatherElements": (lambda: gather_model("GatherElements", axis=0),
                       [DATA, np.array([[0, 1, -1]])], [DATA, np.array([[0, 5, 1]])], "index 5 out of range for axis 0 of size 5"),
    "GatherND": (lambda: _model([helper.make_node("GatherND", ["data", "idx"], ["y"], name="g")],
                                [_info("data", T.FLOAT, [5, 3]), _info("idx", T.INT64, ["n", 2])],
                                [_info("y", T.FLOAT, ["n"])]),
                 [DATA, np.array([[4, 2], [-1, -3]])], [DATA, np.array([[4, 2], [0, 3]])], "index 3 out of range for axis 1 of size 3"),
    "ScatterND": (_scatter_nd_model, [DATA, np.array([[1], [-1]]), np.ones((2, 3), np.float32)],
                  [DATA, np.array([[1], [-6]]), np.ones((2, 3), np.float32)], "index -6 out of range for axis 0 of size 5"),
    "ScatterElements": (_scatter_elements_model,
                        [DATA, np.array([[0, 2]]), np.ones((1, 2), np.float32)],
                        [DATA, np.array([[0, 3]]), np.ones((1, 2), np.float32)], "index 3 out of range for axis 1 of size 3"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_indexing_ops_check_their_indices(name):
    make, good, bad, message = CASES[name]
    model = make()
    compiled = tilecraft.compile(model)
    (expected,) = ReferenceEvaluator(model).run(None, dict(zip([i.name for i in model.graph.input], good)))
    np.testing.assert_allclose(compiled(*good), expected)
    with pytest.raises(IndexOutOfRangeError, match=message):
        compiled(*bad)


# Extents the gather's or scatter's loop runs over while it reads or writes another operand:
# without a check these read (GatherElements, ScatterND's indices) or write (the scatters'
# data) outside a buffer. name: (model, good inputs, bad inputs, message fragment).
EXTENT_CASES = {
    "GatherElements": (
        lambda: _model([helper.make_node("GatherElements", ["data", "idx"], ["y"], name="g", axis=1)],
                       [_info("data", T.FLOAT, ["r", 3]), _info("idx", T.INT64, ["n", 2])],
                       [_info("y", T.FLOAT, ["n", 2])]),
        [DATA, np.zeros((5, 2), np.int64)], [DATA, np.zeros((9, 2), np.int64)],
        "GatherElements node 'g': the indices have size 9 along axis 0, more than the data's 5"),
    "ScatterND updates": (
        lambda: _model([helper.make_node("ScatterND", ["data", "idx", "upd"], ["y"], name="s")],
                       [_info("data", T.FLOAT, [5, 3]), _info("idx", T.INT64, ["n", 1]),
                        _info("upd", T.FLOAT, ["m", 3])], [_info("y", T.FLOAT, [5, 3])]),
        [DATA, np.array([[1], [3]]), np.ones((2, 3), np.float32)],
        [DATA, np.array([[1]]), np.ones((4, 3), np.float32)],
        "ScatterND node 's': the updates have size 4 along axis 0 where the indices and the data need 1"),
    "ScatterElements updates": (
        lambda: _model([helper.make_node("ScatterElements", ["data", "idx", "upd"], ["y"], name="s", axis=1)],
                       [_info("data", T.FLOAT, [5, 3]), _info("idx", T.INT64, ["n", 2]),
                        _info("upd", T.FLOAT, ["m", 2])], [_info("y", T.FLOAT, [5, 3])]),
        [DATA, np.array([[0, 2]]), np.ones((1, 2), np.float32)],
        [DATA, np.array([[0, 2]]), np.ones((3, 2), np.float32)],
        "ScatterElements node 's': the updates have size 3 along axis 0 where the indices have 1"),
    "ScatterElements indices": (
        lambda: _model([helper.make_node("ScatterElements", ["data", "idx", "upd"], ["y"], name="s", axis=1)],
                       [_info("data", T.FLOAT, ["r", 3]), _info("idx", T.INT64, ["n", 2]),
                        _info("upd", T.FLOAT, ["n", 2])], [_info("y", T.FLOAT, ["r", 3])]),
        [DATA, np.array([[0, 2]] * 5), np.ones((5, 2), np.float32)],
        [DATA, np.array([[0, 2]] * 7), np.ones((7, 2), np.float32)],
        "ScatterElements node 's': the indices have size 7 along axis 0, more than the data's 5"),
    "GatherND batch": (
        lambda: _model([helper.make_node("GatherND", ["data", "idx"], ["y"], name="g", batch_dims=1)],
                       [_info("data", T.FLOAT, ["b", 3]), _info("idx", T.INT64, ["c", 1])],
                       [_info("y", T.FLOAT, ["c"])]),
        [DATA, np.array([[0], [2], [1], [0], [2]])], [DATA, np.zeros((8, 1), np.int64)],
        "GatherND node 'g': the indices have size 8 along batch axis 0 where the data has 5"),
    "Concat": (
        lambda: _model([helper.make_node("Concat", ["a", "b"], ["y"], name="c", axis=0)],
                       [_info("a", T.FLOAT, ["n", "m"]), _info("b", T.FLOAT, ["k", "j"])],
                       [_info("y", T.FLOAT, ["z", "m"])]),
        [DATA, np.ones((2, 3), np.float32)], [DATA[:, :2], np.ones((2, 3), np.float32)],
        "Concat node 'c': operand 1 has size 3 along axis 1 where operand 0 has 2"),
}


@pytest.mark.parametrize("name", sorted(EXTENT_CASES))
def test_gathers_scatters_and_concat_check_the_extents_their_loops_run_over(name):
    make, good, bad, message = EXTENT_CASES[name]
    model = make()
    compiled = tilecraft.compile(model)
    (expected,) = ReferenceEvaluator(model).run(None, dict(zip([i.name for i in model.graph.input], good)))
    np.testing.assert_allclose(compiled(*good), expected)
    with pytest.raises(ShapeMismatchError, match=message):
        compiled(*bad)


def test_static_scatter_extents_that_disagree_are_import_errors():
    model = _model([helper.make_node("ScatterND", ["data", "idx", "upd"], ["y"], name="s")],
                   [_info("data", T.FLOAT, [5, 3]), _info("idx", T.INT64, [2, 1]), _info("upd", T.FLOAT, [3, 3])],
                   [_info("y", T.FLOAT, [5, 3])])
    with pytest.raises(tilecraft.errors.ModelImportError, match="the updates have size 3 along axis 0"):
        tilecraft.compile(model)


def _expand_model(x_shape, shape_length=1, constant_shape=None):
    """Expand of ``x`` to a shape that is an input (or, with ``constant_shape``, an initializer)."""
    rank = max(len(x_shape), shape_length)
    model = _model([helper.make_node("Expand", ["x", "shape"], ["y"], name="e")],
                   [_info("x", T.FLOAT, x_shape), _info("shape", T.INT64, [shape_length])],
                   [_info("y", T.FLOAT, [f"d{i}" for i in range(rank)])])
    if constant_shape is not None:
        model.graph.initializer.append(helper.make_tensor("shape", T.INT64, [len(constant_shape)], constant_shape))
        del model.graph.input[1]
    model.ir_version = 8  # one onnxruntime reads
    return model


# (x's declared shape, x's actual shape, the run-time target shape). onnxruntime raises
# where the target does not broadcast with x (sizes equal, or one of them 1); tilecraft
# returned x unchanged there (issue 17). An input dim known only at run time is not
# broadcast: 1 expanded to 4 there is refused too, where onnxruntime gives 4 rows.
EXPAND_CASES = [
    ([6], (6,), [4]), ([6], (6,), [12]), ([6], (6,), [6]), ([6], (6,), [1]),
    (["n"], (6,), [4]), (["n"], (6,), [6]), (["n"], (6,), [1]),
    ([2, 1], (2, 1), [2, 3]), ([2, 1], (2, 1), [3, 3]), ([2, 1], (2, 1), [1, 5]), ([2, 1], (2, 1), [2, 0]),
    ([3], (3,), [2, 3]), ([3], (3,), [2, 1]), ([3], (3,), [2, 2]), ([2, 3], (2, 3), [3]),
]


@pytest.mark.parametrize("declared, actual, target", EXPAND_CASES)
def test_expand_to_a_run_time_shape_that_does_not_broadcast_raises_like_onnxruntime(declared, actual, target):
    onnxruntime = pytest.importorskip("onnxruntime")
    model = _expand_model(declared, len(target))
    x = np.arange(np.prod(actual), dtype=np.float32).reshape(actual)
    shape = np.array(target, np.int64)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    compiled = tilecraft.compile(model)
    try:
        (expected,) = session.run(None, {"x": x, "shape": shape})
    except Exception:  # noqa: BLE001  (onnxruntime: "invalid expand shape")
        with pytest.raises(ShapeMismatchError, match=r"Expand node 'e': the shape has \d+ along axis \d+"):
            compiled(x, shape)
        return
    got = compiled(x, shape)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def test_expand_of_a_run_time_input_dim_to_a_constant_shape_is_checked():
    compiled = tilecraft.compile(_expand_model(["n"], constant_shape=[4]))
    np.testing.assert_array_equal(compiled(np.arange(4, dtype=np.float32)), np.arange(4, dtype=np.float32))
    with pytest.raises(ShapeMismatchError, match="Expand node 'e': the shape has 4 along axis 0 where the input has 6"):
        compiled(np.arange(6, dtype=np.float32))


@pytest.mark.parametrize("declared, target, message", [
    ([6], [4], "has 4 along axis 0, which does not broadcast with the input's 6"),
    ([6], [12], "has 12 along axis 0"),
    ([2, 3], [3, 3], "has 3 along axis 0, which does not broadcast with the input's 2"),
    ([3], [2, 2], "has 2 along axis 1, which does not broadcast with the input's 3"),
])
def test_expand_to_a_constant_shape_that_does_not_broadcast_is_an_import_error(declared, target, message):
    with pytest.raises(tilecraft.errors.ModelImportError, match=rf"node 'e' \(Expand, opset 17\): the shape {message}"):
        tilecraft.compile(_expand_model(declared, constant_shape=target))


EXPAND_FRESH_PROCESS = textwrap.dedent("""
    import sys
    import numpy as np
    import tilecraft.runtime as rt
    p = rt.load(sys.argv[1])
    x = np.arange(6, dtype=np.float32)
    for target in ([6], [1], [4], [12]):
        try:
            print(p(x, np.array(target, np.int64)).tolist())
        except Exception as error:
            print(type(error).__name__, error)
""")


def test_expand_package_run_in_a_fresh_process_raises(tmp_path):
    package = tmp_path / "expand.tar"
    tilecraft.compile(_expand_model([6]), package_path=package)
    script = tmp_path / "run.py"
    script.write_text(EXPAND_FRESH_PROCESS)
    completed = subprocess.run([sys.executable, str(script), str(package)], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == [
        "[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]",
        "[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]",
        "ShapeMismatchError Expand node 'e': the shape has 4 along axis 0, which does not broadcast with the input's 6",
        "ShapeMismatchError Expand node 'e': the shape has 12 along axis 0, which does not broadcast with the input's 6",
    ]


def _range_model(element=T.INT64):
    return _model([helper.make_node("Range", ["a", "b", "d"], ["y"], name="rg")],
                  [_info("a", element, []), _info("b", element, []), _info("d", element, [])],
                  [_info("y", element, ["m"])])


def test_range_with_a_run_time_delta_of_zero_raises_instead_of_dying_of_sigfpe(tmp_path):
    """The count's integer division by a delta of 0 killed the process (SIGFPE); in a
    subprocess so that a regression fails this test, not the whole run."""
    script = tmp_path / "range.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np
        sys.path.insert(0, sys.argv[1])
        import tilecraft
        from onnx import TensorProto
        from test_runtime_checks import _range_model
        for element, dtype in ((TensorProto.INT64, np.int64), (TensorProto.FLOAT, np.float32)):
            compiled = tilecraft.compile(_range_model(element))
            print(compiled(dtype(1), dtype(7), dtype(2)).tolist())
            for start, limit, delta in ((0, 5, 0), (0, -(1 << 63), -1) if dtype is np.int64 else (0, np.inf, 1)):
                try:
                    compiled(dtype(start), dtype(limit), dtype(delta))
                    print("no error")
                except tilecraft.errors.RuntimeCheckError as error:
                    print(type(error).__name__, error)
    """))
    import os

    completed = subprocess.run([sys.executable, str(script), os.path.dirname(__file__)],
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-2000:]
    lines = completed.stdout.splitlines()
    assert lines[0] == "[1, 3, 5]" and lines[3] == "[1.0, 3.0, 5.0]"
    for line in (lines[1], lines[4]):
        assert line == "ShapeMismatchError Range node 'rg': a delta of 0 never ends the range"
    for line in (lines[2], lines[5]):  # counts of 2^63 and of infinity
        assert line.startswith("AllocationLimitError Range node 'rg'")


def test_range_with_a_constant_delta_of_zero_is_an_import_error():
    model = _range_model()
    model.graph.initializer.append(helper.make_tensor("d", T.INT64, [], [0]))
    with pytest.raises(tilecraft.errors.ModelImportError, match="delta of 0 never ends"):
        tilecraft.compile(model)


def test_reshape_with_inconsistent_dynamic_dims_raises():
    compiled = tilecraft.compile(reshape_model())
    np.testing.assert_array_equal(compiled(np.arange(6, dtype=np.float32), np.ones((3, 2), np.float32)),
                                  np.arange(6, dtype=np.float32).reshape(3, 2) + 1)
    with pytest.raises(ShapeMismatchError, match="Reshape node 'r': a tensor of 5 elements is reshaped into a shape of 4"):
        compiled(np.arange(5, dtype=np.float32), np.ones((3, 2), np.float32))
    with pytest.raises(ShapeMismatchError, match="Add node 'add': operand 1 has size 4 along axis 0 where operand 0 has 3"):
        compiled(np.arange(6, dtype=np.float32), np.ones((4, 2), np.float32))


def test_slice_with_inconsistent_dynamic_dims_raises():
    compiled = tilecraft.compile(slice_model())
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(compiled(x, np.ones(4, np.float32)), x[1:] + 1)
    with pytest.raises(ShapeMismatchError, match="Add node 'add'"):
        compiled(x, np.ones(9, np.float32))


def test_huge_dynamic_allocation_raises_instead_of_calling_malloc():
    compiled = tilecraft.compile(fill_model())
    assert compiled(np.array([3, 4])) == 12
    with pytest.raises(AllocationLimitError, match=r"Fill|fill.*needs 4398046511104 bytes"):
        compiled(np.array([1 << 20, 1 << 20]))
    with pytest.raises(AllocationLimitError, match="needs -1 bytes"):  # overflows int64
        compiled(np.array([1 << 40, 1 << 40]))
    with pytest.raises(AllocationLimitError):
        compiled(np.array([-5, 3]))
    assert compiled(np.array([2, 2])) == 4


def test_allocation_limit_is_read_at_compile_time(monkeypatch):
    monkeypatch.setenv("TILECRAFT_MAX_TENSOR", "1K")
    compiled = tilecraft.compile(fill_model())
    monkeypatch.delenv("TILECRAFT_MAX_TENSOR")
    assert compiled(np.array([16, 16])) == 256  # 1 KiB exactly
    with pytest.raises(AllocationLimitError, match="allows 1024"):
        compiled(np.array([16, 17]))


def test_checks_off_compiles_them_out(gather):
    unchecked = tilecraft.compile(gather_model(), runtime_checks=False)
    assert "tilecraft_check_failed" not in unchecked.ir("llvm")
    assert "tilecraft_check_failed" in gather.ir("llvm")
    # Without checks a bad index is clamped: wrong, but inside the buffer.
    np.testing.assert_array_equal(unchecked(DATA, np.array([7])), DATA[[4]])


def test_static_models_carry_no_checks():
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_info("x", T.FLOAT, [4, 8])], [_info("y", T.FLOAT, [4, 8])])
    assert "tilecraft_check_failed" not in tilecraft.compile(model).ir("llvm")


def test_option_type_is_checked():
    with pytest.raises(tilecraft.errors.OptionError):
        tilecraft.compile(gather_model(), runtime_checks="yes")


FRESH_PROCESS = textwrap.dedent("""
    import sys
    import numpy as np
    import tilecraft.runtime as rt
    p = rt.load(sys.argv[1])
    data = np.arange(15, dtype=np.float32).reshape(5, 3)
    ok = p(data, np.array([0, -1]), np.arange(6, dtype=np.float32), np.ones((3, 2), np.float32), np.array([3, 4]))
    print("ok", ok[0].tolist(), float(ok[2]))
    bad = [
        (np.array([0, 9]), 6, 3, [3, 4]),
        (np.array([0, -1]), 5, 3, [3, 4]),
        (np.array([0, -1]), 6, 3, [1 << 20, 1 << 20]),
    ]
    for idx, n, m, shape in bad:
        try:
            p(data, idx, np.arange(n, dtype=np.float32), np.ones((m, 2), np.float32), np.array(shape))
            print("no error")
        except Exception as error:
            print(type(error).__name__, error)
""")


def test_package_run_in_a_fresh_process_raises_typed_errors(tmp_path):
    model = _model(
        [helper.make_node("Gather", ["data", "idx"], ["y"], name="g"),
         helper.make_node("Reshape", ["x", "s"], ["r"], name="r"),
         helper.make_node("Add", ["r", "y2"], ["z"], name="add"),
         helper.make_node("ConstantOfShape", ["shape"], ["c"], name="fill",
                          value=helper.make_tensor("v", T.FLOAT, [1], [1.0])),
         helper.make_node("ReduceSum", ["c"], ["t"], name="sum", keepdims=0)],
        [_info("data", T.FLOAT, [5, 3]), _info("idx", T.INT64, ["n"]), _info("x", T.FLOAT, ["N"]),
         _info("y2", T.FLOAT, ["M", 2]), _info("shape", T.INT64, [2])],
        [_info("y", T.FLOAT, ["n", 3]), _info("z", T.FLOAT, ["K", 2]), _info("t", T.FLOAT, [])],
        [helper.make_tensor("s", T.INT64, [2], [-1, 2])])
    package = tmp_path / "model.tar"
    tilecraft.compile(model, package_path=package)
    script = tmp_path / "run.py"
    script.write_text(FRESH_PROCESS)
    completed = subprocess.run([sys.executable, str(script), str(package)], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert lines[0] == "ok [[0.0, 1.0, 2.0], [12.0, 13.0, 14.0]] 12.0"
    assert lines[1] == "IndexOutOfRangeError Gather node 'g': index 9 out of range for axis 0 of size 5"
    assert lines[2].startswith("ShapeMismatchError Reshape node 'r': a tensor of 5 elements")
    assert lines[3].startswith("AllocationLimitError ConstantOfShape node 'fill'")


# The embedding's gather does not vectorize with static indices (a RuntimeWarning on main
# too, unrelated to its check).
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_pytorch_embedding_checks_its_indices():
    torch = pytest.importorskip("torch")
    import tilecraft.torch as tc_torch

    module = torch.nn.Embedding(10, 4).eval()
    tokens = torch.tensor([[1, 2, 9]])
    compiled = tc_torch.compile(module, (tokens,))
    np.testing.assert_allclose(compiled(tokens).numpy(), module(tokens).detach().numpy(), rtol=1e-6)
    with pytest.raises(IndexOutOfRangeError, match="index 10 out of range for axis 0 of size 10"):
        compiled(torch.tensor([[1, 10, 2]]))


def test_a_failure_on_one_thread_is_not_reported_on_another(gather):
    import threading

    errors = {"good": 0, "bad": 0}

    def call(indices, key, expect_error):
        for _ in range(50):
            try:
                gather(DATA, indices)
                assert not expect_error
            except IndexOutOfRangeError:
                errors[key] += 1

    threads = [threading.Thread(target=call, args=(np.array([0, 9]), "bad", True)),
               threading.Thread(target=call, args=(np.array([1, 2]), "good", False))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == {"good": 0, "bad": 50}


def test_failed_malloc_below_the_limit_raises(tmp_path):
    """Under RLIMIT_AS an 8 GiB buffer (below the 16 GiB limit) cannot be had: malloc's NULL
    is reported, not written through. In a subprocess, so the limit binds only there."""
    script = tmp_path / "oom.py"
    script.write_text(textwrap.dedent("""
        import resource, sys
        import numpy as np
        sys.path.insert(0, sys.argv[1])
        import tilecraft
        from test_runtime_checks import fill_model
        compiled = tilecraft.compile(fill_model())
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
        try:
            compiled(np.array([1 << 31, 1]))
        except tilecraft.errors.AllocationLimitError as error:
            print(error)
        print(compiled(np.array([3, 4])))
    """))
    import os

    completed = subprocess.run([sys.executable, str(script), os.path.dirname(__file__)],
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == [
        "ConstantOfShape node 'fill': a buffer of memref<?x?xf32>: allocating 8589934592 bytes failed (out of memory)",
        "12.0"]
