"""Runs tilecraft-generated PTX on the GPU with CuPy, through the memref-descriptor ABI of
MLIR's gpu lowering (per memref: allocated ptr, aligned ptr, offset, sizes, strides), and
checks each output against numpy. Which argument is the output is not recorded in the PTX:
each assignment of roles that fits the shapes is tried, the output prefilled with NaN (a case
with f16 inputs names its f32 output, ``out``, and its inputs' ``dtype``). Times are CUDA
events around back-to-back launches (median of 5 blocks); a matmul of 1024 or more rows is
timed against PyTorch's (cuBLAS) on the same inputs where torch has CUDA: f16 inputs against
an f16 product, f32 against f32 with TF32 off and on.

    python run_on_gpu.py FOLDER [--only PREFIX]"""
import itertools, json, sys
import numpy as np, cupy as cp

def descriptor(a):
    return [a, a, np.uint64(0), *[np.uint64(d) for d in a.shape], *[np.uint64(s // a.itemsize) for s in a.strides]]

def launch(case, kernel, arrays):
    kernel(tuple(case["grid"]), tuple(case["block"]), tuple(x for a in arrays for x in descriptor(a)))
    cp.cuda.Device().synchronize()


def event_seconds(function, reps):
    """Median over 5 blocks of ``reps`` back-to-back calls, timed by CUDA events."""
    blocks = []
    for _ in range(5):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        for _ in range(reps):
            function()
        stop.record()
        stop.synchronize()
        blocks.append(cp.cuda.get_elapsed_time(start, stop) / 1e3 / reps)
    return sorted(blocks)[2]


def cublas_seconds(x, y, dtype, reps):
    """PyTorch's matmul (cuBLAS) on the same inputs: {label: seconds}; {} without torch CUDA."""
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    a, b = torch.as_tensor(x, device="cuda"), torch.as_tensor(y, device="cuda")
    found = {}
    for label, tf32 in ((("f16", False),) if dtype == np.float16 else (("f32", False), ("tf32", True))):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.matmul(a, b); torch.cuda.synchronize()
        found[label] = event_seconds(lambda: torch.matmul(a, b), reps)
    torch.backends.cuda.matmul.allow_tf32 = False
    return found

def fits(kind, shapes, out, x, y):
    if kind == "add":
        return True
    (m, k), (k2, n), (m2, n2) = shapes[x], shapes[y], shapes[out]
    return k == k2 and m == m2 and n == n2

arguments = sys.argv[1:]
ONLY = arguments[arguments.index("--only") + 1] if "--only" in arguments else ""
FOLDER = arguments[0] if arguments and not arguments[0].startswith("--") else ".gpucheck"
print(cp.cuda.runtime.getDeviceProperties(0)["name"].decode())
failures = 0
for case in json.load(open(FOLDER + "/cases.json")):
    if not case["name"].startswith(ONLY):
        continue
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
        rtol = case.get("rtol", 1e-4)
        if np.allclose(got, want, rtol=rtol, atol=max(1e-3, rtol * float(np.max(np.abs(want))))):
            args = tuple(v for a in arrays for v in descriptor(a))
            run = lambda: kernel(tuple(case["grid"]), tuple(case["block"]), args)
            seconds = event_seconds(run, 20)
            flops = 2 * host[x].shape[0] * host[x].shape[1] * host[y].shape[1] if case["kind"] == "matmul" else 0
            rate = (f"{3 * got.nbytes / seconds / 1e9:.1f} GB/s" if case["kind"] == "add" else
                    f"{flops / seconds / 1e9:.1f} GFLOPS")
            verdict = (f"OK (args: out #{out}, inputs #{x}, #{y}), max error {float(np.max(np.abs(got - want))):.1e}, "
                       f"{seconds * 1e6:.1f} us per launch, {rate}")
            if case["kind"] == "matmul" and shapes[out][0] >= 1024:
                for label, reference in cublas_seconds(host[x], host[y], dtype, 20).items():
                    verdict += (f"; torch {label} {flops / reference / 1e9:.0f} GFLOPS "
                                f"(tilecraft at {100 * reference / seconds:.1f} %)")
            break
    failures += verdict.startswith("MISMATCH")
    print(f"{case['name']:30s} grid {case['grid']} block {case['block']}: {verdict}")
sys.exit(1 if failures else 0)
