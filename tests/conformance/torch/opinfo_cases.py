"""PyTorch's operator database (OpInfo) through ``tilecraft.torch.compile``, one op at a time.

For one OpInfo entry and one dtype, each sample input whose tensors all have elements is
wrapped in an eval-mode module (the sample's tensors are its inputs; every other argument
is a constant of the module), compiled with ``tilecraft.torch.compile`` and compared with
eager PyTorch on the same tensors. A sample's status, in the order they are decided:

- ``export-refused``: ``torch.export`` itself rejects the module (data-dependent control
  flow, an op with no meta kernel...): outside the denominator, it is not ours to fix;
- ``random``: eager gives different results twice under one seed (a nondeterministic
  kernel): there is no single right answer to compare; also outside;
- ``refused``: ``tilecraft.torch.compile`` (or the compiled call) raised a typed
  ``TilecraftError``; the message names the missing ATen op or the reason;
- ``crash``: anything else escaped (an untyped exception or an ``InternalError``: always a
  bug);
- ``wrong``: an output differs in structure, dtype, shape or value (``rtol`` 1e-4) from
  eager float32 and, for float32 samples, also from eager run in float64 on the same values
  (PyTorch's own reference tests judge against a float64 result the same way: a result
  closer to the exact one than eager's float32 rounding, e.g. ``matrix_exp`` where eager
  float32 loses 2e-3 through repeated squaring, is not wrong);
- ``pass``.

Random ops (``bernoulli``, ``normal``, ``dropout`` with ``training=True``) are compared like
any other: the generator is seeded identically (:data:`SEED`) before the eager and before the
compiled call, and a compiled random op draws from PyTorch's default generator at call time
(docs/torch.md "Random ops"), so the two agree draw for draw. OpInfo reseeds inside such
ops (``wrapper_set_seed``: ``torch.manual_seed(42)`` in the op); that reseeding is turned off
while the op runs (:func:`_draws_from_the_caller`), since ``torch.export`` runs it at trace
time and the compiled graph carries no seed: the draws come from the caller's generator, as
a user's model's do.

The op's status is the worst of its samples' among the ones the export accepts (wrong,
crash, refused, pass), else ``export-refused`` / ``random`` / ``no-samples``.
"""

from __future__ import annotations

import time
import warnings
import contextlib
from typing import Any, Iterator

STATUSES = ("pass", "wrong", "crash", "refused", "export-refused", "random", "no-samples", "timeout",
            "harness-error")
# What counts: the op's samples are all decided by tilecraft (the denominator of the rate).
JUDGED = ("pass", "wrong", "crash", "refused", "timeout", "harness-error")
_SEVERITY = ("wrong", "crash", "refused", "pass")
RTOL = {"float32": 1e-4}
ATOL = {"float32": 1e-5}
MESSAGE_LIMIT = 400
# Ops whose result holds uninitialized memory: only dtype and shape can be compared.
UNSPECIFIED_VALUES = ("empty", "new_empty", "empty_like", "new_empty_strided", "empty_strided", "empty_permuted")
DTYPES = ("float32", "int64", "bool")
# The generator's seed before every eager and compiled call of a sample.
SEED = 0


def family(name: str) -> str:
    """``torch`` (``torch.*`` and Tensor methods), ``nn.functional``, ``linalg``, ``fft``,
    ``special``, ``masked``, ... : the op name's namespace."""
    for prefix in ("nn.functional.", "linalg.", "fft.", "special.", "masked.", "sparse.", "signal.", "_refs."):
        if name.startswith(prefix):
            return prefix[:-1]
    if name.startswith("_"):
        return "private"
    return "torch"


def case_name(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def op_database() -> dict[str, Any]:
    """Every OpInfo entry by case name (``max.reduction_with_dim``)."""
    from torch.testing._internal.common_methods_invocations import op_db

    return {case_name(op): op for op in op_db}


def cases(dtype: str = "float32") -> list[str]:
    """The case names of the ops that support ``dtype`` on CPU."""
    import torch

    torch_dtype = getattr(torch, dtype)
    return sorted(name for name, op in op_database().items() if torch_dtype in op.supported_dtypes("cpu"))


def summarize(error: BaseException) -> str:
    text = " | ".join(line.strip() for line in str(error).splitlines() if line.strip())
    text = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 3] + "..."


def _module(op: Any, sample: Any) -> tuple[Any, list[Any]]:
    """An eval-mode module calling ``op`` on ``sample``, and its tensor inputs."""
    import torch
    from torch.utils import _pytree

    leaves, spec = _pytree.tree_flatten((sample.input, list(sample.args), dict(sample.kwargs)))
    positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    tensors = [leaves[i].detach().clone() for i in positions]

    class OpModule(torch.nn.Module):
        def forward(self, *inputs: torch.Tensor) -> Any:
            filled = list(leaves)
            for position, tensor in zip(positions, inputs):
                filled[position] = tensor
            first, args, kwargs = _pytree.tree_unflatten(filled, spec)
            with _draws_from_the_caller():
                return op.op(first, *args, **kwargs)

    return OpModule().eval(), tensors


@contextlib.contextmanager
def _draws_from_the_caller() -> Iterator[None]:
    """Within: ``torch.manual_seed`` leaves the generator alone, so an OpInfo op that seeds
    itself (``wrapper_set_seed``) draws from the state its caller seeded."""
    import torch

    seed = torch.manual_seed
    torch.manual_seed = lambda _seed: torch.default_generator
    try:
        yield
    finally:
        torch.manual_seed = seed


def _compare(got: Any, expected: Any, rtol: float, atol: float) -> str | None:
    import torch
    from torch.utils import _pytree

    got_leaves, got_spec = _pytree.tree_flatten(got)
    expected_leaves, expected_spec = _pytree.tree_flatten(expected)
    if len(got_leaves) != len(expected_leaves):
        return f"{len(got_leaves)} outputs, expected {len(expected_leaves)}"
    for i, (g, e) in enumerate(zip(got_leaves, expected_leaves)):
        if not isinstance(e, torch.Tensor):
            if isinstance(g, torch.Tensor) and g.numel() == 1:
                g = g.item()
            if g != e:
                return f"output {i}: {g!r}, expected {e!r}"
            continue
        if not isinstance(g, torch.Tensor):
            return f"output {i}: a {type(g).__name__}, expected a tensor"
        if g.dtype != e.dtype:
            return f"output {i}: dtype {g.dtype}, expected {e.dtype}"
        if tuple(g.shape) != tuple(e.shape):
            return f"output {i}: shape {tuple(g.shape)}, expected {tuple(e.shape)}"
        if e.dtype.is_floating_point or e.dtype.is_complex:
            close = torch.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
        else:
            close = g == e
        if not bool(close.all()):
            bad = (~close).nonzero()
            first = tuple(int(v) for v in bad[0]) if bad.numel() else ()
            return (f"output {i}: {int((~close).sum())}/{close.numel()} values differ; first at "
                    f"{list(first)}: got {g[first].item()!r}, expected {e[first].item()!r}")
    return None


def _without_values(outputs: Any) -> Any:
    """``outputs`` with every tensor zeroed (same dtype and shape)."""
    import torch
    from torch.utils import _pytree

    return _pytree.tree_map(lambda v: torch.zeros_like(v) if isinstance(v, torch.Tensor) else v, outputs)


def _eager(module: Any, tensors: list[Any], seed: int) -> Any:
    import torch

    torch.manual_seed(seed)
    with torch.no_grad():
        return module(*[t.clone() for t in tensors])


def run_sample(op: Any, sample: Any, dtype: str) -> tuple[str, str]:
    """(status, message) of one sample (see the module doc)."""
    import torch

    import tilecraft
    import tilecraft.torch
    from tilecraft.errors import InternalError

    module, tensors = _module(op, sample)
    try:
        expected = _eager(module, tensors, SEED)
    except Exception as error:
        return "export-refused", f"eager: {summarize(error)}"
    try:
        again = _eager(module, tensors, SEED)
        # Uninitialized memory differs between runs or not, by chance: only its dtype and
        # shape are compared below, so it is no sign of randomness.
        if op.name not in UNSPECIFIED_VALUES and _compare(again, expected, 0.0, 0.0) is not None:
            return "random", "eager results differ between two calls under one seed"
    except Exception as error:
        return "random", f"eager: {summarize(error)}"
    try:
        torch.export.export(module, tuple(tensors))
    except Exception as error:
        return "export-refused", summarize(error)
    try:
        compiled = tilecraft.torch.compile(module, tuple(tensors))
        inputs = [t.clone() for t in tensors]
        torch.manual_seed(SEED)
        got = compiled(*inputs)
    except InternalError as error:  # typed, but a bug in tilecraft (a converter crashed)
        return "crash", summarize(error)
    except tilecraft.TilecraftError as error:
        return "refused", summarize(error)
    except Exception as error:
        return "crash", summarize(error)
    if op.name in UNSPECIFIED_VALUES:
        got, expected = _without_values(got), _without_values(expected)
    problem = _compare(got, expected, RTOL.get(dtype, 0.0), ATOL.get(dtype, 0.0))
    if problem and dtype == "float32" and op.name not in UNSPECIFIED_VALUES:
        precise = _float64_reference(module, tensors)
        if precise is not None and _compare(got, precise, RTOL[dtype], ATOL[dtype]) is None:
            return "pass", f"matches eager float64 (eager float32: {problem})"
    return ("wrong", problem) if problem else ("pass", "")


def _float64_reference(module: Any, tensors: list[Any]) -> Any:
    """Eager's result on the float32 inputs promoted to float64, cast back to float32
    (``None`` when the op does not run in float64 or gives other structure)."""
    import torch
    from torch.utils import _pytree

    if not any(t.dtype == torch.float32 for t in tensors):
        return None
    try:
        result = _eager(module, [t.double() if t.dtype == torch.float32 else t for t in tensors], SEED)
    except Exception:  # noqa: BLE001  (no float64 kernel, or the module fixes float32 constants)
        return None
    return _pytree.tree_map(
        lambda v: v.float() if isinstance(v, torch.Tensor) and v.dtype == torch.float64 else v, result)


def _has_elements(sample: Any) -> bool:
    import torch
    from torch.utils import _pytree

    leaves = _pytree.tree_leaves((sample.input, list(sample.args), dict(sample.kwargs)))
    tensors = [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]
    return bool(tensors) and all(t.numel() > 0 for t in tensors)


def run_op(op: Any, dtype: str = "float32", max_samples: int | None = None) -> dict[str, Any]:
    """The record of one op: ``status``, ``message`` (of the worst sample), ``samples``
    (statuses in order), ``seconds``."""
    import torch

    start = time.perf_counter()
    torch.manual_seed(0)
    statuses: list[str] = []
    messages: dict[str, str] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            samples = op.sample_inputs("cpu", getattr(torch, dtype), requires_grad=False)
            for sample in samples:
                if max_samples is not None and len(statuses) >= max_samples:
                    break
                if not _has_elements(sample):
                    continue
                status, message = run_sample(op, sample, dtype)
                statuses.append(status)
                messages.setdefault(status, f"sample {len(statuses) - 1}: {message}" if message else "")
        except Exception as error:
            return {"status": "harness-error", "message": summarize(error), "samples": statuses,
                    "seconds": round(time.perf_counter() - start, 2)}
    judged = [s for s in statuses if s in _SEVERITY]
    if judged:
        status = min(judged, key=_SEVERITY.index)
    elif statuses:
        status = "random" if "random" in statuses else "export-refused"
    else:
        status = "no-samples"
    return {"status": status, "message": messages.get(status, ""), "samples": statuses,
            "seconds": round(time.perf_counter() - start, 2)}
