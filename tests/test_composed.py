"""tg.composed(): every fused op runs as its composition of primitive ops, and the two are
the same function: equal in value and in every input's gradient (float64, relative 1e-10)
over shapes that batch and broadcast, causal attention and not, S != T, dropout with a fixed
generator; a whole GPT's loss and every parameter gradient agree. Also: the switch itself
(nests, restores, per thread), the names a student reads (q, k, v, scores, weights, the
attention steps' scopes), and gradcheck in composed mode."""
import threading

import numpy as np
import pytest

import nn
import tensorgrad as tg
from nn import functional as F

FUSED = {"softmax", "log_softmax", "gelu", "linear", "layer_norm", "cross_entropy",
         "scaled_dot_product_attention", "var", "std"}


def arrays(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for shape in shapes]


def run(fn, inputs, composed, upstream_seed=1):
    """fn(*inputs) fused or composed: (output, each float input's gradient, op names in the graph).
    The gradient is of sum(out * r) for a fixed random r, which checks every output element."""
    leaves = [tg.Tensor(a.copy(), requires_grad=True) if a.dtype.kind == "f" else a for a in inputs]
    if composed:
        with tg.composed():
            out = fn(*leaves)
    else:
        out = fn(*leaves)
    r = np.random.default_rng(upstream_seed).standard_normal(out.shape)
    loss = (out * r).sum()
    ops = {t.op for t in tg.backward_order(loss) if t.op}
    loss.backward()
    return out.data, [leaf.grad for leaf in leaves if isinstance(leaf, tg.Tensor)], ops


def assert_same_function(fn, *inputs, rtol=1e-10, atol=1e-12):
    fused, fused_grads, fused_ops = run(fn, inputs, composed=False)
    composed, composed_grads, composed_ops = run(fn, inputs, composed=True)
    np.testing.assert_allclose(composed, fused, rtol=rtol, atol=atol)
    for got, want in zip(composed_grads, fused_grads):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    assert fused_ops & FUSED, f"the fused run made no fused op: {fused_ops}"
    assert not composed_ops & FUSED, f"composed mode still made fused ops: {composed_ops & FUSED}"
    return composed_ops


# ---- each fused op against its composition -----------------------------------------------------
@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_and_log_softmax_equal_their_compositions_along_every_axis(op, shape):
    for axis in range(-1, len(shape) - 1):
        ops = assert_same_function(lambda x: getattr(x, op)(axis=axis), *arrays(shape))
        assert {"exp", "sum"} <= ops


@pytest.mark.parametrize("axis, keepdims", [(None, False), (0, True), (-1, False), ((0, 2), True)])
@pytest.mark.parametrize("ddof", [0, 1])
@pytest.mark.parametrize("op", ["var", "std"])
def test_var_and_std_equal_their_compositions(op, ddof, axis, keepdims):
    ops = assert_same_function(lambda x: getattr(x, op)(axis, keepdims, ddof=ddof), *arrays((3, 4, 5)))
    assert {"mean", "sub", "pow"} <= ops


@pytest.mark.parametrize("shape", [(), (7,), (3, 4)])
def test_gelu_equals_its_composition(shape):
    x = arrays(shape)[0] * 3   # reach both tails
    assert {"tanh", "pow", "mul", "add"} <= assert_same_function(lambda x: x.gelu(), x)


@pytest.mark.parametrize("x_shape", [(3, 4), (2, 3, 4)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_equals_x_at_w_plus_b(x_shape, bias):
    inputs = arrays(x_shape, (4, 5), (5,))[:3 if bias else 2]
    assert "matmul" in assert_same_function(F.linear, *inputs)


def test_linear_equals_its_composition_when_only_the_weight_needs_a_gradient():
    x, w, b = arrays((2, 3, 4), (4, 5), (5,))
    fused = F.linear(tg.Tensor(x), tg.Tensor(w, requires_grad=True), tg.Tensor(b))
    w_fused = fused._parents[1]
    fused.sum().backward()
    w_composed = tg.Tensor(w, requires_grad=True)
    with tg.composed():
        composed = F.linear(tg.Tensor(x), w_composed, tg.Tensor(b))
    composed.sum().backward()
    np.testing.assert_allclose(composed.data, fused.data, rtol=1e-12)
    np.testing.assert_allclose(w_composed.grad, w_fused.grad, rtol=1e-12)


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 8)])
@pytest.mark.parametrize("params", ["both", "weight", "bias", "none"])
def test_layer_norm_equals_mean_centre_variance_scale_shift(shape, params):
    x, w, b = arrays(shape, shape[-1:], shape[-1:])
    x = x * 2 + 0.5
    inputs = [x] + ([w] if params in ("both", "weight") else []) + ([b] if params in ("both", "bias") else [])

    def fn(x, *rest):
        weight = rest[0] if params in ("both", "weight") else None
        bias = rest[-1] if params in ("both", "bias") else None
        return F.layer_norm(x, weight, bias, eps=1e-5)
    assert {"mean", "sub", "sqrt"} <= assert_same_function(fn, *inputs)


@pytest.mark.parametrize("shape", [(5, 7), (2, 3, 7)])
@pytest.mark.parametrize("ignore_index", [None, 2])
def test_cross_entropy_equals_log_softmax_picked_and_averaged(shape, ignore_index):
    (logits,) = arrays(shape)
    targets = np.random.default_rng(3).integers(0, shape[-1], shape[:-1])
    targets.reshape(-1)[0] = 2   # at least one ignored position when ignore_index is 2
    targets.reshape(-1)[1] = 4   # and one kept
    ops = assert_same_function(lambda z: F.cross_entropy(z, targets, ignore_index=ignore_index), logits)
    assert {"getitem", "exp", "log"} <= ops


ATTENTION_GRID = [
    # (q batch, k/v batch, T, S, d, dv, causal)
    ((), (), 4, 4, 3, 2, True),
    ((2, 3), (2, 3), 5, 5, 4, 4, True),
    ((2, 3), (2, 3), 5, 5, 4, 3, False),
    ((2,), (2,), 3, 6, 4, 5, True),          # more keys than queries: aligned at the end
    ((2,), (2,), 6, 3, 4, 5, False),         # fewer keys than queries
    ((2, 3), (1, 3), 4, 4, 2, 2, True),      # k and v broadcast over the first batch axis
]


@pytest.mark.parametrize("q_batch, kv_batch, T, S, d, dv, causal", ATTENTION_GRID)
def test_attention_equals_scores_mask_softmax_weighted_sum(q_batch, kv_batch, T, S, d, dv, causal):
    q, k, v = arrays((*q_batch, T, d), (*kv_batch, S, d), (*kv_batch, S, dv))
    ops = assert_same_function(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, causal=causal), q, k, v)
    assert {"matmul", "exp", "sum", "div"} <= ops
    assert ("masked_fill" in ops) == causal


def test_attention_with_dropout_equals_its_composition_with_the_same_generator():
    q, k, v = arrays((2, 2, 5, 4), (2, 2, 5, 4), (2, 2, 5, 3))
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=0.3,
                                                        rng=np.random.default_rng(7))
    ops = assert_same_function(fn, q, k, v)
    assert "dropout" in ops


def test_attention_returns_the_same_weights_in_both_modes():
    q, k, v = (tg.Tensor(a) for a in arrays((2, 4, 3), (2, 4, 3), (2, 4, 3)))
    _, fused = F.scaled_dot_product_attention(q, k, v, return_weights=True)
    with tg.composed():
        _, composed = F.scaled_dot_product_attention(q, k, v, return_weights=True)
    assert isinstance(composed, np.ndarray)
    np.testing.assert_allclose(composed, fused, rtol=1e-12, atol=1e-15)


# ---- the whole model -----------------------------------------------------------------------------
def gpt_loss_and_grads(dtype, composed, dropout=0.0):
    nn.manual_seed(0)
    model = nn.GPT(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=8, dropout=dropout).to(dtype)
    rng = np.random.default_rng(1)
    idx, targets = rng.integers(0, 11, (3, 8)), rng.integers(0, 11, (3, 8))
    nn.manual_seed(5)   # the dropout draws
    if composed:
        with tg.composed():
            _, loss = model(idx, targets)
    else:
        _, loss = model(idx, targets)
    ops = {t.op for t in tg.backward_order(loss) if t.op}
    loss.backward()
    return loss.item(), {name: p.grad for name, p in model.named_parameters()}, ops


@pytest.mark.parametrize("dtype, tolerance", [(np.float64, 1e-9), (np.float32, 1e-5)])
@pytest.mark.parametrize("dropout", [0.0, 0.2])
def test_a_whole_gpt_has_the_same_loss_and_parameter_gradients_composed(dtype, tolerance, dropout):
    fused_loss, fused_grads, fused_ops = gpt_loss_and_grads(dtype, composed=False, dropout=dropout)
    composed_loss, composed_grads, composed_ops = gpt_loss_and_grads(dtype, composed=True, dropout=dropout)
    assert composed_loss == pytest.approx(fused_loss, rel=tolerance)
    assert composed_grads.keys() == fused_grads.keys()
    for name in fused_grads:
        scale = np.abs(fused_grads[name]).max()
        np.testing.assert_allclose(composed_grads[name], fused_grads[name], rtol=tolerance,
                                   atol=tolerance * scale, err_msg=name)
    assert FUSED - {"softmax", "log_softmax", "var", "std"} <= fused_ops   # gelu, linear, layer_norm, attention, cross_entropy
    assert not composed_ops & FUSED


def test_gradcheck_passes_in_composed_mode():
    q, k, v = arrays((2, 4, 3), (2, 4, 3), (2, 4, 2))
    x, w, b = arrays((3, 5), (5,), (5,))
    (logits,) = arrays((4, 6))
    targets = np.array([0, 5, 2, 2])
    with tg.composed():
        assert tg.gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), q, k, v)
        assert tg.gradcheck(lambda x, w, b: F.layer_norm(x, w, b), x, w, b)
        assert tg.gradcheck(lambda z: F.cross_entropy(z, targets), logits)
        assert tg.gradcheck(lambda x: x.gelu().softmax().log_softmax(axis=0), x)
        assert tg.gradcheck(F.linear, x, arrays((5, 2))[0], arrays((2,))[0])


# ---- the switch -----------------------------------------------------------------------------------
def test_composed_nests_and_restores_the_mode_even_after_an_error():
    assert not tg.is_composed()
    with tg.composed():
        assert tg.is_composed()
        with tg.composed():
            assert tg.is_composed()
        assert tg.is_composed()
    assert not tg.is_composed()
    with pytest.raises(ZeroDivisionError), tg.composed():
        1 / 0
    assert not tg.is_composed()


def test_composed_works_as_a_decorator():
    @tg.composed()
    def attention_ops(x):
        return {t.op for t in tg.backward_order(x.softmax().sum()) if t.op}
    assert "softmax" not in attention_ops(tg.tensor([1.0, 2.0], requires_grad=True))
    assert not tg.is_composed()


def test_composed_is_per_thread():
    seen = {}

    def worker():
        seen["worker"] = tg.is_composed()

    with tg.composed():
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        seen["main"] = tg.is_composed()
    assert seen == {"worker": False, "main": True}


def test_outside_composed_mode_the_fused_ops_make_one_node_each():
    x = tg.tensor(np.ones((2, 3)), requires_grad=True)
    for make, op in [(lambda: x.softmax(), "softmax"), (lambda: x.log_softmax(), "log_softmax"),
                     (lambda: x.gelu(), "gelu"), (lambda: F.layer_norm(x), "layer_norm")]:
        out = make()
        assert out.op == op and out._parents == (x,)


# ---- the names a student reads ---------------------------------------------------------------------
def attention_graph(composed):
    nn.manual_seed(0)
    attention = nn.MultiHeadAttention(dim=8, n_heads=2)
    x = tg.randn(1, 4, 8, seed=0, requires_grad=True)
    if composed:
        with tg.composed():
            out = attention(x)
    else:
        out = attention(x)
    loss = out.sum()
    loss.backward(retain_graph=True)
    return attention, tg.backward_order(loss)


def test_multi_head_attention_names_q_k_v_in_both_modes_and_scores_and_weights_composed():
    for composed in (False, True):
        attention, nodes = attention_graph(composed)
        labels = [t.label for t in nodes if t.label]
        assert {"q", "k", "v"} <= set(labels)
        assert ({"scores", "weights"} <= set(labels)) == composed
        q = next(t for t in nodes if t.label == "q")
        assert q.op == "getitem" and q.shape == (1, 2, 4, 4)


def test_composed_attention_runs_each_step_in_a_named_scope():
    _, nodes = attention_graph(composed=True)
    step_ops = {}
    for t in nodes:
        if t.op and t._scope:
            step_ops.setdefault(t._scope, set()).add(t.op)
    steps = {("scores",): {"transpose", "matmul", "div"}, ("mask",): {"masked_fill"},
             ("softmax",): {"sub", "exp", "sum", "div"}, ("weighted_sum",): {"matmul"}}
    assert {scope: step_ops[scope] for scope in steps} == steps
    assert step_ops[("qkv",)] == step_ops[("proj",)] == {"matmul", "add"}   # composed Linear: x @ W + b


def test_last_weights_are_the_same_in_both_modes():
    fused, _ = attention_graph(composed=False)
    composed, _ = attention_graph(composed=True)
    assert fused.last_weights.shape == (1, 2, 4, 4)
    np.testing.assert_allclose(composed.last_weights, fused.last_weights, rtol=1e-6)
