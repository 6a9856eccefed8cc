"""Runs tilecraft-generated PTX on the GPU with CuPy, through the memref-descriptor ABI of
MLIR's gpu lowering (per memref: allocated ptr, aligned ptr, offset, sizes, strides), and
checks each output against numpy. Which argument is the output is not recorded in the PTX:
each assignment of roles that fits the shapes is tried, the output prefilled with NaN (a case
with f16 inputs names its f32 output, ``out``, and its inputs' ``dtype``)."""
import itertools, json, sys, time
import numpy as np, cupy as cp

def descriptor(a):
    return [a, a, np.uint64(0), *[np.uint64(d) for d in a.shape], *[np.uint64(s // a.itemsize) for s in a.strides]]

def launch(case, kernel, arrays):
    kernel(tuple(case["grid"]), tuple(case["block"]), tuple(x for a in arrays for x in descriptor(a)))
    cp.cuda.Device().synchronize()

def fits(kind, shapes, out, x, y):
    if kind == "add":
        return True
    (m, k), (k2, n), (m2, n2) = shapes[x], shapes[y], shapes[out]
    return k == k2 and m == m2 and n == n2

FOLDER = sys.argv[1] if len(sys.argv) > 1 else ".gpucheck"
print(cp.cuda.runtime.getDeviceProperties(0)["name"].decode())
failures = 0
for case in json.load(open(FOLDER + "/cases.json")):
    kernel = cp.RawModule(path=FOLDER + "/" + case["ptx"]).get_function("main_kernel")
    shapes = [tuple(s) for s in case["shapes"]]
    rng = np.random.default_rng(0)
    verdict = "MISMATCH for every assignment of roles"
    dtype = np.dtype(case.get("dtype", "float32"))
    for out, x, y in itertools.permutations(range(3)):
        if not fits(case["kind"], shapes, out, x, y) or case.get("out", out) != out:
            continue
        host = {i: rng.random(shapes[i], dtype=np.float32).astype(dtype) for i in (x, y)}
        arrays = [cp.full(shapes[i], np.nan, np.float32) if i == out else cp.asarray(host[i]) for i in range(3)]
        launch(case, kernel, arrays)
        got = cp.asnumpy(arrays[out])
        want = host[x] + host[y] if case["kind"] == "add" else \
            host[x].astype(np.float32) @ host[y].astype(np.float32)
        if np.allclose(got, want, rtol=1e-4, atol=1e-3):
            reps = 50
            start = time.perf_counter()
            for _ in range(reps):
                launch(case, kernel, arrays)
            seconds = (time.perf_counter() - start) / reps
            rate = (f"{3 * got.nbytes / seconds / 1e9:.1f} GB/s" if case["kind"] == "add" else
                    f"{2 * host[x].shape[0] * host[x].shape[1] * host[y].shape[1] / seconds / 1e9:.1f} GFLOPS")
            verdict = (f"OK (args: out #{out}, inputs #{x}, #{y}), max error {float(np.max(np.abs(got - want))):.1e}, "
                       f"{seconds * 1e6:.1f} us per launch + sync, {rate}")
            break
    failures += verdict.startswith("MISMATCH")
    print(f"{case['name']:30s} grid {case['grid']} block {case['block']}: {verdict}")
sys.exit(1 if failures else 0)
