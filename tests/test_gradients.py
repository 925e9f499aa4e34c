"""Every op, gradient-checked in float64 against central finite differences (tg.gradcheck),
over a grid of shapes that broadcast and of axes, in the style of HIPS autograd's check_grads.
A few explicit values pin down what finite differences cannot see: ties in max/min/maximum
and repeated indices."""
import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import tensorgrad as tg

# ---- shape grids ------------------------------------------------------------------------
SHAPES = [(), (3,), (2, 3), (1, 3), (2, 1, 3)]
BROADCAST_PAIRS = [
    ((), ()), ((3,), ()), ((), (3,)), ((2, 3), (3,)), ((3,), (2, 3)), ((2, 3), (1, 3)),
    ((1, 3), (2, 1)), ((2, 1, 3), (1, 3)), ((2, 1, 3), (2, 3)), ((2, 3), (2, 3)),
]
REDUCE_SHAPES = [(), (3,), (2, 3), (1, 3), (2, 1, 3), (2, 3, 4)]
AXES = [None, 0, 1, -1, (0, 1), (0, -1), ()]


def ids(value):
    return str(value).replace(" ", "")


def valid_axis(axis, ndim):
    axes = () if axis is None else axis if isinstance(axis, tuple) else (axis,)
    if ndim == 0 and axis is not None:
        return False
    normalized = [a % ndim for a in axes] if ndim else []
    return all(-ndim <= a < ndim for a in axes) and len(set(normalized)) == len(normalized)


def leaf(array):
    return tg.tensor(np.asarray(array, dtype=np.float64))


# ---- elementwise functions of one tensor -------------------------------------------------
UNARY = {
    "neg": (lambda x: -x, {}),
    "exp": (lambda x: x.exp(), {}),
    "log": (lambda x: x.log(), {"positive": True}),
    "sqrt": (lambda x: x.sqrt(), {"positive": True}),
    "abs": (lambda x: x.abs(), {"away_from_zero": True}),
    "tanh": (lambda x: x.tanh(), {}),
    "sigmoid": (lambda x: x.sigmoid(), {}),
    "relu": (lambda x: x.relu(), {"away_from_zero": True}),
    "gelu": (lambda x: x.gelu(), {}),
    "square": (lambda x: x ** 2, {}),
    "cube": (lambda x: x ** 3, {}),
    "pow_half": (lambda x: x ** 0.5, {"positive": True}),
    "pow_negative_fraction": (lambda x: x ** -1.5, {"positive": True}),
    "add_scalar": (lambda x: x + 2.5, {}),
    "sub_scalar": (lambda x: x - 2.5, {}),
    "mul_scalar": (lambda x: x * -1.5, {}),
    "div_scalar": (lambda x: x / 4.0, {}),
    "rsub": (lambda x: 2 - x, {}),
    "rdiv": (lambda x: 2 / x, {"positive": True}),
    "rpow": (lambda x: 2 ** x, {}),
    "rmul": (lambda x: 3 * x, {}),
    "radd": (lambda x: 3 + x, {}),
}


@pytest.mark.parametrize("shape", SHAPES, ids=ids)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_elementwise_op_gradient_matches_finite_differences(name, shape, rand):
    fn, data_kind = UNARY[name]
    assert tg.gradcheck(fn, leaf(rand(shape, seed=1, **data_kind)))


def test_gelu_gradient_is_checked_across_its_curved_region():
    x = leaf(np.linspace(-4, 4, 41))
    assert tg.gradcheck(lambda t: t.gelu(), x)


def test_sigmoid_and_tanh_gradients_hold_for_large_inputs():
    x = leaf([-30.0, -5.0, 0.0, 5.0, 30.0])
    assert tg.gradcheck(lambda t: t.sigmoid(), x)
    assert tg.gradcheck(lambda t: t.tanh(), x)


# ---- binary ops with broadcasting ---------------------------------------------------------
BINARY = {
    "add": (lambda a, b: a + b, {}, {}),
    "sub": (lambda a, b: a - b, {}, {}),
    "mul": (lambda a, b: a * b, {}, {}),
    "div": (lambda a, b: a / b, {}, {"positive": True}),
    "pow": (lambda a, b: a ** b, {"positive": True}, {}),
    "maximum": (lambda a, b: tg.maximum(a, b), {}, {}),
}


@pytest.mark.parametrize("shapes", BROADCAST_PAIRS, ids=ids)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_broadcasting_binary_op_gradient_matches_finite_differences(name, shapes, rand):
    fn, kind_a, kind_b = BINARY[name]
    a = leaf(rand(shapes[0], seed=2, **kind_a))
    b = leaf(rand(shapes[1], seed=3, **kind_b))
    assert tg.gradcheck(fn, a, b)


@pytest.mark.parametrize("shapes", BROADCAST_PAIRS, ids=ids)
def test_where_gradient_flows_to_the_chosen_side_under_broadcasting(shapes, rand):
    a, b = leaf(rand(shapes[0], seed=4)), leaf(rand(shapes[1], seed=5))
    out_shape = np.broadcast_shapes(shapes[0], shapes[1])
    condition = np.random.default_rng(6).random(out_shape) > 0.5
    assert tg.gradcheck(lambda x, y: tg.where(condition, x, y), a, b)


def test_where_condition_may_broadcast_against_both_values(rand):
    condition = np.array([[True], [False]])                    # (2, 1)
    a, b = leaf(rand((3,), seed=1)), leaf(rand((1, 3), seed=2))
    assert tg.gradcheck(lambda x, y: tg.where(condition, x, y), a, b)
    x, y = tg.tensor(np.ones(3), requires_grad=True), tg.tensor(np.ones((1, 3)), requires_grad=True)
    tg.where(condition, x, y).sum().backward()
    np.testing.assert_array_equal(x.grad, [1.0, 1.0, 1.0])     # row 0 chose x
    np.testing.assert_array_equal(y.grad, [[1.0, 1.0, 1.0]])   # row 1 chose y


def test_pow_with_tensor_exponent_differentiates_both_base_and_exponent(rand):
    base = leaf(rand((2, 3), seed=7, positive=True))
    exponent = leaf(rand((3,), seed=8))
    assert tg.gradcheck(lambda a, b: a ** b, base, exponent)
    base.requires_grad = exponent.requires_grad = True
    (base ** exponent).sum().backward()
    np.testing.assert_allclose(exponent.grad, (base.data ** exponent.data * np.log(base.data)).sum(0))


def test_pow_with_exponent_zero_has_zero_gradient_even_at_zero():
    # polynomial features x ** [0, 1, 2] at x = 0: d(x^0)/dx = 0, not 0 * 0^-1 = nan
    x = tg.tensor(np.array([0.0, 0.0, 0.0]), requires_grad=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        (x ** tg.tensor(np.array([0.0, 1.0, 2.0]))).sum().backward()
    np.testing.assert_array_equal(x.grad, [0.0, 1.0, 0.0])


def test_pow_gradient_for_the_exponent_is_zero_where_the_base_is_zero():
    # 0 ** y = 0 for every y > 0, so d/dy = 0 there (as torch gives), not 0 * log(0) = nan
    base = tg.tensor(np.array([0.0, 2.0]))
    y = tg.tensor(np.array([1.5, 1.5]), requires_grad=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        (base ** y).sum().backward()
    np.testing.assert_allclose(y.grad, [0.0, 2.0 ** 1.5 * np.log(2.0)])


@pytest.mark.parametrize("fn", [
    lambda x, c: c + x, lambda x, c: c - x, lambda x, c: c * x, lambda x, c: c / x,
    lambda x, c: c ** x, lambda x, c: x ** c, lambda x, c: x - c,
], ids=["radd", "rsub", "rmul", "rtruediv", "rpow", "pow", "sub"])
def test_ndarray_on_either_side_of_a_tensor_gradient(fn, rand):
    constant = rand((2, 3), seed=9, positive=True)
    x = leaf(rand((3,), seed=10, positive=True))
    assert tg.gradcheck(lambda t: fn(t, constant), x)


def test_ndarray_matmul_tensor_gradient(rand):
    constant = rand((4, 2), seed=11)
    assert tg.gradcheck(lambda t: constant @ t, leaf(rand((2, 3), seed=12)))


# ---- maximum / max / min ties: the shared gradient is checked by value ----------------------
def test_maximum_ties_share_the_gradient_half_each():
    a = tg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    b = tg.tensor(np.array([1.0, 0.0, 5.0]), requires_grad=True)
    tg.maximum(a, b).backward(np.array([2.0, 2.0, 2.0]))
    np.testing.assert_array_equal(a.grad, [1.0, 2.0, 0.0])
    np.testing.assert_array_equal(b.grad, [1.0, 0.0, 2.0])


def test_maximum_with_a_scalar_is_relu_like_and_ties_share():
    x = tg.tensor(np.array([-1.0, 0.0, 2.0]), requires_grad=True)
    tg.maximum(x, 0.0).sum().backward()
    np.testing.assert_array_equal(x.grad, [0.0, 0.5, 1.0])


def test_maximum_ties_under_broadcasting_sum_the_halves():
    a = tg.tensor(np.array([[1.0, 1.0], [1.0, 0.0]]), requires_grad=True)
    b = tg.tensor(np.array([1.0]), requires_grad=True)
    tg.maximum(a, b).sum().backward()
    np.testing.assert_array_equal(a.grad, [[0.5, 0.5], [0.5, 0.0]])
    np.testing.assert_array_equal(b.grad, [2.5])   # 3 halves from ties + 1 outright win


def test_max_ties_share_the_gradient_equally_along_the_axis():
    x = tg.tensor(np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]), requires_grad=True)
    x.max(axis=1).backward(np.array([1.0, 3.0]))
    np.testing.assert_allclose(x.grad, [[0.0, 0.5, 0.5], [1.0, 1.0, 1.0]])


def test_min_ties_share_the_gradient_equally_over_the_whole_tensor():
    x = tg.tensor(np.array([[0.0, 5.0], [0.0, 0.0]]), requires_grad=True)
    x.min().backward()
    np.testing.assert_allclose(x.grad, [[1 / 3, 0.0], [1 / 3, 1 / 3]])


def test_max_with_keepdims_and_ties_over_a_tuple_of_axes():
    x = tg.tensor(np.array([[[4.0, 1.0], [4.0, 0.0]], [[2.0, 9.0], [9.0, 9.0]]]), requires_grad=True)
    out = x.max(axis=(1, 2), keepdims=True)
    assert out.shape == (2, 1, 1)
    out.sum().backward()
    np.testing.assert_allclose(x.grad, [[[0.5, 0.0], [0.5, 0.0]], [[0.0, 1 / 3], [1 / 3, 1 / 3]]])


# ---- reductions over the shape x axis x keepdims grid --------------------------------------
REDUCTIONS = {
    "sum": lambda x, axis, keepdims: x.sum(axis=axis, keepdims=keepdims),
    "mean": lambda x, axis, keepdims: x.mean(axis=axis, keepdims=keepdims),
    "max": lambda x, axis, keepdims: x.max(axis=axis, keepdims=keepdims),
    "min": lambda x, axis, keepdims: x.min(axis=axis, keepdims=keepdims),
    "var": lambda x, axis, keepdims: x.var(axis=axis, keepdims=keepdims),
}
REDUCTION_GRID = [(shape, axis, keepdims) for shape in REDUCE_SHAPES for axis in AXES
                  for keepdims in (False, True) if valid_axis(axis, len(shape))]


@pytest.mark.parametrize("shape,axis,keepdims", REDUCTION_GRID, ids=ids)
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_gradient_matches_finite_differences(name, shape, axis, keepdims, rand):
    fn = REDUCTIONS[name]
    x = leaf(rand(shape, seed=13))   # continuous random values: no ties in max/min
    out = fn(x, axis, keepdims)
    expected = getattr(np, name)(x.data, axis=axis, keepdims=keepdims)
    assert out.shape == np.shape(expected)
    np.testing.assert_allclose(out.data, expected, rtol=1e-12, atol=1e-12)
    assert tg.gradcheck(lambda t: fn(t, axis, keepdims), x)


def test_reductions_accept_an_axis_list_like_a_tuple(rand):
    x = leaf(rand((2, 3, 4), seed=14))
    assert tg.gradcheck(lambda t: t.sum(axis=[0, 2]), x)
    assert tg.gradcheck(lambda t: t.mean(axis=[0, 2], keepdims=True), x)


# ---- softmax and log_softmax --------------------------------------------------------------
SOFTMAX_CASES = [((3,), -1), ((3,), 0), ((2, 3), -1), ((2, 3), 0), ((2, 3), 1),
                 ((2, 3, 4), 1), ((2, 3, 4), -1), ((2, 3, 4), 0), ((2, 3, 4), (1, 2))]


@pytest.mark.parametrize("shape,axis", SOFTMAX_CASES, ids=ids)
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_family_gradient_on_several_axes(name, shape, axis, rand):
    x = leaf(rand(shape, seed=15) * 3)
    assert tg.gradcheck(lambda t: getattr(t, name)(axis=axis), x)


def test_softmax_gradient_is_stable_for_large_logits():
    x = leaf([[1000.0, 1001.0, 999.0], [-1000.0, -1000.5, -999.0]])
    assert np.isfinite(x.softmax().data).all() and np.isfinite(x.log_softmax().data).all()
    assert tg.gradcheck(lambda t: t.softmax(), x)
    assert tg.gradcheck(lambda t: t.log_softmax(), x)


# ---- matmul in all its forms -----------------------------------------------------------------
MATMUL_SHAPES = [
    ((2, 3), (3, 4)),            # 2-d @ 2-d
    ((2, 2, 3), (3, 4)),         # batched 3-d @ shared 2-d weights
    ((2, 3), (2, 3, 4)),         # 2-d @ batched 3-d
    ((2, 2, 3), (2, 3, 4)),      # batch @ batch
    ((2, 1, 2, 3), (3, 3, 2)),   # 4-d with a batch axis that broadcasts against 3-d
    ((1, 2, 3), (2, 1, 3, 2)),   # batch broadcast the other way
    ((3,), (3, 4)),              # 1-d (row vector) on the left
    ((2, 3), (3,)),              # 1-d (column vector) on the right
    ((3,), (3,)),                # 1-d @ 1-d: a dot product, 0-d result
    ((3,), (2, 3, 4)),           # 1-d @ batched
    ((2, 2, 3), (3,)),           # batched @ 1-d
    ((2, 1, 2, 3), (3,)),        # 4-d @ 1-d
]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=ids)
def test_matmul_gradient_in_all_its_forms(shapes, rand):
    a, b = leaf(rand(shapes[0], seed=16)), leaf(rand(shapes[1], seed=17))
    out = a @ b
    expected = np.matmul(a.data, b.data)
    assert out.shape == expected.shape
    np.testing.assert_allclose(out.data, expected, rtol=1e-12)
    assert tg.gradcheck(lambda x, y: x @ y, a, b)


def test_matmul_of_a_tensor_with_itself_accumulates_both_sides(rand):
    assert tg.gradcheck(lambda x: x @ x, leaf(rand((3, 3), seed=18)))
    assert tg.gradcheck(lambda x: x @ x.T, leaf(rand((2, 3), seed=19)))


# ---- indexing -------------------------------------------------------------------------------
INDICES = {
    "int": 1,
    "negative_int": -1,
    "slice": slice(1, None),
    "step_slice": slice(None, None, -2),
    "row_and_slice": (1, slice(0, 2)),
    "ellipsis": (Ellipsis, 0),
    "new_axis": (None, slice(None), 1),
    "int_list": [0, 2, 0],
    "int_array_2d": np.array([[0, 1], [1, 1]]),
    "two_int_arrays": (np.array([0, 1, 0]), np.array([2, 2, 2])),
    "slice_and_repeated_ints": (slice(None), [0, 0, 3]),
    "bool_mask": np.array([[True, False, True, False], [False, False, True, True], [True] * 4]),
    "bool_row_mask": np.array([True, False, True]),
}


@pytest.mark.parametrize("name", sorted(INDICES))
def test_getitem_gradient(name, rand):
    index = INDICES[name]
    x = leaf(rand((3, 4), seed=20))
    np.testing.assert_array_equal(x[index].data, x.data[index])
    assert tg.gradcheck(lambda t: t[index], x)


def test_getitem_with_repeated_indices_accumulates_gradients():
    x = tg.tensor(np.zeros(4), requires_grad=True)
    x[[0, 0, 2, 0, 3, 3]].backward(np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]))
    np.testing.assert_array_equal(x.grad, [7.0, 0.0, 3.0, 11.0])


def test_getitem_with_an_int_tensor_index_is_an_embedding_lookup():
    table = tg.tensor(np.arange(12.0).reshape(4, 3), requires_grad=True)
    ids_ = tg.tensor([[1, 1], [3, 1]])
    rows = table[ids_]
    assert rows.shape == (2, 2, 3)
    np.testing.assert_array_equal(rows.data, table.data[[[1, 1], [3, 1]]])
    rows.sum().backward()
    np.testing.assert_array_equal(table.grad, [[0, 0, 0], [3, 3, 3], [0, 0, 0], [1, 1, 1]])
    assert tg.gradcheck(lambda t: t[ids_], leaf(np.random.default_rng(0).standard_normal((4, 3))))


def test_getitem_with_a_bool_tensor_mask(rand):
    x = leaf(rand((2, 3), seed=21))
    mask = x > 0
    assert tg.gradcheck(lambda t: t[mask] * 2, x)


def test_getitem_with_a_0d_int_tensor_index(rand):
    x = leaf(rand((3, 2), seed=22))
    assert tg.gradcheck(lambda t: t[tg.tensor(2)], x)


# ---- masked_fill ---------------------------------------------------------------------------
@pytest.mark.parametrize("mask_shape", [(2, 3), (3,), (1, 3), (2, 1), ()], ids=ids)
def test_masked_fill_gradient_with_broadcasting_masks(mask_shape, rand):
    x = leaf(rand((2, 3), seed=23))
    mask = np.random.default_rng(24).random(mask_shape) > 0.5
    out = x.masked_fill(mask, 0.25)
    np.testing.assert_array_equal(out.data, np.where(mask, 0.25, x.data))
    assert tg.gradcheck(lambda t: t.masked_fill(mask, 0.25), x)


def test_masked_fill_gradient_is_zero_where_filled():
    x = tg.tensor(np.ones((2, 2)), requires_grad=True)
    mask = np.array([[True, False], [False, True]])
    out = x.masked_fill(mask, float("-inf"))
    np.testing.assert_array_equal(out.data, [[-np.inf, 1.0], [1.0, -np.inf]])
    out.backward(np.full((2, 2), 5.0))
    np.testing.assert_array_equal(x.grad, [[0.0, 5.0], [5.0, 0.0]])


# ---- shape ops ------------------------------------------------------------------------------
SHAPE_OPS = {
    "reshape_flat": ((2, 3), lambda t: t.reshape(6)),
    "reshape_minus_one": ((2, 3), lambda t: t.reshape(-1, 2)),
    "reshape_tuple": ((2, 3), lambda t: t.reshape((3, 1, 2))),
    "reshape_0d_to_1d": ((), lambda t: t.reshape(1)),
    "transpose_reverses": ((1, 2, 3), lambda t: t.transpose()),
    "transpose_permutes": ((1, 2, 3), lambda t: t.transpose(1, 0, 2)),
    "transpose_tuple": ((1, 2, 3), lambda t: t.transpose((2, 0, 1))),
    "transpose_negative_axes": ((1, 2, 3), lambda t: t.transpose(-1, 0, 1)),
    "T": ((2, 3), lambda t: t.T),
}


@pytest.mark.parametrize("name", sorted(SHAPE_OPS))
def test_reshape_and_transpose_gradients(name, rand):
    shape, fn = SHAPE_OPS[name]
    assert tg.gradcheck(fn, leaf(rand(shape, seed=25)))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cat_gradient_reaches_each_input(axis, rand):
    shapes = {0: [(1, 3), (2, 3), (3, 3)], 1: [(2, 1), (2, 3), (2, 2)], -1: [(2, 2), (2, 1), (2, 4)]}[axis]
    inputs = [leaf(rand(s, seed=26 + i)) for i, s in enumerate(shapes)]
    assert tg.gradcheck(lambda *ts: tg.cat(ts, axis=axis), *inputs)


def test_cat_accepts_the_same_tensor_twice_and_adds_its_gradients(rand):
    x = leaf(rand((2,), seed=30))
    assert tg.gradcheck(lambda t: tg.cat([t, t * 2, t], axis=0), x)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_stack_gradient_reaches_each_input(axis, rand):
    inputs = [leaf(rand((2, 3), seed=31 + i)) for i in range(3)]
    assert tg.gradcheck(lambda *ts: tg.stack(ts, axis=axis), *inputs)


@pytest.mark.parametrize("sections,axis", [
    (2, 0), (3, 1), (1, -1), ([1, 3], 1), ([2], 0), ([1, 2, 10], -1), ([0, 2], 1),
], ids=ids)
def test_split_gradient_reaches_every_piece(sections, axis, rand):
    x = leaf(rand((4, 6), seed=34))

    def weighted_pieces(t):   # each piece scaled differently, so a misrouted gradient is caught
        return tg.cat([p * (i + 1) for i, p in enumerate(t.split(sections, axis=axis))], axis=axis)
    assert tg.gradcheck(weighted_pieces, x)


def test_a_composed_network_gradient(rand):
    x, w1, b1 = leaf(rand((4, 3), seed=35)), leaf(rand((3, 5), seed=36)), leaf(rand((5,), seed=37))
    w2, targets = leaf(rand((5, 2), seed=38)), np.array([0, 1, 1, 0])

    def loss(x, w1, b1, w2):
        logits = (x @ w1 + b1).gelu() @ w2
        return -logits.log_softmax(axis=-1)[np.arange(4), targets].mean()
    assert tg.gradcheck(loss, x, w1, b1, w2)


# ---- hypothesis: random broadcastable shapes -------------------------------------------------


@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3),
       name=st.sampled_from(sorted(BINARY)), seed=st.integers(0, 2 ** 16))
def test_binary_ops_gradcheck_on_random_broadcastable_shapes(shapes, name, seed):
    fn, kind_a, kind_b = BINARY[name]
    shape_a, shape_b = shapes.input_shapes
    a = leaf(np.random.default_rng(seed).standard_normal(shape_a))
    b = leaf(np.random.default_rng(seed + 1).standard_normal(shape_b))
    if kind_a:
        a = leaf(np.abs(a.data) + 0.5)
    if kind_b:
        b = leaf(np.abs(b.data) + 0.5)
    assert fn(a, b).shape == shapes.result_shape
    assert tg.gradcheck(fn, a, b)


@st.composite
def shape_and_axis(draw):
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4))
    ndim = len(shape)
    axis = draw(st.one_of(
        st.none(),
        st.integers(-ndim, ndim - 1) if ndim else st.none(),
        hnp.valid_tuple_axes(ndim, min_size=1) if ndim else st.none()))
    return shape, axis


@given(case=shape_and_axis(), keepdims=st.booleans(), name=st.sampled_from(sorted(REDUCTIONS)),
       seed=st.integers(0, 2 ** 16))
def test_reductions_gradcheck_on_random_shapes_and_axes(case, keepdims, name, seed):
    shape, axis = case
    x = leaf(np.random.default_rng(seed).standard_normal(shape))
    fn = REDUCTIONS[name]
    out = fn(x, axis, keepdims)
    np.testing.assert_allclose(out.data, getattr(np, name)(x.data, axis=axis, keepdims=keepdims),
                               rtol=1e-12, atol=1e-12)
    assert tg.gradcheck(lambda t: fn(t, axis, keepdims), x)
