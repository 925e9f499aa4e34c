"""Values and gradients of every op against PyTorch, as one-liners (teenygrad style):
check_op(shapes, tensorgrad_fn, torch_fn) builds the same random inputs in both, compares
the outputs, backpropagates the same random projection sum(out * r) in both, and compares
every input's gradient. Skipped as a whole when torch is not installed."""
import numpy as np
import pytest

import tensorgrad as tg

torch = pytest.importorskip("torch")
F = torch.nn.functional
pytestmark = pytest.mark.torch

TOLERANCE = {np.float64: dict(rtol=1e-9, atol=1e-11), np.float32: dict(rtol=2e-5, atol=2e-6)}


def check_op(shapes, tg_fn, torch_fn, positive=False, dtype=np.float64, seed=0):
    """Same inputs, same upstream gradient: outputs and input gradients must match torch's."""
    rng = np.random.default_rng(seed)
    arrays = [(rng.uniform(0.5, 2.0, s) if positive else rng.standard_normal(s)).astype(dtype)
              for s in shapes]
    ours = [tg.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, expected = tg_fn(*ours), torch_fn(*theirs)
    tolerance = TOLERANCE[dtype]

    assert out.dtype == dtype, f"output dtype {out.dtype}, expected {np.dtype(dtype)}"
    assert out.shape == tuple(expected.shape)
    np.testing.assert_allclose(out.data, expected.detach().numpy(), **tolerance)

    r = rng.standard_normal(out.shape).astype(dtype)
    (out * r).sum().backward()
    (expected * torch.tensor(r)).sum().backward()
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a.grad is not None, f"input {i} got no gradient"
        assert a.grad.dtype == dtype and a.grad.shape == a.shape
        np.testing.assert_allclose(a.grad, b.grad.numpy(), **tolerance, err_msg=f"grad of input {i}")


MASK = np.array([[True, False, True], [False, False, True]])
CONDITION = np.array([[True], [False]])
IDS = np.array([[0, 2], [2, 2]])

# (id, input shapes, tensorgrad fn, torch fn, positive inputs)
OPS = [
    # arithmetic with broadcasting
    ("add", [(4, 5), (1, 5)], lambda a, b: a + b, lambda a, b: a + b, False),
    ("add_0d", [(), (2, 3)], lambda a, b: a + b, lambda a, b: a + b, False),
    ("sub", [(4, 5), (5,)], lambda a, b: a - b, lambda a, b: a - b, False),
    ("mul", [(2, 1, 3), (4, 3)], lambda a, b: a * b, lambda a, b: a * b, False),
    ("div", [(3, 1), (1, 4)], lambda a, b: a / b, lambda a, b: a / b, True),
    ("pow_tensor_exponent", [(2, 3), (3,)], lambda a, b: a ** b, lambda a, b: a ** b, True),
    ("neg", [(2, 3)], lambda a: -a, lambda a: -a, False),
    ("pow_3", [(2, 3)], lambda a: a ** 3, lambda a: a ** 3, False),
    ("pow_half", [(2, 3)], lambda a: a ** 0.5, lambda a: a ** 0.5, True),
    ("pow_negative", [(2, 3)], lambda a: a ** -1.5, lambda a: a ** -1.5, True),
    ("rsub", [(2, 3)], lambda a: 2 - a, lambda a: 2 - a, False),
    ("rdiv", [(2, 3)], lambda a: 2 / a, lambda a: 2 / a, True),
    ("rpow", [(2, 3)], lambda a: 2 ** a, lambda a: 2 ** a, False),
    ("rmul_radd", [(2, 3)], lambda a: 3 * a + 1, lambda a: 3 * a + 1, False),
    # elementwise functions
    ("exp", [(2, 3)], lambda a: a.exp(), torch.exp, False),
    ("log", [(2, 3)], lambda a: a.log(), torch.log, True),
    ("sqrt", [(2, 3)], lambda a: a.sqrt(), torch.sqrt, True),
    ("abs", [(2, 3)], lambda a: a.abs(), torch.abs, False),
    ("tanh", [(2, 3)], lambda a: a.tanh(), torch.tanh, False),
    ("sigmoid", [(2, 3)], lambda a: a.sigmoid(), torch.sigmoid, False),
    ("relu", [(2, 3)], lambda a: a.relu(), torch.relu, False),
    ("gelu_tanh", [(3, 4)], lambda a: (a * 3).gelu(), lambda a: F.gelu(a * 3, approximate="tanh"), False),
    # reductions
    ("sum_all", [(2, 3)], lambda a: a.sum(), lambda a: a.sum(), False),
    ("sum_axis0", [(2, 3)], lambda a: a.sum(axis=0), lambda a: a.sum(dim=0), False),
    ("sum_tuple_keepdims", [(2, 3, 4)], lambda a: a.sum(axis=(0, 2), keepdims=True),
     lambda a: a.sum(dim=(0, 2), keepdim=True), False),
    ("mean_all", [(2, 3)], lambda a: a.mean(), lambda a: a.mean(), False),
    ("mean_last_keepdims", [(2, 3)], lambda a: a.mean(axis=-1, keepdims=True),
     lambda a: a.mean(dim=-1, keepdim=True), False),
    ("var_all", [(2, 3)], lambda a: a.var(), lambda a: a.var(correction=0), False),
    ("var_axis1", [(2, 3, 4)], lambda a: a.var(axis=1), lambda a: a.var(dim=1, correction=0), False),
    ("var_tuple_keepdims", [(2, 3, 4)], lambda a: a.var(axis=(0, 2), keepdims=True),
     lambda a: a.var(dim=(0, 2), correction=0, keepdim=True), False),
    ("max_all", [(2, 3)], lambda a: a.max(), lambda a: a.amax(), False),
    ("max_axis", [(2, 3, 4)], lambda a: a.max(axis=1), lambda a: a.amax(dim=1), False),
    ("min_tuple_keepdims", [(2, 3, 4)], lambda a: a.min(axis=(0, 2), keepdims=True),
     lambda a: a.amin(dim=(0, 2), keepdim=True), False),
    # softmax family
    ("softmax_last", [(2, 5)], lambda a: a.softmax(), lambda a: a.softmax(dim=-1), False),
    ("softmax_axis0", [(3, 2, 4)], lambda a: a.softmax(axis=0), lambda a: a.softmax(dim=0), False),
    ("softmax_axis1", [(3, 2, 4)], lambda a: a.softmax(axis=1), lambda a: a.softmax(dim=1), False),
    ("log_softmax_last", [(2, 5)], lambda a: a.log_softmax(), lambda a: a.log_softmax(dim=-1), False),
    ("log_softmax_axis0", [(3, 2, 4)], lambda a: a.log_softmax(axis=0),
     lambda a: a.log_softmax(dim=0), False),
    # matmul
    ("matmul_2d", [(2, 3), (3, 4)], lambda a, b: a @ b, torch.matmul, False),
    ("matmul_batched_weights", [(2, 2, 3), (3, 4)], lambda a, b: a @ b, torch.matmul, False),
    ("matmul_2d_batched", [(2, 3), (2, 3, 4)], lambda a, b: a @ b, torch.matmul, False),
    ("matmul_4d_broadcast", [(2, 1, 2, 3), (3, 3, 2)], lambda a, b: a @ b, torch.matmul, False),
    ("matmul_vector_left", [(3,), (3, 4)], lambda a, b: a @ b, torch.matmul, False),
    ("matmul_vector_right", [(2, 2, 3), (3,)], lambda a, b: a @ b, torch.matmul, False),
    ("matmul_dot", [(3,), (3,)], lambda a, b: a @ b, torch.matmul, False),
    ("matmul_vector_batched", [(3,), (2, 3, 4)], lambda a, b: a @ b, torch.matmul, False),
    # shapes and indexing
    ("reshape", [(2, 3)], lambda a: a.reshape(-1, 2), lambda a: a.reshape(-1, 2), False),
    ("transpose_permute", [(2, 3, 4)], lambda a: a.transpose(2, 0, 1), lambda a: a.permute(2, 0, 1), False),
    ("transpose_reverse", [(2, 3, 4)], lambda a: a.transpose(), lambda a: a.permute(2, 1, 0), False),
    ("T", [(2, 3)], lambda a: a.T, lambda a: a.T, False),
    ("getitem_basic", [(3, 4)], lambda a: a[1:, ::2], lambda a: a[1:, ::2], False),
    ("getitem_int_and_none", [(3, 4)], lambda a: a[None, -1], lambda a: a[None, -1], False),
    ("getitem_repeated_ints", [(3, 4)], lambda a: a[[0, 0, 2]], lambda a: a[[0, 0, 2]], False),
    ("getitem_int_arrays", [(3, 4)], lambda a: a[IDS, 1], lambda a: a[torch.tensor(IDS), 1], False),
    ("getitem_int_tensor", [(4, 3)], lambda a: a[tg.tensor(IDS)], lambda a: a[torch.tensor(IDS)], False),
    ("getitem_bool_mask", [(2, 3)], lambda a: a[MASK], lambda a: a[torch.tensor(MASK)], False),
    ("masked_fill", [(2, 3)], lambda a: a.masked_fill(MASK, -2.0),
     lambda a: a.masked_fill(torch.tensor(MASK), -2.0), False),
    ("masked_fill_broadcast", [(2, 3)], lambda a: a.masked_fill(CONDITION, 0.5),
     lambda a: a.masked_fill(torch.tensor(CONDITION), 0.5), False),
    ("where", [(1, 3), (2, 1)], lambda a, b: tg.where(CONDITION, a, b),
     lambda a, b: torch.where(torch.tensor(CONDITION), a, b), False),
    ("maximum", [(2, 3), (3,)], tg.maximum, torch.maximum, False),
    ("cat_axis0", [(1, 3), (2, 3)], lambda a, b: tg.cat([a, b]), lambda a, b: torch.cat([a, b]), False),
    ("cat_axis_last", [(2, 1), (2, 3)], lambda a, b: tg.cat([a, b, a], axis=-1),
     lambda a, b: torch.cat([a, b, a], dim=-1), False),
    ("stack_axis1", [(2, 3), (2, 3)], lambda a, b: tg.stack([a, b], axis=1),
     lambda a, b: torch.stack([a, b], dim=1), False),
    ("split_sections", [(4, 6)], lambda a: tg.stack([p * (i + 1) for i, p in enumerate(a.split(3, axis=1))]),
     lambda a: torch.stack([p * (i + 1) for i, p in enumerate(torch.chunk(a, 3, dim=1))]), False),
    ("split_points", [(5, 2)], lambda a: tg.cat([p * (i + 1) for i, p in enumerate(a.split([1, 3]))]),
     lambda a: torch.cat([p * (i + 1) for i, p in enumerate(torch.tensor_split(a, [1, 3]))]), False),
]


@pytest.mark.parametrize("name,shapes,tg_fn,torch_fn,positive", OPS, ids=[op[0] for op in OPS])
def test_op_matches_torch_in_float64(name, shapes, tg_fn, torch_fn, positive):
    check_op(shapes, tg_fn, torch_fn, positive=positive)


FLOAT32_OPS = ["add", "mul", "div", "exp", "log", "tanh", "sigmoid", "gelu_tanh", "mean_last_keepdims",
               "var_axis1", "softmax_last", "log_softmax_last", "matmul_batched_weights", "getitem_int_tensor"]


@pytest.mark.parametrize("name", FLOAT32_OPS)
def test_op_matches_torch_in_float32_and_stays_float32(name):
    _, shapes, tg_fn, torch_fn, positive = next(op for op in OPS if op[0] == name)
    check_op(shapes, tg_fn, torch_fn, positive=positive, dtype=np.float32)


def test_gelu_is_torchs_tanh_approximation_over_a_wide_range():
    x = np.linspace(-6, 6, 121)
    ours = tg.tensor(x, requires_grad=True)
    theirs = torch.tensor(x, requires_grad=True)
    ours.gelu().sum().backward()
    F.gelu(theirs, approximate="tanh").sum().backward()
    np.testing.assert_allclose(ours.gelu().data, F.gelu(theirs, approximate="tanh").detach().numpy(),
                               rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(ours.grad, theirs.grad.numpy(), rtol=1e-12, atol=1e-14)
    # and it is not the exact (erf) GELU, which differs by about 1e-3 here
    assert np.abs(ours.gelu().data - F.gelu(theirs).detach().numpy()).max() > 1e-5


def test_max_and_maximum_ties_split_the_gradient_like_torch():
    data = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    check_ties = [
        (lambda a: a.max(axis=1), lambda a: a.amax(dim=1)),
        (lambda a: a.min(), lambda a: a.amin()),
        (lambda a: tg.maximum(a, 2.0), lambda a: torch.maximum(a, torch.tensor(2.0, dtype=torch.float64))),
    ]
    for tg_fn, torch_fn in check_ties:
        ours, theirs = tg.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
        tg_fn(ours).sum().backward()
        torch_fn(theirs).sum().backward()
        np.testing.assert_allclose(ours.grad, theirs.grad.numpy(), rtol=1e-12)


def test_composed_cross_entropy_matches_torch():
    targets = np.array([0, 3, 3, 1])

    def ours(logits, w):
        z = logits @ w
        return -z.log_softmax(axis=-1)[np.arange(4), targets].mean()

    def theirs(logits, w):
        return F.cross_entropy(logits @ w, torch.tensor(targets))
    check_op([(4, 3), (3, 5)], ours, theirs)


def test_composed_layer_norm_matches_torch():
    def ours(x, weight, bias):
        mean = x.mean(axis=-1, keepdims=True)
        return (x - mean) / (x.var(axis=-1, keepdims=True) + 1e-5).sqrt() * weight + bias

    def theirs(x, weight, bias):
        return F.layer_norm(x, (4,), weight, bias, eps=1e-5)
    check_op([(2, 3, 4), (4,), (4,)], ours, theirs)
    check_op([(2, 3, 4), (4,), (4,)], ours, theirs, dtype=np.float32)


def test_composed_causal_attention_matches_torch():
    causal = np.triu(np.ones((4, 4), dtype=bool), k=1)

    def ours(q, k, v):
        scores = (q @ k.transpose(0, 1, 3, 2)) / np.sqrt(8.0)
        return scores.masked_fill(causal, float("-inf")).softmax(axis=-1) @ v

    def theirs(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    check_op([(2, 2, 4, 8)] * 3, ours, theirs)
