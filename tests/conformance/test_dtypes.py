"""Dtypes follow PyTorch's rules: the names (tg.long, tg.float32...) mean PyTorch's dtypes;
python floats make float32; tensors promote bool < integer < float (numpy's result_type
within a kind); python and numpy scalars are weak (they take the tensor's dtype); int / int,
exp of an int, float arange and every float function of an integer tensor give float32;
an integer power keeps the integer dtype; casts are differentiable between floats; and no
op turns float32 into float64 (the result and every gradient stay float32)."""
import operator

import numpy as np
import pytest

import tensorgrad as tg

from .torch_compare import DELIBERATE_DIFFERENCES, FLOAT_FUNCTIONS, INTEGERS, compare, to_torch_dtype, torch

pytestmark = pytest.mark.torch

NAMES = ["float16", "half", "float32", "float", "float64", "double", "int8", "int16", "uint8", "int32", "int",
         "int64", "long", "bool"]
ALL_DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64]


@pytest.mark.parametrize("name", NAMES)
def test_dtype_names_mean_pytorchs_dtypes(name):
    ours = getattr(tg, name)
    assert to_torch_dtype(ours) == getattr(torch, name)
    assert tg.zeros(2, dtype=ours).dtype == ours   # t.dtype == tg.<name> holds


@pytest.mark.parametrize("data", [1.5, [1.5, 2.0], [[1, 2]], 3, True, [True, False], [1, 2.5],
                                  np.float64(1.5), np.arange(3.0), np.arange(3, dtype=np.int32)],
                         ids=repr)
def test_tensor_infers_pytorchs_dtype(data):
    assert tg.tensor(data).dtype == np.dtype(torch.tensor(data).numpy().dtype)


@pytest.mark.parametrize("a", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("b", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_tensors_promote_like_pytorch(a, b):
    x, y = np.array([1, 0, 1]).astype(a), np.array([1, 1, 0]).astype(b)
    compare(operator.add, operator.add, x, y)
    compare(operator.mul, operator.mul, x, y)
    compare(tg.maximum, torch.maximum, x, y)


@pytest.mark.parametrize("scalar", [2, 2.5, True, np.float64(2.5), np.int64(2), np.float32(0.5)], ids=repr)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_python_and_numpy_scalars_are_weak_like_pytorch(dtype, scalar):
    """A scalar takes the tensor's dtype unless it is of a higher kind: a float meeting an
    integer or bool tensor gives float32, an int meeting a bool tensor int64."""
    x = np.array([1, 0, 3]).astype(dtype)
    for fn in [lambda x: x + scalar, lambda x: scalar + x, lambda x: x * scalar, lambda x: x / scalar]:
        compare(fn, fn, x)


def test_the_integer_rules_of_the_table():
    i32, i64 = tg.tensor([1, 2, 3], dtype=tg.int32), tg.tensor([4, 5, 6])
    assert (i32 + 0.5).dtype == np.float32          # int tensor + python float
    assert (i32 / i32).dtype == np.float32          # true division of ints
    assert (i64 / 2).dtype == np.float32
    assert (i32 ** 2).dtype == np.int32 and (i64 ** 2).tolist() == [16, 25, 36]   # int ** int keeps ints
    assert (i32 ** tg.tensor([0, 1, 2])).dtype == np.int64   # (int32, int64: int64)
    assert (i32 * 2).dtype == np.int32              # weak python int
    assert (i32 + i64).dtype == np.int64            # same kind: numpy's result_type
    assert (i64 + tg.tensor([1.0])).dtype == np.float32   # different kinds: the higher one's dtype
    assert (tg.tensor([True]) + 1).dtype == np.int64      # python int with a bool tensor
    assert (tg.tensor([True]) + 1.5).dtype == np.float32


FLOAT_FUNCTIONS_OF_INTEGERS = {
    **FLOAT_FUNCTIONS,
    "logsumexp": (lambda x: x.logsumexp(axis=-1), lambda x: torch.logsumexp(x, -1)),
    "div": (lambda x: x / x, lambda x: x / x),
    "pow_float": (lambda x: x ** 0.5, lambda x: x ** 0.5),
}


@pytest.mark.parametrize("dtype", INTEGERS + (np.bool_,))
@pytest.mark.parametrize("name", FLOAT_FUNCTIONS_OF_INTEGERS)
def test_float_functions_of_integer_tensors_are_float32(name, dtype):
    (out,) = compare(*FLOAT_FUNCTIONS_OF_INTEGERS[name], np.array([[0, 1, 2], [3, 4, 5]]).astype(dtype))
    assert out.dtype == np.float32


@pytest.mark.parametrize("name", ["gelu", "softmax", "log_softmax", "mean", "var", "std"])
@pytest.mark.parametrize("dtype", INTEGERS + (np.bool_,))
def test_functions_pytorch_refuses_for_integers_give_float32_here(name, dtype):
    """DELIBERATE_DIFFERENCES["gelu_softmax_of_integers_are_float32"] and
    ["mean_var_std_of_integers_are_float32"]: the same values as on the float32 tensor."""
    assert {"gelu_softmax_of_integers_are_float32",
            "mean_var_std_of_integers_are_float32"} <= DELIBERATE_DIFFERENCES.keys()
    ints = np.array([[0, 1, 2], [3, 4, 5]]).astype(dtype)
    out = getattr(tg.tensor(ints), name)()
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.data, getattr(tg.tensor(ints.astype(np.float32)), name)().data, rtol=1e-6)


@pytest.mark.parametrize("args", [(5,), (2, 7), (0, 10, 3), (0.0, 1.0, 0.25), (0, 2.5), (1.5,), (np.float64(3),),
                                  (np.int32(4),), (-3, 3, 2)], ids=repr)
def test_arange_dtypes_are_pytorchs(args):
    """Any float argument gives float32, all integers int64."""
    ours, theirs = tg.arange(*args), torch.arange(*args)
    assert ours.dtype == theirs.numpy().dtype
    np.testing.assert_allclose(ours.data, theirs.numpy())


@pytest.mark.parametrize("dtype", [tg.float64, tg.int32, tg.float16])
def test_arange_with_a_dtype(dtype):
    assert tg.arange(0, 4, dtype=dtype).dtype == dtype


def test_creation_functions_give_pytorchs_dtypes():
    pairs = [
        (tg.zeros(2, 3), torch.zeros(2, 3)), (tg.ones((2,)), torch.ones((2,))),
        (tg.zeros(2, dtype=tg.long), torch.zeros(2, dtype=torch.long)),
        (tg.full((2,), 1.5), torch.full((2,), 1.5)), (tg.full((2,), 1), torch.full((2,), 1)),
        (tg.full((2,), True), torch.full((2,), True)),
        (tg.zeros_like(tg.tensor([1, 2])), torch.zeros_like(torch.tensor([1, 2]))),
        (tg.ones_like(tg.tensor([1.0])), torch.ones_like(torch.tensor([1.0]))),
        (tg.full_like(tg.tensor([1, 2]), 7), torch.full_like(torch.tensor([1, 2]), 7)),
        (tg.full_like(tg.tensor([1.0, 2.0]), 2), torch.full_like(torch.tensor([1.0, 2.0]), 2)),
        (tg.randn(2, 3), torch.randn(2, 3)), (tg.rand(4), torch.rand(4)),
        (tg.randint(5, (3,)), torch.randint(5, (3,))), (tg.randint(2, 5, (3,)), torch.randint(2, 5, (3,))),
        (tg.multinomial(tg.tensor([0.2, 0.8]), 3, replacement=True),
         torch.multinomial(torch.tensor([0.2, 0.8]), 3, replacement=True)),
        (tg.one_hot(tg.tensor([0, 2])), torch.nn.functional.one_hot(torch.tensor([0, 2]))),
        (tg.one_hot(tg.tensor([0, 2]), num_classes=4), torch.nn.functional.one_hot(torch.tensor([0, 2]), 4)),
    ]
    for ours, theirs in pairs:
        assert (ours.dtype, ours.shape) == (theirs.numpy().dtype, tuple(theirs.shape))
    np.testing.assert_array_equal(tg.one_hot(tg.tensor([0, 2])).data, [[1, 0, 0], [0, 0, 1]])


# ---- casts ------------------------------------------------------------------------------
CASTS = {
    "float": (lambda x: x.float(), lambda x: x.float()),
    "double": (lambda x: x.double(), lambda x: x.double()),
    "half": (lambda x: x.half(), lambda x: x.half()),
    "to_float64": (lambda x: x.to(tg.float64), lambda x: x.to(torch.float64)),
    "to_float32": (lambda x: x.to(tg.float32), lambda x: x.to(torch.float32)),
    "to_cpu": (lambda x: x.to("cpu"), lambda x: x.to("cpu")),
    "to_dtype_keyword": (lambda x: x.to(dtype=tg.double), lambda x: x.to(dtype=torch.double)),
    "long": (lambda x: x.long(), lambda x: x.long()),
    "int": (lambda x: x.int(), lambda x: x.int()),
    "bool": (lambda x: x.bool(), lambda x: x.bool()),
    "to_long": (lambda x: x.to(tg.long), lambda x: x.to(torch.long)),
    "cast_and_back": (lambda x: x.double().float() * 2, lambda x: x.double().float() * 2),
}


@pytest.mark.parametrize("source", [np.float32, np.float64, np.int64, np.bool_], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", CASTS)
def test_casts_match_pytorch_and_float_casts_carry_gradients_back(name, source):
    """Between floats the gradient comes back in the source's dtype; a cast to int or bool
    is the end of the graph (no gradient), as in PyTorch."""
    x = np.array([[1.5, -2.75, 0.0], [3.0, -0.5, 7.25]]).astype(source)
    (out,) = compare(*CASTS[name], x)
    if out.dtype.kind != "f":
        assert not out.requires_grad


# ---- float32 stays float32 --------------------------------------------------------------
MASK = np.array([[True, False, True], [False, False, True]])
FLOAT32_EXPRESSIONS = {
    "numpy float64 scalar": lambda x: x * np.float64(2.0) + np.float64(1.0),
    "python float": lambda x: 1e-5 + x / 3.0 - 0.1,
    "float powers": lambda x: x ** 0.5 + x ** -1.5 + 2.0 ** x,
    "int tensor": lambda x: x * tg.arange(3) + tg.tensor(2),
    "bool tensor": lambda x: x * (x > 1.0),
    "mean var std": lambda x: x.mean() + x.var(axis=0).sum() + x.std(dim=1, correction=1).sum(),
    "softmax family": lambda x: x.softmax().sum() + x.log_softmax(0).sum() + x.logsumexp(),
    "activations": lambda x: x.gelu() + x.sigmoid() + x.tanh() + x.relu() + x.sin() + x.cos() + x.exp(),
    "clip": lambda x: x.clip(0.75, 1.5) + x.clamp(min=1.0),
    "where maximum minimum": lambda x: tg.where(MASK, x, 0.0) + tg.maximum(x, 0.5) + tg.minimum(x, 1.0),
    "masked_fill": lambda x: x.masked_fill(MASK, -1e9).softmax(),
    "matmul": lambda x: x @ x.T,
    "cumsum": lambda x: x.cumsum(axis=1) + x.cumsum().reshape(2, 3),
    "shapes": lambda x: tg.cat([x, x]).T.tril()[np.array([0, 0])].expand(3, 2, 4).flatten(),
    "gather": lambda x: x.gather(1, np.array([[0, 0], [2, 1]])),
    "float cast": lambda x: x.float().to(tg.float32),
}


@pytest.mark.parametrize("name", FLOAT32_EXPRESSIONS)
def test_no_op_turns_float32_into_float64(name):
    x = tg.tensor(np.array([[0.5, 1.25, 2.0], [1.5, 0.75, 1.0]], np.float32), requires_grad=True)
    out = FLOAT32_EXPRESSIONS[name](x)
    assert out.dtype == np.float32
    out.sum().backward()
    assert x.grad.dtype == np.float32


def test_integer_means_are_float32_not_float64():
    assert tg.tensor([1, 2, 4]).mean().dtype == np.float32
    assert tg.tensor([1, 2, 4], dtype=tg.int32).var().dtype == np.float32


def test_a_0d_tensor_gives_way_to_a_tensor_with_axes_as_in_pytorch():
    """Within a kind, the tensor with axes sets the dtype, as a python scalar would: a 0-d
    float64 (a numpy scalar made a tensor) does not turn float32 into float64. Across kinds
    the 0-d one's kind still counts (an int tensor times a 0-d float is a float)."""
    matrix, zero_d = tg.zeros(2, 3), tg.tensor(np.float64(2.0))
    assert (matrix * zero_d).dtype == np.float32 and (zero_d + matrix).dtype == np.float32
    assert (torch.zeros(2, 3) * torch.tensor(2.0, dtype=torch.float64)).dtype == torch.float32
    assert (tg.zeros(2, dtype=tg.int32) + tg.tensor(1)).dtype == np.int32
    assert (torch.zeros(2, dtype=torch.int32) + torch.tensor(1)).dtype == torch.int32
    assert (tg.zeros(2, dtype=tg.int32) * tg.tensor(np.float64(1.5))).dtype == np.float64
    assert (torch.zeros(2, dtype=torch.int32) * torch.tensor(1.5, dtype=torch.float64)).dtype == torch.float64
    # the gradient comes back in each input's own dtype
    x = tg.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    s = tg.tensor(np.float64(2.0), requires_grad=True)
    (x * s).sum().backward()
    assert x.grad.dtype == np.float32 and s.grad.dtype == np.float64 and s.grad == 6.0
