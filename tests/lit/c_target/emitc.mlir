// The C target's lowering of a small bufferized function: the result becomes an output
// argument, the intermediate buffer a workspace argument (offset planned), the weight an
// argument carrying its value, math.exp a call of libm's expf, and the whole an emitc.func
// over arrays.
// RUN: tilecraft-opt %s --tilecraft-c-out-params --convert-linalg-to-loops --tilecraft-c-plan-workspace | FileCheck %s --check-prefix=PLAN
// RUN: tilecraft-opt %s --tilecraft-c-out-params --convert-linalg-to-loops --tilecraft-c-plan-workspace --tilecraft-c-math-to-libm --convert-to-emitc --tilecraft-c-check | FileCheck %s --check-prefix=EMITC

memref.global "private" constant @bias : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>

// PLAN-NOT: memref.global
// PLAN-LABEL: func.func @f(
// PLAN-SAME: %[[X:.*]]: memref<4xf32> {tilecraft.name = "x"}
// PLAN-SAME: %[[OUT:.*]]: memref<4xf32> {tilecraft.c_output = 0 : i64}
// PLAN-SAME: %[[TMP:.*]]: memref<4xf32> {tilecraft.c_workspace_offset = 0 : i64}
// PLAN-SAME: %[[W:.*]]: memref<4xf32> {tilecraft.c_weight = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>, tilecraft.c_weight_name = "bias"}
// PLAN-SAME: tilecraft.c_buffer_count = 1 : i64, tilecraft.c_buffer_total = 16 : i64, tilecraft.c_workspace_size = 16 : i64
// PLAN-NOT: memref.alloc
// PLAN-NOT: memref.get_global
// PLAN: memref.load %[[X]]
// PLAN: math.exp
// PLAN: memref.store %{{.*}}, %[[TMP]]
// PLAN: memref.load %[[TMP]]
// PLAN: memref.load %[[W]]
// PLAN: memref.store %{{.*}}, %[[OUT]]
// PLAN: return{{$}}

// EMITC-LABEL: emitc.func @f(
// EMITC-SAME: !emitc.array<4xf32>
// EMITC-NOT: memref.
// EMITC: for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} : !emitc.size_t
// EMITC: subscript %arg0
// EMITC: call_opaque "expf"
// EMITC-NOT: math.
// EMITC: return
func.func @f(%x: memref<4xf32> {tilecraft.name = "x"}) -> memref<4xf32> {
  %w = memref.get_global @bias : memref<4xf32>
  %tmp = memref.alloc() : memref<4xf32>
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                  iterator_types = ["parallel"]} ins(%x : memref<4xf32>) outs(%tmp : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  %out = memref.alloc() : memref<4xf32>
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                  iterator_types = ["parallel"]} ins(%tmp, %w : memref<4xf32>, memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  }
  return %out : memref<4xf32>
}
