"""Running compiled code from Python: entry signatures, memref descriptors, CompiledModule."""

from .compiled_module import CompiledModule
from .signature import TensorSpec, EntrySignature

__all__ = ["CompiledModule", "EntrySignature", "TensorSpec"]
