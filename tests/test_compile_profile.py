"""benchmarks/compile_profile.py's per-function codegen probe: a module split into parts, each
part the functions it keeps with bodies and every other one a declaration, JIT-compiles part
by part (the measurement behind "is LLVM's time divisible by function", issue #43)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from mlir import ir

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "compile_profile.py"


@pytest.fixture(scope="module")
def compile_profile():
    spec = importlib.util.spec_from_file_location("compile_profile", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ``@scale`` is private and called by ``@main``; ``@weights`` is a bound-by-address global
# (a declaration, as pipelines/jit/weights.py leaves the weights).
_MODULE = """
module {
  llvm.mlir.global external constant @weights() {addr_space = 0 : i32} : !llvm.array<4 x f32>
  llvm.func @scale(%x: f32) -> f32 attributes {sym_visibility = "private"} {
    %c = llvm.mlir.constant(2.0 : f32) : f32
    %y = llvm.fmul %x, %c : f32
    llvm.return %y : f32
  }
  llvm.func @main(%x: f32) -> f32 {
    %p = llvm.mlir.addressof @weights : !llvm.ptr
    %w = llvm.load %p : !llvm.ptr -> f32
    %y = llvm.call @scale(%x) : (f32) -> f32
    %z = llvm.fadd %y, %w : f32
    llvm.return %z : f32
  }
}
"""


def _defined(module: ir.Module) -> set[str]:
    return {name for name, _ in _functions(module)}


def _functions(module: ir.Module):
    return [(ir.StringAttr(op.operation.attributes["sym_name"]).value, op.operation)
            for op in module.body.operations
            if op.operation.name == "llvm.func" and op.operation.regions[0].blocks]


def test_parts_define_exactly_their_functions_and_each_compiles(compile_profile):
    with ir.Context():
        module = ir.Module.parse(_MODULE)
        assert _defined(module) == {"scale", "main"}
        assert compile_profile._declared_symbols(module) == ["weights"]
        for keep in ({"scale"}, {"main"}):
            part = compile_profile._alone(module, keep)
            assert _defined(part) == keep
            # every other function a declaration the part's JIT binds like a weight
            assert set(compile_profile._declared_symbols(part)) == {"weights", *({"scale", "main"} - keep)}
            created, generated = compile_profile._codegen(part, 2)
            assert created >= 0 and generated >= 0
        assert _defined(module) == {"scale", "main"}  # the original is left as it was


def test_a_kept_private_function_becomes_external(compile_profile):
    """A part's definitions must link against the other parts: none may stay private."""
    with ir.Context():
        part = compile_profile._alone(ir.Module.parse(_MODULE), {"scale"})
        (name, op), = _functions(part)
        assert name == "scale"
        assert "sym_visibility" not in op.attributes
        assert str(op.attributes["linkage"]) == "#llvm.linkage<external>"
