"""Ops of two operands (+ - * / **, maximum, minimum, where, matmul) compute PyTorch's values,
result dtypes and gradients: over every pair of broadcastable shapes (0-d, empty, batched),
float and integer dtypes mixed (PyTorch's promotion), python scalars on either side (weak:
they take the tensor's dtype), and every pair of awkward values (0 ** -1, inf - inf,
0 / 0, (-8) ** 0.5, maximum's ties...), where the gradients must match too."""
import operator

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import tensorgrad as tg

from .torch_compare import DELIBERATE_DIFFERENCES, FLOATS, INTEGERS, arrays, compare, edge_values, torch

pytestmark = pytest.mark.torch


# name: (tensorgrad, PyTorch)
BINARY = {
    "add": (operator.add, operator.add),
    "sub": (operator.sub, operator.sub),
    "mul": (operator.mul, operator.mul),
    "div": (operator.truediv, operator.truediv),
    "pow": (operator.pow, operator.pow),
    "maximum": (tg.maximum, torch.maximum),
    "minimum": (tg.minimum, torch.minimum),
}

DTYPES = FLOATS + INTEGERS


def operand_shapes(max_dims=4):
    """Two shapes that broadcast together: 0-d, size-0 and size-1 axes included."""
    return hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=max_dims, min_side=0, max_side=3)


@pytest.mark.parametrize("name", BINARY)
@given(data=st.data())
def test_binary_op_broadcasts_and_promotes_like_torch(name, data):
    a_dtype, b_dtype = data.draw(st.tuples(st.sampled_from(DTYPES), st.sampled_from(DTYPES)), label="dtypes")
    a_shape, b_shape = data.draw(operand_shapes(), label="shapes").input_shapes
    # an integer power needs a non-negative integer exponent (a negative one is refused: test_errors)
    low = 0 if name == "pow" and np.dtype(b_dtype).kind == "i" else -16
    a = data.draw(arrays(a_dtype, a_shape, grid=True), label="a")
    b = data.draw(arrays(b_dtype, b_shape, low=low, high=4 if name == "pow" else 16, grid=True), label="b")
    compare(*BINARY[name], a, b)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", BINARY)
def test_binary_op_on_every_pair_of_edge_values(name, dtype):
    """a (n, 1) against b (1, n): every pair of awkward values meets once."""
    values = edge_values(dtype)
    compare(*BINARY[name], values[:, None], values[None, :])


@pytest.mark.parametrize("name", BINARY)
def test_binary_op_of_float32_and_float64_is_float64_with_grads_in_each_dtype(name):
    a, b = np.linspace(0.5, 2, 6, dtype=np.float32).reshape(2, 3), np.linspace(1, 3, 3)
    compare(*BINARY[name], a, b)
    compare(*BINARY[name], b, a)


# python scalars on either side: (tensorgrad and PyTorch spell them the same)
SCALAR_EXPRESSIONS = {
    "x + 2": lambda x: x + 2,
    "x + 2.5": lambda x: x + 2.5,
    "2.5 + x": lambda x: 2.5 + x,
    "x - 1": lambda x: x - 1,
    "3 - x": lambda x: 3 - x,
    "0.5 - x": lambda x: 0.5 - x,
    "x * 3": lambda x: x * 3,
    "x * 0.25": lambda x: x * 0.25,
    "-2 * x": lambda x: -2 * x,
    "x * True": lambda x: x * True,
    "x / 4": lambda x: x / 4,
    "x / 0.5": lambda x: x / 0.5,
    "2 / x": lambda x: 2 / x,
    "1.5 / x": lambda x: 1.5 / x,
    "x ** 2": lambda x: x ** 2,
    "x ** 3": lambda x: x ** 3,
    "x ** 0": lambda x: x ** 0,
    "x ** 0.5": lambda x: x ** 0.5,
    "x ** -1.5": lambda x: x ** -1.5,
    "x ** 2.0": lambda x: x ** 2.0,
    "2 ** x": lambda x: 2 ** x,
    "0.5 ** x": lambda x: 0.5 ** x,
}
# a node used twice: (at the edge values their gradients are differences of huge terms,
# 1/x - x/x², where both libraries' answers are rounding noise: ordinary values only)
SCALAR_EXPRESSIONS_REUSING_X = {
    "x / x": lambda x: x / x,
    "x * x + x": lambda x: x * x + x,
    "x ** x": lambda x: x ** x,
}
# these raise for an integer tensor with negative values (int ** negative int): test_errors
NEEDS_NON_NEGATIVE_INTEGERS = {"2 ** x"}


@pytest.mark.parametrize("expression", {**SCALAR_EXPRESSIONS, **SCALAR_EXPRESSIONS_REUSING_X})
@given(data=st.data())
def test_python_scalars_are_weak_like_torch(expression, data):
    dtype = data.draw(st.sampled_from(DTYPES), label="dtype")
    low = 0 if expression in NEEDS_NON_NEGATIVE_INTEGERS | {"x ** x"} and np.dtype(dtype).kind == "i" else -8
    x = data.draw(arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3), low=low, high=8,
                         grid=True), label="x")
    fn = {**SCALAR_EXPRESSIONS, **SCALAR_EXPRESSIONS_REUSING_X}[expression]
    compare(fn, fn, x)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("expression", SCALAR_EXPRESSIONS)
def test_python_scalars_at_edge_values(expression, dtype):
    fn, x = SCALAR_EXPRESSIONS[expression], edge_values(dtype)
    if expression == "x ** 0.5":   # DELIBERATE_DIFFERENCES: IEEE pow's slope at -0.0 and -inf
        assert "pow_gradient_is_ieee_pow_at_minus_zero_and_minus_inf" in DELIBERATE_DIFFERENCES
        x = x[~((x == 0) & np.signbit(x)) & (x != -np.inf)]
    compare(fn, fn, x)


@pytest.mark.parametrize("dtype", FLOATS)
def test_div_gradients_stay_finite_where_the_true_ones_are(dtype):
    """d(a/b)/db = -a/b² is computed without b² on its own, which underflows to 0 (float32:
    b = 1e-30) or overflows where -a/b² does not."""
    tiny = np.array([1e-30, -1e-30, 3e-25], dtype)
    compare(operator.truediv, operator.truediv, tiny, tiny)
    huge = np.array([1e30, -1e30, 3e25], dtype)
    compare(operator.truediv, operator.truediv, huge, huge)


@pytest.mark.parametrize("dtype", FLOATS)
def test_maximum_and_minimum_with_a_scalar(dtype):
    x = edge_values(dtype)
    compare(lambda x: tg.maximum(x, 0.5), lambda x: torch.maximum(x, torch.tensor(0.5, dtype=x.dtype)), x)
    compare(lambda x: tg.minimum(x, 0.5), lambda x: torch.minimum(x, torch.tensor(0.5, dtype=x.dtype)), x)


@given(data=st.data())
def test_where_broadcasts_and_promotes_like_torch(data):
    dtypes = data.draw(st.tuples(st.sampled_from(DTYPES), st.sampled_from(DTYPES)), label="dtypes")
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, min_side=0, max_side=3),
                       label="shapes").input_shapes
    condition = data.draw(arrays(np.bool_, shapes[0]), label="condition")
    a, b = (data.draw(arrays(d, s, grid=True)) for d, s in zip(dtypes, shapes[1:]))
    theirs = lambda a, b: torch.where(torch.tensor(condition), a, b)
    compare(lambda a, b: tg.where(condition, a, b), theirs, a, b)
    compare(lambda a, b: tg.where(tg.tensor(condition), a, b), theirs, a, b)


@pytest.mark.parametrize("dtype", FLOATS)
def test_where_with_a_python_scalar_keeps_the_tensors_dtype(dtype):
    x, condition = edge_values(dtype), edge_values(dtype) > 0
    compare(lambda x: tg.where(condition, x, 0.0), lambda x: torch.where(torch.tensor(condition), x, 0.0), x)
    compare(lambda x: tg.where(condition, 2, x), lambda x: torch.where(torch.tensor(condition), 2, x), x)


@st.composite
def matmul_shapes(draw):
    """Shapes of a and b for a @ b: batch axes that broadcast, and either side possibly 1-d."""
    n, k, m = draw(st.tuples(*[st.integers(0, 3)] * 3))
    batch_a, batch_b = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=3)).input_shapes
    a = (k,) if draw(st.booleans()) else batch_a + (n, k)
    b = (k,) if draw(st.booleans()) else batch_b + (k, m)
    return a, b


@given(data=st.data())
def test_matmul_matches_torch(data):
    dtype = data.draw(st.sampled_from(FLOATS + INTEGERS), label="dtype")
    a_shape, b_shape = data.draw(matmul_shapes(), label="shapes")
    a, b = data.draw(arrays(dtype, a_shape, grid=True)), data.draw(arrays(dtype, b_shape, grid=True))
    compare(operator.matmul, operator.matmul, a, b)
    compare(tg.matmul, torch.matmul, a, b)


@pytest.mark.parametrize("dtype", FLOATS)
def test_matmul_of_awkward_values(dtype):
    values = edge_values(dtype)
    compare(operator.matmul, operator.matmul, values.reshape(1, -1), np.ones((values.size, 2), dtype))
    compare(operator.matmul, operator.matmul, np.ones((2, values.size), dtype), values.reshape(-1, 1))
