"""Attention: the fused F.scaled_dot_product_attention against the same computation
composed from primitives (matmul, masked_fill, softmax) in value and gradient, and
nn.MultiHeadAttention: its [q | k | v] layout, last_weights, causality, gradcheck, and
(where torch is installed) parity with torch's attention with weights copied over."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nn
import tensorgrad as tg
from nn import functional as F


def rand(*shape, seed=0, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def swap_last(x):
    return x.transpose(*range(x.ndim - 2), x.ndim - 1, x.ndim - 2)


def composed_attention(q, k, v, causal=True, drop=None):
    """softmax(q k^T / sqrt(d), masked) v from the engine's primitives; drop = mask/(1-p) or None."""
    T, S = q.shape[-2], k.shape[-2]
    scores = (q @ swap_last(k)) / np.sqrt(q.shape[-1])
    if causal:
        scores = scores.masked_fill(~np.tril(np.ones((T, S), bool), k=S - T), -np.inf)
    weights = scores.softmax(axis=-1)
    return (weights if drop is None else weights * drop) @ v, weights


def value_and_grads(fn, arrays, upstream):
    leaves = [tg.Tensor(a.copy(), requires_grad=True) for a in arrays]
    out = fn(*leaves)
    (out * upstream).sum().backward()
    return out.data, [leaf.grad for leaf in leaves]


# ---- the functional form -----------------------------------------------------------------
@given(st.lists(st.integers(1, 3), min_size=0, max_size=2), st.integers(1, 5), st.integers(0, 3),
       st.integers(1, 4), st.integers(1, 4), st.booleans(), st.integers(0, 2 ** 31))
def test_sdpa_equals_composed_attention_in_value_and_gradient(batch, t, extra, d, dv, causal, seed):
    s = t + extra   # keys may outnumber queries (aligned at the end, as with a cache)
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((*batch, t, d)), rng.standard_normal((*batch, s, d))
    v = rng.standard_normal((*batch, s, dv))
    up = rng.standard_normal((*batch, t, dv))
    fused, fused_grads = value_and_grads(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, causal=causal), [q, k, v], up)
    ref, ref_grads = value_and_grads(lambda q, k, v: composed_attention(q, k, v, causal)[0], [q, k, v], up)
    np.testing.assert_allclose(fused, ref, rtol=1e-10, atol=1e-12)
    for got, want in zip(fused_grads, ref_grads):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11)


def test_sdpa_returns_weights_whose_rows_sum_to_one_and_are_causal():
    q, k, v = (tg.Tensor(rand(2, 3, 6, 4, seed=i)) for i in range(3))
    out, weights = F.scaled_dot_product_attention(q, k, v, causal=True, return_weights=True)
    assert isinstance(weights, np.ndarray) and weights.shape == (2, 3, 6, 6)
    assert out.shape == (2, 3, 6, 4)
    np.testing.assert_allclose(weights.sum(axis=-1), 1, rtol=1e-12)
    assert np.all(weights >= 0)
    np.testing.assert_array_equal(weights[..., np.triu_indices(6, 1)[0], np.triu_indices(6, 1)[1]], 0)
    ref_out, ref_w = composed_attention(q, k, v, causal=True)
    np.testing.assert_allclose(weights, ref_w.data, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(out.data, ref_out.data, rtol=1e-10, atol=1e-12)


def test_sdpa_without_causal_mask_attends_everywhere():
    q, k, v = (tg.Tensor(rand(4, 3, seed=i)) for i in range(3))
    _, weights = F.scaled_dot_product_attention(q, k, v, causal=False, return_weights=True)
    assert np.all(weights > 0)
    np.testing.assert_allclose(weights.sum(axis=-1), 1, rtol=1e-12)


def test_sdpa_gradcheck():
    q, k, v = (tg.Tensor(rand(2, 4, 3, seed=i)) for i in range(3))
    assert tg.gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), q, k, v)
    assert tg.gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, causal=False), q, k, v)


def test_sdpa_with_attention_dropout_equals_composed_version_with_the_same_mask():
    q, k, v = rand(2, 5, 3, seed=0), rand(2, 5, 3, seed=1), rand(2, 5, 2, seed=2)
    up = rand(2, 5, 2, seed=3)
    p = 0.3
    mask = (np.random.default_rng(42).random((2, 5, 5)) >= p) / (1 - p)
    fused, fused_grads = value_and_grads(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=p, training=True,
                                                       rng=np.random.default_rng(42)), [q, k, v], up)
    ref, ref_grads = value_and_grads(lambda q, k, v: composed_attention(q, k, v, True, mask)[0],
                                     [q, k, v], up)
    np.testing.assert_allclose(fused, ref, rtol=1e-10, atol=1e-12)
    for got, want in zip(fused_grads, ref_grads):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11)
    assert tg.gradcheck(lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, dropout_p=p, rng=np.random.default_rng(42)), *map(tg.Tensor, (q, k, v)))


def test_a_row_far_below_its_heads_max_is_redone_with_its_own_max_not_lost_to_underflow():
    """The fused softmax shifts a head's scores by the max of its whole (T, S) block; a row
    far below that max would underflow to all zeros (then 0/0), so block_max_softmax makes
    the scores again and shifts each row by its own max: the same weights as composed."""
    q = np.array([[100.0], [-100.0]])             # scores (d = 1): [[1000, 900], [-1000, -900]]
    k, v = np.array([[10.0], [9.0]]), np.array([[1.0, 0.0], [0.0, 1.0]])
    up = rand(2, 2, seed=3)
    fused = value_and_grads(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, causal=False), [q, k, v], up)
    composed = value_and_grads(lambda q, k, v: composed_attention(q, k, v, causal=False)[0], [q, k, v], up)
    for got, want in zip([fused[0], *fused[1]], [composed[0], *composed[1]]):
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)
    calls = []

    def make_scores():
        calls.append(len(calls))
        return q @ k.T
    weights = nn.transformer.block_max_softmax(make_scores)
    assert len(calls) == 2                        # made again, once
    np.testing.assert_allclose(weights, [[1, np.exp(-100)], [np.exp(-100), 1]] / (1 + np.exp(-100)), rtol=1e-12)


def test_the_model_file_holds_attention_and_functional_names_it_too():
    """A learner finds attention in nn/transformer.py, beside the model that calls it;
    F.scaled_dot_product_attention (PyTorch's spelling) is the same function."""
    assert F.scaled_dot_product_attention is nn.transformer.scaled_dot_product_attention
    assert F.future_positions is nn.transformer.future_positions
    assert F.future_penalty is nn.transformer.future_penalty


def test_sdpa_dropout_is_off_when_not_training():
    q, k, v = (tg.Tensor(rand(4, 3, seed=i)) for i in range(3))
    plain = F.scaled_dot_product_attention(q, k, v)
    off = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5, training=False)
    np.testing.assert_array_equal(plain.data, off.data)


def test_sdpa_keeps_float32():
    q, k, v = (tg.Tensor(rand(3, 4, seed=i, dtype=np.float32), requires_grad=True) for i in range(3))
    out = F.scaled_dot_product_attention(q, k, v)
    assert out.dtype == np.float32
    out.sum().backward()
    assert all(t.grad.dtype == np.float32 for t in (q, k, v))


def test_sdpa_backward_twice_with_retain_graph_accumulates_both_upstreams():
    """A second backward through the same graph, with a new upstream gradient that happens
    to live in the same array, must use the new values (no stale per-graph cache)."""
    q, k, v = (tg.Tensor(rand(3, 2, seed=i), requires_grad=True) for i in range(3))
    out = F.scaled_dot_product_attention(q, k, v)
    g = rand(3, 2, seed=5)
    first = g.copy()
    out.backward(g, retain_graph=True)
    g *= 3                               # the same array, new values
    out.backward(g)
    ref = [tg.Tensor(t.data.copy(), requires_grad=True) for t in (q, k, v)]
    ref_out = composed_attention(*ref)[0]
    (ref_out * (first + 3 * first)).sum().backward()
    for t, r in zip((q, k, v), ref):
        np.testing.assert_allclose(t.grad, r.grad, rtol=1e-10, atol=1e-12)


def test_sdpa_matches_torch():
    torch = pytest.importorskip("torch")
    q, k, v = rand(2, 3, 5, 4, seed=0), rand(2, 3, 5, 4, seed=1), rand(2, 3, 5, 4, seed=2)
    up = rand(2, 3, 5, 4, seed=3)
    for causal in (True, False):
        out, grads = value_and_grads(
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, causal=causal), [q, k, v], up)
        tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
        ref = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
        (ref * torch.from_numpy(up)).sum().backward()
        np.testing.assert_allclose(out, ref.detach().numpy(), rtol=1e-10, atol=1e-12)
        for got, t in zip(grads, (tq, tk, tv)):
            np.testing.assert_allclose(got, t.grad.numpy(), rtol=1e-9, atol=1e-11)


def test_sdpa_with_shapes_that_do_not_fit_is_a_clear_error():
    q, k = tg.Tensor(rand(4, 3)), tg.Tensor(rand(4, 2))
    with pytest.raises(ValueError, match=r"scaled_dot_product_attention.*\(4, 3\).*\(4, 2\)"):
        F.scaled_dot_product_attention(q, k, k)
    with pytest.raises(ValueError, match="scaled_dot_product_attention"):
        F.scaled_dot_product_attention(q, q, tg.Tensor(rand(5, 3)))


# ---- MultiHeadAttention ------------------------------------------------------------------
def reference_mha(attn, x, causal=True):
    """The article's attention in plain numpy: one Linear to [q | k | v], heads split along
    each third, softmax(q k^T / sqrt(hs) + mask) v per head, concat, proj."""
    B, T, C = x.shape
    nh = attn.n_heads
    hs = C // nh
    qkv = x @ attn.qkv.weight.data + attn.qkv.bias.data
    q, k, v = qkv[..., :C], qkv[..., C:2 * C], qkv[..., 2 * C:]
    heads, weights = [], []
    for h in range(nh):
        cols = slice(h * hs, (h + 1) * hs)
        scores = q[..., cols] @ np.swapaxes(k[..., cols], -1, -2) / np.sqrt(hs)
        if causal:
            scores = np.where(np.tril(np.ones((T, T), bool)), scores, -np.inf)
        w = np.exp(scores - scores.max(-1, keepdims=True))
        w /= w.sum(-1, keepdims=True)
        weights.append(w)
        heads.append(w @ v[..., cols])
    y = np.concatenate(heads, axis=-1)
    return y @ attn.proj.weight.data + attn.proj.bias.data, np.stack(weights, axis=1)


def test_multihead_attention_layout_is_qkv_then_proj():
    attn = nn.MultiHeadAttention(12, 3)
    assert [(n, p.shape) for n, p in attn.named_parameters()] == [
        ("qkv.weight", (12, 36)), ("qkv.bias", (36,)), ("proj.weight", (12, 12)), ("proj.bias", (12,))]


@pytest.mark.parametrize("causal", [True, False])
def test_multihead_attention_equals_per_head_reference_on_the_qkv_columns(causal):
    attn = nn.MultiHeadAttention(12, 3, causal=causal).to(np.float64)
    x = rand(2, 5, 12)
    out = attn(tg.Tensor(x))
    ref_out, ref_weights = reference_mha(attn, x, causal)
    np.testing.assert_allclose(out.data, ref_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(attn.last_weights, ref_weights, rtol=1e-10, atol=1e-13)


def test_multihead_attention_keeps_last_weights_with_rows_summing_to_one():
    attn = nn.MultiHeadAttention(8, 2)
    assert attn.last_weights is None
    attn(tg.Tensor(rand(3, 7, 8, dtype=np.float32)))
    w = attn.last_weights
    assert isinstance(w, np.ndarray) and w.shape == (3, 2, 7, 7)
    np.testing.assert_allclose(w.sum(axis=-1), 1, rtol=1e-5)
    assert np.all(np.triu(np.ones((7, 7)), 1)[None, None] * w == 0)
    attn(tg.Tensor(rand(1, 4, 8, dtype=np.float32)))
    assert attn.last_weights.shape == (1, 2, 4, 4)


def test_multihead_attention_is_causal_changing_token_t_never_changes_outputs_before_t():
    attn = nn.MultiHeadAttention(8, 2).to(np.float64)
    x = rand(2, 6, 8)
    base = attn(tg.Tensor(x)).data
    for t in range(6):
        changed = x.copy()
        changed[:, t] += rand(2, 8, seed=10 + t) * 5
        out = attn(tg.Tensor(changed)).data
        np.testing.assert_allclose(out[:, :t], base[:, :t], rtol=1e-12, atol=1e-12)
        assert not np.allclose(out[:, t], base[:, t])


def test_non_causal_attention_lets_later_tokens_change_earlier_outputs():
    attn = nn.MultiHeadAttention(8, 2, causal=False).to(np.float64)
    x = rand(1, 4, 8)
    changed = x.copy()
    changed[:, -1] += 3
    assert not np.allclose(attn(tg.Tensor(x)).data[:, 0], attn(tg.Tensor(changed)).data[:, 0])


def test_multihead_attention_dim_not_divisible_by_heads_is_an_error():
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiHeadAttention(10, 3)


def test_multihead_attention_gradcheck_parameters_and_input():
    attn = nn.MultiHeadAttention(4, 2).to(np.float64)
    x = tg.Tensor(rand(2, 3, 4))
    assert tg.gradcheck(lambda *ps: attn(x), *attn.parameters())
    assert tg.gradcheck(lambda x: attn(x), x)


def test_multihead_attention_dropout_is_seeded_and_off_in_eval():
    nn.manual_seed(0)
    attn = nn.MultiHeadAttention(8, 2, dropout=0.5)
    x = tg.Tensor(rand(2, 5, 8, dtype=np.float32))
    nn.manual_seed(1)
    a = attn(x).data
    b = attn(x).data
    nn.manual_seed(1)
    c = attn(x).data
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, b)
    attn.eval()
    ref, _ = reference_mha(attn, x.data)
    np.testing.assert_allclose(attn(x).data, ref, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(attn(x).data, attn(x).data)


def test_multihead_attention_matches_torch_with_weights_copied():
    torch = pytest.importorskip("torch")
    C, nh, B, T = 12, 3, 2, 5
    attn = nn.MultiHeadAttention(C, nh).to(np.float64)
    ref = torch.nn.MultiheadAttention(C, nh, batch_first=True, dtype=torch.float64)
    with torch.no_grad():   # torch stores (out, in): our [q | k | v] columns are its [q; k; v] rows
        ref.in_proj_weight.copy_(torch.from_numpy(attn.qkv.weight.data.T.copy()))
        ref.in_proj_bias.copy_(torch.from_numpy(attn.qkv.bias.data))
        ref.out_proj.weight.copy_(torch.from_numpy(attn.proj.weight.data.T.copy()))
        ref.out_proj.bias.copy_(torch.from_numpy(attn.proj.bias.data))
    x = rand(B, T, C)
    up = rand(B, T, C, seed=1)
    xt = tg.Tensor(x, requires_grad=True)
    out = attn(xt)
    (out * up).sum().backward()
    xr = torch.tensor(x, requires_grad=True)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)   # True = may not attend
    out_r, w_r = ref(xr, xr, xr, attn_mask=mask, need_weights=True, average_attn_weights=False)
    (out_r * torch.from_numpy(up)).sum().backward()
    np.testing.assert_allclose(out.data, out_r.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(attn.last_weights, w_r.detach().numpy(), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(xt.grad, xr.grad.numpy(), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(attn.qkv.weight.grad, ref.in_proj_weight.grad.numpy().T, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(attn.qkv.bias.grad, ref.in_proj_bias.grad.numpy(), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(attn.proj.weight.grad, ref.out_proj.weight.grad.numpy().T, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(attn.proj.bias.grad, ref.out_proj.bias.grad.numpy(), rtol=1e-9, atol=1e-11)
