"""PyTorch frontend: ``torch.export`` of a module and the import of the exported program
into linalg (``export.py``, ``importer.py``, the ATen table in ``ops.py``). Compiling and
the ``torch.compile`` backend are ``tilecraft.torch`` (compiler/torch.py, compiler/dynamo.py).
See docs/torch.md."""

from .export import export, import_exported
from .ops import ATEN_OPS

__all__ = ["ATEN_OPS", "export", "import_exported"]
