"""The three answers a backend's ``lower`` may give besides declining (TVM UMA's hooks): its own
transform schedule for the op, an extern function called on the op's operands, or the MLIR
replacing it; and what a backend that answers wrongly gets."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tilecraft
from tilecraft.errors import BackendError
from tilecraft.pipelines.tensor.extern import emit_call

TILE_8x32 = """
transform.named_sequence @schedule(%op: !transform.any_op {transform.consumed}) {
  %tile, %loops:2 = transform.structured.tile_using_for %op tile_sizes [8, 32, 0]
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
  transform.structured.vectorize %tile : !transform.any_op
  transform.yield
}
"""


def matmul_relu(n: int = 64) -> str:
    t = f"tensor<{n}x{n}xf32>"
    return f"""
    func.func @main(%a: {t}, %b: {t}) -> {t} {{
      %zero = arith.constant 0.0 : f32
      %e = tensor.empty() : {t}
      %f = linalg.fill ins(%zero : f32) outs(%e : {t}) -> {t}
      %m = linalg.matmul ins(%a, %b : {t}, {t}) outs(%f : {t}) -> {t}
      %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                           iterator_types = ["parallel", "parallel"]}}
          ins(%m : {t}) outs(%e : {t}) {{
        ^bb0(%x: f32, %o: f32):
          %y = arith.maximumf %x, %zero : f32
          linalg.yield %y : f32
      }} -> {t}
      return %r : {t}
    }}
    """


class Answer(tilecraft.Backend):
    """Gives every matmul the answer it was built with."""

    patterns = ("linalg.matmul",)

    def __init__(self, name: str, answer) -> None:
        self.name, self.answer = name, answer

    def lower(self, op, module, num_threads):
        return self.answer(op) if callable(self.answer) else self.answer


def test_a_transform_schedule_replaces_the_default_plan(rand):
    tilecraft.register_backend(Answer("tile_8x32", tilecraft.TransformSchedule(TILE_8x32)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the script applies cleanly
        module = tilecraft.compile(matmul_relu(), offload=["tile_8x32"])
    assert module.offloaded == {"tile_8x32": {"declined": 0, "linalg.matmul (scheduled)": 1}}
    assert "tilecraft.backend_schedule" in module.ir("graph")
    scheduled = module.ir("schedule")
    # The backend's tile: 8 rows x 32 columns, the whole reduction in one contraction.
    assert "vector.contract" in scheduled and "vector<8x64xf32>, vector<64x32xf32> into vector<8x32xf32>" in scheduled
    assert "tilecraft.backend" not in scheduled  # its marks are gone once applied
    a, b = rand((64, 64)), rand((64, 64))
    np.testing.assert_allclose(module(a, b), np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


def test_a_backend_scheduled_op_is_no_tuning_task():
    tilecraft.register_backend(Answer("tile_8x32", tilecraft.TransformSchedule(TILE_8x32)))
    tasks = tilecraft.extract_tasks(matmul_relu(), offload=["tile_8x32"])
    assert [task.op_name for task in tasks] == ["linalg.generic"]  # the ReLU alone
    assert len(tilecraft.extract_tasks(matmul_relu())) == 1  # without the backend: matmul + ReLU, one group


def test_a_schedule_that_fails_to_apply_warns_and_stays_correct(rand):
    # 8x32 tiles of a 20x20 matmul are partial: vectorize refuses them.
    tilecraft.register_backend(Answer("tile_8x32", tilecraft.TransformSchedule(TILE_8x32)))
    with pytest.warns(RuntimeWarning, match="backend 'tile_8x32'.s schedule failed"):
        module = tilecraft.compile(matmul_relu(20), offload=["tile_8x32"])
    a, b = rand((20, 20)), rand((20, 20))
    np.testing.assert_allclose(module(a, b), np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("script, entry, message", [
    ("transform.named_sequence @schedule(", "schedule", "does not parse"),
    (TILE_8x32, "other", "does not parse or has no @other"),
    (TILE_8x32, "not an identifier", "not an identifier"),
])
def test_a_malformed_schedule_is_a_backend_error(script, entry, message):
    tilecraft.register_backend(Answer("bad_schedule", tilecraft.TransformSchedule(script, entry)))
    with pytest.raises(BackendError, match=message):
        tilecraft.compile(matmul_relu(), offload=["bad_schedule"])


def test_an_extern_function_is_called_on_the_inputs_and_accumulator(rand):
    calls = []

    def matmul_accumulate(a, b, init, out):
        calls.append(a.shape)
        np.matmul(a, b, out=out)
        out += init

    extern = tilecraft.extern.register_python(
        "matmul_accumulate_test", matmul_accumulate,
        inputs=["memref<?x?xf32>"] * 3, outputs=["memref<?x?xf32>"])
    try:
        tilecraft.register_backend(Answer("extern_answer", extern))
        module = tilecraft.compile(matmul_relu(16), offload=["extern_answer"])
        assert module.offloaded["extern_answer"]["linalg.matmul"] == 1
        a, b = rand((16, 16)), rand((16, 16))
        np.testing.assert_allclose(module(a, b), np.maximum(a @ b, 0), rtol=1e-4, atol=1e-5)
        assert calls == [(16, 16)]
    finally:
        tilecraft.extern.unregister("matmul_accumulate_test")


@pytest.mark.parametrize("answer, message", [
    (lambda op: [], r"replaced linalg.matmul \(1 result\(s\)\)"),
    (lambda op: ["not a value"], "return one ir.Value per result"),
    (lambda op: [op.operands[2]] * 2, r"\(1 result\(s\)\)"),
])
def test_a_wrong_answer_is_a_backend_error(answer, message):
    tilecraft.register_backend(Answer("wrong_answer", answer))
    with pytest.raises(BackendError, match=message):
        tilecraft.compile(matmul_relu(16), offload=["wrong_answer"])


class MatmulRelu(tilecraft.Backend):
    """A composite pattern: a matmul and the ReLU after it, computed by one Python extern
    (or, with ``region_answer``, whatever that returns for the region)."""

    patterns = ("linalg.matmul",)

    def __init__(self, name: str, region_answer=None, lower_region: bool = True) -> None:
        self.name, self.region_answer = name, region_answer
        self.extern = tilecraft.extern.register_python(
            f"{name}_fn", lambda a, b, out: np.maximum(np.matmul(a, b, out=out), 0, out=out),
            inputs=["memref<?x?xf32>"] * 2, outputs=["memref<?x?xf32>"])
        if not lower_region:
            self.lower_region = super().lower_region

    def lower(self, op, module, num_threads):
        return None  # the matmul alone stays compiled

    def takes_epilogue(self, region, consumer):
        return not region.epilogue and consumer.name == "linalg.generic"

    def lower_region(self, region, module, num_threads):
        if self.region_answer is not None:
            return self.region_answer(region)
        anchor = region.anchor
        return emit_call(module, self.extern, list(anchor.operands[:2]), [region.last.results[0].type])


def test_a_backend_takes_an_epilogue_with_its_op(rand):
    backend = tilecraft.register_backend(MatmulRelu("matmul_relu_region"))
    try:
        module = tilecraft.compile(matmul_relu(16), offload=["matmul_relu_region"])
        assert module.offloaded["matmul_relu_region"] == {"declined": 0, "linalg.matmul": 1, "epilogue ops": 1}
        graph = module.ir("graph")
        assert 'tilecraft.offload_epilogue = "linalg.generic"' in graph
        assert "arith.maximumf" not in graph  # the ReLU went with the matmul
        a, b = rand((16, 16)), rand((16, 16))
        np.testing.assert_allclose(module(a, b), np.maximum(a @ b, 0), rtol=1e-4, atol=1e-5)
    finally:
        tilecraft.extern.unregister(backend.extern.name)


def test_a_declined_region_leaves_the_op_to_lower(rand):
    """``lower_region`` returning None: ``lower`` is asked about the anchor alone (which
    here declines too), and everything stays compiled."""
    backend = tilecraft.register_backend(MatmulRelu("region_declined", region_answer=lambda region: None))
    try:
        module = tilecraft.compile(matmul_relu(16), offload=["region_declined"])
        assert module.offloaded["region_declined"] == {"declined": 1}
        a, b = rand((16, 16)), rand((16, 16))
        np.testing.assert_allclose(module(a, b), np.maximum(a @ b, 0), rtol=1e-4, atol=1e-5)
    finally:
        tilecraft.extern.unregister(backend.extern.name)


@pytest.mark.parametrize("region_answer, lower_region, message", [
    (None, False, "takes epilogues .* but does not define lower_region"),
    (lambda region: [region.anchor.operands[2].owner.operands[0]], True,  # the fill's 0.0
     r"replaced a tensor<16x16xf32> result of linalg.generic with a f32"),
    (lambda region: region.anchor.operands[2], True, "return one ir.Value per result"),
])
def test_a_wrong_region_answer_is_a_backend_error(region_answer, lower_region, message):
    backend = tilecraft.register_backend(MatmulRelu("wrong_region", region_answer, lower_region))
    try:
        with pytest.raises(BackendError, match=message):
            tilecraft.compile(matmul_relu(16), offload=["wrong_region"])
    finally:
        tilecraft.extern.unregister(backend.extern.name)
