"""The compiler's front door: one session from a model to a callable or a package.

``compile.py`` runs the stages (load -> import -> graph -> schedule -> lower -> JIT or
package) with one :class:`CompileOptions` (``options.py``) shared by ``tilecraft.compile``,
the ``tilecraft`` command and the PyTorch entry points (``torch.py``: ``tilecraft.torch``;
``dynamo.py``: ``torch.compile(backend="tilecraft")``); ``source.py`` is ``tilecraft.load``.
See docs/architecture.md.
"""

from .compile import compile
from .options import CompileOptions
from .source import Model, TensorInfo, load

__all__ = ["CompileOptions", "Model", "TensorInfo", "compile", "load"]
