# Every kernel module of the demo CNN is assembled by ptxas in the `assemble` stage (one
# cubin per module); the first module's PTX is assembled again here by hand.
# REQUIRES: ptxas
# RUN: rm -rf %t && mkdir -p %t
# RUN: %PYTHON %s %t sm_80 | FileCheck %s
# RUN: ptxas -arch=sm_80 %t/main_kernel.ptx -o %t/main_kernel.cubin
# RUN: %PYTHON %s %t/90 sm_90 | FileCheck %s
# RUN: ptxas -arch=sm_90 %t/90/main_kernel.ptx -o %t/90/main_kernel.cubin

import sys
from pathlib import Path

import tilecraft

out, arch = Path(sys.argv[1]), sys.argv[2]
out.mkdir(parents=True, exist_ok=True)
model = Path(tilecraft.__file__).parent / "examples" / "digits_cnn.onnx"
module = tilecraft.compile(str(model), target=f"cuda -arch={arch}",
                           shape_dict={"input": [1, 1, 16, 16]})
for name, ptx in module.ptx_modules().items():
    (out / f"{name}.ptx").write_text(ptx)
cubins = module.cubin()
# CHECK: modules: [[N:[0-9]+]], cubins: [[N]], all ELF: True
elf = all(c[:4] == b"\x7fELF" for c in cubins.values())
print(f"modules: {len(module.ptx_modules())}, cubins: {len(cubins)}, all ELF: {elf}")
