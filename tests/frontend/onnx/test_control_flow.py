"""If (scf.if) and Scan (scf.for) against onnxruntime (frontend/onnx/ops/control_flow.py)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

import tilecraft
from tilecraft.errors import ShapeMismatchError
from tilecraft.frontend.onnx import import_model

RNG = np.random.default_rng(5)


def compare(model: onnx.ModelProto, inputs: dict) -> tilecraft.CompiledModule:
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, inputs)
    compiled = tilecraft.compile(model)
    got = compiled(**inputs)
    got = list(got) if isinstance(got, tuple) else [got]
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    return compiled


def model_of(nodes, inputs, outputs, opset=17):
    graph = helper.make_graph(nodes, "cf", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def branch(name: str, nodes, output: str, shape) -> onnx.GraphProto:
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(output, TensorProto.FLOAT, shape)])


@pytest.mark.parametrize("cond", [True, False])
def test_if_with_a_runtime_condition_and_branches_of_different_shapes(cond):
    then = branch("then", [helper.make_node("Add", ["x", "x"], ["t"])], "t", [2, 3])
    other = branch("else", [helper.make_node("Concat", ["x", "x"], ["e"], axis=0)], "e", [4, 3])
    node = helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)
    model = model_of(
        [node],
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])],
    )
    compare(model, {"c": np.array(cond), "x": RNG.standard_normal((2, 3)).astype(np.float32)})
    assert "scf.if" in str(import_model(model)) and "tensor<?x3xf32>" in str(import_model(model))


def test_if_with_a_constant_condition_imports_one_branch():
    then = branch("then", [helper.make_node("Neg", ["x"], ["t"])], "t", [3])
    other = branch("else", [helper.make_node("Abs", ["x"], ["e"])], "e", [3])
    nodes = [
        helper.make_node("Constant", [], ["c"], value=helper.make_tensor("c", TensorProto.BOOL, [], [False])),
        helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
    ]
    model = model_of(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    compare(model, {"x": RNG.standard_normal(3).astype(np.float32)})
    text = str(import_model(model))
    assert "scf.if" not in text and "math.absf" in text and "negf" not in text


@pytest.mark.parametrize("directions", [(0, 0), (1, 0), (0, 1)])
def test_scan_running_sum_and_product_with_directions(directions):
    """Two states (sum, product) and two scan outputs, over axis 1 of a [2, 5] input."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x"], ["s2"]), helper.make_node("Mul", ["p_in", "x"], ["p2"]),
         helper.make_node("Identity", ["s2"], ["out_s"]), helper.make_node("Neg", ["p2"], ["out_p"])],
        "body",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("s_in", "p_in", "x")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("s2", "p2", "out_s", "out_p")],
    )
    node = helper.make_node(
        "Scan", ["s0", "p0", "xs"], ["s", "p", "ys", "ps"], body=body, num_scan_inputs=1,
        scan_input_axes=[1], scan_input_directions=[directions[0]],
        scan_output_directions=[directions[1], 0], scan_output_axes=[0, 1],
    )
    model = model_of(
        [node],
        [helper.make_tensor_value_info("s0", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("p0", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("xs", TensorProto.FLOAT, [2, 5])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape)
         for n, shape in (("s", [2]), ("p", [2]), ("ys", [5, 2]), ("ps", [2, 5]))],
    )
    compare(model, {"s0": np.zeros(2, np.float32), "p0": np.ones(2, np.float32),
                    "xs": RNG.uniform(0.5, 1.5, (2, 5)).astype(np.float32)})
    assert str(import_model(model)).count("scf.for") == 1  # a loop, not unrolled


def test_if_branch_yielding_a_sequence_is_refused_by_name():
    then = helper.make_graph([helper.make_node("SequenceConstruct", ["x"], ["t"])], "then", [],
                             [helper.make_tensor_sequence_value_info("t", TensorProto.FLOAT, [3])])
    other = helper.make_graph([helper.make_node("SequenceConstruct", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_sequence_value_info("e", TensorProto.FLOAT, [3])])
    node = helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)
    model = model_of(
        [node, helper.make_node("ConcatFromSequence", ["y"], ["z"], axis=0)],
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [3])],
    )
    with pytest.raises(tilecraft.ModelImportError, match="If branch yields a TensorSequence"):
        tilecraft.compile(model)


@pytest.mark.parametrize("trips, stop_at", [(5, 100.0), (5, 2.5), (0, 100.0)])
def test_loop_with_runtime_trip_count_condition_and_scan_output(trips, stop_at):
    """``s += x`` each iteration while ``s < stop`` (checked after the update), at most ``M``
    times; the running values are stacked as a scan output of runtime length."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x"], ["s_out"]),
         helper.make_node("ReduceSum", ["s_out"], ["total"], keepdims=0),
         helper.make_node("Less", ["total", "stop"], ["go"]),
         helper.make_node("Identity", ["s_out"], ["scanned"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("go", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("scanned", TensorProto.FLOAT, [2])],
    )
    node = helper.make_node("Loop", ["M", "cond", "s0"], ["s", "history"], body=body)
    model = model_of(
        [node],
        [helper.make_tensor_value_info("M", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s0", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("stop", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("history", TensorProto.FLOAT, ["n", 2])],
    )
    compare(model, {"M": np.array(trips, np.int64), "cond": np.array(True), "s0": np.zeros(2, np.float32),
                    "x": np.array([0.5, 0.25], np.float32), "stop": np.array(stop_at, np.float32)})
    assert "scf.while" in str(import_model(model))


def test_loop_states_of_different_element_types():
    """Loop's states are a heterogeneous variadic (each its own type): an int64 counter beside a
    float state imports; the type-agreement check still names inputs of a homogeneous one."""
    body = helper.make_graph(
        [helper.make_node("Add", ["k_in", "one"], ["k_out"]),
         helper.make_node("Add", ["s_in", "s_in"], ["s_out"]),
         helper.make_node("Identity", ["c"], ["go"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("k_in", TensorProto.INT64, []),
         helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("go", TensorProto.BOOL, []),
         helper.make_tensor_value_info("k_out", TensorProto.INT64, []),
         helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [2])],
    )
    one = helper.make_node("Constant", [], ["one"], value=helper.make_tensor("one", TensorProto.INT64, [], [1]))
    model = model_of(
        [one, helper.make_node("Loop", ["M", "", "k0", "s0"], ["k", "s"], body=body)],
        [helper.make_tensor_value_info("M", TensorProto.INT64, []),
         helper.make_tensor_value_info("k0", TensorProto.INT64, []),
         helper.make_tensor_value_info("s0", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("k", TensorProto.INT64, []),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [2])],
    )
    compare(model, {"M": np.array(3, np.int64), "k0": np.array(10, np.int64),
                    "s0": np.array([1.0, -2.0], np.float32)})
    bad = model_of(
        [helper.make_node("Add", ["x", "n"], ["y"], name="mixed")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("n", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    with pytest.raises(tilecraft.ModelImportError, match="'mixed' \\(Add\\).*must have one element type"):
        tilecraft.compile(bad)


def _torch_exported(module, args, names):
    """``module`` scripted and exported by PyTorch's TorchScript exporter (which keeps Python
    loops as ONNX Loop nodes; the dynamo exporter needs onnxscript, not installed here)."""
    torch = pytest.importorskip("torch")
    import io
    import warnings

    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(torch.jit.script(module), args, buffer, dynamo=False, input_names=names, opset_version=17)
    return onnx.load_from_string(buffer.getvalue())


def test_pytorch_exported_data_dependent_loops():
    """Two PyTorch models whose loops depend on their inputs, exported to ONNX Loop and run as
    one ``scf.while`` (not unrolled): a ``for`` over a runtime count, and a ``while`` whose
    condition reads the data (with an int64 step counter carried beside the float state)."""
    torch = pytest.importorskip("torch")

    class RuntimeCount(torch.nn.Module):
        def forward(self, x, n):
            y = x
            for _ in range(int(n)):
                y = y * 0.5 + x
            return y

    class UntilLarge(torch.nn.Module):
        def forward(self, x):
            y = x
            steps = 0
            while bool(y.abs().sum() < 100.0):
                y = y * 2.0 + 1.0
                steps += 1
            return y, torch.tensor(steps)

    x = torch.tensor(RNG.standard_normal((2, 3)).astype(np.float32))
    counted = _torch_exported(RuntimeCount(), (x, torch.tensor(3)), ["x", "n"])
    assert [n.op_type for n in counted.graph.node].count("Loop") == 1
    compiled = tilecraft.compile(counted)
    for n in (0, 1, 7):
        got = compiled(x=x.numpy(), n=np.array(n, np.int64))
        np.testing.assert_allclose(got, RuntimeCount()(x, torch.tensor(n)).numpy(), rtol=1e-5, atol=1e-6)
    assert "scf.while" in str(import_model(counted))

    until = _torch_exported(UntilLarge(), (x,), ["x"])
    compiled = compare(until, {"x": x.numpy()})
    for scale in (1e-3, 1.0, 200.0):  # many, a few, and no iterations
        y, steps = compiled(x=x.numpy() * scale)
        expected_y, expected_steps = UntilLarge()(x * scale)
        np.testing.assert_allclose(y, expected_y.numpy(), rtol=1e-5, atol=1e-6)
        assert int(steps) == int(expected_steps)
    assert "scf.while" in str(import_model(until))


def _sliding_loop(declared: int) -> onnx.ModelProto:
    """ONNX's test_loop11 with the slice width an input: ``y += x[i:i+width]`` and the running
    ``y`` scanned, the body declaring its outputs ``float[declared]``."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["go"]),
         helper.make_node("Add", ["i", "width"], ["end"]),
         helper.make_node("Unsqueeze", ["i", "zero"], ["start1"]),
         helper.make_node("Unsqueeze", ["end", "zero"], ["end1"]),
         helper.make_node("Slice", ["x", "start1", "end1"], ["piece"]),
         helper.make_node("Add", ["y_in", "piece"], ["y_out"]),
         helper.make_node("Identity", ["y_out"], ["scanned"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_in", TensorProto.FLOAT, [declared])],
        [helper.make_tensor_value_info("go", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_out", TensorProto.FLOAT, [declared]),
         helper.make_tensor_value_info("scanned", TensorProto.FLOAT, [declared])],
    )
    zero = helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("zero", TensorProto.INT64, [1], [0]))
    return model_of(
        [zero, helper.make_node("Loop", ["M", "", "y0"], ["y", "history"], body=body)],
        [helper.make_tensor_value_info("M", TensorProto.INT64, []),
         helper.make_tensor_value_info("width", TensorProto.INT64, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [6]),
         helper.make_tensor_value_info("y0", TensorProto.FLOAT, [declared])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [declared]),
         helper.make_tensor_value_info("history", TensorProto.FLOAT, ["n", declared])],
    )


def test_loop_body_output_declared_static_where_the_import_is_dynamic():
    """A Slice at the iteration count imports with a dynamic extent; the body declares
    ``float[1]``, so the carried state and the scan output keep that extent (test_loop11).
    A width that breaks the declaration at run time is a typed error, not a wrong result."""
    model = _sliding_loop(1)
    x = np.arange(1, 7, dtype=np.float32)
    compiled = compare(model, {"M": np.array(4, np.int64), "width": np.array(1, np.int64), "x": x,
                               "y0": np.zeros(1, np.float32)})
    assert "tensor<?xf32>" not in str(compiled.ir("input").split("scf.while")[0])
    declared = "body output 'y_out': extent 2 of axis 0 differs from the declared 1"
    with pytest.raises(ShapeMismatchError, match=declared):
        compiled(M=np.array(2, np.int64), width=np.array(2, np.int64), x=x, y0=np.zeros(1, np.float32))
