"""Every op that works along axes (sum, mean, max, min, var, std, logsumexp, softmax,
log_softmax, cumsum, argmax, argmin) computes PyTorch's values, dtypes and gradients for
axis None, each axis, negative axes and tuples, with and without keepdims, spelled
numpy's way (axis=, keepdims=, ddof=) or PyTorch's (dim=, keepdim=, correction=); on 0-d
tensors (axis 0 and -1, as PyTorch), empty ones, and rows of awkward values (ties, ±inf,
nan, zero variance), where the gradients must match too (ties share them, as amax)."""
import numpy as np
import pytest
from hypothesis import assume, given, strategies as st

import tensorgrad as tg

from .torch_compare import (FLOATS, INTEGERS, arrays, axes, axis_kwargs, compare, edge_values, shapes, torch,
                            torch_dim)

pytestmark = pytest.mark.torch
SPELLINGS = ["numpy", "torch"]

# name: PyTorch's function of (x, dim, keepdim)
REDUCTIONS = {
    "sum": torch.sum,
    "mean": torch.mean,
    "max": torch.amax,
    "min": torch.amin,
    "logsumexp": torch.logsumexp,
    "var": lambda x, dim, keepdim: torch.var(x, dim=dim, keepdim=keepdim, correction=0),
    "std": lambda x, dim, keepdim: torch.std(x, dim=dim, keepdim=keepdim, correction=0),
}
FUNCTION_FORMS = {"sum", "mean", "var", "std", "logsumexp"}   # tg.sum(x, axis=...) as torch.sum(x, dim=...)
PICKS = {"max", "min"}   # they pick an element: nothing to pick from a size-0 axis (test_errors)


def reduced_axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    return tuple(a % ndim for a in (axis if isinstance(axis, tuple) else (axis,))) if ndim else ()


def reduce_ours(name, form, x, **kwargs):
    return getattr(tg, name)(x, **kwargs) if form == "function" else getattr(x, name)(**kwargs)


@pytest.mark.parametrize("name,form", [(name, "method") for name in REDUCTIONS] +
                         [(name, "function") for name in sorted(FUNCTION_FORMS)])
@given(data=st.data())
def test_reduction_matches_torch(name, form, data):
    dtype = data.draw(st.sampled_from(FLOATS), label="dtype")
    x = data.draw(arrays(dtype, shapes(min_side=1 if name in PICKS else 0), grid=True), label="x")
    axis, keepdims = data.draw(axes(x.ndim), label="axis"), data.draw(st.booleans(), label="keepdims")
    spelling = data.draw(st.sampled_from(SPELLINGS), label="spelling")
    if name == "std":   # where a slice's variance is 0, see test_std_gradient_where_the_variance_is_zero
        assume(x.size == 0 or (np.var(x, axis=reduced_axes(axis, x.ndim)) > 0).all())
    compare(lambda x: reduce_ours(name, form, x, **axis_kwargs(spelling, axis, keepdims)),
            lambda x: REDUCTIONS[name](x, torch_dim(axis, x.ndim), keepdims), x)


@pytest.mark.parametrize("name", ["var", "std"])
@given(data=st.data())
def test_var_and_std_take_ddof_or_correction(name, data):
    dtype = data.draw(st.sampled_from(FLOATS), label="dtype")
    x = data.draw(arrays(dtype, shapes(min_dims=1, min_side=2, max_side=3), grid=True), label="x")
    axis, ddof = data.draw(axes(x.ndim), label="axis"), data.draw(st.sampled_from([0, 1]), label="ddof")
    keyword = data.draw(st.sampled_from(["ddof", "correction"]), label="keyword")
    if name == "std":
        assume((np.var(x, axis=reduced_axes(axis, x.ndim)) > 0).all())
    compare(lambda x: getattr(x, name)(axis, **{keyword: ddof}),
            lambda x: getattr(torch, name)(x, dim=torch_dim(axis, x.ndim), correction=ddof), x)


# mean, var, std, logsumexp of integers are float32: test_dtypes.py and test_differences.py
@pytest.mark.parametrize("name", ["sum", "max", "min"])
@given(data=st.data())
def test_reduction_of_integers_matches_torch(name, data):
    dtype = data.draw(st.sampled_from(INTEGERS), label="dtype")
    x = data.draw(arrays(dtype, shapes(min_side=1 if name in PICKS else 0)), label="x")
    axis, keepdims = data.draw(axes(x.ndim), label="axis"), data.draw(st.booleans(), label="keepdims")
    compare(lambda x: getattr(x, name)(axis=axis, keepdims=keepdims),
            lambda x: REDUCTIONS[name](x, torch_dim(axis, x.ndim), keepdims), x)


# rows of awkward values, reduced along each row and along each column
EDGE_ROWS = [
    [0.0, 0.0, 0.0],           # all tied: max/min share, var is 0
    [1.0, 3.0, 3.0],           # a tie at the top
    [-0.0, 0.0, -0.0],
    [np.inf, 1.0, 2.0],
    [-np.inf, 0.0, 1.0],
    [-np.inf, -np.inf, -np.inf],   # logsumexp of nothing but -inf
    [np.inf, np.inf, -np.inf],
    [np.nan, 1.0, 2.0],
    [1e30, -1e30, 3e30],       # large magnitudes (float32: the variance overflows, in both)
    [1e-30, -1e-30, 0.0],
]


@pytest.mark.parametrize("axis", [1, 0, None])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction_at_edge_values(name, dtype, axis):
    x = np.array(EDGE_ROWS, dtype)
    compare(lambda x: getattr(x, name)(axis=axis), lambda x: REDUCTIONS[name](x, torch_dim(axis, 2), False), x)


@pytest.mark.parametrize("dtype", FLOATS)
def test_std_gradient_where_the_variance_is_zero(dtype):
    """std = sqrt(var) has an infinite slope at var = 0: PyTorch gives gradient 0 there (its
    std_backward masks it), as for a length-1 axis."""
    compare(lambda x: x.std(axis=1), lambda x: x.std(dim=1, correction=0), np.array([[2.0, 2.0], [1.0, 3.0]], dtype))
    compare(lambda x: x.std(axis=0), lambda x: x.std(dim=0, correction=0), np.ones((1, 3), dtype))


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_along_a_nonempty_axis_of_an_empty_tensor(name):
    """(0, 3) reduced along its axis of 3: an empty result, (0,), as numpy and PyTorch; the
    ones that pick an element (max, min) too."""
    x = np.zeros((0, 3))
    compare(lambda x: getattr(x, name)(axis=1), lambda x: REDUCTIONS[name](x, 1, False), x)
    compare(lambda x: getattr(x, name)(axis=-1, keepdims=True), lambda x: REDUCTIONS[name](x, -1, True), x)


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions_of_a_0d_tensor(name):
    """A 0-d tensor has axis 0 (and -1), as in PyTorch; keepdims keeps it 0-d."""
    x = np.array(1.5)
    for kwargs in [{}, {"axis": 0}, {"axis": -1}, {"dim": 0, "keepdim": True}, {"axis": -1, "keepdims": True}]:
        keepdim = kwargs.get("keepdims", kwargs.get("keepdim", False))
        compare(lambda x: getattr(x, name)(**kwargs), lambda x: REDUCTIONS[name](x, 0, keepdim), x)


# ---- softmax, log_softmax, cumsum: one axis, the shape kept -----------------------------
ALONG_AN_AXIS = {
    "softmax": torch.softmax,
    "log_softmax": torch.log_softmax,
    "cumsum": torch.cumsum,
}


@pytest.mark.parametrize("form", ["method", "function"])
@pytest.mark.parametrize("name", ALONG_AN_AXIS)
@given(data=st.data())
def test_op_along_an_axis_matches_torch(name, form, data):
    dtype = data.draw(st.sampled_from(FLOATS), label="dtype")
    x = data.draw(arrays(dtype, shapes(), grid=True), label="x")
    axis = data.draw(axes(x.ndim, tuples=False, none=False), label="axis")
    kwargs = axis_kwargs(data.draw(st.sampled_from(SPELLINGS), label="spelling"), axis)
    compare(lambda x: reduce_ours(name, form, x, **kwargs), lambda x: ALONG_AN_AXIS[name](x, axis), x)


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_and_log_softmax_default_to_the_last_axis(dtype):
    x = np.arange(12, dtype=dtype).reshape(3, 4) / 4
    compare(lambda x: x.softmax(), lambda x: x.softmax(-1), x)
    compare(lambda x: x.log_softmax(), lambda x: x.log_softmax(-1), x)


@pytest.mark.parametrize("axis", [1, 0])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", ALONG_AN_AXIS)
def test_op_along_an_axis_at_edge_values(name, dtype, axis):
    compare(lambda x: getattr(x, name)(axis), lambda x: ALONG_AN_AXIS[name](x, axis), np.array(EDGE_ROWS, dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_of_large_logits_does_not_overflow(dtype):
    x = np.array([[1000.0, 0.0, -1000.0], [-1e4, -1e4 + 1, -1e4 + 2]], dtype)
    compare(lambda x: x.softmax(), lambda x: x.softmax(-1), x)
    compare(lambda x: x.log_softmax(), lambda x: x.log_softmax(-1), x)
    compare(lambda x: x.logsumexp(axis=-1), lambda x: x.logsumexp(-1), x)


@given(data=st.data())
def test_cumsum_without_an_axis_runs_over_the_flattened_tensor(data):
    dtype = data.draw(st.sampled_from(FLOATS + INTEGERS), label="dtype")
    x = data.draw(arrays(dtype, shapes(), grid=True), label="x")
    compare(lambda x: x.cumsum(), lambda x: torch.cumsum(x.flatten(), 0), x)
    compare(lambda x: tg.cumsum(x), lambda x: torch.cumsum(x.flatten(), 0), x)


@given(data=st.data())
def test_cumsum_of_integers_matches_torch(data):
    x = data.draw(arrays(data.draw(st.sampled_from(INTEGERS + (np.bool_,))), shapes(min_dims=1)), label="x")
    axis = data.draw(axes(x.ndim, tuples=False, none=False), label="axis")
    compare(lambda x: x.cumsum(axis), lambda x: torch.cumsum(x, axis), x)


# ---- argmax, argmin: int64 positions, no gradient --------------------------------------
@pytest.mark.parametrize("form", ["method", "function"])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
@given(data=st.data())
def test_argmax_and_argmin_match_torch(name, form, data):
    """Ties and nan go to the first position, as in both libraries."""
    dtype = data.draw(st.sampled_from(FLOATS + INTEGERS), label="dtype")
    x = data.draw(arrays(dtype, shapes(min_side=1)), label="x")
    axis = data.draw(axes(x.ndim, tuples=False), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    kwargs = axis_kwargs(data.draw(st.sampled_from(SPELLINGS), label="spelling"), axis, keepdims)
    (out,) = compare(lambda x: reduce_ours(name, form, x, **kwargs),
                     lambda x: getattr(torch, name)(x, dim=axis, keepdim=keepdims), x, grad=False)
    assert out.dtype == np.int64 and not out.requires_grad


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_argmax_and_argmin_at_edge_values(name, dtype):
    x = np.array(EDGE_ROWS, dtype)
    for axis in [None, 0, 1]:
        compare(lambda x: getattr(x, name)(axis), lambda x: getattr(torch, name)(x, dim=axis), x, grad=False)
    compare(lambda x: getattr(x, name)(), lambda x: getattr(torch, name)(x), edge_values(dtype), grad=False)


def test_argmax_of_a_tensor_that_requires_grad_has_no_gradient():
    x = tg.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    out = x.argmax(axis=1)
    assert out.dtype == np.int64 and not out.requires_grad
