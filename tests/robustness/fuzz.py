"""The robustness fuzz suite (issue 17): seeded malformed inputs, each classified.

    python tests/robustness/fuzz.py --cases 2000 --seed 7      # a longer run, summary table
    python tests/robustness/fuzz.py --cases 400 --seed 0 --show untyped

Categories: ``onnx_bytes`` (mutated protobufs), ``onnx_graph`` (semantically invalid graphs
built with ``onnx.helper``), ``mlir`` (mutated and hostile MLIR text), ``package`` (mutated
package archives), ``records`` (tuning-records files), ``api`` (Python call arguments),
``cli`` (``tilecraft`` and ``tilecraft-opt`` command lines).

Each case runs in a worker subprocess with an address-space limit (``RLIMIT_AS``) and a
per-case timeout; the worker runs cases one after another and is restarted after a crash
or a hang, so one bad case costs one restart, not one process per case. Outcomes:
``ok`` (accepted, and where onnxruntime runs the model, the same numbers), ``typed`` (a
``TilecraftError``, or a CLI exit code with one stderr line), ``internal`` (an
``InternalError``: typed, but a bug in tilecraft), ``untyped`` (any other
exception), ``crash`` (the worker died), ``hang`` (the timeout), ``wrong`` (accepted with
numbers onnxruntime disagrees with). Everything derives from ``--seed``.
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import os
import random
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

CATEGORIES = ("onnx_bytes", "onnx_graph", "mlir", "package", "records", "api", "cli", "runtime")
OUTCOMES = ("ok", "typed", "internal", "untyped", "crash", "hang", "wrong")
FAILING = ("internal", "untyped", "crash", "hang", "wrong")
MEMORY_LIMIT = 6 << 30
CASE_TIMEOUT = 60.0

MATMUL_MLIR = """func.func @main(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %c = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %0 = linalg.matmul ins(%a, %b : tensor<4x4xf32>, tensor<4x4xf32>) outs(%c : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}
"""
GENERIC_MLIR = """#map = affine_map<(d0) -> (d0)>
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %0 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%x: f32, %y: f32):
    %1 = arith.addf %x, %x : f32
    linalg.yield %1 : f32
  } -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


# ---- case generation (parent process; plain JSON so a case can be replayed) -------------------

def generate(seed: int, count: int) -> list[dict[str, Any]]:
    """``count`` cases, spread over the categories round-robin, all from ``seed``."""
    rng = random.Random(seed)
    cases = []
    for index in range(count):
        category = CATEGORIES[index % len(CATEGORIES)]
        cases.append({"id": index, "category": category, "seed": rng.randrange(1 << 31)})
    return cases


# ---- running cases (worker process) ----------------------------------------------------------

def _onnx_base_model(rng: random.Random):
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4), "W")
    bias = numpy_helper.from_array(np.full((4,), 0.5, np.float32), "B")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "B"], ["a"], name="add"),
             helper.make_node("Relu", ["a"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [weight, bias])
    # IR version 8: one onnxruntime reads, so accepted models are compared with it
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", rng.choice([13, 17]))], ir_version=8)


def _compare_with_onnxruntime(model_bytes: bytes, compiled: Any) -> str:
    """``ok`` or ``wrong``: run both on the same seeded inputs where onnxruntime runs."""
    import numpy as np
    import onnxruntime

    try:
        session = onnxruntime.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
        feeds = {}
        rng = np.random.default_rng(0)
        for spec in compiled.signature.arguments:
            shape = [d if d is not None else 2 for d in (spec.shape or ())]
            feeds[spec.name] = (rng.random(shape) * 4 - 2).astype(spec.dtype)
        expected = session.run(None, feeds)
    except Exception:  # onnxruntime rejects the model or the inputs: nothing to compare
        return "ok"
    got = compiled(**feeds)
    got = list(got) if isinstance(got, tuple) else [got]
    for want, have in zip(expected, got):
        if np.asarray(want).shape != np.asarray(have).shape or not np.allclose(
                want, have, rtol=1e-3, atol=1e-3, equal_nan=True):
            return "wrong"
    return "ok"


def case_onnx_bytes(rng: random.Random, work: Path) -> str:
    import tilecraft

    data = bytearray(_onnx_base_model(rng).SerializeToString())
    for _ in range(rng.randint(1, 4)):
        how = rng.choice(["flip", "truncate", "insert", "delete", "byte"])
        position = rng.randrange(len(data))
        if how == "flip":
            data[position] ^= 1 << rng.randrange(8)
        elif how == "truncate":
            del data[position:]
        elif how == "insert":
            data[position:position] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif how == "delete":
            del data[position:position + rng.randint(1, 8)]
        else:
            data[position] = rng.randrange(256)
        if not data:
            data = bytearray(b"\x08")
    path = work / "case.onnx"
    path.write_bytes(bytes(data))
    compiled = tilecraft.compile(path)
    return _compare_with_onnxruntime(bytes(data), compiled)


_UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Abs", "Sqrt", "Softmax", "Identity", "Cast",
          "Transpose", "ReduceSum", "ReduceMean", "Flatten", "Squeeze", "Unsqueeze", "Not"]
_BINARY = ["Add", "Sub", "Mul", "Div", "MatMul", "Pow", "Equal", "Less", "Max", "Min", "Concat",
           "Gather", "Reshape", "Expand", "Tile", "Where", "Gemm", "Conv", "MaxPool", "Slice"]


def _random_attribute(rng: random.Random, helper: Any) -> Any:
    name = rng.choice(["axis", "axes", "perm", "keepdims", "to", "kernel_shape", "strides", "pads",
                       "transA", "alpha", "epsilon", "mode", "value", "group", "bogus"])
    value = rng.choice([
        rng.randint(-5, 5), [rng.randint(-3, 5) for _ in range(rng.randint(0, 4))],
        rng.uniform(-2, 2), b"constant", "nearest", float("nan"), 2**62, -2**62,
    ])
    return helper.make_attribute(name, value)


def _valid_graph(rng: random.Random, work: Path) -> tuple[bytes, Any]:
    """A random chain of float ops with consistent shapes, compiled: (model bytes, module)."""
    from onnx import TensorProto, helper

    import tilecraft

    shape = [rng.randint(1, 5) for _ in range(rng.randint(1, 3))]
    nodes, previous = [], "x"
    for position in range(rng.randint(1, 6)):
        op = rng.choice(["Relu", "Sigmoid", "Tanh", "Neg", "Abs", "Exp", "Add", "Mul", "Sub", "Max", "Softmax"])
        operands = [previous] + (["x"] if op in ("Add", "Mul", "Sub", "Max") else [])
        nodes.append(helper.make_node(op, operands, [f"t{position}"], name=f"n{position}"))
        previous = f"t{position}"
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(previous, TensorProto.FLOAT, shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", rng.choice([13, 17, 21]))],
                              ir_version=8)
    path = work / "case.onnx"
    path.write_bytes(model.SerializeToString())
    return model.SerializeToString(), tilecraft.compile(path)


def case_onnx_graph(rng: random.Random, work: Path) -> str:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    import tilecraft

    dtypes = [TensorProto.FLOAT, TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32,
              TensorProto.DOUBLE, TensorProto.BOOL, TensorProto.UINT8, TensorProto.FLOAT16,
              TensorProto.STRING, TensorProto.COMPLEX64]

    def shape() -> list[Any]:
        return [rng.choice([1, 2, 3, 4, 0, -1, "n", 2**33]) for _ in range(rng.choice([0, 1, 2, 3, 4]))]

    if rng.random() < 0.3:  # a well-formed graph, so that accepting it is checked numerically
        return _compare_with_onnxruntime(*_valid_graph(rng, work))
    inputs = [helper.make_tensor_value_info(f"x{i}", rng.choice(dtypes), shape()) for i in range(rng.randint(1, 3))]
    initializers = []
    if rng.random() < 0.5:
        array = np.asarray(rng.choice([[2, 2], [4], [1, -1], [0], [3, 1, 2], [2**20, 2**20]]),
                           rng.choice([np.int64, np.float32, np.int32]))
        initializers.append(numpy_helper.from_array(array, "c0"))
    names = [v.name for v in inputs] + [t.name for t in initializers] + ["undefined", ""]
    nodes = []
    for position in range(rng.randint(1, 4)):
        op = rng.choice(_UNARY + _BINARY + ["ConstantOfShape", "Range", "Resize", "Unknown"])
        arity = 1 if op in _UNARY or op == "ConstantOfShape" else rng.choice([2, 2, 3, 1, 0])
        node = helper.make_node(op, [rng.choice(names) for _ in range(arity)],
                                [f"t{position}"] + ([f"t{position}b"] if rng.random() < 0.1 else []),
                                name=f"n{position}")
        for _ in range(rng.choice([0, 0, 1, 2])):
            try:
                node.attribute.append(_random_attribute(rng, helper))
            except ValueError:  # onnx.helper cannot type an empty list: no attribute then
                pass
        nodes.append(node)
        names.append(f"t{position}")
    output = nodes[-1].output[0] if rng.random() < 0.9 else "never"
    outputs = [helper.make_tensor_value_info(output, rng.choice(dtypes[:3]), None if rng.random() < 0.5 else shape())]
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializers)
    opset = rng.choice([7, 11, 13, 17, 17, 18, 21, 1, 99])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    model_bytes = model.SerializeToString()
    path = work / "case.onnx"
    path.write_bytes(model_bytes)
    compiled = tilecraft.compile(path)
    return _compare_with_onnxruntime(model_bytes, compiled)


def case_mlir(rng: random.Random, work: Path) -> str:
    import tilecraft

    text = rng.choice([MATMUL_MLIR, GENERIC_MLIR])
    how = rng.choice(["delete", "duplicate", "replace", "dims", "deep", "iterators", "bytes", "maps"])
    if how == "delete":
        start = rng.randrange(len(text))
        text = text[:start] + text[start + rng.randint(1, 20):]
    elif how == "duplicate":
        start = rng.randrange(len(text))
        text = text[:start] + text[start:start + rng.randint(1, 40)] * 2 + text[start:]
    elif how == "replace":
        token = rng.choice(["f32", "4", "tensor", "%a", "ins", "outs", "->", "linalg.yield", "}"])
        text = text.replace(token, rng.choice(["i64", "-1", "memref", "%zz", "", "?", "9223372036854775807", "{"]), 1)
    elif how == "dims":
        text = text.replace("4", str(rng.choice([2**31, 2**40, 2**62, 3037000500, 0])))
    elif how == "deep":
        depth = rng.choice([300, 1000, 5000, 50000])
        opening, closing = rng.choice([("[", "]"), ('"test.op"() ({ ', "}) : () -> () "), ("(", ")")])
        text = "func.func @main() attributes {a = " + opening * depth + closing * depth + "} { return }"
    elif how == "iterators":
        text = GENERIC_MLIR.replace('["parallel"]', rng.choice(
            ["3", '"parallel"', "[3]", '["bogus"]', "[]", '["parallel", "reduction"]', "{a = 1}",
             "[#linalg.iterator_type<parallel>]", "[#linalg.iterator_type<reduction>]"]))
    elif how == "maps":
        text = GENERIC_MLIR.replace("[#map, #map]", rng.choice(
            ["[#map]", "[]", "3", "[#map, #map, #map]", "[affine_map<(d0, d1) -> (d0)>, #map]",
             "[affine_map<(d0) -> (d0 + 9)>, #map]", '["x", #map]']))
    else:
        data = bytearray(text.encode())
        for _ in range(rng.randint(1, 10)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        text = data.decode("utf-8", "surrogateescape")
    compiled = tilecraft.compile(text)
    import numpy as np

    for spec in compiled.signature.arguments:
        if spec.shape is None or any(d is None or d > 64 for d in spec.shape):
            return "ok"
    args = [np.ones(spec.shape, spec.dtype) for spec in compiled.signature.arguments]
    compiled(*args)
    return "ok"


_PACKAGE: dict[str, Path] = {}


def _base_package(work: Path) -> Path:
    """One small valid package per worker (built once, copied per case)."""
    if "path" not in _PACKAGE:
        import tilecraft

        path = work / "base.tar"
        tilecraft.compile(MATMUL_MLIR, package_path=path)
        _PACKAGE["path"] = path
    return _PACKAGE["path"]


def case_package(rng: random.Random, work: Path) -> str:
    import tarfile

    import numpy as np

    from tilecraft.runtime.package import load

    base = _base_package(work)
    path = work / f"case{rng.randrange(1 << 30)}.tar"
    how = rng.choice(["manifest", "bytes", "truncate", "member", "link", "traversal", "json"])
    with tarfile.open(base) as archive:
        members = {m.name: archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}
    if how in ("bytes", "truncate"):
        data = bytearray(base.read_bytes())
        if how == "truncate":
            del data[rng.randrange(len(data)):]
        else:
            for _ in range(rng.randint(1, 5)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        path.write_bytes(bytes(data))
    else:
        manifest = json.loads(members["manifest.json"])
        extra: list[tarfile.TarInfo] = []
        if how == "manifest":
            field = rng.choice(["inputs", "outputs", "symbol", "format", "sha256", "version"])
            if field == "inputs" and manifest.get("inputs"):
                entry = rng.choice(manifest["inputs"])
                key = rng.choice([k for k in entry])
                entry[key] = rng.choice([[8, 8], [4], "float64", "int8", None, 3, [-1, 4], [2**40, 2**40]])
            elif field == "outputs":
                manifest["outputs"] = rng.choice([[], manifest["outputs"] * 2, "x", [{"name": 3}]])
            else:
                manifest[field] = rng.choice(["", None, 7, "../../etc", {"a": 1}])
            members["manifest.json"] = json.dumps(manifest).encode()
        elif how == "json":
            members["manifest.json"] = rng.choice([b"{", b"[]", b"\xff\xfe", b"null", b'{"format": 1}'])
        elif how in ("member", "traversal"):
            name = "extra.bin" if how == "member" else rng.choice(["../escape.so", "/tmp/abs.so", "a/../../b"])
            info = tarfile.TarInfo(name)
            info.size = 4
            extra.append(info)
        else:
            info = tarfile.TarInfo(rng.choice(["model.so", "link"]))
            info.type = rng.choice([tarfile.SYMTYPE, tarfile.LNKTYPE])
            info.linkname = "/etc/passwd"
            members.pop(info.name, None)
            extra.append(info)
        with tarfile.open(path, "w") as archive:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
            for info in extra:
                archive.addfile(info, io.BytesIO(b"\0" * info.size) if info.size else None)
    package = load(path)
    args = [np.ones([d or 1 for d in spec.shape or ()], spec.dtype) for spec in package.signature.arguments]
    result = package(*args)
    expected = np.ones((4, 4), np.float32) @ np.ones((4, 4), np.float32)
    if how == "manifest" and (np.shape(result) != expected.shape or not np.allclose(result, expected)):
        return "wrong"
    return "ok"


def case_records(rng: random.Random, work: Path) -> str:
    import tilecraft
    from tilecraft.schedule.records import load_records

    path = work / f"records{rng.randrange(1 << 30)}.jsonl"
    lines = []
    for _ in range(rng.randint(0, 5)):
        lines.append(rng.choice([
            "{", "[]", "null", '{"task": 3}', '{"config": {"tile": -1}}', "\xff\xfe",
            json.dumps({"task": {"key": "x"}, "config": {"a": rng.randint(-5, 5)}, "cost": "nan"}),
            json.dumps({"target": "llvm", "tilecraft": "0.1.0", "config": [], "costs": [float("inf")]}),
            "x" * rng.choice([10, 100000]),
        ]))
    data = "\n".join(lines).encode("utf-8", "surrogateescape")
    path.write_bytes(data)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        load_records(path, target=rng.choice(["llvm", "llvm -mcpu=znver4", None]))
        if rng.random() < 0.2:
            tilecraft.compile(MATMUL_MLIR, tuning_records=path, opt_level=rng.choice([0, 3]))
    return "ok"


_COMPILED: dict[str, Any] = {}


def case_api(rng: random.Random, work: Path) -> str:
    import numpy as np

    import tilecraft

    how = rng.choice(["call", "call", "compile", "target", "tune_options", "load"])
    odd = [None, "x", 3, 2.5, float("nan"), -1, [], {}, object(), b"\0", np.int64(1), True]
    if how == "call":
        if "matmul" not in _COMPILED:
            _COMPILED["matmul"] = tilecraft.compile(MATMUL_MLIR)
        module = _COMPILED["matmul"]
        args = [rng.choice([np.ones((4, 4), np.float32), np.ones((4, 5), np.float32),
                            np.ones((4, 4), np.float64), np.ones((4, 4), np.int32), np.ones(16, np.float32)[::2],
                            np.ones((4, 4), np.float32)[:, ::-1], np.ones((4, 4), np.float32).T,
                            np.full((4, 4), np.nan, np.float32), *odd])
                for _ in range(rng.choice([0, 1, 2, 2, 2, 3]))]
        result = module(*args)
        if not isinstance(result, np.ndarray) or result.shape != (4, 4):
            return "wrong"
        return "ok"
    if how == "compile":
        options = {rng.choice(["opt_level", "target", "shape_dict", "entry", "pipeline", "keep_ir",
                               "tuning_records", "package_path", "bogus"]): rng.choice(odd)}
        tilecraft.compile(rng.choice([MATMUL_MLIR, *odd[:6]]), **options)
        return "ok"
    if how == "target":
        spec = rng.choice(["llvm", "cuda", "llvm -mcpu=", "llvm -mcpu=zen9", "llvm -mattr=avx", "llvm -mattr=+",
                           "llvm -l1d=0", "llvm -l2=-5", "llvm -l3=nan", "llvm 'x", "cuda -arch=sm_1",
                           "llvm -mtriple=", "llvm -mcpu=znver4 -mcpu=x", *odd])
        tilecraft.Target.parse(spec)
        return "ok"
    if how == "tune_options":
        key = rng.choice(["trials", "timeout", "batch_size", "early_stopping", "tuner", "validate_top", "seed"])
        tilecraft.TuneOptions(**{key: rng.choice(odd)})
        return "ok"
    tilecraft.load(rng.choice([*odd[:6], str(work / "missing.onnx"), str(work)]))
    return "ok"


def _runtime_models() -> dict[str, Any]:
    """Models whose validity depends on the values and sizes of their inputs (run-time
    checks, docs/robustness.md): name -> ONNX model."""
    from onnx import TensorProto as T
    from onnx import helper

    def info(name, element, shape):
        return helper.make_tensor_value_info(name, element, shape)

    def model(nodes, inputs, outputs, initializers=()):
        graph = helper.make_graph(nodes, "m", inputs, outputs, initializer=list(initializers))
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)

    data = info("data", T.FLOAT, [5, 3])
    return {
        "Gather": model([helper.make_node("Gather", ["data", "idx"], ["y"], name="g", axis=0)],
                        [data, info("idx", T.INT64, ["n"])], [info("y", T.FLOAT, ["n", 3])]),
        "Gather1": model([helper.make_node("Gather", ["data", "idx"], ["y"], name="g", axis=1)],
                         [data, info("idx", T.INT64, ["n", 2])], [info("y", T.FLOAT, [5, "n", 2])]),
        "GatherElements": model([helper.make_node("GatherElements", ["data", "idx"], ["y"], name="g", axis=1)],
                                [info("data", T.FLOAT, ["r", 3]), info("idx", T.INT64, ["n", 3])],
                                [info("y", T.FLOAT, ["n", 3])]),
        "GatherND": model([helper.make_node("GatherND", ["data", "idx"], ["y"], name="g")],
                          [data, info("idx", T.INT64, ["n", 2])], [info("y", T.FLOAT, ["n"])]),
        "ScatterND": model([helper.make_node("ScatterND", ["data", "idx", "upd"], ["y"], name="s")],
                           [data, info("idx", T.INT64, ["n", 1]), info("upd", T.FLOAT, ["m", 3])],
                           [info("y", T.FLOAT, [5, 3])]),
        "ScatterElements": model([helper.make_node("ScatterElements", ["data", "idx", "upd"], ["y"], name="s", axis=1)],
                                 [data, info("idx", T.INT64, ["n", 2]), info("upd", T.FLOAT, ["n", 2])],
                                 [info("y", T.FLOAT, [5, 3])]),
        "Reshape": model([helper.make_node("Reshape", ["x", "s"], ["r"], name="r"),
                          helper.make_node("Add", ["r", "y"], ["z"], name="add")],
                         [info("x", T.FLOAT, ["N"]), info("y", T.FLOAT, ["M", 2])], [info("z", T.FLOAT, ["K", 2])],
                         [helper.make_tensor("s", T.INT64, [2], [-1, 2])]),
        "Slice": model([helper.make_node("Slice", ["x", "starts", "ends"], ["s"], name="sl"),
                        helper.make_node("MatMul", ["s", "w"], ["z"], name="mm")],
                       [info("x", T.FLOAT, ["N", "K"]), info("w", T.FLOAT, ["J", 3])], [info("z", T.FLOAT, ["M", 3])],
                       [helper.make_tensor("starts", T.INT64, [1], [1]),
                        helper.make_tensor("ends", T.INT64, [1], [1 << 62])]),
        "Expand": model([helper.make_node("Expand", ["x", "shape"], ["y"], name="e")],
                        [info("x", T.FLOAT, [6, 1]), info("shape", T.INT64, [2])], [info("y", T.FLOAT, ["a", "b"])]),
        "ConstantOfShape": model([helper.make_node("ConstantOfShape", ["shape"], ["c"], name="fill",
                                                   value=helper.make_tensor("v", T.FLOAT, [1], [1.0])),
                                  helper.make_node("ReduceSum", ["c"], ["z"], name="sum", keepdims=0)],
                                 [info("shape", T.INT64, [2])], [info("z", T.FLOAT, [])]),
    }


def _runtime_inputs(rng: random.Random, name: str) -> list[Any]:
    """Inputs for one of :func:`_runtime_models`, valid or not at random."""
    import numpy as np

    data = np.arange(15, dtype=np.float32).reshape(5, 3)

    def indices(shape, extent):
        bound = rng.choice([extent, extent, 2 * extent, 1 << 40])
        return np.array([rng.randint(-bound, bound - 1) for _ in range(int(np.prod(shape)))],
                        dtype=np.int64).reshape(shape)

    n = rng.randint(1, 4)
    if name == "Gather":
        return [data, indices((n,), 5)]
    if name == "Gather1":
        return [data, indices((n, 2), 3)]
    if name == "GatherElements":  # more index rows than data rows read outside the data
        rows = rng.randint(1, 5)
        return [np.arange(rows * 3, dtype=np.float32).reshape(rows, 3), indices((n, 3), 3)]
    if name == "GatherND":
        return [data, np.stack([indices((n,), 5), indices((n,), 3)], axis=1)]
    if name == "ScatterND":  # distinct rows: ONNX leaves duplicate ScatterND targets undefined
        rows = rng.sample(range(-5, 5), n) if rng.random() < 0.7 else [rng.randint(-12, 12) for _ in range(n)]
        if len({r % 5 for r in rows}) < len(rows):
            rows = rows[:1]
        updates = len(rows) if rng.random() < 0.8 else max(0, len(rows) + rng.choice([-1, 1, 2]))
        return [data, np.array(rows, dtype=np.int64).reshape(-1, 1), np.ones((updates, 3), np.float32)]
    if name == "ScatterElements":
        columns = [rng.sample(range(-3, 3), 2) if rng.random() < 0.7 else [rng.randint(-7, 7) for _ in range(2)]
                   for _ in range(n)]
        columns = [c if len({x % 3 for x in c}) == 2 else c[:1] * 2 for c in columns]
        return [data, np.array(columns, dtype=np.int64), np.ones((n, 2), np.float32)]
    if name == "Reshape":
        return [np.ones(rng.randint(0, 9), np.float32), np.ones((rng.randint(0, 5), 2), np.float32)]
    if name == "Expand":  # a target size other than 6 or 1 along axis 0 does not broadcast
        return [np.arange(6, dtype=np.float32).reshape(6, 1),
                np.array([rng.choice([6, 6, 1, 4, 12, 0]), rng.choice([1, 3, 0])], dtype=np.int64)]
    if name == "Slice":
        return [np.ones((rng.randint(1, 5), rng.randint(1, 4)), np.float32),
                np.ones((rng.randint(1, 4), 3), np.float32)]
    return [np.array([rng.choice([0, 3, 1 << 20, 1 << 31, -4]), rng.choice([1, 5, 1 << 20, 1 << 40])], dtype=np.int64)]


def case_runtime(rng: random.Random, work: Path) -> str:
    """A compiled model with dynamic sizes called with random, often invalid, index values
    and sizes: ``typed`` (a run-time check fired) or ``ok`` when onnxruntime (numpy for the
    allocation model) agrees; success where onnxruntime raises is ``wrong``."""
    import numpy as np

    import tilecraft

    models = _runtime_models()
    name = rng.choice(sorted(models))
    key = "runtime:" + name
    if key not in _COMPILED:
        _COMPILED[key] = tilecraft.compile(models[name])
    compiled = _COMPILED[key]
    inputs = _runtime_inputs(rng, name)
    got = compiled(*inputs)  # a TilecraftError here is classified "typed" by run_case
    if name == "ConstantOfShape":
        rows, columns = (int(v) for v in inputs[0])
        # float32 sums of many ones round: compare relatively
        return "ok" if rows >= 0 and columns >= 0 and np.isclose(float(got), rows * columns, rtol=1e-2) else "wrong"
    import onnxruntime

    session = onnxruntime.InferenceSession(models[name].SerializeToString(), providers=["CPUExecutionProvider"])
    try:
        (expected,) = session.run(None, {i.name: v for i, v in zip(models[name].graph.input, inputs)})
    except Exception:  # noqa: BLE001  (onnxruntime refused the inputs; we computed something)
        return "wrong"
    return "ok" if np.shape(got) == np.shape(expected) and np.allclose(got, expected) else "wrong"


class UntypedExit(Exception):
    """A command line that ended with an undocumented exit code or several error lines."""


def case_cli(rng: random.Random, work: Path) -> str:
    """The exit code and stderr of one command line (``typed``: a documented code, one line)."""
    import contextlib

    from tilecraft.tools import cli, opt

    model = work / "cli.mlir"
    model.write_text(MATMUL_MLIR)
    npz = work / "bad.npz"
    npz.write_bytes(b"PK\x03\x04trunc")
    words = [str(model), str(work / "missing.onnx"), "--target", rng.choice(["llvm", "'llvm", "llvm -mcpu=x", "nope"]),
             "--input-shapes", rng.choice(["x:[1,2]", "x:[", ":[]", "x:[-5]", "x:[nan]"]), "-o",
             rng.choice([str(work / "out.tar"), str(work / "no" / "out.tar"), "/"]), "--inputs", str(npz),
             "--trials", rng.choice(["-1", "nan", "0", "x"]), "--opt-level", rng.choice(["9", "-1", "x"]),
             "--repeat", rng.choice(["-3", "1e9", "x"])]
    stderr, stdout = io.StringIO(), io.StringIO()
    if rng.random() < 0.35:
        argv = [rng.choice([str(model), str(npz), str(work / "nothing.mlir"), "-"])]
        argv += rng.sample(["--canonicalize", "--tilecraft-schedule=vector-bits=nan", "--bogus-pass",
                            "--pass-pipeline=builtin.module(", "-o", str(work / "no" / "x.mlir"),
                            "--split-input-file", "--tilecraft-schedule=tuning-records=/none.jsonl"], rng.randint(0, 3))
        try:
            with contextlib.redirect_stderr(stderr):  # argparse writes its usage line there
                code = opt.run(argv, stdin=io.StringIO("\udcff"), stdout=stdout, stderr=stderr)
        except SystemExit as exit_:  # argparse: usage errors exit 2 with a usage line
            code = exit_.code
        if code == 0 or (code in (1, 2) and stderr.getvalue().strip()):
            return "ok" if code == 0 else "typed"
        raise UntypedExit(f"tilecraft-opt {argv}: exit {code}: {stderr.getvalue()[-300:]!r}")
    argv = [rng.choice(["compile", "run", "tune", "bench", "bogus"])] + rng.sample(words, rng.randint(0, 6))
    if argv[0] == "tune" and "--trials" not in argv:  # the default 64 trials take a minute: not a hang
        argv += ["--trials", "2"]
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(stdout):
        try:
            code = cli.run_cli(argv)
        except SystemExit as exit_:  # argparse: usage errors exit 2 with a usage line
            code = exit_.code
    message = [line for line in stderr.getvalue().splitlines() if line.startswith("tilecraft")]
    if code == 0:
        return "ok"
    if code in (1, 2) and len(message) <= 1:
        return "typed"
    raise UntypedExit(f"tilecraft {argv}: exit {code}: {stderr.getvalue()[-300:]!r}")


CASES: dict[str, Callable[[random.Random, Path], str]] = {
    "onnx_bytes": case_onnx_bytes, "onnx_graph": case_onnx_graph, "mlir": case_mlir,
    "package": case_package, "records": case_records, "api": case_api, "cli": case_cli,
    "runtime": case_runtime,
}


def run_case(case: dict[str, Any], work: Path) -> tuple[str, str]:
    """(outcome, detail) of one case, in this process."""
    import warnings

    from tilecraft.errors import InternalError, TilecraftError

    rng = random.Random(case["seed"])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outcome = CASES[case["category"]](rng, work)
        return outcome, ""
    except InternalError as error:  # typed, but a bug in tilecraft: the input did nothing wrong
        return "internal", f"{type(error).__name__}: {str(error)[:300]}"
    except TilecraftError as error:
        return "typed", f"{type(error).__name__}: {str(error)[:200]}"
    except Exception as error:  # noqa: BLE001  (classifying every other exception is the point)
        return "untyped", f"{type(error).__name__}: {str(error)[:300]}"


def worker() -> None:
    """Read cases (JSON lines) on stdin, answer one JSON line each on stdout."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # stray prints must not break the protocol
    with tempfile.TemporaryDirectory(prefix="tilecraft-fuzz-") as folder:
        os.chdir(folder)  # command lines writing default outputs (module.tar) write them here
        for line in sys.stdin:
            case = json.loads(line)
            started = time.perf_counter()
            outcome, detail = run_case(case, Path(folder))
            out.write(json.dumps({"id": case["id"], "outcome": outcome, "detail": detail,
                                  "seconds": round(time.perf_counter() - started, 3)}) + "\n")


class Worker:
    """A worker subprocess, restarted after a crash or a hang."""

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None

    def start(self) -> subprocess.Popen:
        if self.process is None or self.process.poll() is not None:
            self.process = subprocess.Popen(
                [sys.executable, __file__, "--worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, text=True, bufsize=1, start_new_session=True)
        return self.process

    def run(self, case: dict[str, Any], timeout: float) -> dict[str, Any]:
        process = self.start()
        process.stdin.write(json.dumps(case) + "\n")
        process.stdin.flush()
        ready, _, _ = select.select([process.stdout], [], [], timeout)
        line = process.stdout.readline() if ready else ""
        if line:
            return json.loads(line)
        if not ready:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return {"id": case["id"], "outcome": "hang", "detail": f"no answer in {timeout:.0f} s"}
        code = process.wait()
        return {"id": case["id"], "outcome": "crash", "detail": f"worker exit status {code}"}

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(timeout=30)


def run_suite(seed: int, count: int, jobs: int = 2, timeout: float = CASE_TIMEOUT) -> list[dict[str, Any]]:
    """Run ``count`` cases of ``seed`` on ``jobs`` workers; every case's result, in order."""
    import threading

    cases = generate(seed, count)
    results: list[dict[str, Any]] = [{}] * len(cases)
    lock = threading.Lock()
    pending = iter(range(len(cases)))

    def drain() -> None:
        runner = Worker()
        while True:
            with lock:
                index = next(pending, None)
            if index is None:
                break
            results[index] = {**cases[index], **runner.run(cases[index], timeout)}
        runner.close()

    threads = [threading.Thread(target=drain) for _ in range(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def summary_table(results: list[dict[str, Any]]) -> str:
    """Markdown table: cases per category and outcome."""
    counts = collections.Counter((r["category"], r["outcome"]) for r in results)
    lines = ["| category | " + " | ".join(OUTCOMES) + " | total |", "|---" * (len(OUTCOMES) + 2) + "|"]
    for category in CATEGORIES + ("all",):
        row = [sum(counts[(c, o)] for c in CATEGORIES) if category == "all" else counts[(category, o)]
               for o in OUTCOMES]
        lines.append(f"| {category} | " + " | ".join(map(str, row)) + f" | {sum(row)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=420)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=CASE_TIMEOUT)
    parser.add_argument("--show", choices=OUTCOMES, action="append", default=[],
                        help="print the cases with this outcome (repeatable)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker()
        return 0
    started = time.perf_counter()
    results = run_suite(args.seed, args.cases, args.jobs, args.timeout)
    for result in results:
        if result["outcome"] in (args.show or FAILING):
            print(f"case {result['id']} ({result['category']}, seed {result['seed']}): "
                  f"{result['outcome']}: {result.get('detail', '')}")
    print(summary_table(results))
    print(f"{len(results)} cases, seed {args.seed}, {time.perf_counter() - started:.0f} s")
    return 1 if any(r["outcome"] in FAILING for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
