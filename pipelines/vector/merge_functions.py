"""``tilecraft-merge-identical-functions``: one copy of each private ``llvm.func`` body.

Why: a network repeats its blocks (ResNet-50: 16 bottlenecks in 4 stages, all but the first
of each stage with the same shapes), so the same schedule makes the same kernels, and the
async lowering outlines each parallel loop into its own ``parallel_compute_fn_<n>`` and
``async_dispatch_fn_<n>``. The weights reach them as arguments, so two blocks' kernels are
the same function under two names — and LLVM optimized and compiled each copy: the JIT was
most of a ResNet-50 compile (docs/performance.md, "Compile time"). Here, before LLVM sees
the module, every private function whose body is identical to an earlier one's is erased
and its uses point at the earlier one; merging compute functions makes their dispatch
functions identical in turn (and they call each other in cycles: dispatch -> execute ->
dispatch). The code that runs is the same code (LLVM's own MergeFunctions pass would do
this after optimizing every copy).

Two functions are merged when their printed text (no locations), with the names of the
candidate functions they reference blanked, is the same, and the functions they reference
are pairwise merged too (partition refinement). Public functions (the entry and its C
interface, which the runtime looks up by name) are never merged.
"""

from __future__ import annotations

import re
from typing import Mapping

from mlir import ir

from ..passes import register_pass

MERGE_IDENTICAL_FUNCTIONS = "tilecraft-merge-identical-functions"
_REFERENCE = re.compile(r"@([A-Za-z_][\w$.]*)")
_PLAIN_NAME = re.compile(r"[A-Za-z_][\w$.]*\Z")


def _defined_functions(module: ir.Operation) -> dict[str, tuple[ir.Operation, bool]]:
    """Name -> (``llvm.func`` with a body, whether it may be merged: private, plain name)."""
    functions = {}
    for op in module.regions[0].blocks[0].operations:
        op = op.operation
        if op.name != "llvm.func" or not op.regions[0].blocks:
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        private = ("sym_visibility" in op.attributes
                   and ir.StringAttr(op.attributes["sym_visibility"]).value == "private")
        functions[name] = (op, private and bool(_PLAIN_NAME.match(name)))  # quoted names: left alone
    return functions


def equivalence_classes(shapes: dict[str, str], references: dict[str, list[str]]) -> dict[str, int]:
    """Function name -> class: functions of one class have the same ``shapes`` (text with
    references to candidates blanked) and reference, in order, functions of one class.

    Partition refinement (bisimulation), because functions refer to each other in cycles:
    a dispatch function calls its execute function, which calls the dispatch function."""
    ids: dict[object, int] = {}
    classes = {name: ids.setdefault(shape, len(ids)) for name, shape in shapes.items()}
    while True:
        ids = {}
        refined = {name: ids.setdefault((classes[name], tuple(classes[r] for r in references[name])), len(ids))
                   for name in shapes}
        if len(ids) == len(set(classes.values())):
            return classes
        classes = refined


def merge_identical_functions(module: ir.Operation) -> int:
    """Merge the private ``llvm.func``s of ``module`` that compute the same thing (module
    docstring); returns how many were erased."""
    functions = _defined_functions(module)
    candidates = {name for name, (_, mergeable) in functions.items() if mergeable}
    shapes: dict[str, str] = {}
    references: dict[str, list[str]] = {}
    for name, (op, _) in functions.items():
        found: list[str] = []

        def blank(match: re.Match) -> str:
            if match.group(1) not in candidates:
                return match.group(0)
            found.append(match.group(1))
            return "@?"

        shape = _REFERENCE.sub(blank, op.get_asm(use_local_scope=True, assume_verified=True))
        references[name] = found
        if name in candidates:
            shapes[name] = shape
    keepers: dict[int, str] = {}
    replaced: dict[str, str] = {}
    for name, cls in equivalence_classes(shapes, {n: references[n] for n in shapes}).items():
        keeper = keepers.setdefault(cls, name)
        if keeper != name:
            replaced[name] = keeper
    # Symbol uses renamed in the functions that hold them (a walk of the whole module per
    # erased function cost more than finding them).
    for name, (op, _) in functions.items():
        if name in replaced:
            continue
        for old in dict.fromkeys(r for r in references[name] if r in replaced):
            ir.SymbolTable.replace_all_symbol_uses(old, replaced[old], op)
    for name in replaced:
        functions[name][0].erase()
    return len(replaced)


@register_pass(
    MERGE_IDENTICAL_FUNCTIONS,
    "Keep one copy of each private llvm.func body (repeated blocks' kernels), so LLVM "
    "optimizes and compiles each once",
)
def merge_identical_functions_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    merge_identical_functions(module)
