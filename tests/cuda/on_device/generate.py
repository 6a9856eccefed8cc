"""PTX for sm_90 of kernels tilecraft generates, with their launches (grid, block, memref
shapes), for run_on_gpu.py on a machine with a GPU but without tilecraft's compiler (MLIR and
LLVM are 800 MB; the runner needs numpy and CuPy): TE schedules with bind (vector add,
matmul), the default CUDA schedule of matmuls (shared-memory staging), and f16 matmuls
accumulating in f32 on tensor cores (schedule option tensor-cores=f16: ldmatrix + mma.sync).

    python tests/cuda/on_device/generate.py FOLDER     # here
    python tests/cuda/on_device/run_on_gpu.py FOLDER   # there, with FOLDER copied
"""
import json
import re
import sys
from pathlib import Path
ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "examples" / "tutorials")); sys.path.insert(0, str(ROOT / "tests"))
import mlir_text as mt  # noqa: E402
import tilecraft  # noqa: E402
import matmul_gpu  # noqa: E402
import vector_add_gpu  # noqa: E402
from tilecraft.scheduling import build  # noqa: E402
from tilecraft.targets.cuda import cuda_pipeline  # noqa: E402
out = (sys.argv[1] if len(sys.argv) > 1 else ".gpucheck").rstrip("/") + "/"
cases = []

def add(name, kind, module, launch=None):
    Path(out).mkdir(parents=True, exist_ok=True)
    open(out + name + ".ptx", "w").write(module.ptx())
    cases.append({"name": name, "kind": kind, "ptx": name + ".ptx", **launch})

n = 1 << 20
add("vadd_bind", "add", build(vector_add_gpu.schedule(n, 64), target="cuda -arch=sm_90"),
    {"grid": [n // 64, 1, 1], "block": [64, 1, 1], "shapes": [[n]] * 3})
add("matmul_bind", "matmul", build(matmul_gpu.schedule(256, 16), target="cuda -arch=sm_90"),
    {"grid": [16, 16, 1], "block": [16, 16, 1], "shapes": [[256, 256]] * 3})

def add_compiled(name, module):
    """A one-kernel module: its launch (grid, block, memref shapes) read from the outline stage;
    with 16-bit inputs, which memref is the f32 output and the inputs' dtype."""
    launches = [l for l in module.ir("outline").splitlines() if "gpu.launch_func" in l]
    assert len(launches) == 1, launches
    consts = dict(re.findall(r"(%c\w*) = arith.constant (\d+) : index", module.ir("outline")))
    grid, block = [re.search(rf"{w} in \(([^)]*)\)", launches[0]).group(1).split(", ") for w in ("blocks", "threads")]
    value = lambda c: int(consts.get(c, c.replace("%c", "").split("_")[0]))
    memrefs = re.findall(r"memref<([0-9x]+)x(f32|f16)>", launches[0])
    launch = {"grid": [value(c) for c in grid], "block": [value(c) for c in block],
              "shapes": [[int(d) for d in s.split("x")] for s, _ in memrefs]}
    if any(t == "f16" for _, t in memrefs):
        launch.update(dtype="float16", out=[t for _, t in memrefs].index("f32"))
    add(name, "matmul", module, launch)


for m_, n_, k_ in ((256, 256, 256), (512, 384, 256), (128, 1024, 768)):
    add_compiled(f"matmul_default_{m_}x{n_}x{k_}",
                 tilecraft.compile(mt.matmul(m_, n_, k_), target="cuda -arch=sm_90", keep_ir=True))
for m_, n_, k_ in ((256, 256, 256), (512, 384, 256)):
    a, b, c = f"tensor<{m_}x{k_}xf16>", f"tensor<{k_}x{n_}xf16>", f"tensor<{m_}x{n_}xf32>"
    source = (f"func.func @main(%a: {a}, %b: {b}) -> {c} {{\n" + mt.filled("acc", (m_, n_), "0.0")
              + f"  %r = linalg.matmul ins(%a, %b : {a}, {b}) outs(%acc : {c}) -> {c}\n"
              f"  return %r : {c}\n}}\n")
    pipeline = cuda_pipeline("cuda -arch=sm_90", schedule_options="tensor-cores=f16")
    add_compiled(f"matmul_tensor_cores_f16_{m_}x{n_}x{k_}",
                 tilecraft.compile(source, target="cuda -arch=sm_90", pipeline=pipeline, keep_ir=True))
json.dump(cases, open(out + "cases.json", "w"), indent=1)
for c in cases: print(c["name"], c["grid"], c["block"], c["shapes"])
