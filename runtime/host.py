"""Facts about the machine this process runs on (stdlib only: deployed packages check them).

Why here and not in pipelines/target.py: the package loader must import without the MLIR
bindings, and ``tilecraft.pipelines`` imports them; targets and packages read the same
function.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path


@cache
def host_cpu_flags() -> frozenset[str]:
    """CPU feature flags of this machine as the kernel reports them (empty off Linux)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()

