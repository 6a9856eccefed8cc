"""``tilecraft.compile``: MLIR in, a callable :class:`CompiledModule` out."""

from __future__ import annotations

import io

from mlir import ir

from ..errors import CompileError, EntryPointError
from ..runtime.compiled_module import CompiledModule
from ..runtime.signature import EntrySignature
from .cpu import cpu_pipeline
from .pipeline import Pipeline, Stage
from .target import Target




def parse_module(source: "str | bytes | ir.Module", context: ir.Context) -> ir.Module:
    """Parse text/bytecode, or copy an existing module, into ``context``.

    A module given as ``ir.Module`` is copied (through bytecode) so compilation never
    mutates the caller's IR.
    """
    if isinstance(source, ir.Module):


        buffer = io.BytesIO()
        source.operation.write_bytecode(buffer)
        source = buffer.getvalue()
    if not isinstance(source, (str, bytes)):
        raise TypeError(
            f"compile() takes MLIR text, bytecode or an mlir.ir.Module, got {type(source).__name__}"
        )
    try:
        return ir.Module.parse(source, context=context)
    except ir.MLIRError as error:
        raise CompileError(f"could not parse the input module: {error}", stage="input") from None


def find_entry(module: ir.Module, entry: str | None) -> ir.Operation:
    """The public function to call: ``entry`` by name, or the only public one."""
    public = []
    for op in module.body.operations:
        op = op.operation
        if op.name != "func.func" or not op.regions[0].blocks:
            continue
        visibility = op.attributes["sym_visibility"] if "sym_visibility" in op.attributes else None
        if visibility is None or ir.StringAttr(visibility).value == "public":
            public.append(op)
    names = [ir.StringAttr(f.attributes["sym_name"]).value for f in public]
    if entry is not None:
        if entry not in names:
            raise EntryPointError(f"no public function @{entry}; public functions: {names or 'none'}")
        return public[names.index(entry)]
    if not public:
        raise EntryPointError("the module has no public func.func with a body to call")
    if len(public) > 1:
        raise EntryPointError(f"several public functions {names}; choose one with entry=")
    return public[0]


def _asm(module: ir.Module) -> str:
    return module.operation.get_asm(large_elements_limit=64)


def compile(
    source: "str | bytes | ir.Module",
    *,
    target: "str | Target" = "llvm",
    entry: str | None = None,
    pipeline: Pipeline | None = None,
    opt_level: int = 3,
    keep_ir: bool = True,
) -> CompiledModule:
    """Compile a linalg-on-tensors module for ``target`` and JIT it.

    Args:
      source: MLIR text or bytecode, or an ``mlir.ir.Module`` (left unchanged).
      target: ``"llvm"`` for the host CPU or ``"llvm -mcpu=... -mattr=..."``.
      entry: the public function to call; optional when there is exactly one.
      pipeline: a (possibly edited) pipeline; default ``cpu_pipeline(target)``.
      opt_level: LLVM optimization level for the JIT (0-3).
      keep_ir: keep the IR after each stage for :meth:`CompiledModule.ir`.
    """
    if opt_level not in (0, 1, 2, 3):
        raise ValueError(f"opt_level must be 0, 1, 2 or 3, got {opt_level!r}")
    target = Target.parse(target)
    pipeline = pipeline if pipeline is not None else cpu_pipeline(target)
    context = ir.Context()
    module = parse_module(source, context)
    with context, ir.Location.unknown():
        signature = EntrySignature.from_function(find_entry(module, entry))
        stage_ir: dict[str, str] = {"input": _asm(module)} if keep_ir else {}

        def record(stage: Stage, current: ir.Module) -> None:
            if keep_ir:
                stage_ir[stage.name] = _asm(current)

        pipeline.run(module, after_stage=record)
    return CompiledModule(
        module, signature, target=target, pipeline=pipeline, stage_ir=stage_ir, opt_level=opt_level
    )
