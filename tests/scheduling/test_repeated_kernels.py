"""Each distinct op or fusion group is scheduled once (schedule/repeated_kernels.py): copies of
a block are outlined, merged, scheduled once and, with ``kernel_calls=False``, inlined back,
with the same numbers and the same kernels as when every copy was scheduled; by default the
merged kernels stay functions, lowered and compiled once each."""

import re
import warnings

import numpy as np
import onnxruntime as ort
import pytest
from mlir import ir
from onnx import TensorProto, helper, numpy_helper

import tilecraft
from tilecraft.schedule import apply as schedule_apply
from tilecraft.schedule.op_schedule import OpSchedule
from tilecraft.schedule.repeated_kernels import OUTLINED_PREFIX, inline_outlined, outline_repeated


def _repeated_blocks(size: int = 3, width: int = 16) -> tuple["onnx.ModelProto", np.ndarray]:
    """Five conv (``size`` x ``size``, same padding, ``width`` channels) + bias + ReLU blocks
    and two MatMul + Add + ReLU layers: blocks 1-4 and the matmuls repeat shapes with their own weights; block 2's
    bias is a splat of ones and block 3's of twos (constants the schedule sees inside: those
    copies must not merge)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 8, 12, 12)).astype(np.float32)
    inits, nodes, previous = [], [], "x"
    for i, cin in enumerate([8, width, width, width, width]):
        w = (rng.standard_normal((width, cin, size, size)) / np.sqrt(size * size * cin)).astype(np.float32)
        b = np.full(width, float(i - 1), np.float32) if i in (2, 3) else rng.standard_normal(width).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [helper.make_node("Conv", [previous, f"w{i}", f"b{i}"], [f"c{i}"], pads=[size // 2] * 4),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        previous = f"r{i}"
    nodes.append(helper.make_node("Reshape", [previous, "flat_shape"], ["flat"]))
    inits.append(numpy_helper.from_array(np.array([width, 144], np.int64), "flat_shape"))
    previous = "flat"
    for i in range(2):
        m = (rng.standard_normal((144, 144)) / 12).astype(np.float32)
        inits += [numpy_helper.from_array(m, f"m{i}"),
                  numpy_helper.from_array(rng.standard_normal(144).astype(np.float32), f"mb{i}")]
        nodes += [helper.make_node("MatMul", [previous, f"m{i}"], [f"mm{i}"]),
                  helper.make_node("Add", [f"mm{i}", f"mb{i}"], [f"ma{i}"]),
                  helper.make_node("Relu", [f"ma{i}"], [f"mr{i}"])]
        previous = f"mr{i}"
    graph = helper.make_graph(nodes, "repeated", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info(previous, TensorProto.FLOAT, (width, 144))], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), x


def _compile_counting(model, monkeypatch, *, merge: bool, kernel_calls: bool = False):
    """Compile ``model`` uncached; returns (module, sequences the interpreter applied)."""
    applied: list[str] = []
    original = schedule_apply.interpreter.apply_named_sequence

    def counting(payload, sequence, transform_module, *rest):
        applied.append(ir.StringAttr(sequence.attributes["sym_name"]).value)
        return original(payload, sequence, transform_module, *rest)

    with monkeypatch.context() as patch:
        patch.setattr(schedule_apply.interpreter, "apply_named_sequence", counting)
        if not merge:
            patch.setattr(schedule_apply, "outline_repeated", lambda module, plans, texts, **_: plans)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a failed sequence falls back with a warning
            compiled = tilecraft.compile(model, cache=False, keep_ir=True, kernel_calls=kernel_calls)
    return compiled, applied


def test_copies_are_scheduled_once_with_the_same_results(monkeypatch):
    model, x = _repeated_blocks()
    expected = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    merged, merged_applied = _compile_counting(model, monkeypatch, merge=True)
    each, each_applied = _compile_counting(model, monkeypatch, merge=False)
    # Block 4 joins block 1 and the second matmul layer the first; blocks 0, 2 and 3 stay.
    assert len(merged_applied) < len(each_applied), (merged_applied, each_applied)
    got = merged(x)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(got, each(x))  # the same kernels, bit for bit
    assert merged.kernel_count == each.kernel_count
    assert OUTLINED_PREFIX not in merged.ir("schedule")


def test_merging_leaves_the_splat_constants_of_each_copy(monkeypatch):
    """Two copies that differ only in a splat bias (seen inside the outlined body) are not
    merged: merging them would give both the first's bias."""
    model, x = _repeated_blocks()
    merged, _ = _compile_counting(model, monkeypatch, merge=True)
    schedule_ir = merged.ir("schedule")
    assert "1.000000e+00" in schedule_ir and "2.000000e+00" in schedule_ir


PAYLOAD = """
func.func @f(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<64xf32>) {
  %e = tensor.empty() : tensor<8x8xf32>
  %m = linalg.matmul {tilecraft.op_id = 0 : i64} ins(%a, %b : tensor<8x8xf32>, tensor<8x8xf32>)
                     outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %flat = tensor.collapse_shape %m [[0, 1]] : tensor<8x8xf32> into tensor<64xf32>
  %r = linalg.matmul {tilecraft.op_id = 1 : i64} ins(%m, %b : tensor<8x8xf32>, tensor<8x8xf32>)
                     outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %r, %flat : tensor<8x8xf32>, tensor<64xf32>
}
"""


def _fake_group(root: int, producer: int):
    from tilecraft.schedule.op_schedule import GroupSchedule
    return GroupSchedule(root=OpSchedule(tag=root), producers=(OpSchedule(tag=producer),))


def test_a_plan_read_from_outside_between_its_ops_stays_in_place():
    """``%flat`` reads the first matmul before the second runs: the pair cannot become one
    call (the call would come after ``%flat``), so it is scheduled in place."""
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(PAYLOAD)
        before = str(module)
        plans = [_fake_group(1, 0)]
        kept = outline_repeated(module.operation, plans, {plans[0].sequence_name: "()"})
        assert kept == plans
        assert str(module) == before
        inline_outlined(module.operation)
        assert str(module) == before


def test_outlined_copies_inline_back_with_their_own_operands():
    """Two identical matmuls on different operands: one function, two calls, and inlining
    gives each call's operands back to its copy."""
    text = """
func.func @f(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>, %c: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %e = tensor.empty() : tensor<8x8xf32>
  %z = arith.constant 0.0 : f32
  %f0 = linalg.fill {tilecraft.op_id = 2 : i64} ins(%z : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %m0 = linalg.matmul {tilecraft.op_id = 0 : i64} ins(%a, %b : tensor<8x8xf32>, tensor<8x8xf32>)
                      outs(%f0 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %f1 = linalg.fill {tilecraft.op_id = 3 : i64} ins(%z : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %m1 = linalg.matmul {tilecraft.op_id = 1 : i64} ins(%c, %a : tensor<8x8xf32>, tensor<8x8xf32>)
                      outs(%f1 : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %m0, %m1 : tensor<8x8xf32>, tensor<8x8xf32>
}
"""
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        plans = [OpSchedule(tag=0, fused_init_tag=2), OpSchedule(tag=1, fused_init_tag=3)]
        kept = outline_repeated(module.operation, plans, {p.sequence_name: "(same)" for p in plans})
        assert kept == plans[:1]
        outlined = str(module)
        assert outlined.count("call @" + OUTLINED_PREFIX + "0(") == 2
        assert outlined.count("linalg.matmul") == 1
        module.operation.verify()
        inline_outlined(module.operation)
        module.operation.verify()
        inlined = str(module)
        assert OUTLINED_PREFIX not in inlined
        assert "ins(%arg0, %arg1" in inlined and "ins(%arg2, %arg0" in inlined
        assert inlined.count("linalg.fill") == 2 and inlined.count("linalg.matmul") == 2


def _kernel_functions(text: str, kind: str) -> list[str]:
    """Names of the kernel functions ``text`` defines (``kind``: func.func or llvm.func)."""
    return re.findall(kind + r" (?:private )?@(" + OUTLINED_PREFIX + r"\w+)\(", text)


def test_kernel_calls_lower_each_distinct_kernel_once(monkeypatch):
    """By default the merged kernels stay functions: the LLVM module defines each distinct
    one once while the entry calls it once per copy; the numbers are those of the build
    that inlines every copy, bit for bit, and onnxruntime's. (1x1 convolutions: no pad
    between the blocks, so no destination copies, call_destinations.py.)"""
    model, x = _repeated_blocks(size=1)
    expected = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    calls, _ = _compile_counting(model, monkeypatch, merge=True, kernel_calls=True)
    inlined, _ = _compile_counting(model, monkeypatch, merge=True, kernel_calls=False)
    got = calls(x)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(got, inlined(x))
    schedule_ir = calls.ir("schedule")
    called = re.findall(r"call @(" + OUTLINED_PREFIX + r"\w+)\(", schedule_ir)
    defined = _kernel_functions(schedule_ir, "func.func")
    assert set(called) == set(defined) and len(called) > len(defined)
    llvm_ir = calls.ir("llvm")
    lowered = _kernel_functions(llvm_ir, "llvm.func")
    llvm_calls = re.findall(r"llvm.call @(" + OUTLINED_PREFIX + r"\w+)\(", llvm_ir)
    assert sorted(lowered) == sorted(set(llvm_calls)) == sorted(defined)
    assert len(llvm_calls) == len(called)  # one call per copy, one definition per kernel
    assert not _kernel_functions(inlined.ir("llvm"), "llvm.func")
    assert OUTLINED_PREFIX not in inlined.ir("schedule")
    assert calls.kernel_count == inlined.kernel_count  # a kernel counts once per call


def test_kernel_calls_pass_buffers_without_copies(monkeypatch):
    """After bufferization the kernels take memrefs: the entry passes each kernel its output
    buffer (block 1's is block 2's padded input: that call, the only one writing such a
    slice, is inlined by call_destinations.py), and nothing is copied into or out of a call
    (tests/lit/pipelines/call-destinations.mlir: a slice two calls write)."""
    model, _ = _repeated_blocks()
    calls, _ = _compile_counting(model, monkeypatch, merge=True, kernel_calls=True)
    bufferized = calls.ir("bufferize")
    assert re.search(r"call @" + OUTLINED_PREFIX + r"\w+\(.*\) : \(memref<", bufferized)
    assert "memref.copy" not in bufferized


def test_kernel_calls_keep_block_major_filters(monkeypatch):
    """A conv kernel's filter reaches it as an argument; it is still stored block-major
    (blocked_constants.py through the calls), as many filters as when inlined."""
    model, _ = _repeated_blocks(width=64)
    calls, _ = _compile_counting(model, monkeypatch, merge=True, kernel_calls=True)
    inlined, _ = _compile_counting(model, monkeypatch, merge=True, kernel_calls=False)
    assert calls.ir("schedule").count("blocked") == inlined.ir("schedule").count("blocked") > 0


def test_kernel_calls_is_a_checked_option():
    with pytest.raises(tilecraft.TilecraftError, match="kernel_calls"):
        tilecraft.compile(_repeated_blocks()[0], kernel_calls="yes")
