"""Which convolutions of a suite model a planner rule changes: the scheduled IR of a model
compiled under the default rule and under the former 8-pixel bound for one-vector tiles
(``one_vector_tiles.py``'s "eight" build), compared whole, and the register tiles
(``conv_register_tile``'s arguments and result) that differ. No timing: a model whose
scheduled IR is identical under both rules cannot have moved.

    PYTHONPATH=<checkout parent> .venv/bin/python benchmarks/one_vector_ir.py resnet50 resnet_basic mobilenet_v2
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import one_vector_tiles  # noqa: E402

import tilecraft  # noqa: E402
from tilecraft.schedule import conv_plan  # noqa: E402


def scheduled(model, rule) -> tuple[str, list]:
    """(scheduled IR, [(conv_register_tile arguments, result)]) of ``model`` under ``rule``."""
    tiles = []
    plain = conv_plan.conv_register_tile

    def recorded(*arguments):
        result = plain(*arguments)
        tiles.append((arguments, result))
        return result

    one_vector_tiles._rules(rule)
    conv_plan.conv_register_tile = recorded
    try:
        compiled = tilecraft.compile(model, cache=False, keep_ir=True)
    finally:
        conv_plan.conv_register_tile = plain
        one_vector_tiles._rules(one_vector_tiles.DEFAULT)
    return compiled.ir("schedule"), tiles


def main(argv: list[str]) -> int:
    for name in argv:
        model, _ = one_vector_tiles.suite_model(name)
        before, old_tiles = scheduled(model, one_vector_tiles.RULES["eight"])
        after, new_tiles = scheduled(model, one_vector_tiles.DEFAULT)
        changed = sorted({(a, o, n) for (a, o), (_, n) in zip(old_tiles, new_tiles) if o != n})
        print(f"{name}: scheduled IR {'identical' if before == after else 'differs'}; "
              f"{len(old_tiles)} conv tiles planned, {len(changed)} distinct changes", flush=True)
        for arguments, old, new in changed:
            width, filters, channels = arguments[:3]
            print(f"  row {width}, {channels} -> {filters} channels: {old} -> {new}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
