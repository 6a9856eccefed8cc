"""frontend/torch/export.py's ``decompose``: the cached list of composite ops it lends
torch is the list torch computes, the decomposed graph is the one torch gives without the
cache, and an op registered later is seen (the cache key changes)."""

from __future__ import annotations

import importlib

import torch
from torch._export import utils as export_utils
from torch.export import exported_program

# the module, not the package's ``export`` function of the same name
torch_export = importlib.import_module("tilecraft.frontend.torch.export")


class Small(torch.nn.Module):
    def forward(self, x, y):
        return torch.nn.functional.gelu(x + y).mean(0)


def test_the_cached_composite_ops_are_torchs_and_the_graph_is_unchanged():
    args = (torch.randn(3, 4), torch.randn(3, 4))
    program = torch.export.export(Small(), args)
    plain = torch_export._decompose_unhandled(program.run_decompositions())
    cached = torch_export.decompose(program)
    assert str(cached.graph) == str(plain.graph)
    with torch_export._cached_composite_ops():
        assert exported_program._collect_all_valid_cia_ops() == export_utils._collect_all_valid_cia_ops()
    # restored on exit
    assert exported_program._collect_all_valid_cia_ops is export_utils._collect_all_valid_cia_ops


def test_a_composite_op_registered_later_is_seen():
    with torch_export._cached_composite_ops():
        exported_program._collect_all_valid_cia_ops()
    before = dict(torch_export._CIA_CACHE)
    library = torch.library.Library("tilecraft_cache_test", "DEF")
    library.define("twice(Tensor x) -> Tensor")
    library.impl("twice", lambda x: x + x, "CompositeImplicitAutograd")
    with torch_export._cached_composite_ops():
        ops = exported_program._collect_all_valid_cia_ops()
    assert set(torch_export._CIA_CACHE) != set(before)
    assert any(op.name() == "tilecraft_cache_test::twice" for op in ops)
