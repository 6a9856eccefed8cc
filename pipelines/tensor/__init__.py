"""Transforms of linalg on tensors, between the graph passes and bufferization.

What sits here: hand-written kernels that replace a linalg op or a pattern of them
(attention as one kernel, the int8 and bf16 dot-product kernels and the register tiles and
vector bodies they share), constant weights restored in the layout the kernels read (bf16
weights, block-major constants), guards around upstream elementwise fusion, pads turned into
destinations before bufferization, the run-time checks (inserted here on tensors, lowered in
the LLVM stage), extern calls in destination-passing style, and tensorized tiles as calls.
Each module registers its passes when imported; ``pipelines/stages.py`` and
``pipelines/cpu.py`` import them, so every pipeline and ``tilecraft-opt`` sees them.
"""
