"""Transforms of the vector and LLVM dialects: the last stages before the JIT or a package.

What sits here: vector math LLVM would scalarize (``exp`` as a polynomial, float sums as
trees, divides as reciprocal multiplies), unit-reduction contractions canonicalized, the f32
fast-math approximations (chosen in the schedule stage, emitted as vector code), MLIR's
run-time verification of memref accesses routed to typed errors (checked builds), and
identical private ``llvm.func`` bodies merged. Each module registers its passes when
imported; ``pipelines/stages.py`` and ``pipelines/cpu.py`` import them.
"""
