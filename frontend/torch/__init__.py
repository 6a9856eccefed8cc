"""PyTorch frontend: ``torch.export`` into linalg, ``tilecraft.torch.compile`` and a
``torch.compile`` backend (``backend="tilecraft"``). See docs/torch.md."""

from .compiler import CompiledTorchModule, compile, export, import_exported
from .dynamo import tilecraft_backend
from .ops import ATEN_OPS

__all__ = ["ATEN_OPS", "CompiledTorchModule", "compile", "export", "import_exported", "tilecraft_backend"]
