"""PTX for sm_90 of kernels tilecraft generates, with their launches (grid, block, memref
shapes), for run_on_gpu.py on a machine with a GPU but without tilecraft's compiler (MLIR and
LLVM are 800 MB; the runner needs numpy and CuPy): TE schedules with bind (vector add,
matmul) and the default CUDA schedule of matmuls (shared-memory staging).

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
for m_, n_, k_ in ((256, 256, 256), (512, 384, 256), (128, 1024, 768)):
    module = tilecraft.compile(mt.matmul(m_, n_, k_), target="cuda -arch=sm_90", keep_ir=True)
    launches = [l for l in module.ir("outline").splitlines() if "gpu.launch_func" in l]
    assert len(launches) == 1, launches
    consts = dict(re.findall(r"(%c\w*) = arith.constant (\d+) : index", module.ir("outline")))
    grid, block = [re.search(rf"{w} in \(([^)]*)\)", launches[0]).group(1).split(", ") for w in ("blocks", "threads")]
    value = lambda c: int(consts.get(c, c.replace("%c", "").split("_")[0]))
    shapes = [[int(d) for d in s.split("x")] for s in re.findall(r"memref<([0-9x]+)xf32>", launches[0])]
    add(f"matmul_default_{m_}x{n_}x{k_}", "matmul", module,
        {"grid": [value(c) for c in grid], "block": [value(c) for c in block], "shapes": shapes})
json.dump(cases, open(out + "cases.json", "w"), indent=1)
for c in cases: print(c["name"], c["grid"], c["block"], c["shapes"])
