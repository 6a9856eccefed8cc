// The named pipeline tilecraft-lower-c: linalg on tensors to one emitc.func over arrays, with
// the result as an output argument (the exp runs in place in it: no workspace needed) and the
// constant as a weight argument; each loop nest a private function of the buffers it touches.
// RUN: tilecraft-opt %s --pass-pipeline='builtin.module(tilecraft-lower-c)' | FileCheck %s

// CHECK-NOT: memref.global
// CHECK: emitc.func private @tc_model_nest0(%{{.*}}: !emitc.array<2x4xf32>) attributes {specifiers = ["static"]}
// CHECK: emitc.func private @tc_model_nest1(%{{.*}}: !emitc.array<2x3xf32>, %{{.*}}: !emitc.array<3x4xf32>, %{{.*}}: !emitc.array<2x4xf32>)
// CHECK: emitc.func private @tc_model_nest2(
// CHECK: call_opaque "expf"
// CHECK-LABEL: emitc.func @mm(
// CHECK-SAME: %{{.*}}: !emitc.array<2x3xf32> {tilecraft.name = "a"}
// CHECK-SAME: %{{.*}}: !emitc.array<2x4xf32> {tilecraft.c_output = 0 : i64}
// CHECK-SAME: %{{.*}}: !emitc.array<3x4xf32> {tilecraft.c_weight = dense<1.000000e+00> : tensor<3x4xf32>
// CHECK-SAME: tilecraft.c_buffer_count = 0 : i64, tilecraft.c_buffer_total = 0 : i64, tilecraft.c_workspace_size = 0 : i64
// CHECK: call @tc_model_nest0(%arg1)
// CHECK: call @tc_model_nest1(%arg0, %arg2, %arg1)
// CHECK: call @tc_model_nest2(%arg1)
// CHECK-NOT: memref.
// CHECK-NOT: linalg.
// CHECK-NOT: scf.
func.func @mm(%a: tensor<2x3xf32> {tilecraft.name = "a"}) -> tensor<2x4xf32> {
  %w = arith.constant dense<1.0> : tensor<3x4xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %m = linalg.matmul ins(%a, %w : tensor<2x3xf32>, tensor<3x4xf32>) outs(%f : tensor<2x4xf32>) -> tensor<2x4xf32>
  %e2 = tensor.empty() : tensor<2x4xf32>
  %x = linalg.exp ins(%m : tensor<2x4xf32>) outs(%e2 : tensor<2x4xf32>) -> tensor<2x4xf32>
  return %x : tensor<2x4xf32>
}
