"""PTX for sm_90 of kernels tilecraft generates, with their launches (grid, block, memref
shapes), for run_on_gpu.py on a machine with a GPU but without tilecraft's compiler (MLIR and
LLVM are 800 MB; the runner needs numpy and CuPy): TE schedules with bind (vector add,
matmul), the default CUDA schedule of matmuls (shared-memory staging), and f16 matmuls
accumulating in f32 on tensor cores (schedule option tensor-cores=f16: ldmatrix + mma.sync).

    python tests/cuda/on_device/generate.py FOLDER [--large]   # here
    python tests/cuda/on_device/run_on_gpu.py FOLDER             # there, with FOLDER copied

``--large`` adds the 4096^3 matmuls of issue #47's goal (f16 on tensor cores with the default
tiles and variants, TF32, the default f32 schedule); the runner times those against PyTorch's
cuBLAS.
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
arguments = [a for a in sys.argv[1:] if not a.startswith("--")]
LARGE = "--large" in sys.argv[1:]
out = (arguments[0] if arguments else ".gpucheck").rstrip("/") + "/"
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


def mixed_matmul(m_, n_, k_, dtype):
    """``dtype`` inputs accumulated into an f32 result."""
    a, b, c = f"tensor<{m_}x{k_}x{dtype}>", f"tensor<{k_}x{n_}x{dtype}>", f"tensor<{m_}x{n_}xf32>"
    return (f"func.func @main(%a: {a}, %b: {b}) -> {c} {{\n" + mt.filled("acc", (m_, n_), "0.0")
            + f"  %r = linalg.matmul ins(%a, %b : {a}, {b}) outs(%acc : {c}) -> {c}\n"
            f"  return %r : {c}\n}}\n")


def add_scheduled(name, source, options):
    pipeline = cuda_pipeline("cuda -arch=sm_90", schedule_options=options)
    add_compiled(name, tilecraft.compile(source, target="cuda -arch=sm_90", pipeline=pipeline, keep_ir=True))


for m_, n_, k_ in ((256, 256, 256), (512, 384, 256)):
    add_scheduled(f"matmul_tensor_cores_f16_{m_}x{n_}x{k_}", mixed_matmul(m_, n_, k_, "f16"), "tensor-cores=f16")
if LARGE:
    # Issue #47's 4096^3 GEMM (at most 8 large cases, each compiling in about a second): the
    # default tensor-core kernel (128 x 128 blocks, 8 warps of 64 x 32, K slices of 32,
    # cp.async double buffering), tile variants around it, the same without double buffering,
    # the old 64 x 64 / 32 x 32 / k16 tiles (with the other fixes), TF32, and the f32 FMA
    # schedule. docs/cuda.md (tensor cores) says what each is meant to show.
    big = 4096
    for label, options in (("", ""),
                           ("_w64x64", " warp-n=64"),
                           ("_b128x256_w64x64", " mma-block-n=256 warp-n=64"),
                           ("_w32x64", " warp-m=32 warp-n=64"),
                           ("_stages1", " mma-stages=1"),
                           ("_b64x64_w32x32_k16", " mma-block-m=64 mma-block-n=64 warp-m=32 warp-n=32"
                                                  " mma-k-step=16")):
        add_scheduled(f"matmul_tensor_cores_f16_{big}{label}", mixed_matmul(big, big, big, "f16"),
                      "tensor-cores=f16" + options)
    add_scheduled(f"matmul_tensor_cores_tf32_{big}", mixed_matmul(big, big, big, "f32"), "tensor-cores=tf32")
    cases[-1]["rtol"] = 5e-3  # TF32 operands carry 10 mantissa bits
    add_compiled(f"matmul_default_{big}", tilecraft.compile(mt.matmul(big, big, big), target="cuda -arch=sm_90",
                                                            keep_ir=True))
json.dump(cases, open(out + "cases.json", "w"), indent=1)
for c in cases: print(c["name"], c["grid"], c["block"], c["shapes"])
