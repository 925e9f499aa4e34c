"""Bad input gets a clear exception that names the op, the shapes or values involved, and
what was expected. And gradcheck fails loudly, with a report, on a wrong gradient."""
import re

import numpy as np
import pytest

import tensorgrad as tg


def f64(data, requires_grad=False):
    return tg.tensor(np.asarray(data, dtype=np.float64), requires_grad=requires_grad)


def message(error_info):
    return str(error_info.value)


# ---- shapes -----------------------------------------------------------------------------------
@pytest.mark.parametrize("left,right", [((2, 3), (2, 3)), ((2, 3), (4,)), ((3,), (4,)), ((2, 2, 3), (2, 4, 5))],
                         ids=str)
def test_matmul_shape_mismatch_names_matmul_and_both_shapes(left, right):
    with pytest.raises(ValueError) as error:
        f64(np.ones(left)) @ f64(np.ones(right))
    text = message(error)
    assert "matmul" in text and str(left) in text and str(right) in text


def test_matmul_of_a_0d_tensor_is_a_clear_error():
    with pytest.raises(ValueError, match="matmul"):
        f64(2.0) @ f64(np.ones((2, 2)))


@pytest.mark.parametrize("op,fn", [
    ("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("mul", lambda a, b: a * b),
    ("div", lambda a, b: a / b), ("pow", lambda a, b: a ** b), ("maximum", tg.maximum),
])
def test_broadcasting_mismatch_names_the_op_and_both_shapes(op, fn):
    with pytest.raises(ValueError) as error:
        fn(f64(np.ones((2, 3))), f64(np.ones((4,))))
    text = message(error)
    assert op in text and "(2, 3)" in text and "(4,)" in text and "broadcast" in text


def test_broadcasting_mismatch_with_an_ndarray_on_the_left():
    with pytest.raises(ValueError, match=r"add.*\(3,\).*\(2,\)"):
        np.ones(3) + f64(np.ones(2))


def test_cat_mismatch_names_cat_the_shapes_and_the_axis():
    with pytest.raises(ValueError) as error:
        tg.cat([f64(np.ones((2, 3))), f64(np.ones((2, 2)))], axis=0)
    text = message(error)
    assert "cat" in text and "(2, 3)" in text and "(2, 2)" in text and "axis 0" in text


def test_cat_of_nothing_and_stack_of_unequal_shapes_are_clear_errors():
    with pytest.raises(ValueError, match="cat"):
        tg.cat([])
    with pytest.raises(ValueError, match=r"stack.*\(2,\).*\(3,\)"):
        tg.stack([f64([1.0, 2.0]), f64([1.0, 2.0, 3.0])])


def test_stack_of_nothing_is_a_clear_error():
    with pytest.raises(ValueError, match="stack"):
        tg.stack([])


@pytest.mark.parametrize("op", ["masked_fill", "where"])
@pytest.mark.parametrize("mask", [np.ones((2, 3)), np.ones((2, 3), dtype=np.int64), tg.ones(2, 3)],
                         ids=["float_array", "int_array", "float_tensor"])
def test_a_non_boolean_mask_is_a_type_error_mentioning_boolean(op, mask):
    x = f64(np.ones((2, 3)))
    with pytest.raises(TypeError) as error:
        x.masked_fill(mask, 0.0) if op == "masked_fill" else tg.where(mask, x, 0.0)
    assert op in message(error) and "boolean" in message(error)


def test_a_mask_that_does_not_broadcast_names_both_shapes():
    x = f64(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"masked_fill.*\(4,\).*\(2, 3\)"):
        x.masked_fill(np.ones(4, dtype=bool), 0.0)
    with pytest.raises(ValueError, match=r"masked_fill.*\(2, 2, 3\).*\(2, 3\)"):
        x.masked_fill(np.ones((2, 2, 3), dtype=bool), 0.0)   # would grow x: not allowed
    with pytest.raises(ValueError, match=r"where.*\(4,\).*\(2, 3\)"):
        tg.where(np.ones(4, dtype=bool), x, x)


@pytest.mark.parametrize("index", [5, (0, 3), -3, [0, 2], (slice(None), [1, 3])], ids=str)
def test_an_index_out_of_range_is_an_index_error_naming_getitem_and_the_shape(index):
    with pytest.raises(IndexError) as error:
        f64(np.ones((2, 3)))[index]
    assert "getitem" in message(error) and "(2, 3)" in message(error)


def test_a_float_index_tensor_is_an_index_error_naming_getitem():
    with pytest.raises(IndexError, match="getitem"):
        f64(np.ones(3))[tg.tensor([0.0, 1.0])]


@pytest.mark.parametrize("shape", [(4, 2), (-1, 4), (7,)], ids=str)
def test_reshape_to_a_wrong_size_names_both_shapes_and_the_element_count(shape):
    with pytest.raises(ValueError) as error:
        f64(np.ones((2, 3))).reshape(*shape)
    text = message(error)
    assert "reshape" in text and "(2, 3)" in text and "6 elements" in text and str(shape) in text


def test_transpose_with_axes_that_are_not_a_permutation():
    with pytest.raises(ValueError, match=r"transpose.*\(1, 1\).*\(2, 3\)"):
        f64(np.ones((2, 3))).transpose(1, 1)


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "var"])
@pytest.mark.parametrize("axis", [2, -3, (0, 5)], ids=str)
def test_a_bad_axis_in_a_reduction_names_the_op_the_axis_and_the_rank(op, axis):
    with pytest.raises(ValueError) as error:
        getattr(f64(np.ones((2, 3))), op)(axis=axis)
    text = message(error)
    assert op in text
    assert "axis" in text and "2 axes" in text


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_a_bad_axis_in_softmax_names_the_op(op):
    with pytest.raises(ValueError, match=op):
        getattr(f64(np.ones((2, 3))), op)(axis=2)


def test_split_into_unequal_sections_names_the_axis_length_and_count():
    with pytest.raises(ValueError) as error:
        f64(np.ones((2, 5))).split(2, axis=1)
    text = message(error)
    assert "split" in text and "length 5" in text and "2 equal sections" in text
    with pytest.raises(ValueError, match="split"):
        f64(np.ones(4)).split(0)


def test_split_along_a_missing_axis_names_split():
    with pytest.raises((ValueError, IndexError), match="split"):
        f64(np.ones((2, 4))).split(2, axis=2)


def test_requires_grad_on_an_int_tensor_is_a_type_error_naming_the_dtype():
    with pytest.raises(TypeError, match="int64"):
        tg.tensor([1, 2, 3], requires_grad=True)


def test_backward_twice_without_retain_graph_names_the_op_and_the_way_out():
    x = f64([1.0], requires_grad=True)
    y = x.exp().sum()
    y.backward()
    with pytest.raises(RuntimeError) as error:
        y.backward()
    assert "'sum'" in message(error) and "retain_graph=True" in message(error)


def test_non_scalar_backward_says_how_to_fix_it():
    with pytest.raises(RuntimeError) as error:
        (f64(np.ones((2, 2)), requires_grad=True) * 2).backward()
    assert "(2, 2)" in message(error) and "backward(grad)" in message(error) and ".sum()" in message(error)


# ---- gradcheck's own failure report -------------------------------------------------------------
def wrong_square(x):
    """x^2 with a deliberately wrong vjp: forgets the factor 2."""
    return tg.make_op("wrong_square", x.data ** 2, (x,), (lambda g: g * x.data,))


def test_gradcheck_raises_gradcheck_error_on_a_wrong_vjp_with_a_full_report():
    x = f64([1.0, 2.0, 3.0])
    with pytest.raises(tg.GradcheckError) as error:
        tg.gradcheck(lambda t: wrong_square(t).sum(), x)
    text = message(error)
    assert isinstance(error.value, AssertionError)
    assert "input 0" in text and "(3,)" in text and "3 of 3 elements differ" in text
    assert "index (2,)" in text   # the worst element: the largest x
    analytic = float(re.search(r"analytic (\S+),", text).group(1))
    numeric = float(re.search(r"numeric (\S+) ", text).group(1))
    assert numeric == pytest.approx(2 * analytic, rel=1e-4)   # the missing factor 2, measured


def test_gradcheck_names_the_input_whose_gradient_is_wrong():
    a, b = f64([0.5, 1.5]), f64([[1.0, -1.0], [2.0, 0.5]])
    with pytest.raises(tg.GradcheckError) as error:
        tg.gradcheck(lambda p, q: p * 2 + wrong_square(q).sum(axis=0), a, b)
    assert "input 1" in message(error) and "input 0" not in message(error)
    assert "(2, 2)" in message(error)


def test_gradcheck_random_projection_catches_a_vjp_that_mixes_up_output_elements():
    # the vjp reverses g: with an all-ones upstream it would look right
    x = f64([1.0, 2.0, 3.0])
    mixed_up = lambda t: tg.make_op("double", t.data * 2, (t,), (lambda g: 2 * g[::-1],))
    assert np.array_equal(mixed_up(f64([1.0, 2.0, 3.0], True)).data, [2.0, 4.0, 6.0])
    with pytest.raises(tg.GradcheckError, match="input 0"):
        tg.gradcheck(mixed_up, x)


def test_gradcheck_on_a_non_scalar_output_returns_true():
    x, w = f64(np.arange(6.0).reshape(2, 3) / 6), f64(np.ones((3, 4)) * 0.3)
    assert tg.gradcheck(lambda a, b: (a @ b).tanh(), x, w) is True


def test_gradcheck_converts_float32_and_plain_inputs_to_float64_and_passes_ints_through():
    x32 = tg.tensor([0.5, 1.0, 2.0])
    ids = tg.tensor([2, 0])
    assert tg.gradcheck(lambda t, i: t[i].exp(), x32, ids) is True
    assert tg.gradcheck(lambda t: t.log(), [1.0, 2.0]) is True
    assert x32.dtype == np.float32 and not x32.requires_grad   # the caller's tensor is untouched


def test_gradcheck_restores_requires_grad_and_grad_of_float64_inputs():
    x = f64([1.0, 2.0])
    assert tg.gradcheck(lambda t: t * t, x)
    assert not x.requires_grad and x.grad is None
    np.testing.assert_array_equal(x.data, [1.0, 2.0])   # perturbations undone


def test_gradcheck_refuses_a_float32_output_with_a_clear_error():
    float32_weights = tg.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match="float64"):
        tg.gradcheck(lambda t: float32_weights * 2, f64([1.0, 2.0]))
