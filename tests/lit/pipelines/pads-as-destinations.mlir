// tilecraft-pads-as-destinations: a function-level tensor.pad becomes a fresh tensor whose
// borders alone are filled (per padded dim, the slab before the source and the slab after
// it) and the source inserted at the low pad. With eliminate-empty-tensors and bufferization
// after it, the source's producer (a fusion group's scf.forall) stores straight into the
// padded buffer's interior: no copy of the source is left. Pads inside a loop (a fusion
// group's per-task pad) and pads with a computed value are left alone.
// RUN: tilecraft-opt %s --tilecraft-pads-as-destinations | FileCheck %s
// RUN: tilecraft-opt %s --pass-pipeline='builtin.module(tilecraft-pads-as-destinations,eliminate-empty-tensors,one-shot-bufferize{bufferize-function-boundaries},cse,canonicalize)' | FileCheck %s --check-prefix=BUF

// CHECK-LABEL: func.func @producer_into_pad
// CHECK-NOT: tensor.pad
// CHECK: %[[EMPTY:.*]] = tensor.empty() : tensor<1x10x18x4xf32>
// CHECK: %[[TOP:.*]] = tensor.extract_slice %[[EMPTY]][0, 0, 0, 0] [1, 1, 18, 4] [1, 1, 1, 1]
// CHECK: %[[TOPF:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[TOP]]
// CHECK: %[[T1:.*]] = tensor.insert_slice %[[TOPF]] into %[[EMPTY]][0, 0, 0, 0] [1, 1, 18, 4]
// CHECK: tensor.extract_slice %[[T1]][0, 9, 0, 0] [1, 1, 18, 4]
// CHECK: tensor.extract_slice %{{.*}}[0, 0, 0, 0] [1, 10, 1, 4]
// CHECK: tensor.extract_slice %{{.*}}[0, 0, 17, 0] [1, 10, 1, 4]
// CHECK: %[[R:.*]] = tensor.insert_slice %{{.*}} into %{{.*}}[0, 1, 1, 0] [1, 8, 16, 4] [1, 1, 1, 1]
// CHECK: return %[[R]]

// BUF-LABEL: func.func @producer_into_pad
// BUF: %[[ALLOC:.*]] = memref.alloc() {{.*}} : memref<1x10x18x4xf32>
// BUF-COUNT-4: linalg.fill
// BUF: %[[INTERIOR:.*]] = memref.subview %[[ALLOC]][0, 1, 1, 0] [1, 8, 16, 4] [1, 1, 1, 1]
// BUF: scf.forall
// BUF: memref.subview %[[INTERIOR]]
// BUF: linalg.map
// BUF-NOT: memref.copy
// BUF: return %[[ALLOC]]

// CHECK-LABEL: func.func @argument_source
// CHECK-NOT: tensor.pad
// CHECK-COUNT-2: linalg.fill
// CHECK: tensor.insert_slice %arg0 into %{{.*}}[2, 0] [4, 8] [1, 1] : tensor<4x8xf32> into tensor<9x8xf32>

// BUF-LABEL: func.func @argument_source
// BUF-COUNT-2: linalg.fill
// BUF: memref.copy %arg0

// CHECK-LABEL: func.func @left_alone
// CHECK: scf.forall
// CHECK: tensor.pad
// CHECK: tensor.pad
// CHECK-NOT: tensor.insert_slice %{{.*}} into %{{.*}}[1, 1]

func.func @producer_into_pad(%x: tensor<1x8x16x4xf32>) -> tensor<1x10x18x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x8x16x4xf32>
  %r = scf.forall (%i) in (2) shared_outs(%o = %e) -> (tensor<1x8x16x4xf32>) {
    %off = affine.apply affine_map<(d0) -> (d0 * 4)>(%i)
    %s = tensor.extract_slice %x[0, %off, 0, 0] [1, 4, 16, 4] [1, 1, 1, 1] : tensor<1x8x16x4xf32> to tensor<1x4x16x4xf32>
    %so = tensor.extract_slice %o[0, %off, 0, 0] [1, 4, 16, 4] [1, 1, 1, 1] : tensor<1x8x16x4xf32> to tensor<1x4x16x4xf32>
    %m = linalg.map { math.exp } ins(%s : tensor<1x4x16x4xf32>) outs(%so : tensor<1x4x16x4xf32>)
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %m into %o[0, %off, 0, 0] [1, 4, 16, 4] [1, 1, 1, 1] : tensor<1x4x16x4xf32> into tensor<1x8x16x4xf32>
    }
  }
  %p = tensor.pad %r low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %zero : f32
  } : tensor<1x8x16x4xf32> to tensor<1x10x18x4xf32>
  return %p : tensor<1x10x18x4xf32>
}

func.func @argument_source(%x: tensor<4x8xf32>) -> tensor<9x8xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %p = tensor.pad %x low[2, 0] high[3, 0] {
  ^bb0(%a: index, %b: index):
    tensor.yield %ninf : f32
  } : tensor<4x8xf32> to tensor<9x8xf32>
  return %p : tensor<9x8xf32>
}

func.func @left_alone(%x: tensor<2x8x8xf32>) -> (tensor<2x10x10xf32>, tensor<10x10xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x10x10xf32>
  %r = scf.forall (%i) in (2) shared_outs(%o = %e) -> (tensor<2x10x10xf32>) {
    %s = tensor.extract_slice %x[%i, 0, 0] [1, 8, 8] [1, 1, 1] : tensor<2x8x8xf32> to tensor<8x8xf32>
    %p = tensor.pad %s low[1, 1] high[1, 1] {
    ^bb0(%a: index, %b: index):
      tensor.yield %zero : f32
    } : tensor<8x8xf32> to tensor<10x10xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %p into %o[%i, 0, 0] [1, 10, 10] [1, 1, 1] : tensor<10x10xf32> into tensor<2x10x10xf32>
    }
  }
  %s0 = tensor.extract_slice %x[0, 0, 0] [1, 8, 8] [1, 1, 1] : tensor<2x8x8xf32> to tensor<8x8xf32>
  %q = tensor.pad %s0 low[1, 1] high[1, 1] {
  ^bb0(%a: index, %b: index):
    %v = arith.index_cast %a : index to i32
    %f = arith.sitofp %v : i32 to f32
    tensor.yield %f : f32
  } : tensor<8x8xf32> to tensor<10x10xf32>
  return %r, %q : tensor<2x10x10xf32>, tensor<10x10xf32>
}

// A source that an op besides the pad reads (SqueezeNet's squeeze output, read padded by the
// 3x3 expand and whole by the 1x1 expand): the padded tensor is built right after the
// producer, and the other reader, even one placed before the pad, reads the interior as a
// slice of it. Bufferized, one buffer serves both and nothing is copied.
// CHECK-LABEL: func.func @shared_source
// CHECK: %[[R:.*]] = linalg.map { math.exp }
// CHECK-NEXT: tensor.empty() : tensor<1x10x18x4xf32>
// CHECK: %[[IN:.*]] = tensor.insert_slice %[[R]] into %{{.*}}[0, 1, 1, 0] [1, 8, 16, 4] [1, 1, 1, 1]
// CHECK-NEXT: %[[VIEW:.*]] = tensor.extract_slice %[[IN]][0, 1, 1, 0] [1, 8, 16, 4] [1, 1, 1, 1]
// CHECK: linalg.map { math.absf } ins(%[[VIEW]]
// CHECK: return %[[IN]]

// BUF-LABEL: func.func @shared_source
// BUF: %[[ALLOC:.*]] = memref.alloc() {{.*}} : memref<1x10x18x4xf32>
// BUF: %[[INTERIOR:.*]] = memref.subview %[[ALLOC]][0, 1, 1, 0] [1, 8, 16, 4] [1, 1, 1, 1]
// BUF: linalg.map { math.exp } ins(%arg0 {{.*}} outs(%[[INTERIOR]]
// BUF: linalg.map { math.absf } ins(%[[INTERIOR]]
// BUF-NOT: memref.copy
// BUF: return %[[ALLOC]]
func.func @shared_source(%x: tensor<1x8x16x4xf32>) -> (tensor<1x10x18x4xf32>, tensor<1x8x16x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x8x16x4xf32>
  %r = linalg.map { math.exp } ins(%x : tensor<1x8x16x4xf32>) outs(%e : tensor<1x8x16x4xf32>)
  %e2 = tensor.empty() : tensor<1x8x16x4xf32>
  %w = linalg.map { math.absf } ins(%r : tensor<1x8x16x4xf32>) outs(%e2 : tensor<1x8x16x4xf32>)
  %p = tensor.pad %r low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %zero : f32
  } : tensor<1x8x16x4xf32> to tensor<1x10x18x4xf32>
  return %p, %w : tensor<1x10x18x4xf32>, tensor<1x8x16x4xf32>
}
