"""Splitting an LLVM-dialect module by function: which functions another process may
compile, and the module each part keeps.

Why a module of its own, importing nothing from tilecraft: the codegen worker
(codegen_worker.py) runs as a bare script in a fresh interpreter, so that its start costs
the MLIR bindings' import and nothing else (no numpy, no frontend); it imports this file
by path. The JIT (parallel_codegen.py) imports the same file as part of the package, so
the process that plans the split and the processes that compile the parts agree on what a
part is.
"""

from __future__ import annotations

from typing import Callable, Iterable

from mlir import ir

# The attributes through which an LLVM-dialect op names another symbol of the module
# (``llvm.call`` and ``llvm.invoke`` a callee, ``llvm.mlir.addressof`` a global or function).
_REFERENCE_ATTRIBUTES = ("callee", "global_name")
_LOCAL_LINKAGES = ("private", "internal")


class SplitError(Exception):
    """A part names a symbol the split did not allow it (a bug in the split's plan).

    Not a TilecraftError: this module is also run without the package (the worker script);
    the JIT wraps it into one."""


def symbol_name(op: ir.Operation) -> str | None:
    return ir.StringAttr(op.attributes["sym_name"]).value if "sym_name" in op.attributes else None


def linkage(op: ir.Operation) -> str:
    """The LLVM linkage of a function or global (``external`` when none is written)."""
    if "linkage" not in op.attributes:
        return "external"
    text = str(op.attributes["linkage"])  # #llvm.linkage<private>
    return text[text.find("<") + 1:text.rfind(">")] if "<" in text else text


def is_local(op: ir.Operation) -> bool:
    """Whether no one outside the module may name the function: private or internal
    linkage, or private MLIR symbol visibility (how func-to-llvm leaves private functions)."""
    if linkage(op) in _LOCAL_LINKAGES:
        return True
    return "sym_visibility" in op.attributes and ir.StringAttr(op.attributes["sym_visibility"]).value == "private"


def is_defined_function(op: ir.Operation) -> bool:
    return op.name == "llvm.func" and len(op.regions[0].blocks) > 0


# Conversions LLVM lowers to compiler-rt calls on targets without the instructions
# (``__truncsfbf2``, ``__extendhfsf2``): the JIT's process resolves them from a library it
# happens to have loaded, a bare worker process did not (a bf16 BERT layer's kernels failed
# with "Symbols not found: __truncsfbf2"). A function holding one names this pseudo-symbol,
# which nothing resolves, so it stays with the JIT.
HALF_PRECISION_CONVERSION = "<half-precision conversion: a compiler-rt call>"
_CONVERSIONS = frozenset({"llvm.fptrunc", "llvm.fpext"})


def _converts_half_precision(op: ir.Operation) -> bool:
    return op.name in _CONVERSIONS and any(
        "f16" in str(value.type) for value in (*op.operands, *op.results))


def references(op: ir.Operation) -> tuple[set[str], int]:
    """The symbols the ops nested in ``op`` name (callees, addresses taken; a half-precision
    conversion as :data:`HALF_PRECISION_CONVERSION`), and how many operations ``op`` holds
    (the part's size estimate)."""
    found: set[str] = set()
    count = 0

    def visit(nested: ir.Operation) -> ir.WalkResult:
        nonlocal count
        count += 1
        if _converts_half_precision(nested):
            found.add(HALF_PRECISION_CONVERSION)
        attributes = nested.attributes
        for name in _REFERENCE_ATTRIBUTES:
            if name in attributes:
                attribute = attributes[name]
                if isinstance(attribute, ir.FlatSymbolRefAttr):  # the bindings give the concrete class
                    found.add(attribute.value)
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return found, count


def movable_functions(module: ir.Module, resolvable: Callable[[str], bool]) -> dict[str, int]:
    """The functions of ``module`` another process may compile, with their operation counts.

    A function moves when it is local to the module (:func:`is_local`: a kernel the
    lowering outlined, never the entry) and everything it names can be found without
    this module's JIT: other movable functions, or declared functions ``resolvable`` says
    the process already provides (libc, the parallel-loop runtime, MLIR's runner
    utilities). A function naming a global (weights, messages, tables), a symbol the JIT
    binds by address (extern callbacks, the check reporter) or a function that stays
    behind, stays behind too (repeated until nothing changes)."""
    defined: dict[str, ir.Operation] = {}
    declared: set[str] = set()
    pinned: set[str] = set()  # named by something other than a function body (global_ctors...)
    for op in module.body.operations:
        op = op.operation
        name = symbol_name(op)
        if is_defined_function(op):
            defined[name] = op
        elif op.name == "llvm.func":
            declared.add(name)
        else:  # a global's initializer, global_ctors: what they name stays with the JIT
            pinned |= references(op)[0]
            for index in range(len(op.attributes)):
                pinned |= _symbols_in(op.attributes[index].attr)
    candidates: dict[str, tuple[set[str], int]] = {}
    for name, op in defined.items():
        if is_local(op) and name not in pinned:
            candidates[name] = references(op)
    allowed_external = {name for name in declared if resolvable(name)}
    changed = True
    while changed:
        changed = False
        for name in list(candidates):
            named, _ = candidates[name]
            if any(symbol != name and symbol not in candidates and symbol not in allowed_external
                   for symbol in named):
                del candidates[name]
                changed = True
    return {name: size for name, (_, size) in candidates.items()}


def _symbols_in(attribute: ir.Attribute) -> set[str]:
    """Symbol names inside an attribute (``llvm.mlir.global_ctors``' arrays of them)."""
    if isinstance(attribute, ir.FlatSymbolRefAttr):
        return {attribute.value}
    if isinstance(attribute, ir.ArrayAttr):
        found: set[str] = set()
        for element in attribute:
            found |= _symbols_in(element)
        return found
    return set()


def balance(sizes: dict[str, int], parts: int) -> list[list[str]]:
    """``sizes``' functions in at most ``parts`` groups of about equal operation counts
    (largest first, each into the lightest group), each group's names sorted."""
    groups: list[tuple[int, list[str]]] = [(0, []) for _ in range(max(1, parts))]
    for name in sorted(sizes, key=lambda n: (-sizes[n], n)):
        lightest = min(range(len(groups)), key=lambda i: groups[i][0])
        total, names = groups[lightest]
        groups[lightest] = (total + sizes[name], names + [name])
    return [sorted(names) for _, names in groups if names]


def _external(op: ir.Operation) -> None:
    op.attributes["linkage"] = ir.Attribute.parse("#llvm.linkage<external>")
    if "sym_visibility" in op.attributes:
        del op.attributes["sym_visibility"]


def _declare(op: ir.Operation) -> None:
    """Replace the function ``op`` by an external declaration of the same signature."""
    attributes = {op.attributes[i].name: op.attributes[i].attr for i in range(len(op.attributes))}
    attributes["linkage"] = ir.Attribute.parse("#llvm.linkage<external>")
    attributes.pop("sym_visibility", None)
    ir.Operation.create("llvm.func", attributes=attributes, regions=1, loc=op.location, ip=ir.InsertionPoint(op))
    op.erase()


def declare_functions(module: ir.Module, names: Iterable[str]) -> None:
    """In place: the functions ``names`` (compiled elsewhere) become external declarations,
    so that ``module``'s JIT binds them by address."""
    wanted = set(names)
    with module.context, ir.Location.unknown():
        for op in list(module.body.operations):
            op = op.operation
            if op.name == "llvm.func" and symbol_name(op) in wanted:
                _declare(op)


def keep_part(module: ir.Module, names: Iterable[str]) -> None:
    """In place: ``module`` reduced to one part, the functions ``names`` defined with
    external linkage (so that the parts link with each other and the JIT finds them), the
    symbols they name declared, everything else removed. :class:`SplitError` when a kept
    function names a global (the split keeps those functions behind)."""
    kept = set(names)
    with module.context, ir.Location.unknown():
        named: set[str] = set()
        for op in module.body.operations:
            op = op.operation
            if symbol_name(op) in kept:
                named |= references(op)[0]
        for op in list(module.body.operations):
            op = op.operation
            name = symbol_name(op)
            if name in kept:
                _external(op)
            elif op.name == "llvm.func" and name in named:
                if is_defined_function(op):
                    _declare(op)
                else:
                    _external(op)
            elif name in named:
                raise SplitError(f"a function of this part names the {op.name} {name!r}")
            else:
                op.erase()
