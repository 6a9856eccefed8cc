"""The C target's pipeline: linalg on tensors -> plain loops over plain buffers -> EmitC.

Why these steps, in this order:

- no schedule: the C compiler of the device vectorizes and unrolls (``-O2``/``-O3``); the
  loops stay ``linalg``'s own loop nests in the op's iteration order.
- ``tilecraft-c-out-params``: results become output arguments (``float *out``), written in
  place where the result buffer is a fresh allocation, copied otherwise (a result that is an
  input or a weight). Upstream ``buffer-results-to-out-params`` left the results of our
  functions in place (see shared/STACK.md); every ``memref.copy`` becomes ``linalg.copy`` so
  that it lowers to loops, not ``memcpy`` of a descriptor.
- ``fold-memref-alias-ops``: reshapes and subviews fold into the indices of the loads and
  stores that read through them, so only whole buffers are left (EmitC has no views).
- ``tilecraft-c-plan-workspace``: each ``memref.alloc`` becomes an argument that the
  entry wrapper points into the workspace at an offset planned here (workspace.py), each
  weight (``memref.get_global``) an argument pointing at a ``const`` array. What is left is a
  function over arrays that ``convert-to-emitc`` turns into an ``emitc.func``.
- ``tilecraft-c-math-to-libm``: math ops become calls of the C99 libm functions listed in
  :data:`LIBM_FUNCTIONS` (docs/c-target.md); anything else is a typed error.
- ``tilecraft-c-outline-nests``: each top-level loop nest becomes a function of the buffers
  it touches, which the plan made disjoint, so the packer can declare them ``restrict``.
- ``tilecraft-c-loop-hints``: each nest's innermost loop is preceded by the macro
  ``TC_MODEL_INNER_LOOP`` (package.py: GCC's ``unroll 1``), which keeps GCC's ``-O3``
  from unrolling it completely before its vectorizer sees it.
- ``tilecraft-c-omp-parallel`` (target ``c -openmp`` only): the outermost loop of each nest
  whose iterations touch disjoint slices of every buffer they write gets ``#pragma omp
  parallel for``.
"""

from __future__ import annotations

import re
from typing import Mapping

import numpy as np
from mlir import ir
from mlir.dialects import linalg

from ...ir.maps import indexing_maps, set_indexing_maps
from ...errors import CTargetShapeError, CTargetUnsupportedOpError
from ...pipelines.graph import graph_pass_elements
from ...pipelines.ir_queries import defined_functions, defining_op, ops_where, remap_operands
from ...pipelines.passes import register_pass, register_pipeline
from ...pipelines.pipeline import Pipeline, Stage
from ...pipelines.stages import input_stage, simplify_stage
from ...pipelines.tensor.loop_carried import LOOP_CARRIED_IN_PLACE
from ...pipelines.buffer import workspace

C_OUT_PARAMS = "tilecraft-c-out-params"
C_PLAN_WORKSPACE = "tilecraft-c-plan-workspace"
C_MATH_TO_LIBM = "tilecraft-c-math-to-libm"
C_CHECK = "tilecraft-c-check"
C_SIGNED_INDEX = "tilecraft-c-signed-index"
C_OUTLINE_NESTS = "tilecraft-c-outline-nests"
C_INNER_PARALLEL = "tilecraft-c-inner-parallel"
C_OMP_PARALLEL = "tilecraft-c-omp-parallel"
OMP_PRAGMA = "#pragma omp parallel for"
C_LOOP_HINTS = "tilecraft-c-loop-hints"
INNER_LOOP_MACRO = "TC_MODEL_INNER_LOOP"
NEST_PREFIX = "tc_model_nest"
# index op -> the cast that keeps its meaning in i64 (signed ops sign-extend, unsigned zero-extend)
_INDEX_OPS_IN_I64 = {"arith.remsi": "arith.index_cast", "arith.divsi": "arith.index_cast",
                     "arith.shrsi": "arith.index_cast", "arith.remui": "arith.index_castui",
                     "arith.divui": "arith.index_castui", "arith.shrui": "arith.index_castui"}

# Argument attributes the C packer reads (package.py).
OUTPUT_ATTR = "tilecraft.c_output"  # index of the function result this argument holds
OFFSET_ATTR = "tilecraft.c_workspace_offset"  # byte offset in the workspace
WEIGHT_ATTR = "tilecraft.c_weight"  # the weight's initial value (a dense / dense_resource attr)
WEIGHT_NAME_ATTR = "tilecraft.c_weight_name"
WORKSPACE_SIZE_ATTR = "tilecraft.c_workspace_size"  # on the function: planned bytes
BUFFER_TOTAL_ATTR = "tilecraft.c_buffer_total"  # on the function: sum of all buffers' bytes
BUFFER_COUNT_ATTR = "tilecraft.c_buffer_count"

# math op -> libm function (f32 name, f64 name). The documented list: the C target calls
# nothing else from libm (docs/c-target.md).
LIBM_FUNCTIONS: dict[str, tuple[str, str]] = {
    "math.exp": ("expf", "exp"), "math.exp2": ("exp2f", "exp2"), "math.expm1": ("expm1f", "expm1"),
    "math.log": ("logf", "log"), "math.log2": ("log2f", "log2"), "math.log10": ("log10f", "log10"),
    "math.log1p": ("log1pf", "log1p"), "math.sqrt": ("sqrtf", "sqrt"), "math.cbrt": ("cbrtf", "cbrt"),
    "math.powf": ("powf", "pow"), "math.tanh": ("tanhf", "tanh"), "math.sinh": ("sinhf", "sinh"),
    "math.cosh": ("coshf", "cosh"), "math.sin": ("sinf", "sin"), "math.cos": ("cosf", "cos"),
    "math.tan": ("tanf", "tan"), "math.asin": ("asinf", "asin"), "math.acos": ("acosf", "acos"),
    "math.atan": ("atanf", "atan"), "math.atan2": ("atan2f", "atan2"), "math.asinh": ("asinhf", "asinh"),
    "math.acosh": ("acoshf", "acosh"), "math.atanh": ("atanhf", "atanh"), "math.erf": ("erff", "erf"),
    "math.erfc": ("erfcf", "erfc"), "math.absf": ("fabsf", "fabs"), "math.floor": ("floorf", "floor"),
    "math.ceil": ("ceilf", "ceil"), "math.round": ("roundf", "round"), "math.roundeven": ("rintf", "rint"),
    "math.trunc": ("truncf", "trunc"), "math.copysign": ("copysignf", "copysign"),
    "math.fma": ("fmaf", "fma"), "arith.remf": ("fmodf", "fmod"),
}


def _element_bytes(element: ir.Type) -> int:
    if isinstance(element, ir.IndexType):
        return 8  # size_t: at most 8 bytes on every target, so the plan is safe everywhere
    if isinstance(element, (ir.IntegerType,)):
        return max(1, ir.IntegerType(element).width // 8)
    if isinstance(element, ir.F64Type):
        return 8
    if isinstance(element, ir.F32Type):
        return 4
    raise CTargetUnsupportedOpError(f"the C target has no C type for the element type {element}")


def buffer_bytes(memref: ir.MemRefType) -> int:
    """Bytes of a statically shaped buffer; :class:`CTargetShapeError` for a dynamic one."""
    if not memref.has_static_shape:
        raise CTargetShapeError(f"the C target needs static shapes, got a buffer {memref}: "
                                "pass shape_dict / --input-shapes with every dimension")
    return int(np.prod(memref.shape, dtype=np.int64)) * _element_bytes(memref.element_type)


def entry_function(module: ir.Operation) -> ir.Operation:
    """The one function the C target compiles (the packer reads its planned signature)."""
    functions = defined_functions(module)
    if len(functions) != 1:
        raise CTargetUnsupportedOpError(
            f"the C target compiles one function, found {len(functions)} "
            f"({', '.join(ir.StringAttr(f.attributes['sym_name']).value for f in functions)})")
    return functions[0]


def _function_type(func: ir.Operation) -> ir.FunctionType:
    return ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)


def argument_attributes(func: ir.Operation) -> list[dict[str, ir.Attribute]]:
    """Each argument's attributes by name (empty dicts where the function has none)."""
    count = len(func.regions[0].blocks[0].arguments)
    if "arg_attrs" not in func.attributes:
        return [{} for _ in range(count)]
    return [{named.name: named.attr for named in ir.DictAttr(a)} for a in ir.ArrayAttr(func.attributes["arg_attrs"])]


def _set_signature(func: ir.Operation, attrs: list[dict[str, ir.Attribute]], results: list[ir.Type]) -> None:
    block = func.regions[0].blocks[0]
    func.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get([a.type for a in block.arguments], results))
    func.attributes["arg_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get(a) for a in attrs])
    if "res_attrs" in func.attributes:
        del func.attributes["res_attrs"]


def _identity_memref(memref: ir.MemRefType) -> ir.MemRefType:
    """``memref`` with the identity layout: what a C array parameter is."""
    return ir.MemRefType.get(memref.shape, memref.element_type, loc=ir.Location.unknown())


def _top_level_ancestor(op: ir.Operation, func: ir.Operation) -> ir.Operation:
    while True:
        parent = op.parent
        if parent is None or parent == func:
            return op
        op = parent.operation if hasattr(parent, "operation") else parent


@register_pass(C_OUT_PARAMS, "C target: function results become output arguments; memref.copy becomes linalg.copy")
def out_params_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    func = entry_function(module)
    block = func.regions[0].blocks[0]
    for arg in block.arguments:
        if isinstance(arg.type, ir.MemRefType) and not ir.MemRefType(arg.type).has_static_shape:
            raise CTargetShapeError(f"the C target needs static shapes, got an argument {arg.type}: "
                                    "pass shape_dict / --input-shapes with every dimension")
    attrs = argument_attributes(func)
    terminator = block.operations[len(block.operations) - 1].operation
    returned = list(terminator.operands)
    for index, value in enumerate(returned):
        if not isinstance(value.type, ir.MemRefType):
            raise CTargetUnsupportedOpError(f"the C target returns buffers only, result {index} is {value.type}")
        memref = ir.MemRefType(value.type)
        buffer_bytes(memref)
        layout = ir.MemRefType.get(memref.shape, memref.element_type, loc=ir.Location.unknown())
        arg = block.add_argument(layout, terminator.location)
        attrs.append({OUTPUT_ATTR: ir.IntegerAttr.get(ir.IntegerType.get_signless(64), index)})
        owner = defining_op(value)
        if (owner is not None and owner.name == "memref.alloc" and owner.parent == func
                and returned.count(value) == 1 and memref.layout == layout.layout):
            value.replace_all_uses_with(arg)
            owner.erase()
        else:
            with ir.InsertionPoint(terminator), terminator.location:
                linalg.copy(value, outs=[arg])
    with ir.InsertionPoint(terminator), terminator.location:
        ir.Operation.create("func.return")
    terminator.erase()
    _set_signature(func, attrs, [])
    for copy in ops_where(module, lambda op: op.name == "memref.copy"):
        source, target = copy.operands
        with ir.InsertionPoint(copy), copy.location:
            linalg.copy(source, outs=[target])
        copy.erase()


@register_pass(C_PLAN_WORKSPACE,
               "C target: allocations become arguments at planned workspace offsets (liveness-based "
               "reuse), weights become arguments; memref.global ops are dropped",
               options={"alignment": "byte alignment of every buffer (default 16)"})
def plan_workspace_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    alignment = int(options.get("alignment", workspace.DEFAULT_ALIGNMENT))
    func = entry_function(module)
    block = func.regions[0].blocks[0]
    attrs = argument_attributes(func)
    allocs = ops_where(func, lambda op: op.name in ("memref.alloc", "memref.alloca", "memref.dealloc"))
    for op in allocs:
        if op.name == "memref.dealloc":
            op.erase()
            continue
        if op.parent != func:
            raise CTargetUnsupportedOpError(
                f"the C target plans whole-function buffers only; {op.name} inside a loop or branch at "
                f"{op.location} (a buffer chosen at run time, e.g. an axis given as an input)")
    allocs = [op for op in allocs if op.name != "memref.dealloc"]
    # A view left unfolded would hide uses of its buffer from the lifetimes below.
    views = ops_where(func, lambda op: op.name.startswith("memref.") and op.name not in _BUFFER_OPS
                      and any(isinstance(r.type, ir.MemRefType) for r in op.results))
    if views:
        raise CTargetUnsupportedOpError(f"the C target cannot translate the view {views[0].name} at "
                                        f"{views[0].location} (only loads and stores may read through views)")
    # Lifetimes: positions in the top-level op order, from the allocation to its last user.
    position = {op.operation: i for i, op in enumerate(block.operations)}
    users: dict[ir.Value, int] = {op.results[0]: position[op] for op in allocs}
    for op in block.operations:
        top = position[op.operation]
        for nested in ops_where(op.operation, lambda _: True):
            for operand in nested.operands:
                if operand in users:
                    users[operand] = max(users[operand], top)
    buffers = [workspace.Buffer(f"b{i}", buffer_bytes(ir.MemRefType(op.results[0].type)),
                                position[op], users[op.results[0]]) for i, op in enumerate(allocs)]
    plan = workspace.plan(buffers, alignment)
    workspace.check(buffers, plan, alignment)
    i64 = ir.IntegerType.get_signless(64)
    for buffer, op in zip(buffers, allocs):
        memref = ir.MemRefType(op.results[0].type)
        arg = block.add_argument(_identity_memref(memref), op.location)
        attrs.append({OFFSET_ATTR: ir.IntegerAttr.get(i64, plan.offsets[buffer.name])})
        op.results[0].replace_all_uses_with(arg)
        op.erase()
    globals_ = {ir.StringAttr(op.attributes["sym_name"]).value: op
                for op in ops_where(module, lambda op: op.name == "memref.global")}
    weight_args: dict[str, ir.Value] = {}
    for op in ops_where(func, lambda op: op.name == "memref.get_global"):
        name = ir.FlatSymbolRefAttr(op.attributes["name"]).value
        if name not in weight_args:
            memref = ir.MemRefType(op.results[0].type)
            buffer_bytes(memref)
            weight_args[name] = block.add_argument(_identity_memref(memref), op.location)
            attrs.append({WEIGHT_ATTR: globals_[name].attributes["initial_value"],
                          WEIGHT_NAME_ATTR: ir.StringAttr.get(name)})
        op.results[0].replace_all_uses_with(weight_args[name])
        op.erase()
    for op in globals_.values():
        op.erase()
    _scalars_as_one_element_arrays(block)
    _set_signature(func, attrs, [])
    func.attributes[WORKSPACE_SIZE_ATTR] = ir.IntegerAttr.get(i64, plan.size)
    func.attributes[BUFFER_TOTAL_ATTR] = ir.IntegerAttr.get(i64, plan.total)
    func.attributes[BUFFER_COUNT_ATTR] = ir.IntegerAttr.get(i64, len(buffers))


_BUFFER_OPS = frozenset({"memref.alloc", "memref.alloca", "memref.get_global"})


def _scalars_as_one_element_arrays(block: ir.Block) -> None:
    """Rank-0 buffers (a scalar tensor: ReduceSum without keepdims) become ``memref<1xT>``:
    EmitC has no rank-0 array, and ``convert-func-to-emitc`` failed on such an argument. An
    unused empty tensor (CastLike's ``like`` input, ``memref<0xf64>``) becomes one too: C
    has no zero-length array."""
    for arg in block.arguments:
        if not isinstance(arg.type, ir.MemRefType):
            continue
        memref = ir.MemRefType(arg.type)
        element = memref.element_type
        if memref.rank > 0 and 0 in memref.shape:
            if list(arg.uses):
                raise CTargetUnsupportedOpError(f"the C target has no zero-length arrays: {memref} is used")
            arg.set_type(ir.MemRefType.get([1], element, loc=ir.Location.unknown()))
            continue
        if memref.rank != 0:
            continue
        arg.set_type(ir.MemRefType.get([1], element, loc=ir.Location.unknown()))
        for use in list(arg.uses):
            op = use.owner.operation if hasattr(use.owner, "operation") else use.owner
            if op.name not in ("memref.load", "memref.store"):
                raise CTargetUnsupportedOpError(
                    f"the C target cannot index a scalar buffer in {op.name} at {op.location}")
            with ir.InsertionPoint(op), op.location:
                zero = ir.Operation.create("arith.constant", results=[ir.IndexType.get()],
                                           attributes={"value": ir.IntegerAttr.get(ir.IndexType.get(), 0)})
                new = ir.Operation.create(op.name, results=[r.type for r in op.results],
                                          operands=[*op.operands, zero.results[0]])
            for old, replacement in zip(op.results, new.results):
                old.replace_all_uses_with(replacement)
            op.erase()


def _load_emitc(context: ir.Context) -> None:
    context.dialects["emitc"]  # loads it: a dialect cannot be loaded while a pass runs


@register_pass(C_MATH_TO_LIBM, "C target: math ops (and arith.remf) become emitc.call_opaque of C99 libm "
               "functions (the documented list)", prepare=_load_emitc)
def math_to_libm_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    for op in ops_where(module, lambda op: op.name in LIBM_FUNCTIONS or op.name == "math.rsqrt"):
        result = op.results[0].type
        if not isinstance(result, (ir.F32Type, ir.F64Type)):
            raise CTargetUnsupportedOpError(f"the C target calls libm for f32/f64 scalars only; "
                                            f"{op.name} on {result} at {op.location}")
        single = isinstance(result, ir.F32Type)
        with ir.InsertionPoint(op), op.location:
            if op.name == "math.rsqrt":
                root = ir.Operation.create("emitc.call_opaque", results=[result], operands=list(op.operands),
                                           attributes={"callee": ir.StringAttr.get("sqrtf" if single else "sqrt")})
                one = ir.Operation.create("arith.constant", results=[result],
                                          attributes={"value": ir.FloatAttr.get(result, 1.0)})
                call = ir.Operation.create("arith.divf", results=[result],
                                           operands=[one.results[0], root.results[0]])
            else:
                name = LIBM_FUNCTIONS[op.name][0 if single else 1]
                call = ir.Operation.create("emitc.call_opaque", results=[result], operands=list(op.operands),
                                           attributes={"callee": ir.StringAttr.get(name)})
        op.results[0].replace_all_uses_with(call.results[0])
        op.erase()


@register_pass(C_SIGNED_INDEX, "C target: division, remainder and right shift of index values computed in "
               "i64 (EmitC prints index as size_t, where signed ones would be unsigned)")
def signed_index_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why: ``convert-arith-to-emitc`` turns ``arith.remsi`` of two ``index`` values into ``%``
    of two ``size_t`` values: unsigned, so ``(j - 2) mod 6`` of a reflect pad was wrong for
    ``j < 2``. ``arith.index_cast`` goes through ``ptrdiff_t`` (signed) in EmitC, so the op
    is done on i64 between two such casts. The unsigned ones (``divui``/``remui`` of index,
    from ConvTranspose's strided loops) have no EmitC pattern at all; zero-extended
    (``index_castui``) to i64 they do."""
    i64 = ir.IntegerType.get_signless(64)
    def on_index(op: ir.Operation) -> bool:
        return op.name in _INDEX_OPS_IN_I64 and isinstance(op.results[0].type, ir.IndexType)

    for op in ops_where(module, on_index):
        cast = _INDEX_OPS_IN_I64[op.name]
        with ir.InsertionPoint(op), op.location:
            operands = [ir.Operation.create(cast, results=[i64], operands=[v]).results[0] for v in op.operands]
            wide = ir.Operation.create(op.name, results=[i64], operands=operands)
            back = ir.Operation.create(cast, results=[op.results[0].type], operands=[wide.results[0]])
        op.results[0].replace_all_uses_with(back.results[0])
        op.erase()


@register_pass(C_INNER_PARALLEL, "C target: the loop over the output's contiguous dimension of each "
               "linalg.generic moved innermost (past the reductions), where C compilers vectorize it")
def inner_parallel_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why: linalg's own loop order puts reductions innermost (``C[i,j] += A[i,k] * B[k,j]``
    loops i, j, k): the inner loop is a scalar sum over a strided column, which a C compiler
    may not vectorize without reassociating floats. With the output's last dimension
    innermost (i, k, j) it is an elementwise multiply-add over contiguous rows, which
    ``-O2``/``-O3`` vectorize as written. Every output element still sums its terms in the
    same order, so the results are bitwise those of the old order. Kept as they are: ops
    whose body reads ``linalg.index`` (loop positions), and ops where an operand indexed by
    that dimension has another one last (``y[i] += x[i, k]``: the inner loop would stride
    across rows of ``x``)."""
    def interchangeable(op: ir.Operation) -> bool:
        return op.name == "linalg.generic" and not ops_where(op, lambda o: o.name == "linalg.index")

    for op in ops_where(module, interchangeable):
        iterators = list(ir.ArrayAttr(op.attributes["iterator_types"]))
        maps = indexing_maps(op)
        output = maps[-1]
        if not output.results:
            continue
        last = output.results[-1]
        if not isinstance(last, ir.AffineDimExpr):
            continue
        inner = last.position
        count = len(iterators)
        if inner == count - 1 or "parallel" not in str(iterators[inner]):
            continue
        uses = re.compile(rf"\bd{inner}\b")
        if any(any(uses.search(str(e)) for e in m.results) and not uses.search(str(m.results[-1]))
               for m in maps[:-1] if m.results):
            continue  # an operand would be read across rows in the inner loop (a row sum): keep
        order = [d for d in range(count) if d != inner] + [inner]  # new loop i runs old loop order[i]
        inverse = [order.index(d) for d in range(count)]
        with op.context:
            to_old = ir.AffineMap.get(count, 0, [ir.AffineDimExpr.get(inverse[d]) for d in range(count)])
            set_indexing_maps(op, [ir.AffineMap.get(count, m.n_symbols, [e.compose(to_old) for e in m.results])
                                   for m in maps])
            op.attributes["iterator_types"] = ir.ArrayAttr.get([iterators[d] for d in order])


def _defined_inside(op: ir.Operation) -> set[ir.Value]:
    inside: set[ir.Value] = set()
    for nested in ops_where(op, lambda _: True):
        inside.update(nested.results)
        for region in nested.regions:
            for block in region.blocks:
                inside.update(block.arguments)
    return inside


@register_pass(C_OUTLINE_NESTS, "C target: each top-level loop nest of the entry becomes a private function of "
               "the buffers it touches (which the workspace plan makes disjoint: restrict-safe)",
               options={"prefix": f"name prefix of the outlined functions (default {NEST_PREFIX})"})
def outline_nests_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why: every buffer a nest reads or writes is alive during that nest, so the plan gave
    them disjoint bytes; as parameters of a function of their own they can be ``restrict``
    (package.py adds it), which lets the C compiler keep accumulators in registers
    and vectorize. In one function for the whole model they could not: buffers that share
    bytes at different times would be parameters of the same function. Constants are cloned
    into each nest, not passed."""
    prefix = options.get("prefix", NEST_PREFIX)
    func = entry_function(module)
    block = func.regions[0].blocks[0]
    count = 0
    for op in list(block.operations):
        op = op.operation
        if op.name != "scf.for" or len(op.results):
            continue
        inside = _defined_inside(op)
        captured: list[ir.Value] = []
        for nested in ops_where(op, lambda _: True):
            for value in nested.operands:
                if value not in inside and value not in captured:
                    captured.append(value)
        name = f"{prefix}{count}"
        count += 1
        body, params, mapping = _private_function(name, captured, ir.InsertionPoint(func), op.location)
        with ir.InsertionPoint(body), op.location:
            clone = op.clone()
            ir.Operation.create("func.return")
        remap_operands(clone, mapping)
        with ir.InsertionPoint(op), op.location:
            ir.Operation.create("func.call", operands=params,
                                attributes={"callee": ir.FlatSymbolRefAttr.get(name)})
        op.erase()


def _private_function(name: str, captured: list[ir.Value], at: ir.InsertionPoint,
                      location: ir.Location) -> tuple[ir.Block, list[ir.Value], dict[ir.Value, ir.Value]]:
    """A private ``func.func name`` inserted at ``at`` taking the non-constant ``captured``
    values (``params``, in order) as arguments; constants are cloned into its entry block.
    Returns (entry block, params, mapping from captured values to their values inside)."""
    constants = [v for v in captured if (d := defining_op(v)) is not None and d.name == "arith.constant"]
    params = [v for v in captured if v not in constants]
    with at, location:
        outlined = ir.Operation.create(
            "func.func", regions=1,
            attributes={"sym_name": ir.StringAttr.get(name), "sym_visibility": ir.StringAttr.get("private"),
                        "function_type": ir.TypeAttr.get(ir.FunctionType.get([v.type for v in params], []))})
    entry = outlined.regions[0].blocks.append(*[v.type for v in params], arg_locs=[location] * len(params))
    mapping: dict[ir.Value, ir.Value] = dict(zip(params, entry.arguments))
    with ir.InsertionPoint(entry), location:
        for value in constants:
            mapping[value] = defining_op(value).clone().results[0]
    return entry, params, mapping


def _constant_index(value: ir.Value) -> int | None:
    owner = defining_op(value)
    if owner is None or owner.name != "arith.constant":
        return None
    return ir.IntegerAttr(owner.attributes["value"]).value


def _trip_count(loop: ir.Operation) -> int | None:
    low, high, step = (_constant_index(v) for v in list(loop.operands)[:3])
    if low is None or high is None or not step:
        return None
    return max(0, -(-(high - low) // step))


def _iterations_disjoint(loop: ir.Operation) -> bool:
    """True when the iterations of ``loop`` can run in any order, at the same time: it
    carries no values, and for every buffer stored to inside it, one index of every access
    (load or store) of that buffer is the loop's induction variable itself. Then iteration
    ``i`` reads and writes only the slice ``i`` of each buffer it writes (buffers it only
    reads are shared safely); conservative: a written buffer indexed any other way says no."""
    if len(loop.results):
        return False
    induction = loop.regions[0].blocks[0].arguments[0]
    accesses: list[tuple[ir.Value, list[ir.Value]]] = []
    written: list[ir.Value] = []
    for op in ops_where(loop, lambda o: o.name in ("memref.load", "memref.store")):
        operands = list(op.operands)
        if op.name == "memref.store":
            accesses.append((operands[1], operands[2:]))
            written.append(operands[1])
        else:
            accesses.append((operands[0], operands[1:]))
    if not written:
        return False
    for buffer in written:
        positions: set[int] | None = None
        for accessed, indices in accesses:
            if accessed == buffer:
                here = {i for i, index in enumerate(indices) if index == induction}
                positions = here if positions is None else positions & here
                if not positions:
                    return False
    return True


def _outermost_parallel_loop(loop: ir.Operation) -> ir.Operation | None:
    """The first loop of the nest, going inward through perfectly nested loops, that runs
    more than once and whose iterations are disjoint (:func:`_iterations_disjoint`)."""
    while True:
        count = _trip_count(loop)
        if count is not None and count > 1 and _iterations_disjoint(loop):
            return loop
        body = [op.operation for op in loop.regions[0].blocks[0].operations]
        inner = [op for op in body if op.name == "scf.for"]
        others = [op for op in body if op.name not in ("scf.for", "scf.yield", "arith.constant")
                  and not op.name.startswith(("arith.", "math."))]
        if len(inner) != 1 or others:
            return None
        loop = inner[0]


@register_pass(C_OMP_PARALLEL, "C target with -openmp: '#pragma omp parallel for' (an emitc.verbatim) before the "
               "outermost loop of each nest whose iterations write disjoint slices", prepare=_load_emitc)
def omp_parallel_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why this analysis and not linalg's iterator types: the loops are plain ``scf.for``
    by now (``convert-linalg-to-loops``), and a nest's first loop is often a batch of one
    (folded away by canonicalize) or a reduction; what makes a loop safe to split across
    threads is read off the loads and stores themselves. Each nest is one outlined
    function, so the pragma's loop never shares a written buffer with another nest.

    The loop's body becomes a function of its own (``<nest>_body``, restrict parameters like
    the nest's: package.py): GCC outlines an OpenMP loop into a function that reaches the
    buffers through a struct of pointers, which drops ``restrict``; the inner loops then
    stopped vectorizing (a BERT layer ran 17x slower on one thread before this)."""
    for func in _nest_functions(module):
        name = ir.StringAttr(func.attributes["sym_name"]).value
        for op in list(func.regions[0].blocks[0].operations):
            if op.operation.name != "scf.for":
                continue
            chosen = _outermost_parallel_loop(op.operation)
            if chosen is None:
                continue
            _outline_body(chosen, f"{name}_body", func)
            with ir.InsertionPoint(chosen), chosen.location:
                ir.Operation.create("emitc.verbatim", attributes={"value": ir.StringAttr.get(OMP_PRAGMA)})
        for op in list(func.regions[0].blocks[0].operations):  # constants only the body used
            if op.operation.name == "arith.constant" and not list(op.operation.results[0].uses):
                op.operation.erase()


def _outline_body(loop: ir.Operation, name: str, before: ir.Operation) -> None:
    """Move the body of ``loop`` (all but its ``scf.yield``) into the private function
    ``name(induction variable, captured values...)``, placed before ``before`` and called
    from the loop; constants are cloned in, not passed."""
    block = loop.regions[0].blocks[0]
    body = [op.operation for op in block.operations]
    terminator, body = body[-1], body[:-1]
    inside: set[ir.Value] = set()
    for op in body:
        inside |= _defined_inside(op)
    captured: list[ir.Value] = [block.arguments[0]]
    for op in body:
        for nested in ops_where(op, lambda _: True):
            for value in nested.operands:
                if value not in inside and value not in captured:
                    captured.append(value)
    entry, params, mapping = _private_function(name, captured, ir.InsertionPoint(before), loop.location)
    with ir.InsertionPoint(entry), loop.location:
        for op in body:
            clone = op.clone()
            remap_operands(clone, mapping)
            mapping.update(zip(op.results, clone.results))
        ir.Operation.create("func.return")
    with ir.InsertionPoint(terminator), loop.location:
        ir.Operation.create("func.call", operands=params, attributes={"callee": ir.FlatSymbolRefAttr.get(name)})
    for op in reversed(body):
        op.erase()


def _nest_functions(module: ir.Operation) -> list[ir.Operation]:
    return ops_where(module, lambda op: op.name == "func.func"
                     and ir.StringAttr(op.attributes["sym_name"]).value.startswith(NEST_PREFIX))


def _after_verbatim(op: ir.Operation) -> bool:
    """Whether ``op`` directly follows an ``emitc.verbatim`` (a pragma that must stay next to it)."""
    previous = None
    for sibling in op.block.operations:
        if sibling.operation == op:
            return previous is not None and previous.name == "emitc.verbatim"
        previous = sibling.operation
    return False


@register_pass(C_LOOP_HINTS, f"C target: {INNER_LOOP_MACRO} (an emitc.verbatim) before the innermost loop of each "
               "nest, where package.py defines it as GCC's 'unroll 1'", prepare=_load_emitc)
def loop_hints_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    """Why: the innermost loop runs over the output's contiguous dimension (inner-parallel),
    often 16 or fewer iterations of a packed weight. GCC 12's ``-O3`` unrolled it completely
    before vectorizing (``cunrolli``), then vectorized the reduction loop around it with
    strided loads instead: 4-5x slower than ``-O2`` on a BERT layer (docs/performance.md).
    ``#pragma GCC unroll 1`` on that loop leaves it to the vectorizer; other compilers see an
    empty macro. (The unroll-and-jam of the loop around it, the other half, is switched off
    for the file in package.py: GCC has no per-loop pragma for it.)"""
    for func in _nest_functions(module):
        for loop in ops_where(func, lambda op: op.name == "scf.for"):
            if ops_where(loop, lambda op: op.name == "scf.for" and op != loop) or _after_verbatim(loop):
                continue
            with ir.InsertionPoint(loop), loop.location:
                ir.Operation.create("emitc.verbatim", attributes={"value": ir.StringAttr.get(INNER_LOOP_MACRO)})


def _unsupported(op: ir.Operation) -> bool:
    dialect = op.name.split(".")[0]
    return dialect not in ("emitc", "builtin")


@register_pass(C_CHECK, "C target: fail with the name of the first op EmitC did not translate")
def check_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    left = ops_where(module, _unsupported)
    if left:
        names = sorted({op.name for op in left})
        raise CTargetUnsupportedOpError(
            f"the C target cannot translate {', '.join(names)} (first at {left[0].location})")


def c_pipeline(*, opt_level: int = 0, openmp: bool = False) -> Pipeline:
    """linalg on tensors -> ``emitc.func`` s over arrays (the entry and one per loop nest),
    which ``mlir-translate --mlir-to-cpp`` then prints (package.py).

    Without the run-time checks (pipelines/tensor/runtime_checks.py): shapes are static here, so
    no shape or allocation check would remain, and an index check reports through the
    JIT's or a package's runtime, which a microcontroller does not have. Gathers and
    scatters still clamp their indices, so a bad index never reads or writes outside a
    buffer; it is not reported (docs/c-target.md). ``openmp``: the ``tilecraft-c-omp-parallel``
    pragmas (target ``c -openmp``)."""
    graph_elements = [e for e in graph_pass_elements(opt_level) if e != "tilecraft-mark-groups"]
    return Pipeline((
        input_stage(),
        *((Stage("graph", tuple(graph_elements), "graph passes for opt_level"),) if graph_elements else ()),
        simplify_stage(runtime_checks=False),
        Stage("bufferize",
              (LOOP_CARRIED_IN_PLACE,
               "one-shot-bufferize{bufferize-function-boundaries "
               "function-boundary-type-conversion=identity-layout-map}",
               "canonicalize", "func.func(buffer-loop-hoisting)", C_OUT_PARAMS),
              "a loop's carried tensors updated in their own buffers; tensors to buffers, those of "
              "a loop's step allocated once outside it; results as output arguments"),
        Stage("loops",
              # scf.forall: the row bands of a grouped convolution (ir/conv.py) are built
              # as one; C runs them in order.
              ("func.func(scf-forall-to-for)", "linalg-generalize-named-ops", C_INNER_PARALLEL,
               "convert-linalg-to-loops", "fold-memref-alias-ops", "lower-affine", "arith-expand",
               "canonicalize", "cse"),
              "parallel bands and linalg to loops; views folded into indices; affine to arith"),
        Stage("workspace", (C_PLAN_WORKSPACE,),
              "buffers into one planned workspace, weights as arguments"),
        Stage("emitc", (C_SIGNED_INDEX, C_MATH_TO_LIBM, C_OUTLINE_NESTS, "canonicalize",
                        *((C_OMP_PARALLEL,) if openmp else ()), C_LOOP_HINTS, "convert-to-emitc", "canonicalize",
                        C_CHECK),
              "math to libm calls; one function per loop nest; arith/scf/memref/func to EmitC"),
    ))


@register_pipeline("tilecraft-lower-c",
                   "The whole C target pipeline (c_pipeline, opt_level 0) from linalg on tensors to EmitC; "
                   "print it with mlir-translate --mlir-to-cpp")
def lower_c_pipeline(options: Mapping[str, str]) -> list[str]:
    return c_pipeline().pass_elements()
