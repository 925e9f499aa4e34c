"""What the engine promises beyond gradients (DESIGN.md): dtype rules, numpy semantics of
var/split/reshape/transpose/indexing, comparisons, fused ops against their composed twins,
and the small conveniences (repr, item, numpy, detach, ndarray on the left)."""
import numpy as np
import pytest

import tensorgrad as tg


# ---- dtype rules ----------------------------------------------------------------------------
@pytest.mark.parametrize("data", [1.0, [1.0, 2.0], [[1.5], [2.5]], 3])
def test_python_numbers_make_float32_or_int_tensors(data):
    t = tg.tensor(data)
    assert t.dtype.kind == "i" if data == 3 else t.dtype == np.float32
    assert tg.Tensor(data).dtype == t.dtype


@pytest.mark.parametrize("array", [np.array(2.0), np.array([1.0, 2.0]), np.ones((2, 3))], ids=["0d", "1d", "2d"])
def test_float64_arrays_stay_float64(array):
    assert tg.tensor(array).dtype == np.float64
    assert tg.Tensor(array).dtype == np.float64
    assert (tg.tensor(array) * 2.0 + 1).dtype == np.float64


def test_constructors_default_to_float32_and_accept_a_dtype():
    assert tg.zeros(2, 3).dtype == tg.ones((2, 3)).dtype == tg.randn(2, 3).dtype == np.float32
    assert tg.zeros(2, 3).shape == tg.ones((2, 3)).shape == tg.randn(2, 3).shape == (2, 3)
    assert tg.zeros(2, dtype=np.float64).dtype == np.float64
    assert tg.randn(4, seed=1, dtype=np.float64).dtype == np.float64
    assert tg.tensor([1, 2], dtype=np.float64).dtype == np.float64


def test_randn_with_the_same_seed_gives_the_same_numbers():
    np.testing.assert_array_equal(tg.randn(3, 4, seed=7).data, tg.randn(3, 4, seed=7).data)
    assert not np.array_equal(tg.randn(3, 4, seed=7).data, tg.randn(3, 4, seed=8).data)


def test_tensor_copies_its_data():
    array = np.ones(3)
    t = tg.tensor(array)
    array[0] = 5.0
    assert t.data[0] == 1.0


SCALARS = [2, 2.0, np.float64(2.0), np.float32(2.0), np.int64(2), np.float64(0.5)]
MASK = np.array([[True, False, True], [False, True, False]])

# every op, with python and numpy scalars wherever it takes one
FLOAT32_OPS = {
    "add": lambda x, s: x + s, "radd": lambda x, s: s + x,
    "sub": lambda x, s: x - s, "rsub": lambda x, s: s - x,
    "mul": lambda x, s: x * s, "rmul": lambda x, s: s * x,
    "div": lambda x, s: x / s, "rdiv": lambda x, s: s / x,
    "pow": lambda x, s: x ** s, "rpow": lambda x, s: s ** x,
    "neg": lambda x, s: -x,
    "matmul": lambda x, s: x @ x.T * s,
    "sum": lambda x, s: x.sum(axis=0) * s, "mean": lambda x, s: x.mean(axis=1, keepdims=True) + s,
    "max": lambda x, s: x.max() - s, "min": lambda x, s: x.min(axis=0) / s,
    "var": lambda x, s: x.var(axis=-1) * s,
    "exp": lambda x, s: (x * s).exp(), "log": lambda x, s: (x + s).log(),
    "sqrt": lambda x, s: (x * s).sqrt(), "abs": lambda x, s: (x - s).abs(),
    "tanh": lambda x, s: (x * s).tanh(), "sigmoid": lambda x, s: (x - s).sigmoid(),
    "relu": lambda x, s: (x - s).relu(), "gelu": lambda x, s: (x * s).gelu(),
    "softmax": lambda x, s: (x * s).softmax(axis=0), "log_softmax": lambda x, s: (x / s).log_softmax(),
    "reshape": lambda x, s: x.reshape(-1) * s, "transpose": lambda x, s: x.transpose() + s,
    "getitem": lambda x, s: x[[0, 0], 1:] * s, "getitem_mask": lambda x, s: x[MASK] * s,
    "masked_fill": lambda x, s: x.masked_fill(MASK, s),
    "where_scalar_b": lambda x, s: tg.where(MASK, x, s), "where_scalar_a": lambda x, s: tg.where(MASK, s, x),
    "maximum": lambda x, s: tg.maximum(x, s), "maximum_scalar_first": lambda x, s: tg.maximum(s, x),
    "cat": lambda x, s: tg.cat([x, x * s]), "stack": lambda x, s: tg.stack([x, x + s], axis=-1),
    "split": lambda x, s: x.split(3, axis=1)[1] * s,
}


@pytest.mark.parametrize("scalar", SCALARS, ids=lambda s: f"{type(s).__name__}({s})")
@pytest.mark.parametrize("name", sorted(FLOAT32_OPS))
def test_float32_stays_float32_through_every_op_with_python_and_numpy_scalars(name, scalar):
    x = tg.tensor(np.linspace(0.5, 2.0, 6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    out = FLOAT32_OPS[name](x, scalar)
    assert out.dtype == np.float32, f"{name} with {type(scalar).__name__} gave {out.dtype}"
    out.backward(np.ones(out.shape, np.float32))
    assert x.grad.dtype == np.float32 and x.grad.shape == x.shape


def test_grad_has_the_dtype_and_shape_of_data_even_when_the_op_promoted():
    x32 = tg.tensor(np.ones(3, np.float32), requires_grad=True)
    y64 = tg.tensor(np.full((2, 3), 0.5), requires_grad=True)
    out = x32 * y64                 # a float64 array stays float64, so out is float64
    assert out.dtype == np.float64
    out.sum().backward()
    assert x32.grad.dtype == np.float32 and x32.grad.shape == (3,)
    assert y64.grad.dtype == np.float64 and y64.grad.shape == (2, 3)
    np.testing.assert_array_equal(x32.grad, [1.0, 1.0, 1.0])


def test_backward_grad_argument_is_cast_to_the_tensors_dtype():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).backward(np.array([1.0, 1.0], dtype=np.float64))
    assert x.grad.dtype == np.float32
    np.testing.assert_array_equal(x.grad, [3.0, 3.0])


def test_integer_tensors_stay_integer():
    ids = tg.tensor([[1, 2], [3, 4]])
    assert ids.dtype.kind == "i"
    assert tg.arange(5).dtype.kind == "i"
    np.testing.assert_array_equal(tg.arange(5).data, np.arange(5))
    for out in [ids + 1, ids * 2, ids - np.int64(1), ids[0], ids.reshape(-1), ids.T, ids.sum(),
                tg.cat([ids, ids]), tg.stack([ids, ids]), ids.split(2)[0], tg.where(ids > 2, ids, 0)]:
        assert out.dtype.kind == "i", out
        assert not out.requires_grad


def test_max_and_min_of_an_integer_tensor_stay_integer():
    ids = tg.tensor([[1, 7], [3, 4]])   # e.g. checking token ids against a vocabulary size
    assert ids.max().item() == 7 and ids.min(axis=0).data.tolist() == [1, 4]
    assert ids.max().dtype.kind == "i" and ids.min(axis=0).dtype.kind == "i"
    np.testing.assert_array_equal(tg.maximum(ids, 2).data, [[2, 7], [3, 4]])


@pytest.mark.parametrize("make", [
    lambda: tg.tensor([1, 2], requires_grad=True),
    lambda: tg.Tensor(np.arange(3), requires_grad=True),
    lambda: tg.zeros(3, dtype=np.int64, requires_grad=True),
    lambda: tg.tensor([True, False], requires_grad=True),
], ids=["tensor", "Tensor", "zeros", "bool"])
def test_integer_and_bool_tensors_cannot_require_grad(make):
    with pytest.raises(TypeError, match="floating-point"):
        make()


def test_integer_inputs_of_a_float_op_get_no_gradient():
    weights = tg.tensor(np.ones(3), requires_grad=True)
    counts = tg.tensor([1, 2, 3])
    (weights * counts).sum().backward()
    np.testing.assert_array_equal(weights.grad, [1.0, 2.0, 3.0])
    assert counts.grad is None


# ---- numpy semantics ------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_var_is_the_population_variance_like_np_var(axis, keepdims, rand):
    x = rand((3, 4, 5), seed=1)
    np.testing.assert_allclose(tg.tensor(x).var(axis=axis, keepdims=keepdims).data,
                               np.var(x, axis=axis, keepdims=keepdims), rtol=1e-12)


@pytest.mark.parametrize("sections,axis", [
    (2, 0), (3, 1), (1, 0), (6, -1), ([2], 0), ([1, 3], 1), ([2, 10], 0), ([0, 2], -1),
    ([3, 1], 1), ([], 0), ([4], 0),
], ids=str)
def test_split_follows_np_split(sections, axis):
    x = np.arange(24.0).reshape(4, 6)
    ours = tg.tensor(x).split(sections, axis=axis)
    theirs = np.split(x, sections, axis=axis)
    assert isinstance(ours, list) and len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape
        np.testing.assert_array_equal(a.data, b)


@pytest.mark.parametrize("shape", [(-1, 4), (4, -1), (2, 3, 4), ((6, 4),), ([3, 8],), (24,), (-1,)], ids=str)
def test_reshape_takes_minus_one_and_tuple_shapes(shape):
    x = np.arange(24.0).reshape(4, 6)
    target = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    np.testing.assert_array_equal(tg.tensor(x).reshape(*shape).data, x.reshape(target))


def test_transpose_without_axes_reverses_them():
    x = np.arange(24.0).reshape(2, 3, 4)
    assert tg.tensor(x).transpose().shape == (4, 3, 2)
    np.testing.assert_array_equal(tg.tensor(x).transpose().data, x.transpose())
    np.testing.assert_array_equal(tg.tensor(x).T.data, x.T)
    np.testing.assert_array_equal(tg.tensor(x).transpose(1, 0, 2).data, x.transpose(1, 0, 2))
    np.testing.assert_array_equal(tg.tensor(x).transpose((2, 0, 1)).data, x.transpose(2, 0, 1))
    np.testing.assert_array_equal(tg.tensor(x[0, 0]).T.data, x[0, 0])   # 1-d: unchanged


INDEXING = {
    "int": 1, "negative_int": -2, "slice": slice(1, None), "negative_step": slice(None, None, -1),
    "int_and_slice": (0, slice(1, 3)), "ellipsis": (Ellipsis, 2), "new_axis": (None, 1),
    "full_basic": (slice(None), slice(None), 0), "int_list": [2, 0, 2],
    "int_array": np.array([[0, 1], [2, 2]]), "two_int_arrays": (np.array([0, 2]), np.array([1, 1])),
    "int_array_after_slice": (slice(None), [3, 0, 3]), "bool_array": np.array([True, False, True]),
    "bool_array_full": np.arange(36).reshape(3, 4, 3) % 5 == 0, "scalar_tuple": (1, 2, 0),
}


@pytest.mark.parametrize("name", sorted(INDEXING))
def test_indexing_matches_numpy(name):
    x = np.arange(36.0).reshape(3, 4, 3)
    index = INDEXING[name]
    out = tg.tensor(x)[index]
    assert out.shape == x[index].shape
    np.testing.assert_array_equal(out.data, x[index])


def test_an_int_tensor_and_a_bool_tensor_work_as_indices():
    x = tg.tensor(np.arange(12.0).reshape(4, 3))
    np.testing.assert_array_equal(x[tg.tensor([3, 0, 3])].data, x.data[[3, 0, 3]])
    np.testing.assert_array_equal(x[x > 5.0].data, x.data[x.data > 5.0])
    np.testing.assert_array_equal(x[:, tg.tensor(1)].data, x.data[:, 1])


COMPARISONS = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
               "==": np.equal, "!=": np.not_equal}


@pytest.mark.parametrize("op", sorted(COMPARISONS))
@pytest.mark.parametrize("other", [1.0, np.array([0.0, 1.0, 3.0]), "tensor"], ids=["float", "ndarray", "tensor"])
def test_comparisons_return_bool_tensors_without_grad(op, other):
    x = tg.tensor(np.array([0.0, 1.0, 2.0]), requires_grad=True)
    if isinstance(other, str):
        other = tg.tensor(np.array([0.0, 1.0, 3.0]), requires_grad=True)
    out = eval(f"x {op} other")
    assert isinstance(out, tg.Tensor)
    assert out.dtype == np.bool_
    assert not out.requires_grad and out._parents == ()
    expected = COMPARISONS[op](x.data, other.data if isinstance(other, tg.Tensor) else other)
    np.testing.assert_array_equal(out.data, expected)


@pytest.mark.parametrize("make_scalar", [float, np.float64], ids=["python_float", "numpy_float64"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_comparison_with_a_scalar_uses_the_tensors_dtype(dtype, make_scalar):
    # 0.1, 0.2, 0.3 are not exactly representable: compared in another precision they differ
    x = tg.tensor(np.array([0.1, 0.2, 0.3], dtype=dtype))
    np.testing.assert_array_equal((x == make_scalar(0.1)).data, [True, False, False])
    np.testing.assert_array_equal((x != make_scalar(0.1)).data, [False, True, True])
    np.testing.assert_array_equal((x > make_scalar(0.1)).data, [False, True, True])
    np.testing.assert_array_equal((x <= make_scalar(0.2)).data, [True, True, False])
    np.testing.assert_array_equal((x >= make_scalar(0.3)).data, [False, False, True])
    np.testing.assert_array_equal((x < make_scalar(0.3)).data, [True, True, False])


def test_max_and_min_return_values_only(rand):
    x = tg.tensor(rand((3, 4), seed=2))
    assert isinstance(x.max(axis=1), tg.Tensor) and x.max(axis=1).shape == (3,)
    np.testing.assert_array_equal(x.min(axis=0).data, x.data.min(axis=0))


# ---- fused ops against their composed twins -------------------------------------------------
def composed_softmax(x, axis):
    e = (x - x.max(axis=axis, keepdims=True)).exp()
    return e / e.sum(axis=axis, keepdims=True)


def composed_log_softmax(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - shifted.exp().sum(axis=axis, keepdims=True).log()


@pytest.mark.parametrize("axis", [-1, 0, 1, (0, 2)], ids=str)
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_fused_softmax_family_matches_its_composition_from_primitives(name, axis, rand):
    data, upstream = rand((2, 3, 4), seed=3) * 4, rand((2, 3, 4), seed=4)
    composed = {"softmax": composed_softmax, "log_softmax": composed_log_softmax}[name]
    fused_x, composed_x = tg.tensor(data, requires_grad=True), tg.tensor(data, requires_grad=True)
    fused_out = getattr(fused_x, name)(axis=axis)
    composed_out = composed(composed_x, axis)
    np.testing.assert_allclose(fused_out.data, composed_out.data, rtol=1e-12, atol=1e-14)
    fused_out.backward(upstream)
    composed_out.backward(upstream)
    np.testing.assert_allclose(fused_x.grad, composed_x.grad, rtol=1e-10, atol=1e-12)


def test_softmax_rows_sum_to_one_and_log_softmax_is_its_log(rand):
    x = tg.tensor(rand((3, 5), seed=5) * 10)
    np.testing.assert_allclose(x.softmax().data.sum(-1), np.ones(3), rtol=1e-12)
    np.testing.assert_allclose(np.exp(x.log_softmax().data), x.softmax().data, rtol=1e-12)


def test_gelu_is_the_tanh_approximation():
    x = np.linspace(-5, 5, 11)
    expected = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(tg.tensor(x).gelu().data, expected, rtol=1e-12)


def test_sigmoid_does_not_overflow_for_large_negative_inputs():
    with np.errstate(all="raise"):
        out = tg.tensor(np.array([-1000.0, 0.0, 1000.0])).sigmoid()
    np.testing.assert_allclose(out.data, [0.0, 0.5, 1.0])


# ---- conveniences -----------------------------------------------------------------------------
def test_repr_shows_values_dtype_and_how_the_tensor_was_made():
    assert repr(tg.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    leaf = tg.tensor(np.array([1.0, 2.0]), requires_grad=True, label="w")
    assert "dtype=float64" in repr(leaf) and "requires_grad=True" in repr(leaf) and "'w'" in repr(leaf)
    assert "op=mul" in repr(leaf * 2)
    assert "int64" in repr(tg.arange(3))
    big = repr(tg.zeros(100, 100))
    assert "..." in big and len(big) < 1000


def test_item_numpy_and_detach():
    x = tg.tensor(np.array([[3.5]]), requires_grad=True)
    assert x.item() == 3.5 and isinstance(x.item(), float)
    assert x.numpy() is x.data
    d = (x * 2).detach()
    assert not d.requires_grad and d._parents == ()
    np.testing.assert_array_equal(d.data, [[7.0]])
    (d * x).sum().backward()           # the gradient does not flow through the detached branch
    np.testing.assert_array_equal(x.grad, [[7.0]])


def test_shape_ndim_size_len_and_bool():
    x = tg.zeros(2, 3)
    assert (x.shape, x.ndim, x.size, len(x)) == ((2, 3), 2, 6, 2)
    assert bool(tg.tensor(1.0)) and not bool(tg.tensor(0.0))


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "**", "@", "<", "=="])
def test_ndarray_on_the_left_of_a_tensor_returns_a_tensor(op):
    array = np.full((2, 2), 2.0)
    x = tg.tensor(np.array([[1.0, 2.0], [3.0, 4.0]]), requires_grad=True)
    out = eval(f"array {op} x")
    assert isinstance(out, tg.Tensor), type(out)
    np.testing.assert_allclose(out.data, eval(f"array {op} x.data"))
    if op not in ("<", "=="):
        assert out.requires_grad


def test_numpy_scalar_on_the_left_of_a_tensor_returns_a_tensor():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    for out in [np.float64(2.0) * x, np.float64(2.0) + x, np.float32(2.0) - x, np.float64(2.0) / x]:
        assert isinstance(out, tg.Tensor) and out.dtype == np.float32 and out.requires_grad


def test_tensors_are_hashable_by_identity():
    a, b = tg.tensor([1.0]), tg.tensor([1.0])
    assert len({a, b}) == 2 and {a: 1}[a] == 1


def test_a_tensor_names_the_op_that_made_it():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    assert x.op is None and (x * 2).op == "mul" and (x * 2).sum().op == "sum"
