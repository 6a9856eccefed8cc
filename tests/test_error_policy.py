"""The importers wrap only what they know to be the model's fault (docs/architecture.md,
"Errors"): an op converter that refuses the model's operands gives the model import error
naming the node; a converter that crashes (a bug in tilecraft) gives an ``InternalError``
naming the node, never a ``ModelImportError`` that would blame the model."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft
from tilecraft.errors import (
    InternalError,
    IRNotKeptError,
    ModelImportError,
    OperandError,
    OperandTypeError,
    OptionError,
    TilecraftError,
)

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402


def _relu_model() -> "onnx.ModelProto":
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="the_relu")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _conv_model(input_channels: int, filter_channels: int) -> "onnx.ModelProto":
    weight = helper.make_tensor("w", TensorProto.FLOAT, [4, filter_channels, 3, 3],
                                np.zeros(4 * filter_channels * 9, np.float32))
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="the_conv")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, input_channels, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])], initializer=[weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _replace_onnx_handler(monkeypatch, op_type: str, emit) -> None:
    from tilecraft.frontend.onnx import registry

    monkeypatch.setitem(registry._HANDLERS, op_type, [registry.OpHandler(op_type, 1, None, emit)])


def test_a_bad_model_is_a_model_import_error_naming_the_node():
    from tilecraft.frontend.onnx import import_model

    with pytest.raises(ModelImportError, match="the_conv.*channels") as caught:
        import_model(_conv_model(input_channels=3, filter_channels=5))
    assert not isinstance(caught.value, InternalError)
    assert isinstance(caught.value.__cause__, OperandError)


@pytest.mark.parametrize("bug", [KeyError("oops"), TypeError("f() takes 1 argument"), ValueError("bad math"),
                                 AttributeError("no attribute 'x'"), IndexError("list index")])
def test_a_bug_in_an_onnx_converter_is_an_internal_error(monkeypatch, bug):
    from tilecraft.frontend.onnx import import_model

    def buggy(ctx):
        raise bug

    _replace_onnx_handler(monkeypatch, "Relu", buggy)
    with pytest.raises(InternalError, match=r"the_relu.*Relu.*bug in tilecraft") as caught:
        import_model(_relu_model())
    assert not isinstance(caught.value, ModelImportError)
    assert caught.value.__cause__ is bug


def test_a_converter_refusal_is_still_a_model_error(monkeypatch):
    from tilecraft.frontend.onnx import import_model

    def refuses(ctx):
        raise OperandError("Relu of a quaternion")

    _replace_onnx_handler(monkeypatch, "Relu", refuses)
    with pytest.raises(ModelImportError, match="the_relu.*quaternion") as caught:
        import_model(_relu_model())
    assert caught.value.problems == [("the_relu", "Relu", "Relu of a quaternion")]


def test_a_typed_error_inside_a_converter_keeps_its_type(monkeypatch):
    from tilecraft.errors import ResourceLimitError
    from tilecraft.frontend.onnx import import_model

    def too_big(ctx):
        raise ResourceLimitError("tensor 'x' is larger than the limit")

    _replace_onnx_handler(monkeypatch, "Relu", too_big)
    with pytest.raises(ResourceLimitError):
        import_model(_relu_model())


def test_a_bug_in_a_torch_converter_is_an_internal_error(monkeypatch):
    torch = pytest.importorskip("torch")
    import tilecraft.torch
    from tilecraft.errors import TorchImportError
    from tilecraft.frontend.torch.ops.table import ATEN_OPS

    def buggy(ctx, *args, **kwargs):
        return {}["missing"]

    monkeypatch.setitem(ATEN_OPS, "aten.relu.default", buggy)
    with pytest.raises(InternalError, match=r"relu.*bug in tilecraft.*KeyError") as caught:
        tilecraft.torch.compile(torch.nn.ReLU().eval(), (torch.randn(2, 3),))
    assert not isinstance(caught.value, TorchImportError)


def test_a_torch_converter_refusal_is_a_torch_import_error(monkeypatch):
    torch = pytest.importorskip("torch")
    import tilecraft.torch
    from tilecraft.errors import TorchImportError
    from tilecraft.frontend.torch.ops.table import ATEN_OPS

    def refuses(ctx, *args, **kwargs):
        raise OperandError("relu of a sparse tensor")

    monkeypatch.setitem(ATEN_OPS, "aten.relu.default", refuses)
    with pytest.raises(TorchImportError, match="relu of a sparse tensor"):
        tilecraft.torch.compile(torch.nn.ReLU().eval(), (torch.randn(2, 3),))


def test_the_new_types_keep_the_builtins_callers_catch():
    """Sites that raised a builtin now raise a typed error deriving from it."""
    assert issubclass(OperandError, ValueError) and issubclass(OperandTypeError, TypeError)
    assert issubclass(OptionError, TypeError) and issubclass(IRNotKeptError, KeyError)
    assert all(issubclass(t, TilecraftError) for t in (OperandError, InternalError, IRNotKeptError))
    assert not issubclass(InternalError, ModelImportError)


def test_an_unknown_stage_is_a_typed_key_error():
    module = tilecraft.compile(_relu_model())
    with pytest.raises(IRNotKeptError, match="nope"):
        module.ir("nope")


def test_bad_timing_arguments_are_option_errors():
    from tilecraft.runtime.timing import measure

    with pytest.raises(OptionError, match="repeat"):
        measure(lambda: None, number=1, repeat=0)
