"""Shared-memory buffers aligned to 16 bytes (``tilecraft-gpu-align-shared``).

A kernel's workgroup attributions (the schedule's shared-memory tiles) become ``.shared``
arrays in PTX aligned to their element type only (``.align 2`` for f16), but the instructions
that read them need more: ``ldmatrix`` (tensor cores) takes 16-byte aligned row addresses,
and a 128-bit ``ld.shared.v4``/``st.shared.v4`` a 16-byte aligned address. The lowering of
``gpu.func`` (``convert-gpu-to-nvvm``) takes each attribution's ``llvm.align``, so this pass,
run after outlining, sets it to 16 on every workgroup attribution that asks for less: the
tiles' row pitches are multiples of 16 bytes where those instructions are used, so a 16-byte
aligned base makes every row address aligned. It costs at most 14 bytes of padding per buffer.
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir

from ...pipelines.ir_queries import ops_where
from ...pipelines.passes import register_pass

ALIGN_SHARED = "tilecraft-gpu-align-shared"
SHARED_ALIGNMENT = 16
_ATTRIBUTES = "workgroup_attrib_attrs"
_ALIGN = "llvm.align"


def align_workgroup_attributions(func: ir.Operation, alignment: int = SHARED_ALIGNMENT) -> None:
    """Give each workgroup attribution of the ``gpu.func`` ``func`` an ``llvm.align`` of at
    least ``alignment`` bytes (attributions already aligned further keep theirs)."""
    count = ir.IntegerAttr(func.attributes["workgroup_attributions"]).value \
        if "workgroup_attributions" in func.attributes else 0
    if count == 0:
        return
    old = list(ir.ArrayAttr(func.attributes[_ATTRIBUTES])) if _ATTRIBUTES in func.attributes \
        else [ir.DictAttr.get({}) for _ in range(count)]
    i64 = ir.IntegerType.get_signless(64)
    new = []
    for attrs in old:
        entries = {named.name: named.attr for named in ir.DictAttr(attrs)}
        current = ir.IntegerAttr(entries[_ALIGN]).value if _ALIGN in entries else 0
        entries[_ALIGN] = ir.IntegerAttr.get(i64, max(current, alignment))
        new.append(ir.DictAttr.get(entries))
    func.attributes[_ATTRIBUTES] = ir.ArrayAttr.get(new)


@register_pass(ALIGN_SHARED, "Align every kernel's shared-memory buffers to 16 bytes (ldmatrix, "
                             "128-bit shared accesses)")
def align_shared_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    for func in ops_where(module, lambda op: op.name == "gpu.func"):
        align_workgroup_attributions(func)
