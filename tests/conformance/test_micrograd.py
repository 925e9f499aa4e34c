"""micrograd's scalar graphs, as 0-d tensors: the README's expression and the two engine
tests (test_sanity_check, test_more_ops) give PyTorch's values and leaf gradients, in float64
(to 1e-10) and float32 (to 1e-5 relative). Nodes are used many times over (`c += c + 1`
makes a new node from the old one, twice), so each gradient is a sum of many paths.
Then every op at 0-d, its output used more than once: each .grad is a 0-d np.ndarray (not
a numpy scalar) of the tensor's dtype, with PyTorch's value."""
import numpy as np
import pytest

import tensorgrad as tg

from .torch_compare import FLOAT_FUNCTIONS, FLOAT_INPUT_FUNCTIONS, FLOATS, TOLERANCE, compare, to_torch_dtype, torch

pytestmark = pytest.mark.torch


# ---- micrograd's expressions, written once for any library's 0-d tensors -----------------
def sanity_check(x):
    """micrograd's test_sanity_check, on the leaf x = -4."""
    z = 2 * x + 2 + x
    q = z.relu() + z * x
    h = (z * z).relu()
    return h + q + q * x


def more_ops(a, b):
    """micrograd's test_more_ops and its README example, on the leaves a = -4, b = 2."""
    c = a + b
    d = a * b + b ** 3
    c += c + 1
    c += 1 + c + (-a)
    d += d * 2 + (b + a).relu()
    d += 3 * d + (b - a).relu()
    e = c - d
    f = e ** 2
    g = f / 2.0
    g += 10.0 / f
    return g


def leaves(lib, dtype, *values):
    return [lib.tensor(v, dtype=dtype if lib is tg else to_torch_dtype(dtype), requires_grad=True) for v in values]


def check_scalar_graph(expression, values, dtype):
    """The expression's value and its leaves' gradients: tensorgrad's against PyTorch's."""
    ours, theirs = leaves(tg, dtype, *values), leaves(torch, dtype, *values)
    out, expected = expression(*ours), expression(*theirs)
    assert out.shape == () and out.dtype == dtype
    out.backward()
    expected.backward()
    tolerance = TOLERANCE[np.dtype(dtype)]
    np.testing.assert_allclose(out.item(), expected.item(), **tolerance)
    for i, (mine, reference) in enumerate(zip(ours, theirs)):
        assert type(mine.grad) is np.ndarray and mine.grad.shape == () and mine.grad.dtype == dtype
        np.testing.assert_allclose(mine.grad, reference.grad.numpy(), **tolerance, err_msg=f"leaf {i}")
    return ours, out


@pytest.mark.parametrize("dtype", FLOATS)
def test_sanity_check(dtype):
    check_scalar_graph(sanity_check, [-4.0], dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_more_ops(dtype):
    check_scalar_graph(more_ops, [-4.0, 2.0], dtype)


def test_readme_example_prints_micrograds_numbers():
    (a, b), g = check_scalar_graph(more_ops, [-4.0, 2.0], np.float64)
    assert f"{g:.4f}" == "24.7041"                 # 0-d tensors format as their number
    assert f"{a.grad:.4f}" == "138.8338" and f"{b.grad:.4f}" == "645.5773"


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("values", [[-4.0, 2.0], [3.0, -1.5], [0.5, 0.25], [2.0, 2.0]], ids=repr)
def test_more_ops_at_other_points(values, dtype):
    check_scalar_graph(more_ops, values, dtype)


def test_a_node_used_twice_at_0d():
    """api.md's example: c used twice, its gradient a 0-d array."""
    a, b = tg.tensor(-4.0, requires_grad=True), tg.tensor(2.0, requires_grad=True)
    c = a + b
    (c + c).backward()
    for leaf in (a, b):
        assert type(leaf.grad) is np.ndarray and leaf.grad.shape == () and leaf.grad.dtype == np.float32
        assert leaf.grad == 2.0


# ---- every op at 0-d, its output used more than once: y = f(x) + f(x) * x ----------------
ZERO_D_OPS = {
    "neg": (lambda x: -x, lambda x: -x),
    "add": (lambda x: x + x, lambda x: x + x),
    "sub": (lambda x: x - 2 * x, lambda x: x - 2 * x),
    "mul": (lambda x: x * x, lambda x: x * x),
    "div": (lambda x: 1 / x, lambda x: 1 / x),
    "pow": (lambda x: x ** 3, lambda x: x ** 3),
    "pow_tensor": (lambda x: x ** x, lambda x: x ** x),
    "rpow": (lambda x: 2 ** x, lambda x: 2 ** x),
    **FLOAT_FUNCTIONS,
    **FLOAT_INPUT_FUNCTIONS,
    "clip": (lambda x: x.clip(0.0, 1.0), lambda x: x.clamp(0.0, 1.0)),
    "maximum": (lambda x: tg.maximum(x, 0.5 * x), lambda x: torch.maximum(x, 0.5 * x)),
    "minimum": (lambda x: tg.minimum(x, 0.5 * x), lambda x: torch.minimum(x, 0.5 * x)),
    "where": (lambda x: tg.where(np.array(True), x, -x), lambda x: torch.where(torch.tensor(True), x, -x)),
    "sum": (lambda x: x.sum(), lambda x: x.sum()),
    "sum_axis0": (lambda x: x.sum(0), lambda x: x.sum(0)),
    "mean": (lambda x: x.mean(-1, keepdims=True), lambda x: x.mean(-1, keepdim=True)),
    "max": (lambda x: x.max(), lambda x: x.amax()),
    "min": (lambda x: x.min(0), lambda x: x.amin(0)),
    "var": (lambda x: x.var() + x, lambda x: x.var(correction=0) + x),
    "logsumexp": (lambda x: x.logsumexp(), lambda x: x.logsumexp(0)),
    "softmax": (lambda x: x.softmax() * x, lambda x: x.softmax(-1) * x),
    "log_softmax": (lambda x: x.log_softmax() + x, lambda x: x.log_softmax(-1) + x),
    "cumsum": (lambda x: x.cumsum(0), lambda x: x.cumsum(0)),
    "reshape": (lambda x: x.reshape(1, 1), lambda x: x.reshape(1, 1)),
    "unsqueeze": (lambda x: x.unsqueeze(0), lambda x: x.unsqueeze(0)),
    "squeeze": (lambda x: x.squeeze(), lambda x: x.squeeze()),
    "expand": (lambda x: x.expand(3), lambda x: x.expand(3)),
    "flatten": (lambda x: x.flatten(), lambda x: x.flatten()),
    "transpose": (lambda x: x.T, lambda x: x.permute(())),
    "getitem_none": (lambda x: x[None], lambda x: x[None]),
    "getitem_ellipsis": (lambda x: x[...], lambda x: x[...]),
    "stack": (lambda x: tg.stack([x, x * 2]), lambda x: torch.stack([x, x * 2])),
    "matmul": (lambda x: x.reshape(1) @ x.reshape(1), lambda x: x.reshape(1) @ x.reshape(1)),
    "double_cast": (lambda x: x.double(), lambda x: x.double()),
    "float_cast": (lambda x: x.float(), lambda x: x.float()),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", ZERO_D_OPS)
def test_every_op_at_0d_with_its_output_used_twice(name, dtype):
    ours, theirs = ZERO_D_OPS[name]

    def reused(f):
        return lambda x: f(x) + f(x) * x   # x, f(x) and each op inside f reached by several paths
    compare(reused(ours), reused(theirs), np.array(0.75, dtype))
