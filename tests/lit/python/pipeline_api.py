# Pipelines are data: print, edit and serialize them from Python.
# RUN: %PYTHON %s | FileCheck %s

import tilecraft


def run(f):
    print("\nTEST:", f.__name__)
    f()
    return f


# CHECK-LABEL: TEST: print_stages
# CHECK: input:
# CHECK-NEXT: tilecraft-prepare-entry
# CHECK: schedule:
# CHECK-NEXT: tilecraft-schedule{vector-bits=256 num-threads=1 l1d={{[0-9]+[KMG]?}} l2={{[0-9]+[KMG]?}} l3={{[0-9]+[KMG]?}} keep-kernels=1}
# CHECK: llvm:
# CHECK: reconcile-unrealized-casts
@run
def print_stages():
    print(tilecraft.cpu_pipeline(tilecraft.Target(mattr=("+avx2", "-avx512f"), num_threads=1)))


# CHECK-LABEL: TEST: edit_and_serialize
# CHECK: builtin.module(tilecraft-prepare-entry,tilecraft-lower-externs,canonicalize,cse,tilecraft-slice-concat-parts,tilecraft-int8-matmul{vnni={{[01]}} num-threads=1},tilecraft-transposes-as-reads,tilecraft-fusion-barriers,func.func(linalg-fuse-elementwise-ops),tilecraft-drop-fusion-barriers,tilecraft-int8-epilogues,tilecraft-drop-inner-unit-dims,tilecraft-insert-runtime-checks{enabled=1},resolve-ranked-shaped-type-result-dims,canonicalize,canonicalize,tilecraft-pads-as-destinations,tilecraft-concats-as-destinations,eliminate-empty-tensors,tilecraft-call-destinations,one-shot-bufferize
# CHECK-NOT: tilecraft-schedule
# CHECK: ['input', 'simplify', 'schedule', 'bufferize', 'loops', 'vector', 'llvm']
@run
def edit_and_serialize():
    pipeline = tilecraft.cpu_pipeline(tilecraft.Target(num_threads=1))
    edited = pipeline.replace("schedule", ["canonicalize"])
    print(edited.to_pass_pipeline())
    print(edited.stage_names)


# CHECK-LABEL: TEST: parse_targets
# CHECK: llvm -mcpu=znver4 512
# CHECK: llvm -mattr=+avx2,-avx512f 256
# CHECK: TargetError: unknown target kind 'opencl'
@run
def parse_targets():
    for spec in ("llvm -mcpu=znver4", "llvm -mattr=+avx2,-avx512f"):
        target = tilecraft.Target.parse(spec)
        print(target, target.vector_bits)
    try:
        tilecraft.Target.parse("opencl")
    except tilecraft.TargetError as error:
        print("TargetError:", error)
