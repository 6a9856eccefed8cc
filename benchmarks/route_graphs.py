"""The two routes a PyTorch model takes into tilecraft, compared op by op (issue #43).

    .venv/bin/python benchmarks/route_graphs.py --models squeezenet,vit_b16
    .venv/bin/python benchmarks/route_graphs.py --models resnext --stage graph --tiny
    .venv/bin/python benchmarks/route_graphs.py --models squeezenet --show
    .venv/bin/python benchmarks/route_graphs.py --models squeezenet --time --repeat 7

A suite model (benchmarks/public_suite.py) reaches the compiler either as the ONNX file the
TorchScript exporter writes (``tilecraft.compile``) or through ``tilecraft.torch.compile``
(torch.export, core ATen). Where the model is the same, both should reach the same graph,
and so the same kernels: the suite showed the PyTorch route slower on every CNN. This runs
the default CPU pipeline's stages up to ``--stage`` (``simplify`` by default: the IR the
schedule sees; ``graph`` for the graph passes' result) on both imports and lists the ops
that compute (linalg ops, reshapes, pads, slices, concats, loops), each with its result
shapes, then every stretch where the two lists differ. No compile to machine code: a
model takes seconds.

``--time`` measures instead, in one process: both routes, the PyTorch route without
``tilecraft-drop-inner-unit-dims`` (pipelines/tensor/inner_unit_dims.py) and eager.

Why result shapes and not whole ops: the two imports name values, constants and locations
differently; what decides the kernels is which op runs on which shape.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from dataclasses import dataclass
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))

# Ops that compute nothing the schedule plans (values, destinations, scalar arithmetic,
# terminators, run-time checks).
_SKIPPED_PREFIXES = ("arith.", "math.", "index.", "affine.", "cf.", "ub.")
_SKIPPED = frozenset({"tensor.empty", "tensor.dim", "func.return", "scf.yield", "scf.forall.in_parallel",
                      "bufferization.alloc_tensor"})


@dataclass(frozen=True)
class RouteOp:
    """One op of a route's graph: what it is and the shapes it produces."""

    name: str
    results: str

    def __str__(self) -> str:
        return f"{self.name} -> {self.results}"


def _describe(op: Any) -> RouteOp:
    from mlir import ir

    name = op.name
    if name == "linalg.generic":
        kinds = "".join("r" if "reduction" in str(t) else "p" for t in ir.ArrayAttr(op.attributes["iterator_types"]))
        name = f"linalg.generic[{kinds}]"
    results = ", ".join(str(r.type) for r in op.results) or "()"
    return RouteOp(name, results)


def graph_ops(module: Any) -> list[RouteOp]:
    """The computing ops of ``module``'s public functions, in program order (loops and the
    ops inside them; a linalg op's body is not entered)."""
    found: list[RouteOp] = []

    def visit_block(block: Any) -> None:
        for op in block.operations:
            op = op.operation
            if op.name in _SKIPPED or op.name.startswith(_SKIPPED_PREFIXES):
                continue
            found.append(_describe(op))
            if not op.name.startswith("linalg."):
                for region in op.regions:
                    for inner in region.blocks:
                        visit_block(inner)

    for op in module.body.operations:
        op = op.operation
        if op.name == "func.func" and op.regions[0].blocks and "sym_visibility" not in op.attributes:
            visit_block(op.regions[0].blocks[0])
    return found


def staged(module: Any, stage: str, opt_level: int = 3) -> None:
    """Run the default CPU pipeline (for the host) on ``module`` in place, up to and with
    ``stage``."""
    from mlir import ir

    from tilecraft.pipelines.cpu import cpu_pipeline
    from tilecraft.pipelines.pipeline import Pipeline

    pipeline = cpu_pipeline("llvm", opt_level=opt_level)
    names = pipeline.stage_names
    if stage not in names:
        raise SystemExit(f"no stage {stage!r}; stages: {', '.join(names)}")
    with module.context, ir.Location.unknown():
        Pipeline(pipeline.stages[:names.index(stage) + 1]).run(module)


def route_graphs(module: Any, inputs: tuple, stage: str = "simplify") -> dict[str, list[RouteOp]]:
    """``{"onnx": ops, "torch": ops}``: ``module`` (eval mode) on ``inputs`` through the
    ONNX export (public_suite.py's) and through torch.export, each after ``stage``."""
    import onnx
    from mlir import ir

    from tilecraft.dialects import graph
    from tilecraft.frontend.loader import load_module
    from tilecraft.frontend.torch.export import export, import_exported

    sys.path.insert(0, HERE)
    from public_suite import export_onnx  # noqa: E402

    routes: dict[str, list[RouteOp]] = {}
    for route in ("onnx", "torch"):
        context = ir.Context()
        graph.load(context)
        if route == "onnx":
            imported = load_module(onnx.load_from_string(export_onnx(module, inputs)), context)
        else:
            imported = import_exported(export(module, inputs), context)
        staged(imported, stage)
        routes[route] = graph_ops(imported)
    return routes


def differences(onnx_ops: list[RouteOp], torch_ops: list[RouteOp]) -> list[tuple[list[RouteOp], list[RouteOp]]]:
    """The stretches where the two op lists differ: (ONNX route's ops, PyTorch route's ops)."""
    matcher = difflib.SequenceMatcher(a=onnx_ops, b=torch_ops, autojunk=False)
    return [(onnx_ops[i1:i2], torch_ops[j1:j2])
            for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def report(name: str, routes: dict[str, list[RouteOp]], show: bool = False) -> str:
    onnx_ops, torch_ops = routes["onnx"], routes["torch"]
    stretches = differences(onnx_ops, torch_ops)
    lines = [f"== {name}: onnx {len(onnx_ops)} ops, torch {len(torch_ops)} ops, "
             f"{len(stretches)} differing stretch(es)"]
    for number, (left, right) in enumerate(stretches, 1):
        lines.append(f"-- difference {number}")
        lines += [f"  onnx:  {op}" for op in left] or ["  onnx:  (nothing)"]
        lines += [f"  torch: {op}" for op in right] or ["  torch: (nothing)"]
    if show:
        for route, ops in routes.items():
            lines.append(f"-- {route} route")
            lines += [f"  {op}" for op in ops]
    return "\n".join(lines)


def time_routes(name: str, repeat: int, threads: int) -> dict[str, float]:
    """Milliseconds per call of ``name`` in one process, the runners alternating in blocks
    (public_suite.py's timing): the ONNX route, the PyTorch route, the PyTorch route without
    ``tilecraft-drop-inner-unit-dims`` (the A/B of that pass) and eager PyTorch; outputs
    checked against eager first."""
    os.environ["TILECRAFT_NUM_THREADS"] = str(threads)
    import numpy as np
    import onnx
    import torch

    import tilecraft
    from tilecraft.pipelines.cpu import cpu_pipeline
    from tilecraft.pipelines.tensor.inner_unit_dims import DROP_INNER_UNIT_DIMS

    sys.path.insert(0, HERE)
    import public_suite  # noqa: E402
    from end_to_end import RUNNER_PAUSE_S, alternating  # noqa: E402

    torch.set_num_threads(threads)
    module, inputs = public_suite.build(name)
    arrays = [x.numpy() for x in inputs]
    pipeline = cpu_pipeline(tilecraft.Target.parse("llvm"))
    without = pipeline.replace("simplify", [e for e in pipeline.stage("simplify").passes if e != DROP_INNER_UNIT_DIMS])
    onnx_route = tilecraft.compile(onnx.load_from_string(public_suite.export_onnx(module, inputs)),
                                   keep_ir=False, cache=False, verbose=False)
    torch_route = tilecraft.torch.compile(module, inputs, keep_ir=False, cache=False, verbose=False)
    torch_former = tilecraft.torch.compile(module, inputs, keep_ir=False, cache=False, verbose=False, pipeline=without)
    with torch.no_grad():
        eager = module(*inputs).numpy()
        for label, got in (("onnx", onnx_route(*arrays)), ("torch", torch_route(*inputs).numpy()),
                           ("torch without the pass", torch_former(*inputs).numpy())):
            scale = float(np.abs(eager).max())
            if not np.allclose(got, eager, rtol=1e-3, atol=1e-3 * scale):
                raise SystemExit(f"{name}: the {label} route's output differs from eager")
        runners = {"tilecraft (onnx)": lambda: onnx_route(*arrays), "tilecraft.torch": lambda: torch_route(*inputs),
                   "tilecraft.torch without the pass": lambda: torch_former(*inputs),
                   "eager": lambda: module(*inputs)}
        return {k: v * 1e3 for k, v in alternating(runners, repeat, min_sample_s=0.05, pause_s=RUNNER_PAUSE_S).items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="squeezenet,vit_b16,resnext,mobilenet_v2,convnext",
                        help="comma-separated public_suite.py names")
    parser.add_argument("--stage", default="simplify", help="the last pipeline stage to run (default: simplify)")
    parser.add_argument("--tiny", action="store_true", help="the smoke test's sizes")
    parser.add_argument("--show", action="store_true", help="also print both op lists whole")
    parser.add_argument("--time", action="store_true",
                        help="instead: time both routes (and the PyTorch route without tilecraft-drop-inner-unit-dims) "
                             "and eager in one process")
    parser.add_argument("--repeat", type=int, default=5, help="--time: timed blocks per runner (median)")
    parser.add_argument("--threads", type=int, default=1, help="--time: threads per runtime")
    args = parser.parse_args(argv)
    if args.time:
        for name in args.models.split(","):
            load = os.getloadavg()[0]
            times = time_routes(name, args.repeat, args.threads)
            print(f"{name} ({args.threads} thread(s), median of {args.repeat} blocks, load {load:.1f}): "
                  + ", ".join(f"{k} {v:.2f} ms" for k, v in times.items()), flush=True)
        return 0
    sys.path.insert(0, HERE)
    import public_suite  # noqa: E402

    for name in args.models.split(","):
        module, inputs = public_suite.build(name, tiny=args.tiny)
        print(report(name, route_graphs(module, inputs, args.stage), args.show), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
