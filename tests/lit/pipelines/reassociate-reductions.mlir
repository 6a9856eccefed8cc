// tilecraft-reassociate-reductions: float add/mul vector.reductions may be summed as a tree
// (LLVM adds the lanes one by one otherwise); max, integer and already-flagged ones keep
// their attributes.
// RUN: tilecraft-opt %s --tilecraft-reassociate-reductions | FileCheck %s

// CHECK-LABEL: func.func @sums
// CHECK: vector.reduction <add>, %{{.*}}, %{{.*}} fastmath<reassoc> : vector<64xf32> into f32
// CHECK: vector.reduction <mul>, %{{.*}} fastmath<reassoc,nnan> : vector<16xf32> into f32
// CHECK: vector.reduction <maximumf>, %{{.*}} : vector<64xf32> into f32
// CHECK: vector.reduction <add>, %{{.*}} : vector<16xi32> into i32
func.func @sums(%v: vector<64xf32>, %w: vector<16xf32>, %i: vector<16xi32>, %a: f32) -> (f32, f32, f32, i32) {
  %s = vector.reduction <add>, %v, %a : vector<64xf32> into f32
  %p = vector.reduction <mul>, %w fastmath<nnan> : vector<16xf32> into f32
  %m = vector.reduction <maximumf>, %v : vector<64xf32> into f32
  %n = vector.reduction <add>, %i : vector<16xi32> into i32
  return %s, %p, %m, %n : f32, f32, f32, i32
}

// The llvm stage runs the pass again after convert-vector-to-llvm: lowering a dot-product
// vector.contract (layer norm's sum of squares) creates LLVM reductions there, unflagged.
// CHECK-LABEL: llvm.func @lowered_sums
// CHECK: "llvm.intr.vector.reduce.fadd"(%{{.*}}, %{{.*}}) <{fastmathFlags = #llvm.fastmath<reassoc>}>
// CHECK: "llvm.intr.vector.reduce.fmul"(%{{.*}}, %{{.*}}) <{fastmathFlags = #llvm.fastmath<nnan, reassoc>}>
// CHECK: llvm.intr.vector.reduce.fmaximum(%{{.*}}) : (vector<64xf32>) -> f32
llvm.func @lowered_sums(%v: vector<64xf32>, %w: vector<16xf32>, %a: f32) -> f32 {
  %s = "llvm.intr.vector.reduce.fadd"(%a, %v) <{fastmathFlags = #llvm.fastmath<none>}> : (f32, vector<64xf32>) -> f32
  %p = "llvm.intr.vector.reduce.fmul"(%s, %w) <{fastmathFlags = #llvm.fastmath<nnan>}> : (f32, vector<16xf32>) -> f32
  %m = llvm.intr.vector.reduce.fmaximum(%v) : (vector<64xf32>) -> f32
  %r = llvm.fadd %p, %m : f32
  llvm.return %r : f32
}
