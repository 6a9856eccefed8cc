"""Programs that write their inputs or buffers, and bfloat16 tensors at the call boundary.

``torch.export`` functionalizes in-place ops: the new value of a written input or buffer is an
extra graph output (``USER_INPUT_MUTATION``, ``BUFFER_MUTATION``). The compiled code returns
it after the results and ``CompiledTorchModule`` copies it into the caller's tensor (or the
module's buffer), so after each call the caller sees what eager leaves: these tests call the
compiled module and eager on separate copies, several times, and compare both the results
and the written tensors.
"""

from __future__ import annotations

import copy
import warnings

import torch
import torch.nn.functional as F

import tilecraft.torch
from tilecraft.compiler.dynamo import TilecraftFallbackWarning
from torch_testing import Lambda, assert_close


def same_effects(module: torch.nn.Module, *inputs: torch.Tensor, calls: int = 2) -> None:
    """Compile ``module`` and compare results, written inputs and buffers with eager's after
    each of ``calls`` calls (a buffer written once must be read back on the next call)."""
    module = module.eval()
    eager = copy.deepcopy(module)
    compiled = tilecraft.torch.compile(module, tuple(t.clone() for t in inputs))
    eager_inputs = [t.clone() for t in inputs]
    compiled_inputs = [t.clone() for t in inputs]
    for _ in range(calls):
        with torch.no_grad():
            expected = eager(*eager_inputs)
        got = compiled(*compiled_inputs)
        # torch's comparison: torch_testing's goes through numpy, which has no bfloat16
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(compiled_inputs, eager_inputs, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(list(module.buffers()), list(eager.buffers()), rtol=1e-4, atol=1e-5)


def test_add_in_place_on_an_input():
    def bump(x):
        x.add_(1)
        return x * 2

    same_effects(Lambda(bump), torch.randn(3, 4))


def test_returned_input_written_in_place():
    """``return x.mul_(3)``: the result equals the written input (a separate tensor)."""
    same_effects(Lambda(lambda x: x.mul_(3)), torch.randn(5))


def test_index_put_on_an_input():
    def scatter(x, index, values):
        x.index_put_((index,), values, accumulate=True)
        return x.sum(0)

    same_effects(Lambda(scatter), torch.randn(6, 3), torch.tensor([0, 4, 4]), torch.randn(3, 3))


def test_batch_norm_updating_running_statistics():
    """``batch_norm(training=True)`` on running buffers passed in: OpInfo's form, the buffers
    are written with the momentum update (unbiased variance), as eager does."""
    module = Lambda(lambda v, m, s, w, b: F.batch_norm(v, m, s, w, b, training=True, momentum=0.3))
    same_effects(module, torch.randn(4, 3, 5) * 2 + 1, torch.zeros(3), torch.ones(3), torch.randn(3),
                 torch.randn(3), calls=3)


def test_instance_norm_updating_running_statistics():
    module = Lambda(lambda v, m, s: F.instance_norm(v, m, s, use_input_stats=True, momentum=0.2))
    same_effects(module, torch.randn(2, 3, 4, 4), torch.randn(3), torch.rand(3) + 0.5)


class Accumulator(torch.nn.Module):
    """An eval-mode module that writes a buffer on every call (a running sum, a step count)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("total", torch.zeros(4))
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.total.add_(x.sum(0))
        self.steps.add_(1)
        return x - self.total / self.steps


def test_module_buffers_are_written_and_read_back():
    module = Accumulator()
    same_effects(module, torch.randn(3, 4), calls=3)
    assert int(module.steps) == 3


class StaticCache(torch.nn.Module):
    """A KV cache's update: ``index_copy_`` of new rows into a buffer at given positions."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("cache", torch.zeros(8, 2))

    def forward(self, rows: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        self.cache.index_copy_(0, positions, rows)
        return self.cache.sum(0)


def test_buffer_written_at_positions():
    module = StaticCache()
    compiled = tilecraft.torch.compile(module.eval(), (torch.ones(2, 2), torch.tensor([0, 1])))
    compiled(torch.full((2, 2), 2.0), torch.tensor([3, 5]))
    total = compiled(torch.full((2, 2), 1.0), torch.tensor([5, 6]))
    expected = torch.zeros(8, 2)
    expected[3] = 2.0
    expected[5:7] = 1.0
    assert torch.equal(module.cache, expected)
    assert torch.equal(total, expected.sum(0))


def test_non_contiguous_input_is_written():
    """The written input is a transposed view: the copy goes through its strides."""
    base = torch.randn(4, 3)
    eager_base = base.clone()
    compiled = tilecraft.torch.compile(Lambda(lambda x: x.add_(1).sum()).eval(), (base.t().clone(),))
    compiled(base.t())
    eager_base.t().add_(1)
    assert torch.equal(base, eager_base)


def test_training_batch_norm_under_torch_compile():
    """Dynamo lifts the running buffers to graph inputs: the whole graph compiles (no fallback
    warning) and the module's statistics and step count follow eager's."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU()).train()
    reference = copy.deepcopy(net)
    torch._dynamo.reset()
    fast = torch.compile(net, backend="tilecraft")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", TilecraftFallbackWarning)
        for _ in range(2):
            x = torch.randn(2, 3, 8, 8)
            assert_close(fast(x), reference(x))
    assert_close([net[1].running_mean, net[1].running_var], [reference[1].running_mean, reference[1].running_var])
    assert int(net[1].num_batches_tracked) == int(reference[1].num_batches_tracked) == 2


def test_writes_happen_once_when_the_graph_is_split():
    """A graph with an op tilecraft leaves to eager (complex eigenvalues) is split into
    regions; the split runs the graph once to learn the regions' shapes, on copies: the
    caller's tensors are written once per call, not twice on the first."""
    def step(x, y):
        y.mul_(2)
        return torch.linalg.eigvals(x).real.sum() + y

    module = Lambda(step)
    torch._dynamo.reset()
    fast = torch.compile(module, backend="tilecraft")
    x, y = torch.randn(3, 3), torch.randn(3)
    expected_y = y.clone()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", TilecraftFallbackWarning)
        for _ in range(2):
            expected = step(x, expected_y)
            assert_close(fast(x, y), expected)
    assert_close(y, expected_y)


def test_bfloat16_in_and_out():
    """bfloat16 tensors cross the boundary as their bits (int16 views): numpy has no bfloat16."""
    x = torch.randn(4, 8).to(torch.bfloat16)
    module = Lambda(lambda v, w: (v * 2 + 1, (v.float() @ w).to(torch.bfloat16), v.sum(1)))
    w = torch.randn(8, 3)
    compiled = tilecraft.torch.compile(module.eval(), (x, w))
    got = compiled(x, w)
    expected = module(x, w)
    assert [g.dtype for g in got] == [torch.bfloat16] * 3
    torch.testing.assert_close(got[0], expected[0], rtol=0, atol=0)
    torch.testing.assert_close(got[1], expected[1], rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(got[2], expected[2], rtol=2e-2, atol=5e-2)


def test_bfloat16_weights_and_written_input():
    module = Lambda(lambda v: v.add_(torch.ones(3, dtype=torch.bfloat16)))
    same_effects(module, torch.randn(2, 3).to(torch.bfloat16))
    linear = torch.nn.Linear(6, 2).to(torch.bfloat16).eval()
    x = torch.randn(3, 6).to(torch.bfloat16)
    got = tilecraft.torch.compile(linear, (x,))(x)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), linear(x).float(), rtol=2e-2, atol=2e-2)

