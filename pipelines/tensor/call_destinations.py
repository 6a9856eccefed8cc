"""A kernel call whose destination is a slice of a larger tensor takes the larger tensor:
``tilecraft-call-destinations``.

Why: with ``keep-kernels`` (schedule/repeated_kernels.py) each distinct kernel stays a
private function that the entry calls, and its output buffer is an argument (the
``tensor.empty`` the schedule wrote into). The pad and concat destination passes
(pad_destinations.py, concat_destinations.py) and ``eliminate-empty-tensors`` then make
that argument a slice of the padded or concatenated result:

    %s = tensor.extract_slice %d[offsets] [sizes] [1...]
    %r = call @kernel(..., %s, ...)
    %d2 = tensor.insert_slice %r into %d[offsets] [sizes] [1...]

and bufferizing a function boundary with identity layouts (the kernels keep static unit
strides, which their vector code needs) copied the strided slice into a fresh buffer
before the call and back after it: two copies of every padded producer's output (ResNet-50:
20 calls, 40 copies per inference).

Here the call takes ``%d`` itself and a copy of the kernel, specialized to that slice,
extracts it on entry and inserts its result on return:

    %d2 = call @kernel__into_N(..., %d, ...)    // extract_slice / insert_slice inside

so bufferization writes the kernel's output in place into the larger buffer, as it did
when the kernel's body was inlined. Calls with the same kernel, slice and larger type share
one specialized copy (a network's repeated blocks pad alike). A slice only one call writes
(DenseNet's concat offsets differ layer by layer) gets no copy: that call is inlined, as it
was before kernels were kept. A kernel left with no call of its own is erased. Only static
slices with unit strides qualify, and only when the slice feeds nothing but the call and the call's result
nothing but the insert, so the rewrite keeps every value as it was.

The slice may reach the call expanded and its result be collapsed back before the insert
(``expand_shape`` of the slice, ``collapse_shape`` of the result, one reassociation): a 5-D
transpose writing its part of a concat (concat_destinations.py, a reshaped part). The copy of
the kernel then expands the slice on entry and collapses its result before the insert; without
it the identity-layout boundary copied the strided expanded view in and out.

A call's result may also be carried on before it is inserted: a max pool's -inf fill is a
kernel of its own at one thread, and the pool accumulates into its result before that is
inserted into the padded buffer (Inception's pools: 6 copies per call, the interior copied
out for the fill and back after the pool). When the larger tensor has no user but the slice
and that later insert, the call takes the larger tensor as above, what used its result reads
the slice of the call's new result, and the insert goes into that result (equal to the larger
tensor outside the slice, since the kernel's copy inserts nothing else), so the fill, the
accumulation and the insert are all in place.

The same holds for a slice a kernel only reads (a split as views): ShuffleNet's second half of
each channel split fed its 1x1 convolution's kernel as ``tensor.extract_slice %shuffled[...,
58] [..., 58]``, and the identity-layout boundary copied those channels into a buffer of their
own before every call. A call whose input is such a slice, and whose kernel only reads that
argument (transfer reads, slices, ``linalg`` inputs), takes the larger tensor, and a copy of
the kernel, shared by the calls with the same kernel, argument and slice, extracts it on entry:
bufferized, a strided view of the larger buffer, read where it lies. A source slice only one
call reads is left as it was (a copy of the kernel for one call is no cheaper than the copy of
the slice).
"""

from __future__ import annotations

from typing import Mapping

from mlir import ir

from ..ir_queries import KERNEL_FUNCTION_PREFIX, defining_op, ops_where
from ..passes import register_pass

CALL_DESTINATIONS = "tilecraft-call-destinations"
SPECIALIZED_SUFFIX = "__into_"
SOURCE_SUFFIX = "__from_"


def _static_slice(op: ir.Operation | None, operands: int) -> bool:
    """``op`` is a ``tensor.extract_slice`` / ``insert_slice`` with static offsets, sizes and
    unit strides (no operands beyond its ``operands`` tensors)."""
    if op is None or len(op.operands) != operands:
        return False
    strides = ir.DenseI64ArrayAttr(op.attributes["static_strides"])
    return all(stride == 1 for stride in strides)


def _same_slice(extract: ir.Operation, insert: ir.Operation) -> bool:
    return all(str(extract.attributes[name]) == str(insert.attributes[name])
               for name in ("static_offsets", "static_sizes", "static_strides"))


def _users(value: ir.Value) -> list[ir.Operation]:
    return [getattr(use.owner, "operation", use.owner) for use in value.uses]


def _destination_pair(call: ir.Operation) -> tuple | None:
    """(operand index, result index, extract_slice, insert_slice, expand_shape, collapse_shape)
    of the first slice of a larger tensor that ``call`` writes and that is inserted back where
    it was taken; the two reshapes are None, or the slice reaches the call expanded and its
    result is collapsed back before the insert (a transpose's 5-D destination in a concat:
    concat_destinations.py, "reshape of a producer's result")."""
    for index, operand in enumerate(call.operands):
        view = defining_op(operand)
        expand = None
        if view is not None and view.name == "tensor.expand_shape" and len(view.operands) == 1:
            if _users(operand) != [call]:
                continue
            expand, operand = view, view.operands[0]
            view = defining_op(operand)
        extract = view
        if extract is None or extract.name != "tensor.extract_slice" or not _static_slice(extract, 1):
            continue
        if _users(operand) != [expand if expand is not None else call]:
            continue
        larger = extract.operands[0]
        for number, result in enumerate(call.results):
            users = _users(result)
            if len(users) != 1:
                continue
            insert, collapse, inserted = users[0], None, result
            if expand is not None:
                collapse = insert
                if (collapse.name != "tensor.collapse_shape"
                        or str(collapse.attributes["reassociation"]) != str(expand.attributes["reassociation"])
                        or len(_users(collapse.results[0])) != 1):
                    continue
                inserted = collapse.results[0]
                insert = _users(inserted)[0]
            if (insert.name == "tensor.insert_slice" and _static_slice(insert, 2)
                    and insert.operands[0] == inserted and insert.operands[1] == larger
                    and _same_slice(extract, insert)):
                return index, number, extract, insert, expand, collapse
        if expand is None and (insert := _later_insert(call, extract)) is not None and len(call.results) == 1:
            return index, 0, extract, insert, None, None
    return None


def _later_insert(call: ir.Operation, extract: ir.Operation) -> ir.Operation | None:
    """The ``tensor.insert_slice`` after ``call`` that puts something back into the slice
    ``extract`` took, when the larger tensor has no other user: a kernel whose result is
    carried on by loops before it is inserted (an -inf fill, then the max pool that
    accumulates into it: Inception's pools into padded buffers, at one thread)."""
    larger = extract.operands[0]
    others = [user for user in _users(larger) if user != extract]
    if len(others) != 1:
        return None
    insert = others[0]
    if (insert.name == "tensor.insert_slice" and _static_slice(insert, 2)
            and insert.operands[1] == larger and insert.operands[0] != larger
            and insert.operands[0] not in list(call.results)  # read elsewhere too: left alone
            and _same_slice(extract, insert) and insert.block == call.block
            and call.is_before_in_block(insert)):
        return insert
    return None


_READ_ONLY_USERS = ("vector.transfer_read", "tensor.extract", "tensor.dim")
_VIEW_USERS = ("tensor.extract_slice", "tensor.expand_shape", "tensor.collapse_shape")


def _only_read(value: ir.Value) -> bool:
    """Every use of ``value`` (a kernel's argument) reads it: a transfer read, an element
    read, a view that is itself only read, or an input (not an init) of a ``linalg`` op.
    What writes it (an init, a loop's shared output) would make the larger tensor passed in
    its place a value the kernel changes, and bufferization copy all of it."""
    for use in value.uses:
        owner = getattr(use.owner, "operation", use.owner)
        if owner.name in _READ_ONLY_USERS:
            continue
        if owner.name in _VIEW_USERS and use.operand_number == 0:
            if all(_only_read(result) for result in owner.results):
                continue
            return False
        if owner.name.startswith("linalg.") and "operandSegmentSizes" in owner.attributes:
            inputs = ir.DenseI32ArrayAttr(owner.attributes["operandSegmentSizes"])[0]
            if use.operand_number < inputs:
                continue
        return False
    return True


def _source_slices(call: ir.Operation, function: ir.Operation) -> list[tuple[int, ir.Operation]]:
    """(operand index, extract_slice) of each input of ``call`` that is a static slice of a
    larger tensor and that ``function`` (its callee) only reads."""
    arguments = function.regions[0].blocks[0].arguments
    found = []
    for index, operand in enumerate(call.operands):
        extract = defining_op(operand)
        if extract is None or extract.name != "tensor.extract_slice" or not _static_slice(extract, 1):
            continue
        if _only_read(arguments[index]):
            found.append((index, extract))
    return found


def _source_key(call: ir.Operation, index: int, extract: ir.Operation) -> tuple:
    """Which specialized copy serves the source slice ``extract`` at argument ``index``."""
    return ("source", ir.FlatSymbolRefAttr(call.attributes["callee"]).value, index,
            str(extract.operands[0].type),
            *(str(extract.attributes[n]) for n in ("static_offsets", "static_sizes", "static_strides")))


def _specialize_source(function: ir.Operation, name: str, index: int, extract: ir.Operation,
                       larger: ir.Type, expand: ir.Operation | None = None) -> ir.Operation:
    """A copy of ``function`` named ``name`` whose argument ``index`` is the larger tensor
    that it extracts the slice from on entry (and expands, with ``expand``'s reassociation)."""
    copy = function.clone(ip=ir.InsertionPoint(function))
    copy.move_after(function)
    copy.attributes["sym_name"] = ir.StringAttr.get(name)
    body = copy.regions[0].blocks[0]
    argument = body.arguments[index]
    slice_op = extract.clone(ip=ir.InsertionPoint.at_block_begin(body))
    entry = slice_op
    if expand is not None:
        entry = expand.clone(ip=ir.InsertionPoint.after(slice_op))
        entry.operands[0] = slice_op.results[0]
    argument.replace_all_uses_with(entry.results[0])
    argument.set_type(larger)
    slice_op.operands[0] = argument
    old = ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value)
    inputs = list(old.inputs)
    inputs[index] = larger
    copy.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, list(old.results)))
    return copy


def call_sources(module: ir.Operation) -> int:
    """Pass the larger tensor to every call that reads a static slice of it, where at least
    two calls read the same slice through the same kernel (module docstring); returns how
    many operands were rewritten."""
    module_body = module.regions[0].blocks[0]
    functions = _private_functions(module_body)
    calls = ops_where(module, lambda op: op.name == "func.call"
                      and ir.FlatSymbolRefAttr(op.attributes["callee"]).value in functions)
    found = {}
    uses: dict[tuple, int] = {}
    for call in calls:
        callee = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
        found[call] = _source_slices(call, functions[callee])
        for index, extract in found[call]:
            key = _source_key(call, index, extract)
            uses[key] = uses.get(key, 0) + 1
    specialized: dict[tuple, str] = {}
    rewritten = 0
    for call in calls:
        # One slice per call: a second would need a copy of the copy (none of the models has
        # a kernel reading two slices).
        if not found[call]:
            continue
        index, extract = found[call][0]
        key = _source_key(call, index, extract)
        if uses[key] < 2:
            continue
        name = specialized.get(key)
        if name is None:
            name = f"{key[1]}{SOURCE_SUFFIX}{len(specialized)}"
            functions[name] = _specialize_source(functions[key[1]], name, index, extract,
                                                 extract.operands[0].type)
            specialized[key] = name
        call.operands[index] = extract.operands[0]
        call.attributes["callee"] = ir.FlatSymbolRefAttr.get(name)
        if not list(extract.results[0].uses):
            extract.erase()
        rewritten += 1
    still_called = {ir.FlatSymbolRefAttr(call.attributes["callee"]).value for call in calls}
    for callee in set(functions) - still_called:
        if callee.startswith(KERNEL_FUNCTION_PREFIX) and callee not in specialized.values():
            functions[callee].erase()
    return rewritten


def _private_functions(module_body: ir.Block) -> dict[str, ir.Operation]:
    """The module's private functions with a body, by name: the kernels calls may be rewritten to."""
    functions = {}
    for op in module_body.operations:
        op = op.operation
        if (op.name == "func.func" and op.regions[0].blocks and "sym_visibility" in op.attributes
                and ir.StringAttr(op.attributes["sym_visibility"]).value == "private"):
            functions[ir.StringAttr(op.attributes["sym_name"]).value] = op
    return functions


def _specialize(function: ir.Operation, name: str, index: int, number: int,
                extract: ir.Operation, insert: ir.Operation, larger: ir.Type,
                expand: ir.Operation | None = None, collapse: ir.Operation | None = None) -> ir.Operation:
    """A copy of ``function`` named ``name`` whose argument ``index`` is the larger tensor:
    it extracts (and expands) the slice on entry and returns its result ``number``
    (collapsed and) inserted back."""
    copy = _specialize_source(function, name, index, extract, larger, expand)
    body = copy.regions[0].blocks[0]
    terminator = list(body.operations)[-1]
    value = terminator.operands[number]
    if collapse is not None:
        collapsed = collapse.clone(ip=ir.InsertionPoint(terminator))
        collapsed.operands[0] = value
        value = collapsed.results[0]
    inserted = insert.clone(ip=ir.InsertionPoint(terminator))
    inserted.operands[0] = value
    inserted.operands[1] = body.arguments[index]
    terminator.operands[number] = inserted.results[0]
    signature = ir.FunctionType(ir.TypeAttr(copy.attributes["function_type"]).value)
    outputs = list(signature.results)
    outputs[number] = larger
    copy.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(list(signature.inputs), outputs))
    return copy


def _key(call: ir.Operation, pair: tuple[int, int, ir.Operation, ir.Operation]) -> tuple:
    """Which specialized copy serves ``pair`` of ``call``: kernel, argument, result, slice."""
    index, number, extract, _insert, expand, _collapse = pair
    return (ir.FlatSymbolRefAttr(call.attributes["callee"]).value, index, number,
            str(extract.operands[0].type),
            *(str(extract.attributes[n]) for n in ("static_offsets", "static_sizes", "static_strides")),
            None if expand is None else str(expand.attributes["reassociation"]))


def _inline(call: ir.Operation, function: ir.Operation) -> None:
    """Replace ``call`` by a copy of ``function``'s body."""
    copy = function.clone(ip=ir.InsertionPoint(function))
    body = copy.regions[0].blocks[0]
    for argument, value in zip(body.arguments, call.operands):
        argument.replace_all_uses_with(value)
    operations = list(body.operations)
    for op in operations[:-1]:
        op.operation.move_before(call)
    for result, value in zip(call.results, operations[-1].operands):
        result.replace_all_uses_with(value)
    call.erase()
    copy.erase()


def call_destinations(module: ir.Operation) -> int:
    """Rewrite every qualifying call in ``module`` (module docstring); returns how many."""
    module_body = module.regions[0].blocks[0]
    functions = _private_functions(module_body)
    calls = ops_where(module, lambda op: op.name == "func.call"
                      and ir.FlatSymbolRefAttr(op.attributes["callee"]).value in functions)
    # A slice only one call writes (DenseNet's concat offsets: each layer its own) would get
    # a copy of the kernel for that call alone, no cheaper to lower than the call inlined,
    # and LLVM inlined it back at a cost: such a call is inlined here instead.
    first_keys = {}
    for call in calls:
        pair = _destination_pair(call)
        if pair is not None:
            first_keys[call] = _key(call, pair)
    uses: dict[tuple, int] = {}
    for key in first_keys.values():
        uses[key] = uses.get(key, 0) + 1
    specialized: dict[tuple, str] = {}
    rewritten = 0
    kept = []
    for call in calls:
        callee = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
        if call in first_keys and uses[first_keys[call]] == 1:
            _inline(call, functions[callee])
            rewritten += 1
            continue
        kept.append(call)
        while (pair := _destination_pair(call)) is not None:
            index, number, extract, insert, expand, collapse = pair
            key = _key(call, pair)
            name = specialized.get(key)
            if name is None:
                callee = key[0]
                name = f"{callee}{SPECIALIZED_SUFFIX}{len(specialized)}"
                functions[name] = _specialize(functions[callee], name, index, number,
                                              extract, insert, extract.operands[0].type, expand, collapse)
                specialized[key] = name
            result = call.results[number]
            direct = insert.operands[0] == result or collapse is not None
            call.operands[index] = extract.operands[0]
            result.set_type(extract.operands[0].type)
            call.attributes["callee"] = ir.FlatSymbolRefAttr.get(name)
            if direct:
                insert.results[0].replace_all_uses_with(result)
                insert.erase()
                if collapse is not None:
                    collapse.erase()
                    expand.erase()
            else:
                # Carried on before it is inserted: what used the slice reads it from the
                # whole result, and the insert goes into that result, which equals the
                # larger tensor outside the slice (the copy of the kernel inserts nothing else).
                view = extract.clone(ip=ir.InsertionPoint.after(call)).operation
                view.operands[0] = result
                result.replace_all_uses_except(view.results[0], view)
                insert.operands[1] = result
            extract.erase()
            rewritten += 1
    # A kernel all of whose calls now go to its copies, or were inlined, is not lowered and
    # compiled for nothing.
    still_called = {ir.FlatSymbolRefAttr(call.attributes["callee"]).value for call in kept}
    for callee in set(functions) - still_called:
        if callee.startswith(KERNEL_FUNCTION_PREFIX):
            functions[callee].erase()
    return rewritten


@register_pass(
    CALL_DESTINATIONS,
    "A call that writes a static slice of a larger tensor takes the larger tensor (a copy of "
    "its callee extracts and inserts the slice), so the kernel writes in place; a slice "
    "that kernels only read is passed the same way, so it is read in place",
)
def call_destinations_pass(module: ir.Operation, options: Mapping[str, str]) -> None:
    call_destinations(module)
    call_sources(module)
