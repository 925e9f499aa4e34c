"""The one comparison every conformance test uses, and the hypothesis strategies that feed it.

compare(ours_fn, torch_fn, *arrays) makes a tensorgrad tensor and a torch tensor from each
numpy array (float ones require grad), runs the op in both, and checks, for every output:

  - it is a Tensor of the same shape and dtype as PyTorch's;
  - its values are PyTorch's, nan at the same places, inf the same sign (float64 to 1e-10
    relative, float32 to 1e-5; integers and bools exactly);

then backpropagates the same random projection sum(out * r) in both and checks every float
input's .grad the same way (and that it is an ndarray of the input's dtype and shape).

Sums come out the same whatever the order of their terms when the terms are exact: r holds
multiples of 1/64, and the strategies below can draw values on a grid of quarters
(arrays(..., grid=True)), so a matmul, a sum or a cumsum is compared for what it computes,
not for the order numpy's and PyTorch's loops add in.

Importing this module skips the importing test module when torch is not installed, so the
whole folder skips cleanly without it.
"""
import contextlib
import warnings

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tensorgrad as tg

torch = pytest.importorskip("torch")

# atol only matters where the values are ~0 (cancellations): there the relative error is meaningless
TOLERANCE = {
    np.dtype(np.float64): dict(rtol=1e-10, atol=1e-12),
    np.dtype(np.float32): dict(rtol=1e-5, atol=1e-6),
    np.dtype(np.float16): dict(rtol=1e-3, atol=1e-4),
}

FLOATS = (np.float32, np.float64)
INTEGERS = (np.int32, np.int64)
DTYPES_ALL = FLOATS + INTEGERS + (np.bool_,)


# ---- the comparison ---------------------------------------------------------------------
def compare(ours_fn, torch_fn, *arrays, grad=True, seed=0):
    """Run `ours_fn` on tensorgrad tensors and `torch_fn` on torch tensors made from the same
    numpy `arrays`; outputs (a tensor, or a list/tuple of them) and, with grad=True, the
    gradients of every float input must match. Returns tensorgrad's outputs, as a list."""
    arrays = [np.asarray(a) for a in arrays]
    needs_grad = [grad and a.dtype.kind == "f" for a in arrays]
    ours = [tg.tensor(a, requires_grad=g) for a, g in zip(arrays, needs_grad)]
    theirs = [torch.tensor(a, requires_grad=g) for a, g in zip(arrays, needs_grad)]
    for a, t in zip(arrays, ours):   # the inputs themselves must be what we meant
        assert t.dtype == a.dtype and t.shape == a.shape

    with edge_cases_quiet():
        outs = as_list(ours_fn(*ours))
        expected = as_list(torch_fn(*theirs))
    assert len(outs) == len(expected), f"{len(outs)} outputs, PyTorch gives {len(expected)}"
    for i, (out, want) in enumerate(zip(outs, expected)):
        assert isinstance(out, tg.Tensor), f"output {i} is a {type(out).__name__}, not a Tensor"
        assert_same(out.data, want.detach().numpy(), f"output {i}")

    if not any(needs_grad):
        return outs
    # the same upstream gradient r in both: dL/d(out) for L = sum(out * r)
    rng = np.random.default_rng(seed)
    pairs = [(out, want, projection(rng, out.shape, out.dtype))
             for out, want in zip(outs, expected) if want.requires_grad]
    assert all(out.requires_grad for out, _, _ in pairs), "an output that PyTorch differentiates needs no grad here"
    if not pairs:
        return outs
    with edge_cases_quiet():
        sum((out * tg.tensor(r)).sum() for out, _, r in pairs).backward()
        sum((want * torch.tensor(r)).sum() for _, want, r in pairs).backward()

    for i, (ours_input, their_input, g) in enumerate(zip(ours, theirs, needs_grad)):
        if not g:
            continue
        if their_input.grad is None:   # PyTorch never reached it: no gradient, or zeros
            assert ours_input.grad is None or not ours_input.grad.any(), f"input {i}: a gradient where PyTorch has none"
            continue
        assert ours_input.grad is not None, f"input {i} got no gradient"
        assert type(ours_input.grad) is np.ndarray, f"input {i}: .grad is a {type(ours_input.grad).__name__}"
        assert_same(ours_input.grad, their_input.grad.numpy(), f"gradient of input {i}")
        assert ours_input.grad.dtype == ours_input.dtype
    return outs


def assert_same(actual, expected, what):
    """Same shape, same dtype, same values: exactly for integers and bools; for floats within
    TOLERANCE, with nan at the same places and infinities of the same sign."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape}, PyTorch {expected.shape}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype}, PyTorch {expected.dtype}"
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(actual, expected, equal_nan=True, err_msg=what, **TOLERANCE[expected.dtype])
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what)


def projection(rng, shape, dtype):
    """r for L = sum(out * r): nonzero multiples of 1/64 in [-1, 1], random signs (exact in
    every float dtype, and distinct enough that a misplaced gradient shows)."""
    r = rng.integers(1, 65, size=shape) / 64 * rng.choice([-1, 1], size=shape)
    return r.astype(dtype)


def as_list(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


@contextlib.contextmanager
def edge_cases_quiet():
    """log(0), inf - inf, a mean of nothing: numpy warns (RuntimeWarning), and PyTorch does
    for a variance of too few values (UserWarning); the values are what we compare, so the
    warnings are only noise here."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", UserWarning)
        yield


# ---- axes in both spellings -------------------------------------------------------------
def axis_kwargs(spelling, axis, keepdims=None):
    """{"axis": .., "keepdims": ..} (numpy's names) or {"dim": .., "keepdim": ..} (PyTorch's)."""
    names = ("axis", "keepdims") if spelling == "numpy" else ("dim", "keepdim")
    kwargs = {names[0]: axis}
    if keepdims is not None:
        kwargs[names[1]] = keepdims
    return kwargs


def torch_dim(axis, ndim):
    """PyTorch's dim for our axis: None (every axis) is the tuple of all of them (PyTorch's
    dim=None is not taken by every function); a 0-d tensor's only axis is 0."""
    if axis is None:
        return tuple(range(ndim)) if ndim else 0
    return axis


# ---- hypothesis strategies --------------------------------------------------------------
def shapes(min_dims=0, max_dims=4, min_side=0, max_side=4):
    """0-d up to batched 4-d shapes; sides of 0 (empty tensors) included unless min_side=1."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)


def elements(dtype, low=-16, high=16):
    """Values of `dtype` in [low, high]: hypothesis favours 0, integers and the bounds, so ties,
    zeros (the kinks of relu, abs, sqrt...) and repeated values come up often."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return st.floats(low, high, width=8 * dtype.itemsize)
    if dtype.kind == "b":
        return st.booleans()
    return st.integers(int(low), int(high))


def arrays(dtype, shape, low=-16, high=16, grid=False):
    """Arrays of `dtype` and `shape` (a shape or a strategy); grid=True: floats are multiples
    of 1/4, so that sums and products of them are exact (for the ops that add up terms)."""
    if grid and np.dtype(dtype).kind == "f":
        values = st.integers(4 * int(low), 4 * int(high)).map(lambda i: i / 4)
    else:
        values = elements(dtype, low, high)
    return hnp.arrays(np.dtype(dtype), shape, elements=values)


@st.composite
def axes(draw, ndim, tuples=True, none=True):
    """An axis for a tensor of `ndim` axes: None, one axis (maybe negative), or (tuples=True)
    a tuple of distinct axes. A 0-d tensor takes axis 0 and -1, as in PyTorch."""
    choices = [st.integers(-max(ndim, 1), max(ndim, 1) - 1)]
    if none:
        choices.append(st.none())
    if tuples and ndim:
        choices.append(hnp.valid_tuple_axes(ndim, min_size=1))
    return draw(st.one_of(*choices))


def edge_values(dtype):
    """One of every awkward value: zeros of both signs, ±inf, nan, a large and a tiny
    magnitude, and a few ordinary numbers (so kinks and their neighbours meet)."""
    big = 1e30 if np.dtype(dtype) == np.float32 else 1e200
    return np.array([0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, np.inf, -np.inf, np.nan, big, -big, 1e-30], dtype)


def to_torch_dtype(dtype):
    return torch.from_numpy(np.zeros(0, dtype)).dtype


# ---- the elementwise functions every grid takes: name: (tensorgrad, PyTorch) -------------
# floats out of any input (integers too: PyTorch's rule, test_dtypes.py)
FLOAT_FUNCTIONS = {
    "exp": (lambda x: x.exp(), torch.exp),
    "log": (lambda x: x.log(), torch.log),
    "sqrt": (lambda x: x.sqrt(), torch.sqrt),
    "tanh": (lambda x: x.tanh(), torch.tanh),
    "sigmoid": (lambda x: x.sigmoid(), torch.sigmoid),
    "sin": (lambda x: x.sin(), torch.sin),
    "cos": (lambda x: x.cos(), torch.cos),
}
# and those with a kink, or only for floats
FLOAT_INPUT_FUNCTIONS = {
    "abs": (lambda x: x.abs(), torch.abs),
    "relu": (lambda x: x.relu(), torch.relu),
    "gelu": (lambda x: x.gelu(), lambda x: torch.nn.functional.gelu(x, approximate="tanh")),
}


# ---- where tensorgrad differs from PyTorch on purpose ----------------------------------
# Each entry is tested, as tensorgrad's own documented behaviour, in test_differences.py
# (a test named after its key); the grids elsewhere compare everything else with PyTorch.
DELIBERATE_DIFFERENCES = {
    "pow_gradient_is_ieee_pow_at_minus_zero_and_minus_inf":
        "d(x ** b)/dx = b·x^(b-1) is computed with numpy's (IEEE) pow: for x ** 0.5 at -0.0 it is "
        "0.5·(-0.0)^(-0.5) = +inf, at -inf it is 0. PyTorch computes x^(-0.5) as rsqrt there, "
        "giving -inf and nan. Both are the limit of no real function: x ** 0.5 is nan left of 0.",
    "bad_shapes_are_value_errors":
        "shapes that do not broadcast, a reshape to the wrong size, a matmul of mismatched shapes, "
        "stack of different shapes, cat of 0-d tensors, int ** negative int: ValueError (numpy's "
        "type); PyTorch raises RuntimeError.",
    "axis_out_of_range_is_numpys_axis_error":
        "np.exceptions.AxisError, which is an IndexError (PyTorch's type for a dim out of range) "
        "and a ValueError (numpy's): code catching either still works.",
    "integer_tensors_cannot_require_grad_type_error":
        "requires_grad=True on an integer tensor is a TypeError (a wrong type of argument); PyTorch "
        "raises RuntimeError.",
    "mean_var_std_of_integers_are_float32":
        "mean, var and std of integer or bool tensors give float32; PyTorch refuses them.",
    "gelu_softmax_of_integers_are_float32":
        "gelu, softmax and log_softmax of integer tensors give float32 (as exp and log do in both); "
        "PyTorch has no integer kernels for them and raises.",
    "var_std_default_to_ddof_0":
        "var and std default to ddof=0 (numpy, the population variance); PyTorch's default is "
        "correction=1. Both take correction= / ddof= explicitly.",
    "max_min_return_values_only":
        "x.max(axis) and x.min(axis) return the values (numpy, PyTorch's amax/amin); PyTorch's "
        "max(dim) returns (values, indices) and sends a tie's gradient to one index, amax shares it "
        "equally, as tensorgrad does.",
    "split_by_a_count_makes_that_many_sections":
        "x.split(3) makes 3 equal sections and x.split([1, 3]) splits at those points (numpy); "
        "PyTorch's split(3) makes pieces of size 3 and split([1, 3]) pieces of sizes 1 and 3 "
        "(PyTorch's chunk and tensor_split are tensorgrad's split).",
    "transpose_takes_a_permutation":
        "x.transpose(a, b, ...) permutes all the axes (numpy), so on a 2-d tensor transpose(0, 1) "
        "is x unchanged (with a UserWarning naming swapaxes) and transpose(1, 0) is x.T; PyTorch's "
        "transpose(a, b) swaps two axes (our swapaxes). On more than 2 axes, transpose(-2, -1) is an "
        "error naming swapaxes.",
    "empty_axis_tuple_reduces_nothing":
        "x.sum(axis=()) reduces no axis (numpy); PyTorch's sum(dim=()) reduces every axis.",
    "cumsum_without_axis_flattens":
        "x.cumsum() (axis=None) is the cumulative sum of the flattened tensor (numpy); PyTorch "
        "requires dim.",
    "integer_power_negative_tensor_exponent_refused":
        "an integer tensor to a negative integer power is refused for tensor exponents too; PyTorch "
        "refuses a negative python int exponent but gives 0 (integer arithmetic) for a tensor one.",
    "matmul_promotes_mixed_dtypes":
        "matmul of float32 and float64 (or int and float) tensors promotes (numpy); PyTorch requires "
        "both operands to have the same dtype.",
    "size_is_the_number_of_elements":
        "t.size is numpy's property, the number of elements; PyTorch's t.size() is a method giving "
        "the shape (t.shape in both, t.numel() in both).",
    "negative_step_slices_work":
        "x[::-1] reverses (numpy basic indexing); PyTorch refuses negative steps (torch.flip).",
    "squeezing_an_axis_not_of_size_1_is_an_error":
        "x.squeeze(axis) of an axis whose size is not 1 is a ValueError (numpy); PyTorch returns x "
        "unchanged.",
    "reduction_of_nothing_is_a_value_error":
        "max, min, argmax, argmin over a size-0 axis (nothing to pick from): ValueError naming the "
        "op (numpy's type); PyTorch raises IndexError (a dim given) or RuntimeError (all axes).",
}
