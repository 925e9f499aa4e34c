"""Where tensorgrad differs from PyTorch on purpose (torch_compare.DELIBERATE_DIFFERENCES,
each with its reason), it does what its documentation says: one test per entry, named after
it, checks tensorgrad's behaviour, and PyTorch's where that shows the difference. Every
entry of the table has its test here, and every test here has its entry."""
import sys
import warnings

import numpy as np
import pytest

import tensorgrad as tg

from .torch_compare import DELIBERATE_DIFFERENCES, compare, torch

pytestmark = pytest.mark.torch


def test_every_deliberate_difference_is_tested_here():
    tests = {name[len("test_"):] for name in dir(sys.modules[__name__]) if name.startswith("test_")}
    tests.discard("every_deliberate_difference_is_tested_here")
    assert tests == set(DELIBERATE_DIFFERENCES)


def test_pow_gradient_is_ieee_pow_at_minus_zero_and_minus_inf():
    x = tg.tensor(np.array([-0.0, -np.inf]), requires_grad=True)
    (x ** 0.5).sum().backward()
    np.testing.assert_array_equal(x.grad, [np.inf, 0.0])
    theirs = torch.tensor([-0.0, -np.inf], dtype=torch.float64, requires_grad=True)
    (theirs ** 0.5).sum().backward()
    np.testing.assert_array_equal(theirs.grad.numpy(), [-np.inf, np.nan])


def test_bad_shapes_are_value_errors():
    for call in [lambda lib: lib.zeros(2, 3) + lib.zeros(4), lambda lib: lib.zeros(2, 3).reshape(4),
                 lambda lib: lib.zeros(2, 3) @ lib.zeros(2, 3),
                 lambda lib: lib.stack([lib.zeros(2), lib.zeros(3)]),
                 lambda lib: lib.cat([lib.tensor(1.0), lib.tensor(2.0)]),
                 lambda lib: lib.tensor([1, 2]) ** -2]:
        with pytest.raises(ValueError):
            call(tg)
        with pytest.raises(RuntimeError):
            call(torch)


def test_axis_out_of_range_is_numpys_axis_error():
    with pytest.raises(np.exceptions.AxisError) as ours:
        tg.zeros(2, 3).sum(2)
    with pytest.raises(IndexError):
        torch.zeros(2, 3).sum(2)
    assert isinstance(ours.value, IndexError) and isinstance(ours.value, ValueError)


def test_integer_tensors_cannot_require_grad_type_error():
    with pytest.raises(TypeError):
        tg.tensor([1, 2], requires_grad=True)
    with pytest.raises(RuntimeError):
        torch.tensor([1, 2], requires_grad=True)


def test_mean_var_std_of_integers_are_float32():
    x = tg.tensor([[1, 2, 4], [0, 0, 3]])
    assert x.mean().dtype == np.float32 and x.mean().item() == pytest.approx(10 / 6)
    assert x.var(axis=1).dtype == np.float32 and x.std(dim=0).dtype == np.float32
    np.testing.assert_allclose(x.var(axis=1).data, np.var([[1, 2, 4], [0, 0, 3]], axis=1), rtol=1e-6)
    assert tg.tensor([True, False]).mean().item() == 0.5
    with pytest.raises(RuntimeError):
        torch.tensor([1, 2]).mean()


def test_gelu_softmax_of_integers_are_float32():
    ints = tg.tensor([[1, 2, 3]])
    for name in ["gelu", "softmax", "log_softmax"]:
        out = getattr(ints, name)()
        assert out.dtype == np.float32
        np.testing.assert_allclose(out.data, getattr(ints.float(), name)().data)
    with pytest.raises((RuntimeError, NotImplementedError)):
        torch.softmax(torch.tensor([[1, 2, 3]]), -1)


def test_var_std_default_to_ddof_0():
    x = np.array([1.0, 2.0, 4.0, 7.0])
    compare(lambda x: x.var(), lambda x: x.var(correction=0), x)
    compare(lambda x: x.std(), lambda x: x.std(correction=0), x)
    compare(lambda x: x.var(ddof=1), lambda x: x.var(), x)          # PyTorch's default
    compare(lambda x: x.std(correction=1), lambda x: x.std(), x)


def test_max_min_return_values_only():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
    (out,) = compare(lambda x: x.max(axis=1), lambda x: x.amax(dim=1), x)
    assert isinstance(out, tg.Tensor)
    compare(lambda x: x.min(dim=0, keepdim=True), lambda x: x.amin(dim=0, keepdim=True), x)
    # PyTorch's max(dim) gives (values, indices), its gradient going to one of the tied places
    values, indices = torch.tensor(x, requires_grad=True).max(dim=1)
    assert indices.dtype == torch.int64
    ours = tg.tensor(x, requires_grad=True)
    ours.max(axis=1).sum().backward()
    np.testing.assert_array_equal(ours.grad, [[0, 0.5, 0.5], [0.5, 0.5, 0]])   # ties share it


def test_split_by_a_count_makes_that_many_sections():
    x = np.arange(12.0).reshape(6, 2)
    outs = compare(lambda x: x.split(3), lambda x: torch.tensor_split(x, 3), x)
    assert [o.shape for o in outs] == [(2, 2)] * 3
    assert [tuple(p.shape) for p in torch.tensor(x).split(3)] == [(3, 2)] * 2    # PyTorch: pieces of 3
    compare(lambda x: x.split([1, 4]), lambda x: torch.tensor_split(x, [1, 4]), x)


def test_transpose_takes_a_permutation():
    """A trap for PyTorch code on matrices: x.transpose(0, 1) is the identity permutation."""
    x = np.arange(6.0).reshape(2, 3)
    compare(lambda x: x.transpose(1, 0), lambda x: x.transpose(0, 1), x)
    compare(lambda x: x.transpose(0, 1), lambda x: x, x)
    with pytest.warns(UserWarning, match="swapaxes"):   # and says so
        tg.zeros(2, 3).transpose(0, 1)
    compare(lambda x: x.swapaxes(0, 1), lambda x: x.transpose(0, 1), x)
    compare(lambda x: x.transpose(2, 0, 1), lambda x: x.permute(2, 0, 1), np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match="swapaxes"):
        tg.zeros(2, 3, 4).transpose(-2, -1)
    with warnings.catch_warnings():   # spellings that mean "keep the axes" in both say nothing
        warnings.simplefilter("error")
        tg.zeros(2, 3).swapaxes(0, 0), tg.zeros(2, 3).permute(0, 1), tg.zeros(2, 3).transpose((0, 1))


def test_empty_axis_tuple_reduces_nothing():
    x = np.arange(6.0).reshape(2, 3)
    compare(lambda x: x.sum(axis=()), lambda x: x * 1, x)
    assert torch.tensor(x).sum(dim=()).shape == ()


def test_cumsum_without_axis_flattens():
    x = np.arange(6.0).reshape(2, 3)
    compare(lambda x: x.cumsum(), lambda x: torch.cumsum(x.reshape(-1), 0), x)
    with pytest.raises(TypeError):
        torch.tensor(x).cumsum()


def test_integer_power_negative_tensor_exponent_refused():
    with pytest.raises(ValueError, match="pow"):
        tg.tensor([2, 3]) ** tg.tensor([-1, 2])
    assert (torch.tensor([2, 3]) ** torch.tensor([-1, 2])).tolist() == [0, 9]


def test_matmul_promotes_mixed_dtypes():
    a, b = np.ones((2, 3), np.float32), np.ones((3, 2), np.float64)
    ours_a, ours_b = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
    out = ours_a @ ours_b
    assert out.dtype == np.float64
    out.sum().backward()
    assert ours_a.grad.dtype == np.float32 and ours_b.grad.dtype == np.float64
    np.testing.assert_array_equal(out.data, np.full((2, 2), 3.0))
    assert (tg.tensor(np.ones((2, 3), np.int64)) @ tg.tensor(b)).dtype == np.float64   # int and float: the float one
    with pytest.raises(RuntimeError):
        torch.tensor(a) @ torch.tensor(b)


def test_size_is_the_number_of_elements():
    x = tg.zeros(2, 3)
    assert x.size == 6 == x.numel() == torch.zeros(2, 3).numel()
    assert x.shape == (2, 3) == tuple(torch.zeros(2, 3).size())


def test_negative_step_slices_work():
    x = np.arange(6.0).reshape(2, 3)
    compare(lambda x: x[:, ::-1], lambda x: torch.flip(x, [1]), x)
    compare(lambda x: x[::-1, ::-2], lambda x: torch.flip(x, [0, 1])[:, ::2], x)
    with pytest.raises(ValueError):
        torch.tensor(x)[:, ::-1]


def test_reduction_of_nothing_is_a_value_error():
    for op in ["max", "min", "argmax", "argmin"]:
        with pytest.raises(ValueError, match=op):
            getattr(tg.zeros(0, 3), op)(axis=0)
    with pytest.raises(IndexError):
        torch.zeros(0, 3).amax(dim=0)
    with pytest.raises(RuntimeError):
        torch.zeros(0, 3).amax()


def test_squeezing_an_axis_not_of_size_1_is_an_error():
    with pytest.raises(ValueError, match="squeeze"):
        tg.zeros(2, 3).squeeze(0)
    assert torch.zeros(2, 3).squeeze(0).shape == (2, 3)
    compare(lambda x: x.squeeze(1), lambda x: x.squeeze(1), np.zeros((2, 1, 3)))
