// tilecraft-merge-identical-functions: private llvm.funcs that compute the same thing keep
// one copy (repeated blocks' kernels; pipelines/vector/merge_functions.py), references follow.
// RUN: tilecraft-opt %s --split-input-file --tilecraft-merge-identical-functions | FileCheck %s

// Two identical kernels: the second is erased, its call goes to the first.
// CHECK-LABEL: llvm.func @kernel_a
// CHECK-NOT: llvm.func @kernel_b
// CHECK-LABEL: llvm.func @main
// CHECK: llvm.call @kernel_a
// CHECK-NEXT: llvm.call @kernel_a
// A kernel that differs (fmul, not fadd) stays.
// CHECK-NEXT: llvm.call @kernel_c
llvm.func @kernel_a(%x: f32) -> f32 attributes {sym_visibility = "private"} {
  %y = llvm.fadd %x, %x : f32
  llvm.return %y : f32
}
llvm.func @kernel_b(%x: f32) -> f32 attributes {sym_visibility = "private"} {
  %y = llvm.fadd %x, %x : f32
  llvm.return %y : f32
}
llvm.func @kernel_c(%x: f32) -> f32 attributes {sym_visibility = "private"} {
  %y = llvm.fmul %x, %x : f32
  llvm.return %y : f32
}
llvm.func @main(%x: f32) -> f32 {
  %a = llvm.call @kernel_a(%x) : (f32) -> f32
  %b = llvm.call @kernel_b(%a) : (f32) -> f32
  %c = llvm.call @kernel_c(%b) : (f32) -> f32
  llvm.return %c : f32
}

// -----

// Functions that call each other in a cycle (dispatch <-> execute, as the async lowering
// makes them) merge pairwise; the public entry points are never merged, even when equal.
// CHECK-LABEL: llvm.func @dispatch_1
// CHECK: llvm.call @execute_1
// CHECK-LABEL: llvm.func @execute_1
// CHECK: llvm.call @dispatch_1
// CHECK-NOT: @dispatch_2
// CHECK-NOT: @execute_2
// CHECK-LABEL: llvm.func @entry_1
// CHECK: llvm.call @dispatch_1
// CHECK-LABEL: llvm.func @entry_2
// CHECK: llvm.call @dispatch_1
llvm.func @dispatch_1(%n: i64) attributes {sym_visibility = "private"} {
  llvm.call @execute_1(%n) : (i64) -> ()
  llvm.return
}
llvm.func @execute_1(%n: i64) attributes {sym_visibility = "private"} {
  %m = llvm.add %n, %n : i64
  llvm.call @dispatch_1(%m) : (i64) -> ()
  llvm.return
}
llvm.func @dispatch_2(%n: i64) attributes {sym_visibility = "private"} {
  llvm.call @execute_2(%n) : (i64) -> ()
  llvm.return
}
llvm.func @execute_2(%n: i64) attributes {sym_visibility = "private"} {
  %m = llvm.add %n, %n : i64
  llvm.call @dispatch_2(%m) : (i64) -> ()
  llvm.return
}
llvm.func @entry_1(%n: i64) {
  llvm.call @dispatch_1(%n) : (i64) -> ()
  llvm.return
}
llvm.func @entry_2(%n: i64) {
  llvm.call @dispatch_2(%n) : (i64) -> ()
  llvm.return
}

// -----

// Same text, but they call kernels that differ: not merged.
// CHECK-LABEL: llvm.func @outer_1
// CHECK: llvm.call @leaf_add
// CHECK-LABEL: llvm.func @outer_2
// CHECK: llvm.call @leaf_mul
llvm.func @leaf_add(%x: f32) -> f32 attributes {sym_visibility = "private"} {
  %y = llvm.fadd %x, %x : f32
  llvm.return %y : f32
}
llvm.func @leaf_mul(%x: f32) -> f32 attributes {sym_visibility = "private"} {
  %y = llvm.fmul %x, %x : f32
  llvm.return %y : f32
}
llvm.func @outer_1(%x: f32) -> f32 attributes {sym_visibility = "private"} {
  %y = llvm.call @leaf_add(%x) : (f32) -> f32
  llvm.return %y : f32
}
llvm.func @outer_2(%x: f32) -> f32 attributes {sym_visibility = "private"} {
  %y = llvm.call @leaf_mul(%x) : (f32) -> f32
  llvm.return %y : f32
}
