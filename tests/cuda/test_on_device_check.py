"""The on-device check (tests/cuda/on_device/): PTX of TE-bound and default-schedule kernels
with their launches, generated here, run on a GPU by a runner that needs only numpy and CuPy.
Here (no GPU): the generated launches agree with the PTX's parameter lists under MLIR's
memref-descriptor ABI (per memref of rank r: two pointers, an offset, r sizes, r strides).
On a machine with a GPU and CuPy the runner itself runs (docs/cuda.md has its output from
an H100)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_testing import requires_gpu

HERE = Path(__file__).resolve().parent / "on_device"


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    folder = tmp_path_factory.mktemp("on_device")
    result = subprocess.run([sys.executable, str(HERE / "generate.py"), str(folder)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return folder


def test_launches_match_the_kernel_parameters(generated):
    cases = json.loads((generated / "cases.json").read_text())
    assert {c["name"] for c in cases} >= {"vadd_bind", "matmul_bind", "matmul_default_512x384x256",
                                          "matmul_tensor_cores_f16_512x384x256"}
    for case in cases:
        ptx = (generated / case["ptx"]).read_text()
        entry = ptx[ptx.index(".entry main_kernel("):]
        params = re.findall(r"\.param \.u64", entry[:entry.index(")")])
        assert len(params) == sum(3 + 2 * len(shape) for shape in case["shapes"]), case["name"]
        if case.get("dtype") == "float16":  # tensor cores; the f32 output named for the runner
            assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx, case["name"]
            out = case["shapes"][case["out"]]
            a, b = [shape for i, shape in enumerate(case["shapes"]) if i != case["out"]]
            assert [a[0], b[1]] == out and a[1] == b[0] or [b[0], a[1]] == out and b[1] == a[0]
        block = case["block"][0] * case["block"][1] * case["block"][2]
        assert f".maxntid {case['block'][0]}, {case['block'][1]}, {case['block'][2]}" in ptx or block <= 1024


@requires_gpu
def test_kernels_run_on_the_gpu(generated):
    pytest.importorskip("cupy")
    result = subprocess.run([sys.executable, str(HERE / "run_on_gpu.py"), str(generated)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
