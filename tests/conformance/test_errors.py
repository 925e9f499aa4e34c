"""A bad call fails at once, with the error type code expects and a message that names the op
and the real cause: an axis out of range is numpy's AxisError (an IndexError, as PyTorch's,
and a ValueError, as numpy's) naming the op, the axis and the number of axes; shapes that
don't fit are a ValueError naming the op and the shapes (PyTorch: RuntimeError, see
DELIBERATE_DIFFERENCES); wrong kinds of argument are TypeErrors. Each case is run in PyTorch
too, where PyTorch has it, to show which error a PyTorch user meets there."""
import sys

import numpy as np
import pytest

import tensorgrad as tg

from .torch_compare import DELIBERATE_DIFFERENCES, torch

pytestmark = pytest.mark.torch
AxisError = np.exceptions.AxisError


def raises(call, error, *words):
    """call() raises `error` (or a subclass) whose message contains every word (any case)."""
    with pytest.raises(error) as caught:
        call()
    message = str(caught.value).lower()
    missing = [w for w in words if w.lower() not in message]
    assert not missing, f"the message does not say {missing}: {caught.value}"
    return caught.value


def torch_error(call):
    """The exception PyTorch raises for the same call."""
    with pytest.raises(Exception) as caught:
        call()
    return caught.value


# ---- axes out of range: (op, what the message says of the axes, tensorgrad call, PyTorch call) --
# the calls are on a 2-d x with axis 2 (or -3); unsqueeze and stack insert an axis, so their
# range is that of a 3-d result; a 0-d tensor has axes 0 and -1, as in PyTorch
def x2(lib):
    return lib.zeros(2, 3)


INDEX = np.zeros((2, 3), dtype=np.int64)
AXIS_OUT_OF_RANGE = [
    ("sum", "2 axes", lambda: x2(tg).sum(2), lambda: x2(torch).sum(2)),
    ("sum", "2 axes", lambda: x2(tg).sum(axis=(0, -3)), lambda: x2(torch).sum(dim=(0, -3))),
    ("mean", "2 axes", lambda: x2(tg).mean(dim=-3), lambda: x2(torch).mean(dim=-3)),
    ("max", "2 axes", lambda: x2(tg).max(2), lambda: x2(torch).amax(2)),
    ("min", "2 axes", lambda: x2(tg).min(axis=2, keepdims=True), lambda: x2(torch).amin(2, keepdim=True)),
    ("var", "2 axes", lambda: x2(tg).var(2), lambda: x2(torch).var(2)),
    ("std", "2 axes", lambda: x2(tg).std(2), lambda: x2(torch).std(2)),
    ("logsumexp", "2 axes", lambda: x2(tg).logsumexp(2), lambda: x2(torch).logsumexp(2)),
    ("softmax", "2 axes", lambda: x2(tg).softmax(2), lambda: x2(torch).softmax(2)),
    ("log_softmax", "2 axes", lambda: x2(tg).log_softmax(-3), lambda: x2(torch).log_softmax(-3)),
    ("cumsum", "2 axes", lambda: x2(tg).cumsum(2), lambda: x2(torch).cumsum(2)),
    ("argmax", "2 axes", lambda: x2(tg).argmax(2), lambda: x2(torch).argmax(2)),
    ("argmin", "2 axes", lambda: x2(tg).argmin(-3), lambda: x2(torch).argmin(-3)),
    ("squeeze", "2 axes", lambda: x2(tg).squeeze(2), lambda: x2(torch).squeeze(2)),
    ("unsqueeze", "[-3, 2]", lambda: x2(tg).unsqueeze(3), lambda: x2(torch).unsqueeze(3)),
    ("unsqueeze", "[-3, 2]", lambda: x2(tg).unsqueeze(-4), lambda: x2(torch).unsqueeze(-4)),
    ("cat", "2 axes", lambda: tg.cat([x2(tg), x2(tg)], 2), lambda: torch.cat([x2(torch), x2(torch)], 2)),
    ("stack", "[-3, 2]", lambda: tg.stack([x2(tg), x2(tg)], 3), lambda: torch.stack([x2(torch), x2(torch)], 3)),
    ("split", "2 axes", lambda: x2(tg).split(1, 2), lambda: x2(torch).split(1, 2)),
    ("gather", "2 axes", lambda: x2(tg).gather(2, INDEX), lambda: x2(torch).gather(2, torch.tensor(INDEX))),
    ("swapaxes", "2 axes", lambda: x2(tg).swapaxes(0, 2), lambda: x2(torch).swapaxes(0, 2)),
    ("flatten", "2 axes", lambda: x2(tg).flatten(0, 2), lambda: x2(torch).flatten(0, 2)),
    ("sum", "0 axes", lambda: tg.tensor(1.0).sum(1), lambda: torch.tensor(1.0).sum(1)),
    ("softmax", "0 axes", lambda: tg.tensor(1.0).softmax(-2), lambda: torch.tensor(1.0).softmax(-2)),
]


@pytest.mark.parametrize("op,says,ours,theirs", AXIS_OUT_OF_RANGE, ids=[case[0] for case in AXIS_OUT_OF_RANGE])
def test_an_axis_out_of_range_is_an_axis_error_naming_the_op_the_axis_and_the_ndim(op, says, ours, theirs):
    error = raises(ours, AxisError, op, "axis", says)
    assert isinstance(error, IndexError) and isinstance(error, ValueError)
    # code written for PyTorch, catching its IndexError, catches ours too
    assert isinstance(error, type(torch_error(theirs)))
    assert "axis_out_of_range_is_numpys_axis_error" in DELIBERATE_DIFFERENCES


# ---- shapes that don't fit: (name, tensorgrad call, PyTorch call, words of the message) ---
def a(lib):
    return lib.zeros(2, 3)


def b(lib):
    return lib.zeros(4)


MASK = np.array([True, False, True, False])
SHAPE_MISMATCHES = [
    ("add", lambda: a(tg) + b(tg), lambda: a(torch) + b(torch), ["(2, 3)", "(4,)"]),
    ("sub", lambda: a(tg) - b(tg), lambda: a(torch) - b(torch), ["(2, 3)", "(4,)"]),
    ("mul", lambda: a(tg) * b(tg), lambda: a(torch) * b(torch), ["(2, 3)", "(4,)"]),
    ("div", lambda: a(tg) / b(tg), lambda: a(torch) / b(torch), ["(2, 3)", "(4,)"]),
    ("pow", lambda: a(tg) ** b(tg), lambda: a(torch) ** b(torch), ["(2, 3)", "(4,)"]),
    ("maximum", lambda: tg.maximum(a(tg), b(tg)), lambda: torch.maximum(a(torch), b(torch)), ["(2, 3)", "(4,)"]),
    ("minimum", lambda: tg.minimum(a(tg), b(tg)), lambda: torch.minimum(a(torch), b(torch)), ["(2, 3)", "(4,)"]),
    ("where", lambda: tg.where(MASK, a(tg), 0.0), lambda: torch.where(torch.tensor(MASK), a(torch), 0.0),
     ["(2, 3)", "(4,)"]),
    ("masked_fill", lambda: a(tg).masked_fill(MASK, 0.0), lambda: a(torch).masked_fill(torch.tensor(MASK), 0.0),
     ["(2, 3)", "(4,)"]),
    ("matmul", lambda: a(tg) @ b(tg), lambda: a(torch) @ b(torch), ["(2, 3)", "(4,)"]),
    ("matmul", lambda: tg.matmul(b(tg), a(tg)), lambda: torch.matmul(b(torch), a(torch)), ["(4,)", "(2, 3)"]),
    ("reshape", lambda: a(tg).reshape(4), lambda: a(torch).reshape(4), ["(2, 3)", "(4,)"]),
    ("view", lambda: a(tg).view(5, -1), lambda: a(torch).view(5, -1), ["(2, 3)"]),
    ("expand", lambda: a(tg).expand(3, 3), lambda: a(torch).expand(3, 3), ["(2, 3)", "(3, 3)"]),
    ("expand", lambda: a(tg).expand(3), lambda: a(torch).expand(3), ["(2, 3)"]),
    ("cat", lambda: tg.cat([a(tg), b(tg)]), lambda: torch.cat([a(torch), b(torch)]), ["(2, 3)", "(4,)"]),
    ("cat", lambda: tg.cat([a(tg), a(tg).T]), lambda: torch.cat([a(torch), a(torch).T]), ["(2, 3)", "(3, 2)"]),
    ("stack", lambda: tg.stack([a(tg), a(tg).T]), lambda: torch.stack([a(torch), a(torch).T]), ["(2, 3)", "(3, 2)"]),
    ("gather", lambda: a(tg).gather(1, np.zeros(3, np.int64)),
     lambda: a(torch).gather(1, torch.zeros(3, dtype=torch.long)), []),
    ("tril", lambda: b(tg).tril(), lambda: b(torch).tril(), []),
]


@pytest.mark.parametrize("op,ours,theirs,words", SHAPE_MISMATCHES, ids=[case[0] for case in SHAPE_MISMATCHES])
def test_shapes_that_do_not_fit_are_a_value_error_naming_the_op_and_shapes(op, ours, theirs, words):
    raises(ours, ValueError, op, *words)
    # PyTorch: RuntimeError (DELIBERATE_DIFFERENCES["bad_shapes_are_value_errors"])
    assert isinstance(torch_error(theirs), RuntimeError)


def test_cat_of_0d_tensors_says_zero_dimensional():
    raises(lambda: tg.cat([tg.tensor(1.0), tg.tensor(2.0)]), ValueError, "cat", "zero-dimensional")
    assert "zero-dimensional" in str(torch_error(lambda: torch.cat([torch.tensor(1.0), torch.tensor(2.0)])))


def test_cat_and_stack_of_nothing():
    raises(lambda: tg.cat([]), ValueError, "cat")
    raises(lambda: tg.stack([]), ValueError, "stack")
    assert isinstance(torch_error(lambda: torch.cat([])), ValueError)


def test_transpose_of_two_axes_on_3d_points_to_swapaxes():
    """PyTorch's k.transpose(-2, -1) is our k.swapaxes(-2, -1); on more than 2 axes the
    PyTorch spelling is caught, not silently read as a (bad) permutation."""
    x = tg.zeros(2, 3, 4)
    raises(lambda: x.transpose(-2, -1), ValueError, "swapaxes")
    raises(lambda: x.transpose(0, 1), ValueError, "swapaxes")
    assert x.swapaxes(-2, -1).shape == (2, 4, 3) == tuple(torch.zeros(2, 3, 4).transpose(-2, -1).shape)


def test_permute_of_a_non_permutation_is_a_value_error():
    raises(lambda: tg.zeros(2, 3).permute(0, 0), ValueError, "permut")
    raises(lambda: tg.zeros(2, 3).permute(0, 2), ValueError)
    raises(lambda: tg.zeros(2, 3, 4).permute(0, 1), ValueError)


@pytest.mark.parametrize("dtype", [tg.int32, tg.int64])
def test_integer_to_a_negative_integer_power_is_refused_naming_pow(dtype):
    x = tg.tensor([1, 2, 3], dtype=dtype)
    raises(lambda: x ** -2, ValueError, "pow", "negative")
    raises(lambda: x ** tg.tensor([1, -1, 2]), ValueError, "pow", "negative")
    raises(lambda: 2 ** -x, ValueError, "pow", "negative")
    assert "negative" in str(torch_error(lambda: torch.tensor([1, 2, 3]) ** -2))
    # a float exponent, or a float base, is fine
    assert (x ** -2.0).dtype == np.float32 and (x.float() ** -2).dtype == np.float32


def test_only_float_tensors_can_require_grad():
    raises(lambda: tg.tensor([1, 2], requires_grad=True), TypeError, "int64")
    raises(lambda: tg.zeros(2, dtype=tg.int32, requires_grad=True), TypeError, "int32")
    raises(lambda: tg.tensor([True], requires_grad=True), TypeError, "bool")
    # PyTorch: RuntimeError (DELIBERATE_DIFFERENCES["integer_tensors_cannot_require_grad_type_error"])
    assert isinstance(torch_error(lambda: torch.tensor([1, 2], dtype=torch.float32).long().requires_grad_()),
                      RuntimeError)


DEVICE_CALLS = {
    "tensor": lambda device: tg.tensor([1.0], device=device),
    "zeros": lambda device: tg.zeros(2, device=device),
    "ones": lambda device: tg.ones(2, device=device),
    "full": lambda device: tg.full((2,), 1.0, device=device),
    "randn": lambda device: tg.randn(2, device=device),
    "rand": lambda device: tg.rand(2, device=device),
    "randint": lambda device: tg.randint(3, (2,), device=device),
    "arange": lambda device: tg.arange(3, device=device),
    "to": lambda device: tg.zeros(2).to(device),
}


@pytest.mark.parametrize("call", DEVICE_CALLS)
def test_cuda_without_cupy_says_how_to_install_it_in_one_line(call, monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)   # `import cupy` fails, as on a machine without it
    for device in ("cuda", "cuda:0"):
        error = raises(lambda: DEVICE_CALLS[call](device), RuntimeError, "cupy", 'pip install "tensorgrad[cuda]"')
        assert "\n" not in str(error)


@pytest.mark.parametrize("call", DEVICE_CALLS)
def test_a_device_tensorgrad_has_not_is_refused_by_name(call):
    raises(lambda: DEVICE_CALLS[call]("mps"), ValueError, "'mps'", "'cpu' or 'cuda'")


def test_the_cpu_is_accepted_everywhere(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    assert tg.cuda.is_available() is False and tg.cuda.device_count() == 0
    x = tg.tensor([1.0], device="cpu")
    assert x.device == "cpu" and x.to("cpu").device == "cpu" and tg.zeros(2, device="cpu").device == "cpu"


BOTH_SPELLINGS = {
    "sum": lambda x: x.sum(axis=0, dim=0),
    "mean": lambda x: x.mean(0, keepdims=True, keepdim=True),
    "softmax": lambda x: x.softmax(axis=0, dim=0),
    "var": lambda x: x.var(0, ddof=1, correction=1),
    "tril": lambda x: x.tril(k=1, diagonal=1),
    "cat": lambda x: tg.cat([x, x], axis=0, dim=0),
}


@pytest.mark.parametrize("op", BOTH_SPELLINGS)
def test_numpy_and_pytorch_spellings_of_one_argument_at_once_are_a_type_error(op):
    raises(lambda: BOTH_SPELLINGS[op](tg.zeros(2, 3)), TypeError, op)


def test_writing_into_a_tensor_that_needs_grad():
    leaf = tg.zeros(3, requires_grad=True)
    raises(lambda: leaf.__setitem__(0, 1.0), RuntimeError, "no_grad")
    with tg.no_grad():
        leaf[0] = 1.0
    assert leaf.tolist() == [1.0, 0.0, 0.0]
    out = leaf * 2
    raises(lambda: out.__setitem__(0, 1.0), RuntimeError, "mul")
    # PyTorch refuses the leaf with a RuntimeError too
    assert isinstance(torch_error(lambda: torch.zeros(3, requires_grad=True).__setitem__(0, 1.0)), RuntimeError)


def test_only_a_0d_integer_tensor_is_an_index():
    data = list(range(10))
    assert data[tg.tensor(2):tg.tensor(5)] == [2, 3, 4] and list(range(tg.tensor(3))) == [0, 1, 2]
    raises(lambda: data[tg.tensor(2.0)], TypeError)
    raises(lambda: data[tg.tensor([1, 2]):], TypeError)
    assert isinstance(torch_error(lambda: data[torch.tensor(2.0)]), TypeError)


@pytest.mark.parametrize("op", ["max", "min", "argmax", "argmin"])
def test_picking_from_nothing_is_a_value_error_naming_the_op(op):
    """DELIBERATE_DIFFERENCES["reduction_of_nothing_is_a_value_error"]."""
    raises(lambda: getattr(tg.zeros(0, 3), op)(), ValueError, op)
    raises(lambda: getattr(tg.zeros(0, 3), op)(axis=0), ValueError, op)
    theirs = {"max": "amax", "min": "amin"}.get(op, op)
    assert isinstance(torch_error(lambda: getattr(torch.zeros(0, 3), theirs)(dim=0)), IndexError)


def test_a_tensor_holds_numbers():
    raises(lambda: tg.tensor(["a", "b"]), TypeError, "number")
