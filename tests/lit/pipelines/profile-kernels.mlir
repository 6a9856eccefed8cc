// tilecraft-profile-kernels: every top-level kernel of a public function (a loop nest, a
// linalg op, a kernel call, a pad or concat that still copies) gets its own
// tilecraft_profile_begin/end(id) bracket around exactly that op, named in tilecraft.kernels.
// A call that replaced a product and its epilogue (int8_matmul.py's fuse_epilogue) carries a
// fused location, product first: it is named after the product, not the epilogue's
// QuantizeLinear (the int8 stem's time was reported under the QuantizeLinear after it).
// RUN: tilecraft-opt %s --tilecraft-profile-kernels | FileCheck %s

// CHECK: module attributes {tilecraft.kernels = ["stem(Conv)", "stem(Conv) [tensor.pad]", "stem/int8/conv(ConvInteger)", "scf.for (line {{[0-9]+}})"]}
// CHECK-LABEL: func.func @main
// CHECK:      %[[ID0:.*]] = arith.constant 0 : i64
// CHECK-NEXT: call @tilecraft_profile_begin(%[[ID0]])
// CHECK-NEXT: linalg.transpose
// CHECK-NEXT: %[[END0:.*]] = arith.constant 0 : i64
// CHECK-NEXT: call @tilecraft_profile_end(%[[END0]])
// CHECK-NEXT: %[[ID1:.*]] = arith.constant 1 : i64
// CHECK-NEXT: call @tilecraft_profile_begin(%[[ID1]])
// CHECK-NEXT: tensor.pad
// CHECK:      } : tensor<1x4x4x2xi8> to tensor<1x6x6x2xi8>
// CHECK-NEXT: %[[END1:.*]] = arith.constant 1 : i64
// CHECK-NEXT: call @tilecraft_profile_end(%[[END1]])
// CHECK-NEXT: %[[ID2:.*]] = arith.constant 2 : i64
// CHECK-NEXT: call @tilecraft_profile_begin(%[[ID2]])
// CHECK-NEXT: call @kernel(
// CHECK-NEXT: %[[END2:.*]] = arith.constant 2 : i64
// CHECK-NEXT: call @tilecraft_profile_end(%[[END2]])
// CHECK-NEXT: %[[ID3:.*]] = arith.constant 3 : i64
// CHECK-NEXT: call @tilecraft_profile_begin(%[[ID3]])
// CHECK-NEXT: scf.for
// CHECK:      }
// CHECK-NEXT: %[[END3:.*]] = arith.constant 3 : i64
// CHECK-NEXT: call @tilecraft_profile_end(%[[END3]])
// CHECK-NEXT: return
// The kernel itself is private: not bracketed inside.
// CHECK-LABEL: func.func private @kernel
// CHECK-NOT:  tilecraft_profile
// CHECK:      return
// CHECK-DAG:  func.func private @tilecraft_profile_begin(i64)
// CHECK-DAG:  func.func private @tilecraft_profile_end(i64)

func.func @main(%x: tensor<1x2x4x4xi8>, %w: tensor<18x8xi8>) -> tensor<36x8xi8> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0 : i8
  %e = tensor.empty() : tensor<1x4x4x2xi8>
  %t = linalg.transpose ins(%x : tensor<1x2x4x4xi8>) outs(%e : tensor<1x4x4x2xi8>) permutation = [0, 2, 3, 1] loc("stem(Conv)")
  %p = tensor.pad %t low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %zero : i8
  } : tensor<1x4x4x2xi8> to tensor<1x6x6x2xi8> loc("stem(Conv)")
  %y = func.call @kernel(%p, %w) : (tensor<1x6x6x2xi8>, tensor<18x8xi8>) -> tensor<36x8xi8> loc(fused["stem/int8/conv(ConvInteger)", "x1_QuantizeLinear(QuantizeLinear)"])
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %y) -> (tensor<36x8xi8>) {
    scf.yield %acc : tensor<36x8xi8>
  }
  return %r : tensor<36x8xi8>
}

func.func private @kernel(%p: tensor<1x6x6x2xi8>, %w: tensor<18x8xi8>) -> tensor<36x8xi8> {
  %w0 = arith.constant 1 : i8
  %e = tensor.empty() : tensor<36x8xi8>
  %c = linalg.fill ins(%w0 : i8) outs(%e : tensor<36x8xi8>) -> tensor<36x8xi8>
  return %c : tensor<36x8xi8>
}
