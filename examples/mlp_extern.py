"""The MLC course's end-to-end MLP with extern calls: ``linear`` is a numpy function the
compiled module calls (destination-passing style), ReLU is a tilecraft kernel.

    python examples/mlp_extern.py

Prints the IR showing both, checks the result against PyTorch (numpy when PyTorch is not
installed), then compiles the same MLP with ``linear`` as a linalg kernel and prints both
timings. The weights are random (seeded): the point is the mix, not the accuracy.
"""

from __future__ import annotations

import time

import numpy as np

import tilecraft

BATCH, IN, HIDDEN, OUT = 1, 784, 128, 10

# Two call sites of different shapes: a declaration has one type, so each gets a name; both
# names are the same registered function.
MLP_WITH_EXTERNS = f"""
func.func private @linear0(tensor<{BATCH}x{IN}xf32>, tensor<{HIDDEN}x{IN}xf32>, tensor<{HIDDEN}xf32>) -> tensor<{BATCH}x{HIDDEN}xf32>
func.func private @linear1(tensor<{BATCH}x{HIDDEN}xf32>, tensor<{OUT}x{HIDDEN}xf32>, tensor<{OUT}xf32>) -> tensor<{BATCH}x{OUT}xf32>
func.func @main(%x: tensor<{BATCH}x{IN}xf32>, %w0: tensor<{HIDDEN}x{IN}xf32>, %b0: tensor<{HIDDEN}xf32>,
                %w1: tensor<{OUT}x{HIDDEN}xf32>, %b1: tensor<{OUT}xf32>) -> tensor<{BATCH}x{OUT}xf32> {{
  %lv0 = func.call @linear0(%x, %w0, %b0) : (tensor<{BATCH}x{IN}xf32>, tensor<{HIDDEN}x{IN}xf32>, tensor<{HIDDEN}xf32>) -> tensor<{BATCH}x{HIDDEN}xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{BATCH}x{HIDDEN}xf32>
  %lv1 = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                          iterator_types = ["parallel", "parallel"]}}
      ins(%lv0 : tensor<{BATCH}x{HIDDEN}xf32>) outs(%e : tensor<{BATCH}x{HIDDEN}xf32>) {{
    ^bb0(%a: f32, %o: f32):
      %r = arith.maximumf %a, %zero : f32
      linalg.yield %r : f32
  }} -> tensor<{BATCH}x{HIDDEN}xf32>
  %out = func.call @linear1(%lv1, %w1, %b1) : (tensor<{BATCH}x{HIDDEN}xf32>, tensor<{OUT}x{HIDDEN}xf32>, tensor<{OUT}xf32>) -> tensor<{BATCH}x{OUT}xf32>
  return %out : tensor<{BATCH}x{OUT}xf32>
}}
"""


def linear_kernel(name: str, rows: int, cols: int, depth: int) -> str:
    """``x @ w.T + b`` as linalg: a matmul reading ``w`` transposed, then the bias."""
    out = f"tensor<{rows}x{cols}xf32>"
    return f"""
    func.func private @{name}(%x: tensor<{rows}x{depth}xf32>, %w: tensor<{cols}x{depth}xf32>, %b: tensor<{cols}xf32>) -> {out} {{
      %zero = arith.constant 0.0 : f32
      %e = tensor.empty() : {out}
      %f = linalg.fill ins(%zero : f32) outs(%e : {out}) -> {out}
      %m = linalg.matmul indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (j, k)>,
                                          affine_map<(i, j, k) -> (i, j)>]
          ins(%x, %w : tensor<{rows}x{depth}xf32>, tensor<{cols}x{depth}xf32>) outs(%f : {out}) -> {out}
      %y = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                             affine_map<(i, j) -> (i, j)>],
                            iterator_types = ["parallel", "parallel"]}}
          ins(%m, %b : {out}, tensor<{cols}xf32>) outs(%e : {out}) {{
        ^bb0(%a: f32, %c: f32, %o: f32):
          %s = arith.addf %a, %c : f32
          linalg.yield %s : f32
      }} -> {out}
      return %y : {out}
    }}
    """


def linear(x: np.ndarray, w: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """The extern: ``out = x @ w.T + b``, written into the buffer the compiled code passes."""
    np.matmul(x, w.T, out=out)
    out += b


def reference(x: np.ndarray, params: list[np.ndarray]) -> np.ndarray:
    w0, b0, w1, b1 = params
    try:
        import torch
    except ImportError:
        return np.maximum(x @ w0.T + b0, 0) @ w1.T + b1
    t = [torch.from_numpy(a) for a in (x, w0, b0, w1, b1)]
    hidden = torch.nn.functional.relu(torch.nn.functional.linear(t[0], t[1], t[2]))
    return torch.nn.functional.linear(hidden, t[3], t[4]).numpy()


def median_ms(function, *args, repeat: int = 200) -> float:
    function(*args)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function(*args)
        times.append(time.perf_counter() - start)
    return float(np.median(times) * 1e3)


def main() -> None:
    rng = np.random.default_rng(0)
    params = [(rng.standard_normal(shape) / 10).astype(np.float32)
              for shape in ((HIDDEN, IN), (HIDDEN,), (OUT, HIDDEN), (OUT,))]
    x = rng.random((BATCH, IN), dtype=np.float32)
    signature = dict(inputs=["memref<?x?xf32>", "memref<?x?xf32>", "memref<?xf32>"], outputs=["memref<?x?xf32>"])
    for name in ("linear0", "linear1"):
        tilecraft.extern.register_python(name, linear, **signature)

    mixed = tilecraft.compile(MLP_WITH_EXTERNS)
    print("IR after the input stage: the externs are calls, ReLU a linalg kernel\n")
    print(mixed.ir("input"))
    expected = reference(x, params)
    np.testing.assert_allclose(mixed(x, *params), expected, rtol=1e-4, atol=1e-5)
    print("extern MLP matches", "PyTorch" if "torch" in __import__("sys").modules else "numpy")

    # The same MLP with both linears compiled: the declarations become function bodies.
    compiled_source = MLP_WITH_EXTERNS
    for name, rows, cols, depth in (("linear0", BATCH, HIDDEN, IN), ("linear1", BATCH, OUT, HIDDEN)):
        declaration = next(line for line in compiled_source.splitlines() if f"private @{name}(" in line)
        compiled_source = compiled_source.replace(declaration, linear_kernel(name, rows, cols, depth))
    compiled = tilecraft.compile(compiled_source)
    np.testing.assert_allclose(compiled(x, *params), expected, rtol=1e-4, atol=1e-5)
    print(f"median per call: linear as a numpy extern {median_ms(mixed, x, *params):.3f} ms, "
          f"as a compiled kernel {median_ms(compiled, x, *params):.3f} ms")


if __name__ == "__main__":
    main()
