"""The fake CuPy (tests/fake_cupy.py) behaves like CuPy where tensorgrad's GPU port can go wrong:
numpy's dispatch hands it its ufuncs and functions, `out=` writes into it, it refuses implicit
host copies and numpy array operands, takes numpy and python scalars, counts the copies."""
import copy
import sys

import numpy as np
import pytest

import fake_cupy as cp

HOST = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5


@pytest.fixture
def x():
    """HOST on the fake device, the copy counter reset after it."""
    array = cp.asarray(HOST)
    cp.copies.reset()
    return array


def on_host(result):
    """A result's value for comparing, read through the counted copy; fails on a numpy result."""
    if isinstance(result, (list, tuple)):
        return [on_host(r) for r in result]
    assert isinstance(result, cp.ndarray), f"numpy's dispatch gave a {type(result)}"
    return result.get()


CALLS = {   # numpy calls made on the fake array and on HOST: the same values, a fake array back
    "exp": lambda a: np.exp(a), "add": lambda a: np.add(a, a), "matmul": lambda a: np.matmul(a, a.T),
    "where": lambda a: np.where(a > 0, a, 0.0), "sum": lambda a: np.sum(a, axis=0),
    "sum all": lambda a: np.sum(a), "concatenate": lambda a: np.concatenate([a, a], axis=1),
    "broadcast_to": lambda a: np.broadcast_to(a[:1], (2, 4)), "tril": lambda a: np.tril(a),
    "take_along_axis": lambda a: np.take_along_axis(a, np.argsort(a, axis=1), axis=1),
    "maximum": lambda a: np.maximum(a, 0.0), "isfinite": lambda a: np.isfinite(a),
    "argwhere": lambda a: np.argwhere(a > 0), "flip": lambda a: np.flip(a, 0),
    "cumsum": lambda a: np.cumsum(a, axis=1), "zeros_like": lambda a: np.zeros_like(a),
    "ones_like": lambda a: np.ones_like(a), "full_like": lambda a: np.full_like(a, 2.0),
    "empty_like": lambda a: np.empty_like(a).shape and np.zeros_like(a),
    "expand_dims": lambda a: np.expand_dims(a, 0), "squeeze": lambda a: np.squeeze(a[:1]),
    "split": lambda a: np.split(a, 2, axis=1), "swapaxes": lambda a: np.swapaxes(a, 0, 1),
    "moveaxis": lambda a: np.moveaxis(a, 0, 1), "einsum": lambda a: np.einsum("ij,kj->ik", a, a),
    "diff": lambda a: np.diff(a, prepend=0.0), "flatnonzero": lambda a: np.flatnonzero(a > 0),
    "sign": lambda a: np.sign(a), "nan_to_num": lambda a: np.nan_to_num(a * np.inf),
    "mean": lambda a: np.mean(a, axis=1, keepdims=True), "reshape": lambda a: np.reshape(a, (4, 3)),
    "transpose": lambda a: np.transpose(a), "stack": lambda a: np.stack([a, a]),
    "tanh": lambda a: np.tanh(a), "max": lambda a: np.max(a, axis=-1), "var": lambda a: np.var(a),
    "methods": lambda a: (a.reshape(2, 6).transpose().swapaxes(0, 1).sum(axis=0) * a.max()
                          + a.min() - a.mean() + a.var() + a.std()),
    "method argmax": lambda a: a.argmax(axis=1), "method clip": lambda a: a.clip(-1, 1).ravel(),
    "method cumsum": lambda a: a.cumsum(axis=0).flatten(), "method repeat": lambda a: a.repeat(2, 0),
    "method dot": lambda a: a.dot(a.T), "method astype": lambda a: a.astype(np.float64),
    "method any/all": lambda a: (a > 0).any(axis=1) & (a > -9).all(axis=1),
    "operators": lambda a: (-a + 1) * 2 - a / 3 + a // 2 + a % 2 + abs(a) ** 2 + (a @ a.T).sum(),
    "reflected": lambda a: 1 - a + 2 * a + 3 / (a * a + 1) + 2 ** (a / 10),
    "comparison": lambda a: (a >= 0) | (a < -5) & (a != 1),
    "getitem": lambda a: a[1:, ::2][0], "scalar getitem": lambda a: a[1, 2],
}


@pytest.mark.parametrize("name", CALLS)
def test_numpy_calls_on_a_fake_array_return_fake_arrays(x, name):
    expected, got = CALLS[name](HOST), on_host(CALLS[name](x))
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert np.asarray(got).dtype == np.asarray(expected).dtype


def test_reductions_give_0d_device_arrays_not_numpy_scalars(x):
    for result in (x.sum(), np.sum(x), x[0, 0], np.argmax(x), x.max()):
        assert isinstance(result, cp.ndarray) and result.shape == ()
    assert cp.copies.to_host == 0


def test_out_writes_into_the_fake_arrays_storage(x):
    out = cp.empty_like(x)
    assert np.add(x, x, out=out) is out and np.tanh(x, out=out) is out
    np.testing.assert_allclose(out.get(), np.tanh(HOST))
    assert np.sum(x, axis=0, out=cp.zeros(4, np.float32)).get().tolist() == HOST.sum(0).tolist()
    y = x.copy()
    same = y
    y += x
    y *= np.float32(2)
    y -= 1
    assert y is same and np.array_equal(y.get(), (HOST + HOST) * 2 - 1)
    np.copyto(y, x)
    assert np.array_equal(y.get(), HOST)
    assert np.nan_to_num(y, copy=False) is y


def test_ufunc_methods_at_and_reduceat(x):
    grad = cp.zeros((3, 2), dtype=np.float32)
    np.add.at(grad, cp.asarray(np.array([0, 0, 2])), cp.ones((3, 2), dtype=np.float32))
    assert grad.get().tolist() == [[2, 2], [0, 0], [1, 1]]
    sums = np.add.reduceat(x, cp.asarray(np.array([0, 2])), axis=0)
    np.testing.assert_array_equal(sums.get(), np.add.reduceat(HOST, [0, 2], axis=0))
    np.testing.assert_array_equal(cp.add.reduce(x, axis=1).get(), HOST.sum(1))


@pytest.mark.parametrize("convert", [np.asarray, np.array, np.asanyarray, np.ascontiguousarray,
                                     np.require, lambda a: np.asarray(a, dtype=np.float64)])
def test_implicit_conversion_to_numpy_is_refused(x, convert):
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        convert(x)


@pytest.mark.parametrize("mix", {
    "x + array": lambda a, h: a + h, "array + x": lambda a, h: h + a, "x * 0-d": lambda a, h: a * np.asarray(2.0),
    "0-d * x": lambda a, h: np.asarray(2.0, np.float32) * a, "ufunc": lambda a, h: np.maximum(a, h),
    "out=": lambda a, h: np.exp(a, out=h), "where": lambda a, h: np.where(a > 0, h, a),
    "concatenate": lambda a, h: np.concatenate([a, h]), "function": lambda a, h: np.matmul(a, h.T),
    "in place": lambda a, h: a.__iadd__(h), "list operand": lambda a, h: np.add(a, [1.0, 2.0, 3.0, 4.0]),
    "cupy routine": lambda a, h: cp.exp(h), "method": lambda a, h: a.dot(h.T),
}.items(), ids=lambda item: item[0])
def test_numpy_array_operands_are_refused(x, mix):
    with pytest.raises(TypeError, match="Unsupported type"):
        mix[1](x, HOST.copy())


def test_numpy_and_python_scalars_are_accepted(x):
    for scalar in (2, 2.5, True, np.float32(2.5), np.float64(2.5), np.int64(3)):
        for result in (x * scalar, scalar * x, np.maximum(x, scalar), x - scalar, scalar / (abs(x) + 1)):
            assert isinstance(result, cp.ndarray)
    assert (x * 2.5).dtype == np.float32 and (x * np.float64(2.5)).dtype == np.float64   # NEP 50
    assert on_host(x > np.asarray(0.0)).tolist() == (HOST > 0).tolist()   # CuPy's 0-d comparison quirk


def test_copies_are_counted(x):
    cp.copies.reset()
    assert cp.asarray(x) is x and cp.asarray(x, dtype=np.float32) is x
    assert (cp.copies.to_device, cp.copies.to_host) == (0, 0)
    cp.asarray(HOST), cp.array([1, 2]), np.asarray(HOST, like=x), cp.asarray(x, np.float64)
    assert cp.copies.to_device == 3
    np.zeros(3, like=x), cp.zeros(3), cp.arange(4), np.exp(x), x.copy(), cp.random.default_rng(0).random(3)
    assert (cp.copies.to_device, cp.copies.to_host) == (3, 0)
    host = x.get()
    assert type(host) is np.ndarray and np.array_equal(host, HOST)
    host[0, 0] = 99.0                                       # a copy: the device array is untouched
    assert type(cp.asnumpy(x)) is np.ndarray and x.tolist() == HOST.tolist()
    x[0, 0].item(), float(x[0, 0]), int(x[0, 0]), bool(x[1, 1] > 0)
    assert cp.copies.to_host == 7
    cp.copies.reset()
    assert (cp.copies.to_device, cp.copies.to_host) == (0, 0)


def test_flags_have_no_writeable_and_views_have_a_base(x):
    assert (x.flags.c_contiguous, x.flags.f_contiguous, x.flags.owndata) == (True, False, True)
    with pytest.raises(AttributeError):
        x.flags.writeable
    with pytest.raises(AttributeError):
        x.flags.writeable = False
    view = x.T
    assert view.flags.f_contiguous and not view.flags.owndata and view.base is x and view[1:].base is x
    assert x.base is None and x.copy().base is None and np.exp(x).base is None


def test_attributes_and_container(x):
    assert (x.shape, x.dtype, x.ndim, x.size, x.itemsize, x.nbytes, x.strides) == (
        HOST.shape, HOST.dtype, 2, 12, 4, 48, HOST.strides)
    assert len(x) == 3 and [row.shape for row in x] == [(4,)] * 3
    with pytest.raises(TypeError):
        len(x.sum())
    assert cp.ndarray((2, 3), np.float32).shape == (2, 3) and x.T.T.shape == x.shape
    with pytest.raises(TypeError):
        hash(x)
    assert copy.deepcopy(x) is not x and np.array_equal(copy.deepcopy(x).get(), HOST)


@pytest.mark.parametrize("index", [np.array([2, 0]), [2, 0], "fake", (slice(None), np.array([1, 3]))],
                         ids=["numpy", "list", "fake", "tuple"])
def test_indexing_with_index_arrays(x, index):
    fake = isinstance(index, str)
    expected = HOST[np.array([2, 0]) if fake else index]
    index = cp.asarray(np.array([2, 0])) if fake else index
    cp.copies.reset()
    assert np.array_equal(on_host(x[index]), expected)
    assert cp.copies.to_device == (0 if fake else 1)   # the index goes in
    with pytest.raises(TypeError, match="Implicit conversion"):
        HOST[cp.asarray(np.array([2, 0]))]                # a host array indexed by a device one


def test_setitem(x):
    x[x < 0] = 0.0
    x[np.array([0, 2]), 1] = np.array([7.0, 8.0])        # advanced index: CuPy copies the values in
    x[1] = x[0]
    x[2, :2] = np.float32(5.0)
    x[0, 0] = np.asarray(-1.0)                           # a 0-d array fills as its scalar
    expected = np.maximum(HOST, 0)
    expected[[0, 2], 1] = [7, 8]
    expected[1] = expected[0]
    expected[2, :2], expected[0, 0] = 5, -1
    assert np.array_equal(x.get(), expected)
    with pytest.raises(ValueError, match="non-scalar numpy.ndarray"):
        x[...] = HOST                                    # basic index: CuPy refuses the host array


def test_routines_cupy_lacks_and_objects_that_opt_out_of_numpy():
    a = cp.ones((2, 3))
    with pytest.raises(TypeError):
        np.vecdot(a, a)

    class OptsOut:                                       # like tensorgrad's Tensor
        __array_ufunc__ = None

        def __radd__(self, other):
            return "reflected"

    assert a + OptsOut() == "reflected"


def test_module_stands_in_for_cupy(monkeypatch, x):
    monkeypatch.setitem(sys.modules, "cupy", cp)
    import cupy
    assert cupy is cp and cupy.__version__ == "14.2.0-fake" and cupy.is_available()
    assert cupy.cuda.is_available() and cupy.cuda.runtime.getDeviceCount() == 1
    assert cupy.get_array_module(HOST, x) is cupy and cupy.get_array_module(HOST, 1.0) is np
    assert cupy.float32 is np.float32 and cupy.bool_ is np.bool_
    made = [cupy.empty((2,)), cupy.zeros((2,), cupy.int64), cupy.ones(2), cupy.full(2, 3.0),
            cupy.arange(3), cupy.zeros_like(x), cupy.ones_like(x), cupy.full_like(x, 1), cupy.empty_like(x),
            cupy.concatenate([x, x]), cupy.stack([x, x]), cupy.where(x > 0, x, 0), cupy.maximum(x, 0),
            cupy.minimum(x, 0), cupy.exp(x), cupy.log(abs(x)), cupy.sqrt(abs(x)), cupy.tanh(x),
            cupy.sum(x), cupy.matmul(x, x.T)]
    assert all(isinstance(m, cupy.ndarray) for m in made)
    rng = cupy.random.default_rng(0)
    for sample in (rng.standard_normal((2, 3), dtype=np.float32), rng.random(3), rng.integers(0, 5, 4),
                   cupy.random.RandomState(0).standard_normal(3)):
        assert isinstance(sample, cupy.ndarray)
    assert cp.copies.to_host == 0 and cp.copies.to_device == 0
