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
