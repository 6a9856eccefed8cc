// tilecraft-keep-entry-loops-rolled: the back edges of the public entry's loops carry
// llvm.loop.unroll.disable when the kernels are outlined (private functions exist);
// kernels and forward branches are untouched (pipelines/vector/entry_loops.py).
// RUN: tilecraft-opt %s --split-input-file --tilecraft-keep-entry-loops-rolled | FileCheck %s

// CHECK: #[[$UNROLL:.*]] = #llvm.loop_unroll<disable = true>
// CHECK: #[[$ROLLED:.*]] = #llvm.loop_annotation<unroll = #[[$UNROLL]]>
// The kernel's own loop: no annotation.
// CHECK-LABEL: llvm.func @kernel
// CHECK: llvm.cond_br
// CHECK-NOT: loop_annotation
// CHECK: llvm.br ^bb1
// CHECK-NOT: loop_annotation
// CHECK-LABEL: llvm.func @main
// The entry's forward branches: none; its loop's back edge: annotated.
// CHECK: llvm.br ^bb1(%{{.*}} : i64)
// CHECK-NOT: loop_annotation
// CHECK: llvm.cond_br
// CHECK-NOT: loop_annotation
// CHECK: llvm.br ^bb1(%{{.*}} : i64) {loop_annotation = #[[$ROLLED]]}
llvm.func @kernel(%p: !llvm.ptr, %n: i64) attributes {sym_visibility = "private"} {
  %zero = llvm.mlir.constant(0 : i64) : i64
  llvm.br ^bb1(%zero : i64)
^bb1(%i: i64):
  %more = llvm.icmp "slt" %i, %n : i64
  llvm.cond_br %more, ^bb2, ^bb3
^bb2:
  %one = llvm.mlir.constant(1 : i64) : i64
  %next = llvm.add %i, %one : i64
  llvm.br ^bb1(%next : i64)
^bb3:
  llvm.return
}
llvm.func @main(%p: !llvm.ptr, %n: i64) {
  %zero = llvm.mlir.constant(0 : i64) : i64
  %value = llvm.mlir.constant(0.0 : f32) : f32
  llvm.br ^bb1(%zero : i64)
^bb1(%i: i64):
  %more = llvm.icmp "slt" %i, %n : i64
  llvm.cond_br %more, ^bb2, ^bb3
^bb2:
  %address = llvm.getelementptr %p[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  llvm.store %value, %address : f32, !llvm.ptr
  %one = llvm.mlir.constant(1 : i64) : i64
  %next = llvm.add %i, %one : i64
  llvm.br ^bb1(%next : i64)
^bb3:
  llvm.call @kernel(%p, %n) : (!llvm.ptr, i64) -> ()
  llvm.return
}

// -----

// No private function (one thread: the kernels are inside the entry): nothing changes.
// CHECK-LABEL: llvm.func @only_entry
// CHECK-NOT: loop_annotation
// CHECK: llvm.return
llvm.func @only_entry(%n: i64) {
  %zero = llvm.mlir.constant(0 : i64) : i64
  llvm.br ^bb1(%zero : i64)
^bb1(%i: i64):
  %more = llvm.icmp "slt" %i, %n : i64
  llvm.cond_br %more, ^bb2, ^bb3
^bb2:
  %one = llvm.mlir.constant(1 : i64) : i64
  %next = llvm.add %i, %one : i64
  llvm.br ^bb1(%next : i64)
^bb3:
  llvm.return
}

// -----

// A loop of the entry that computes (a kernel with no thread level runs inside the entry)
// keeps LLVM's unrolling; the copy loop beside it is rolled.
// CHECK-LABEL: llvm.func @serial_kernel_in_entry
// CHECK: llvm.fmul
// CHECK-NOT: loop_annotation
// CHECK: llvm.br ^bb1(%{{.*}} : i64)
// CHECK: llvm.store
// CHECK: llvm.br ^bb4(%{{.*}} : i64) {loop_annotation =
llvm.func @helper() attributes {sym_visibility = "private"} {
  llvm.return
}
llvm.func @serial_kernel_in_entry(%p: !llvm.ptr, %n: i64) {
  %zero = llvm.mlir.constant(0 : i64) : i64
  %one = llvm.mlir.constant(1 : i64) : i64
  llvm.br ^bb1(%zero : i64)
^bb1(%i: i64):
  %more = llvm.icmp "slt" %i, %n : i64
  llvm.cond_br %more, ^bb2, ^bb3
^bb2:
  %address = llvm.getelementptr %p[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  %x = llvm.load %address : !llvm.ptr -> f32
  %y = llvm.fmul %x, %x : f32
  llvm.store %y, %address : f32, !llvm.ptr
  %next = llvm.add %i, %one : i64
  llvm.br ^bb1(%next : i64)
^bb3:
  llvm.br ^bb4(%zero : i64)
^bb4(%j: i64):
  %again = llvm.icmp "slt" %j, %n : i64
  llvm.cond_br %again, ^bb5, ^bb6
^bb5:
  %target = llvm.getelementptr %p[%j] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  %zero_f = llvm.mlir.constant(0.0 : f32) : f32
  llvm.store %zero_f, %target : f32, !llvm.ptr
  %step = llvm.add %j, %one : i64
  llvm.br ^bb4(%step : i64)
^bb6:
  llvm.call @helper() : () -> ()
  llvm.return
}

// -----

// A loop that builds a vector lane by lane (a broadcast vector.transfer_read of one value
// per row, as lowered: a scalar load and an insertelement at the loop's index) keeps LLVM's
// unrolling, which makes it a broadcast; rolled, each lane was a dynamic insert (a
// LayerNorm's row reads ran 100x slower). The plain copy loop after it is rolled.
// CHECK-LABEL: llvm.func @lane_by_lane_in_entry
// CHECK: llvm.insertelement
// CHECK-NOT: loop_annotation
// CHECK: llvm.br ^bb1(%{{.*}}, %{{.*}} : i64, vector<48xf32>){{$}}
// CHECK: llvm.store
// CHECK: llvm.br ^bb4(%{{.*}} : i64) {loop_annotation =
llvm.func @outlined() attributes {sym_visibility = "private"} {
  llvm.return
}
llvm.func @lane_by_lane_in_entry(%p: !llvm.ptr, %q: !llvm.ptr) -> vector<48xf32> {
  %zero = llvm.mlir.constant(0 : i64) : i64
  %one = llvm.mlir.constant(1 : i64) : i64
  %lanes = llvm.mlir.constant(48 : i64) : i64
  %empty = llvm.mlir.poison : vector<48xf32>
  llvm.br ^bb1(%zero, %empty : i64, vector<48xf32>)
^bb1(%i: i64, %built: vector<48xf32>):
  %more = llvm.icmp "slt" %i, %lanes : i64
  llvm.cond_br %more, ^bb2, ^bb3
^bb2:
  %x = llvm.load %p : !llvm.ptr -> f32
  %with = llvm.insertelement %x, %built[%i : i64] : vector<48xf32>
  %next = llvm.add %i, %one : i64
  llvm.br ^bb1(%next, %with : i64, vector<48xf32>)
^bb3:
  llvm.br ^bb4(%zero : i64)
^bb4(%j: i64):
  %again = llvm.icmp "slt" %j, %lanes : i64
  llvm.cond_br %again, ^bb5, ^bb6
^bb5:
  %source = llvm.getelementptr %q[%j] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  %value = llvm.load %source : !llvm.ptr -> f32
  %target = llvm.getelementptr %p[%j] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  llvm.store %value, %target : f32, !llvm.ptr
  %step = llvm.add %j, %one : i64
  llvm.br ^bb4(%step : i64)
^bb6:
  llvm.call @outlined() : () -> ()
  llvm.return %built : vector<48xf32>
}
