"""Core ATen ops through tilecraft.torch.compile, each compared with eager PyTorch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import tilecraft.torch
from torch_testing import Lambda, check

# The default CPU schedule cannot vectorize some ops (data-dependent reads, grouped
# convolutions): it warns and keeps scalar loops, which tests/conftest.py turns into an error.
# The numbers are still checked; the schedule gap is reported, not worked around here.
SCALAR_FALLBACK = pytest.mark.filterwarnings("ignore:tilecraft-schedule:RuntimeWarning")


def cases(table: dict, scalar: set = frozenset()) -> list:
    return [pytest.param(name, marks=SCALAR_FALLBACK) if name in scalar else name for name in table]


torch.manual_seed(0)
X = torch.randn(3, 4, 5)
M = torch.randn(4, 6)
IDX = torch.tensor([2, 0, 3, 1])

ELEMENTWISE = {
    "relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "hardswish": F.hardswish,
    "relu6": F.relu6, "leaky_relu": F.leaky_relu, "elu": F.elu, "softplus": F.softplus,
    "add": lambda x: x + x[0], "sub": lambda x: x - 1.5, "rsub": lambda x: 2 - x, "mul": lambda x: x * x,
    "div": lambda x: x / (x.abs() + 1), "div_scalar": lambda x: x / 3, "pow": lambda x: x.abs() ** 1.7,
    "square": lambda x: x ** 2, "pow_tensor": lambda x: x.abs() ** x, "rsqrt": lambda x: torch.rsqrt(x.abs() + 1),
    "sqrt": lambda x: x.abs().sqrt(), "exp": torch.exp, "log": lambda x: (x.abs() + 0.1).log(),
    "neg": torch.neg, "abs": torch.abs, "erf": torch.erf, "clamp": lambda x: x.clamp(-0.5, 0.3),
    "where": lambda x: torch.where(x > 0, x, x * 0.1), "masked_fill": lambda x: x.masked_fill(x < 0, -2.0),
    "compare": lambda x: (x >= 0.2) | (x == x[0]) & (x != 1) | (x < -1), "maximum": lambda x: torch.maximum(x, x[1]),
    "floor_divide": lambda x: torch.div(x, 0.3, rounding_mode="floor"),
    "trunc_divide": lambda x: torch.div(x, 0.3, rounding_mode="trunc"), "round": torch.round, "floor": torch.floor, "sign": torch.sign,
    "int_math": lambda x: (x * 10).long() // 3 + (x * 10).long() % 4, "cast": lambda x: (x > 0).float() + x.int(),
}


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_elementwise(name):
    check(ELEMENTWISE[name], X)


REDUCTIONS = {
    "sum": lambda x: x.sum(-1), "sum_all": lambda x: x.sum(), "sum_keepdim": lambda x: x.sum((0, 2), keepdim=True),
    "mean": lambda x: x.mean(1), "amax": lambda x: x.amax(-1), "amin": lambda x: x.amin(0),
    "var": lambda x: x.var(-1), "var_biased": lambda x: x.var((0, 1), unbiased=False, keepdim=True),
    "softmax": lambda x: x.softmax(-1), "log_softmax": lambda x: F.log_softmax(x, 1),
    "cumsum": lambda x: x.cumsum(1), "max_dim": lambda x: x.max(1), "argmax": lambda x: x.argmax(-1),
    "layer_norm": lambda x: F.layer_norm(x, (5,), torch.linspace(0.5, 1.5, 5), torch.linspace(-1, 1, 5)),
    "layer_norm_2d": lambda x: F.layer_norm(x, (4, 5)),
    "std": lambda x: x.std(0), "norm": lambda x: F.normalize(x, dim=-1),
}


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction(name):
    check(REDUCTIONS[name], X)


SHAPES = {
    "view": lambda x: x.view(12, 5), "reshape_infer": lambda x: x.reshape(-1, 10), "permute": lambda x: x.permute(2, 0, 1),
    "transpose": lambda x: x.transpose(0, 2), "expand": lambda x: x[:, :1].expand(3, 4, 5) + 0,
    "expand_rank": lambda x: x[0].expand(2, 4, 5) * 1, "cat": lambda x: torch.cat([x, x * 2], 1),
    "stack": lambda x: torch.stack([x, -x], -1), "split": lambda x: x.split([1, 3], 1)[1] * 1,
    "chunk": lambda x: x.chunk(5, -1)[2] + 1, "slice": lambda x: x[1:, ::2, -3:] * 1,
    "select": lambda x: x[:, -1] + 0, "unsqueeze": lambda x: x.unsqueeze(1).squeeze(1) + x[None, 0],
    "flatten": lambda x: x.flatten(1) + 0, "unbind": lambda x: x.unbind(1)[3] + 1,
    "index": lambda x: x[:, IDX] * 1, "index_2": lambda x: x[IDX[:3] % 3, IDX[1:]] + 0,
    "index_select": lambda x: x.index_select(1, IDX[:2]) + 0,
    "gather": lambda x: torch.gather(x, 2, (IDX.view(1, 4, 1) % 5).expand(3, 4, 2)) * 1,
    "tril": lambda x: x.tril() + 0, "triu": lambda x: torch.triu(x, 1) + 0,
    "pad": lambda x: F.pad(x, (1, 2, 0, 1)), "flip": lambda x: x.flip(0) + 0, "repeat": lambda x: x.repeat(1, 2, 1) + 0,
    "arange": lambda x: x + torch.arange(5), "full": lambda x: x + torch.full((4, 5), 0.5) + torch.zeros(5) + torch.ones(1),
    "full_like": lambda x: x + torch.ones_like(x),
}


@pytest.mark.parametrize("name", cases(SHAPES, {"index", "index_2", "index_select", "gather", "flip"}))
def test_shape(name):
    check(SHAPES[name], X)


@SCALAR_FALLBACK
def test_embedding():
    table = torch.nn.Embedding(10, 6)
    check(table, torch.tensor([[1, 2, 9], [0, 0, 4]]))


@pytest.mark.parametrize("name, fn", [
    ("mm", lambda a: a @ M), ("bmm", lambda a: torch.bmm(a, a.transpose(1, 2))),
    ("matmul_broadcast", lambda a: torch.matmul(a, M[:, :5].T)), ("addmm", lambda a: torch.addmm(M[0, :4], a[0], M[:, :5].T + 1)),
    ("baddbmm", lambda a: torch.baddbmm(a[:, :, :4], a, a.transpose(1, 2)[:, :, :4], alpha=0.5)),
    ("vector", lambda a: a @ M[0, :5]),
])
def test_matmul(name, fn):
    check(fn, X[:, :, :4].contiguous() if name == "mm" else X)


def test_linear():
    check(torch.nn.Linear(5, 7), X)


@pytest.mark.parametrize("kwargs", [
    dict(in_channels=4, out_channels=6, kernel_size=3),
    dict(in_channels=4, out_channels=6, kernel_size=3, stride=2, padding=1, bias=False),
    dict(in_channels=4, out_channels=4, kernel_size=3, dilation=2, padding=2),
    dict(in_channels=4, out_channels=8, kernel_size=3, groups=2, padding=1),
    pytest.param(dict(in_channels=4, out_channels=4, kernel_size=3, groups=4, padding=1), marks=SCALAR_FALLBACK),
])
def test_conv2d(kwargs):
    check(torch.nn.Conv2d(**kwargs), torch.randn(2, 4, 9, 9))


def test_conv1d():
    check(torch.nn.Conv1d(3, 5, 3, padding=1), torch.randn(2, 3, 11))


@pytest.mark.parametrize("kwargs", [
    dict(in_channels=16, out_channels=32, kernel_size=3, groups=2, padding=1),
    dict(in_channels=32, out_channels=32, kernel_size=3, groups=2, stride=2, dilation=2, padding=2, bias=False),
])
def test_conv2d_grouped(kwargs):
    """8-16 channels per group: one NHWC convolution per group (vectorized: no warning)."""
    conv = torch.nn.Conv2d(**kwargs)
    check(conv, torch.randn(1, kwargs["in_channels"], 9, 9))


def test_conv1d_grouped():
    """A grouped Conv1d goes through the 2-D path over a unit row, one convolution per group."""
    check(torch.nn.Conv1d(16, 16, 5, groups=2, padding=2), torch.randn(1, 16, 20))


@pytest.mark.parametrize("name, layer", [
    ("max", torch.nn.MaxPool2d(2)), ("max_stride", torch.nn.MaxPool2d(3, 2, padding=1)),
    ("max_ceil", torch.nn.MaxPool2d(3, 2, ceil_mode=True)),
    ("avg", torch.nn.AvgPool2d(2)), ("avg_pad", torch.nn.AvgPool2d(3, 2, padding=1)),
    ("avg_pad_exclude", torch.nn.AvgPool2d(3, 2, padding=1, count_include_pad=False)),
    ("adaptive_1", torch.nn.AdaptiveAvgPool2d(1)), ("adaptive_3", torch.nn.AdaptiveAvgPool2d((3, 3))),
])
def test_pool(name, layer):
    check(layer, torch.randn(2, 3, 9, 9))


def test_batch_norm():
    bn = torch.nn.BatchNorm2d(4)
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.5, 2)
    bn.weight.data.uniform_(0.5, 2)
    check(bn, torch.randn(2, 4, 5, 5))


@pytest.mark.parametrize("mode", ["causal", "mask", "bool_mask", "plain"])
def test_scaled_dot_product_attention(mode):
    q, k, v = (torch.randn(2, 3, 8, 16) for _ in range(3))
    mask = torch.randn(8, 8)
    if mode == "causal":
        fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)  # noqa: E731
    elif mode == "mask":
        fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # noqa: E731
    elif mode == "bool_mask":
        fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask > 0)  # noqa: E731
    else:
        fn = F.scaled_dot_product_attention
    check(fn, q, k, v)


def test_consecutive_permutes_compose():
    def permutes(x):
        return (x.permute(2, 0, 1, 3).permute(1, 2, 0, 3) + x.transpose(1, 2).transpose(2, 1),
                x.permute(1, 0, 2, 3).permute(0, 1, 3, 2) * 2)

    compiled = check(permutes, torch.randn(2, 3, 4, 5))
    assert compiled.ir("simplify").count("linalg.transpose") == 1  # inverse pairs vanish


# --- issue 51: ops the OpInfo suite (tests/conformance/torch) found missing or wrong -------------

class _Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *inputs):
        return self.fn(*inputs)


def test_squeeze_of_no_dims_keeps_the_shape():
    check(_Fn(lambda x: torch.squeeze(x, dim=())), torch.randn(1, 1, 1, 1))


@pytest.mark.parametrize("fn", [lambda x: x.sum(0, keepdim=True), lambda x: x.amax(0), lambda x: x.argmax(0),
                                lambda x: x.index_select(0, torch.tensor([0]))])
def test_reductions_of_a_0d_tensor(fn):
    check(_Fn(fn), torch.tensor(1.5))


@SCALAR_FALLBACK
def test_sort_topk_and_adaptive_pooling_to_non_dividing_sizes():
    check(_Fn(lambda x: torch.sort(x, dim=1, descending=True)), torch.randn(3, 7))
    check(_Fn(lambda x: torch.topk(x, 3)), torch.randn(3, 7))
    check(_Fn(lambda x: F.adaptive_max_pool2d(x, (5, 7), return_indices=True)), torch.randn(1, 2, 8, 8))
    check(_Fn(lambda x: F.adaptive_avg_pool2d(x, (5, 7))), torch.randn(1, 2, 8, 8))


@SCALAR_FALLBACK
def test_scatter_family():
    index = torch.tensor([[0, 1, 0], [2, 2, 1]])
    check(_Fn(lambda x, s: x.scatter_reduce(0, index, s, "mean", include_self=False)), torch.randn(3, 3),
          torch.randn(2, 3))
    check(_Fn(lambda x, v: x.index_put((torch.tensor([0, 2]),), v, accumulate=True)), torch.randn(3, 4),
          torch.randn(2, 4))


def test_index_put_of_several_values_through_a_mask_is_refused():
    from tilecraft.errors import TorchImportError
    import tilecraft.torch

    module = _Fn(lambda x, m, v: torch.ops.aten.index_put(x, [m], v)).eval()
    with pytest.raises(TorchImportError, match="boolean mask"):
        tilecraft.torch.compile(module, (torch.randn(4), torch.tensor([True, False, True, False]), torch.randn(2)))


def test_angle_of_real_numbers():
    x = torch.tensor([-2.0, -0.0, 0.0, 3.0, float("nan"), -float("inf")])
    check(torch.angle, x)
    check(torch.angle, torch.tensor([-3, 0, 4]))  # integers: a float result


def test_empty_with_a_layout_has_the_shape_and_dtype():
    """``new_empty_strided``: values unspecified, so compared by shape and dtype."""
    x = torch.randn(2, 3, 4)
    compiled = tilecraft.torch.compile(Lambda(lambda v: v.new_empty_strided((3, 2), (1, 3)) + v[0, :, :2]).eval(), (x,))
    result = compiled(x)
    assert result.shape == (3, 2) and result.dtype == torch.float32
