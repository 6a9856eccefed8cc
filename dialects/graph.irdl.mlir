// The tilecraft graph dialect, in IRDL: loaded at run time by dialects/graph.py (load),
// no C++ build. Documented in docs/graph-dialect.md.
//
// What IRDL (MLIR 22) cannot say, and where it is checked instead:
// - a variadic operand or result list of *different* types: the list's elements share one
//   constraint variable, which the first element binds ("expected 'tensor<4xf32>' but got
//   'tensor<2xi32>'" for `variadic %any` given two types). So a fusion group has no operands:
//   its body reads the values it needs from the enclosing block (like scf.execute_region),
//   and its results (usually one) all have one type; dialects/graph.py lists the captured
//   values (FusionGroup.inputs) and the fusion pass never forms a group with results of
//   two types.
// - traits: no IsTerminator, no IsolatedFromAbove, no custom assembly. A fusion group's body
//   ends in `tosa.yield` (a trait-carrying terminator with no parent constraint) because a
//   `graph.yield` defined here would be rejected as "block with no terminator"; the
//   terminator's types are checked by dialects/graph.py (verify_group).
// - every constraint variable is one value: two attributes constrained by the same
//   `irdl.base` would have to be *equal*, hence one `irdl.base` per attribute below.
irdl.dialect @graph {
  // #graph.layout<"NCHW8c">: the data layout of a tensor, as a TVM-style layout string.
  irdl.attribute @layout {
    %name = irdl.base "#builtin.string"
    irdl.parameters(name: %name)
  }

  // A fusion group: the ops of one kernel in a region without arguments that reads the
  // values it needs from the enclosing block; results yielded by `tosa.yield`.
  irdl.operation @fusion_group {
    %out = irdl.any
    irdl.results(outputs: variadic %out)
    %kind = irdl.base "#builtin.string"
    %anchor = irdl.base "#builtin.string"
    %signature = irdl.base "#builtin.string"
    irdl.attributes {"kind" = %kind, "anchor" = %anchor, "signature" = %signature}
    %body = irdl.region
    irdl.regions(body: %body)
  }

  // An explicit change of data layout between two tensors holding the same values.
  irdl.operation @layout_convert {
    %in = irdl.any
    %out = irdl.any
    irdl.operands(input: %in)
    irdl.results(output: %out)
    %src = irdl.base @graph::@layout
    %dst = irdl.base @graph::@layout
    irdl.attributes {"src_layout" = %src, "dst_layout" = %dst}
  }
}
