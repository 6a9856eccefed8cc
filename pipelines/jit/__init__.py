"""Calling compiled code: the entry function and its signature, the JIT (engine.py),
weights bound by address, and :class:`CompiledModule` (compiled_module.py).

Why in pipelines/ and not with the CPU target (targets/cpu/): ``compile``, the TE ``build``
(schedule/te) and the tuner's measurements make a :class:`CompiledModule` for every target,
and the CUDA module builds on it. Those callers sit below targets/ in the layering, so the
module that makes one sits below them too; a target's plugin chooses what it returns.
"""
