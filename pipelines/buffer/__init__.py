"""Transforms of buffers and loops, after bufferization and before the vector stage.

What sits here: pads that fill only their borders, the next block of a block-major constant
prefetched, strided copies as vector transfers along their contiguous rows, ``i1`` buffers
stored as bytes, and multi-dimensional parallel loops collapsed before the async lowering.
Each module registers its passes when imported; ``pipelines/stages.py`` imports them.
"""
