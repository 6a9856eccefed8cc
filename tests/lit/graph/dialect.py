# The graph dialect from Python: load (IRDL at run time), build, inspect, verify.
# RUN: %PYTHON %s | FileCheck %s

from mlir import ir

from tilecraft.dialects import graph
from tilecraft.errors import GraphError

SOURCE = """
func.func @f(%a: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %m = linalg.matmul ins(%a, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %m : tensor<4x16xf32>
}
"""


def run(f):
    print("\nTEST:", f.__name__)
    context = ir.Context()
    graph.load(context)
    graph.load(context)  # idempotent
    with context, ir.Location.unknown():
        f()
    return f


def body_ops(module):
    return [op.operation for op in module.body.operations[0].regions[0].blocks[0].operations]


# CHECK-LABEL: TEST: outline_and_inspect
# CHECK: "graph.fusion_group"() ({
# CHECK: linalg.matmul
# CHECK: tosa.yield
# CHECK: }) {anchor = "linalg.matmul", kind = "matmul", signature = "[[SIG:matmul-[0-9a-f]+]]"}
# CHECK: kind matmul anchor linalg.matmul
# CHECK: inputs ['tensor<4x8xf32>', 'tensor<8x16xf32>']
# CHECK: outputs ['tensor<4x16xf32>']
# CHECK: signature [[SIG]] recomputed [[SIG]]
@run
def outline_and_inspect():
    module = ir.Module.parse(SOURCE)
    ops = body_ops(module)[1:-1]
    group = graph.outline_group(ops, kind="matmul", anchor=ops[-1])
    module.operation.verify()
    group.verify()
    print(module)
    print("kind", group.kind, "anchor", group.anchor.name)
    print("inputs", [str(t) for t in group.input_types])
    print("outputs", [str(t) for t in group.output_types])
    print("signature", group.signature, "recomputed", group.compute_signature())


# CHECK-LABEL: TEST: parse_generic_form
# CHECK: groups 1 kind elementwise
@run
def parse_generic_form():
    module = ir.Module.parse("""
func.func @g(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "graph.fusion_group"() ({
    %e = tensor.empty() : tensor<4xf32>
    %r = linalg.add ins(%a, %a : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
    tosa.yield %r : tensor<4xf32>
  }) {anchor = "", kind = "elementwise", signature = ""} : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}""")
    groups = graph.fusion_groups(module.operation)
    print("groups", len(groups), "kind", groups[0].kind)


# A group whose signature does not match its body fails verify_group; a kind IRDL accepts
# (any string) but the dialect does not is rejected too.
# CHECK-LABEL: TEST: verify_errors
# CHECK: GraphError: {{.*}}signature '' does not match the body
# CHECK: GraphError: {{.*}}kind 'fused' is not one of conv, matmul
@run
def verify_errors():
    module = ir.Module.parse("""
func.func @g(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "graph.fusion_group"() ({
    tosa.yield %a : tensor<4xf32>
  }) {anchor = "", kind = "elementwise", signature = ""} : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}""")
    group = graph.fusion_groups(module.operation)[0]
    for attr, value in (("signature", ""), ("kind", "fused")):
        group.op.attributes[attr] = ir.StringAttr.get(value)
        try:
            group.verify()
        except GraphError as error:
            print("GraphError:", error)


# IRDL checks what it can: a missing attribute is a verifier error of the op itself.
# CHECK-LABEL: TEST: irdl_verifier
# CHECK: error: {{.*}}attribute "signature" is expected but not provided
@run
def irdl_verifier():
    try:
        ir.Module.parse("""
func.func @g(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "graph.fusion_group"() ({
    tosa.yield %a : tensor<4xf32>
  }) {anchor = "", kind = "elementwise"} : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}""")
    except ir.MLIRError as error:
        print("error:", error.error_diagnostics[0].message)


# CHECK-LABEL: TEST: layouts
# CHECK: "graph.layout_convert"(%arg0) {dst_layout = #graph.layout<"NCHW8c">, src_layout = #graph.layout<"NCHW">} : (tensor<1x16x4x4xf32>) -> tensor<1x2x4x4x8xf32>
# CHECK: dst NCHW8c
# CHECK: GraphError: layout 'NC-HW' must be letters and digits
@run
def layouts():
    module = ir.Module.parse("""
func.func @h(%a: tensor<1x16x4x4xf32>) {
  return
}""")
    block = module.body.operations[0].regions[0].blocks[0]
    blocked = ir.RankedTensorType.get([1, 2, 4, 4, 8], ir.F32Type.get())
    value = graph.layout_convert(block.arguments[0], "NCHW", "NCHW8c", blocked,
                                 ip=ir.InsertionPoint.at_block_begin(block))
    module.operation.verify()
    print(value.owner)
    print("dst", graph.layout_name(value.owner.attributes["dst_layout"]))
    try:
        graph.layout_attr("NC-HW")
    except GraphError as error:
        print("GraphError:", error)
