// tilecraft-int8-matmul's configs option (what compile(tuning_records=) passes, from the
// kernels' tuning records): the kernel named by its default name is built with that register
// tile and task split, and its name and call say so; another kernel keeps the default.
// RUN: tilecraft-opt %s --tilecraft-int8-matmul="vnni=1 num-threads=1 configs=tilecraft_int8_matmul_40x32x8_u8_t1:2.1.4" | FileCheck %s
// RUN: tilecraft-opt %s --tilecraft-int8-matmul="vnni=1 num-threads=1" | FileCheck %s --check-prefix=DEFAULT
// RUN: not tilecraft-opt %s --tilecraft-int8-matmul="vnni=1 configs=tilecraft_int8_matmul_40x32x8_u8_t1:2.1" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not tilecraft-opt %s --tilecraft-int8-matmul="vnni=1 num-threads=1 configs=tilecraft_int8_matmul_40x32x8_u8_t1:12.4.12" 2>&1 | FileCheck %s --check-prefix=TOO-MANY

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>

// 2 rows x 1 vector (16 columns) per register tile, 4 rows per task: B' packed for 16
// columns (2 tiles), 10 x 2 tasks.
// CHECK-LABEL: func.func @u8_by_s8
// CHECK: call @tilecraft_int8_matmul_40x32x8_u8_t1_r2v1b4({{.*}}) {tilecraft.int8_kernel = {a_unsigned = true, config = array<i64: 2, 1, 4>, threads = 1 : i64}} : (tensor<40x8xi8>, tensor<2x2x64xi8>, tensor<32xi32>)
// CHECK-LABEL: func.func private @tilecraft_int8_matmul_40x32x8_u8_t1_r2v1b4
// CHECK: scf.forall ({{.*}}) in (10, 2)
// The default: 12 rows x 2 vectors (24 accumulators), one task (one thread).
// DEFAULT: call @tilecraft_int8_matmul_40x32x8_u8_t1({{.*}}) {tilecraft.int8_kernel = {a_unsigned = true, threads = 1 : i64}} : (tensor<40x8xi8>, tensor<1x2x128xi8>, tensor<32xi32>)
// DEFAULT-LABEL: func.func private @tilecraft_int8_matmul_40x32x8_u8_t1(
// DEFAULT: scf.forall ({{.*}}) in (1, 1)
// BAD: configs item 'tilecraft_int8_matmul_40x32x8_u8_t1:2.1' is not <kernel>:<rows>.<vectors>.<task rows>
// TOO-MANY: 12 x 4 accumulators, more than 24
func.func @u8_by_s8(%x: tensor<40x8xi8>) -> tensor<40x32xi32> {
  %zero = arith.constant 0 : i32
  %w = arith.constant dense<3> : tensor<8x32xi8>
  %e = tensor.empty() : tensor<40x32xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<40x32xi32>) -> tensor<40x32xi32>
  %y = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<40x8xi8>, tensor<8x32xi8>) outs(%f : tensor<40x32xi32>) {
  ^bb0(%p: i8, %q: i8, %acc: i32):
    %pe = arith.extui %p : i8 to i32
    %qe = arith.extsi %q : i8 to i32
    %m = arith.muli %pe, %qe : i32
    %s = arith.addi %acc, %m : i32
    linalg.yield %s : i32
  } -> tensor<40x32xi32>
  return %y : tensor<40x32xi32>
}
