"""Every elementwise op of one tensor (neg, exp, log, sqrt, abs, tanh, sigmoid, relu, gelu,
sin, cos, clip/clamp) computes PyTorch's values and gradients: in float32 and float64, at
any shape (0-d, empty, batched), at every awkward value (0, -0, ±inf, nan, huge, tiny, the
kinks of relu/abs/clip and the edges of log/sqrt's domain), and on integer tensors (the
result dtype PyTorch gives). Method and function spellings (x.exp(), tg.exp(x)) agree."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import tensorgrad as tg

from .torch_compare import (FLOAT_FUNCTIONS, FLOAT_INPUT_FUNCTIONS, FLOATS, INTEGERS, arrays, compare, edge_values,
                            shapes, torch)

pytestmark = pytest.mark.torch

# name: (tensorgrad, PyTorch). clip's bounds are 1 and 3 apart from 0: the edge values -1 and
# 3.0 sit exactly on them, where the gradient is 1 (the bounds are inclusive, as PyTorch's)
UNARY = {
    "neg": (lambda x: -x, lambda x: -x),
    **FLOAT_FUNCTIONS,
    **FLOAT_INPUT_FUNCTIONS,
    "clip": (lambda x: x.clip(-1.0, 3.0), lambda x: x.clamp(-1.0, 3.0)),
    "clip_keywords": (lambda x: x.clip(min=-1.0, max=3.0), lambda x: x.clamp(min=-1.0, max=3.0)),
    "clip_min_only": (lambda x: x.clip(min=-1.0), lambda x: x.clamp(min=-1.0)),
    "clip_max_only": (lambda x: x.clip(max=3.0), lambda x: x.clamp(max=3.0)),
    "clamp": (lambda x: x.clamp(-1.0, 3.0), lambda x: x.clamp(-1.0, 3.0)),
    "clamp_function": (lambda x: tg.clamp(x, -1.0, 3.0), lambda x: torch.clamp(x, -1.0, 3.0)),
    "clip_function": (lambda x: tg.clip(x, -1.0, 3.0), lambda x: torch.clip(x, -1.0, 3.0)),
}

# the ones tensorgrad also spells as functions, torch.exp(x) style: tg.exp(x)
FUNCTION_FORMS = ["exp", "log", "sqrt", "abs", "tanh", "sigmoid", "relu", "sin", "cos"]

# on an integer tensor: these give float32 (as PyTorch); the others keep the integer dtype
FLOAT_RESULT = {"exp", "log", "sqrt", "tanh", "sigmoid", "sin", "cos"}
# gelu of an integer tensor is float32 in tensorgrad, refused by PyTorch: test_differences.py
NOT_IN_TORCH_FOR_INTEGERS = {"gelu"}


@pytest.mark.parametrize("name", UNARY)
@given(data=st.data())
def test_unary_op_matches_torch(name, data):
    dtype = data.draw(st.sampled_from(FLOATS), label="dtype")
    x = data.draw(arrays(dtype, shapes()), label="x")
    compare(*UNARY[name], x)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", UNARY)
def test_unary_op_at_edge_values(name, dtype):
    compare(*UNARY[name], edge_values(dtype))


@pytest.mark.parametrize("name", FUNCTION_FORMS)
@given(data=st.data())
def test_function_form_matches_torch(name, data):
    dtype = data.draw(st.sampled_from(FLOATS), label="dtype")
    x = data.draw(arrays(dtype, shapes(max_dims=3)), label="x")
    compare(getattr(tg, name), getattr(torch, name), x)


@pytest.mark.parametrize("name", sorted(set(UNARY) - NOT_IN_TORCH_FOR_INTEGERS))
@given(data=st.data())
def test_unary_op_on_integers_matches_torch(name, data):
    dtype = data.draw(st.sampled_from(INTEGERS), label="dtype")
    x = data.draw(arrays(dtype, shapes(max_dims=3)), label="x")
    (out,) = compare(*UNARY[name], x)
    if name in FLOAT_RESULT:
        assert out.dtype == np.float32


@pytest.mark.parametrize("dtype", FLOATS)
def test_gelu_over_its_whole_curve(dtype):
    """gelu is PyTorch's tanh approximation everywhere, its flat tails included."""
    compare(*UNARY["gelu"], np.linspace(-12, 12, 241).astype(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_sigmoid_and_tanh_saturate_like_torch(dtype):
    x = np.array([-100, -40, -20, -10, 10, 20, 40, 100], dtype)
    compare(*UNARY["sigmoid"], x)
    compare(*UNARY["tanh"], x)


def test_clip_with_bounds_crossed_is_the_upper_bound_as_torch():
    x = np.linspace(-3, 3, 7)
    compare(lambda x: x.clip(1.0, -1.0), lambda x: x.clamp(1.0, -1.0), x)
