"""nn.functional: the transformer's functions as fused tensorgrad ops.

Each op here could be composed from the engine's primitives (tests check that it equals
that composition in value and gradient); fusing it means one node in the graph, numpy work
arranged to pass over memory as few times as it can (in place where safe), and a
hand-derived backward: that is what makes training fast. Every backward states its
derivation.
"""
import functools

import numpy as np

from tensorgrad import Tensor, make_op

from . import rng as nn_rng


def linear(x, weight, bias=None):
    """x @ weight + bias for x (..., in), weight (in, out), bias (out,): one op instead of two,
    so the bias is added into the matmul's output in place rather than into a second
    activation-sized array (~6% of a GPT training step)."""
    if x.shape[-1] != weight.shape[0]:
        raise ValueError(f"linear: input of shape {x.shape} has {x.shape[-1]} features, "
                         f"expected {weight.shape[0]} (weight of shape {weight.shape})")
    rows = x.data.reshape(-1, x.shape[-1])                         # (N, in): every row at once
    out = rows @ weight.data                                       # (N, out)
    if bias is not None:
        out += bias.data
    flat = lambda g: g.reshape(-1, g.shape[-1])                    # dL/dout as (N, out)
    ones = np.ones(len(rows), rows.dtype)                          # ones @ g: g's rows summed by BLAS
    inputs = (x, weight) if bias is None else (x, weight, bias)
    vjps = (lambda g: (flat(g) @ weight.data.T).reshape(x.shape),  # d(xW)/dx: g W^T
            lambda g: rows.T @ flat(g),                            # d(xW)/dW: x^T g, summed over rows
            lambda g: ones @ flat(g))                              # d(b)/db: g summed over rows
    return make_op("linear", out.reshape(*x.shape[:-1], weight.shape[1]), inputs, vjps[:len(inputs)])


def softmax(x, axis=-1):
    return x.softmax(axis)


def log_softmax(x, axis=-1):
    return x.log_softmax(axis)


def gelu(x):
    """GELU, tanh approximation (as GPT-2 and nanoGPT)."""
    return x.gelu()


def cross_entropy(logits, targets, ignore_index=None):
    """Mean over positions of -log softmax(logits)[target].

    logits (..., V) float; targets (...) integer class ids in [0, V); positions whose
    target equals ignore_index count for nothing.
    """
    targets = np.asarray(targets.data if isinstance(targets, Tensor) else targets)
    vocab = logits.shape[-1]
    if targets.dtype.kind not in "iu":
        raise TypeError(f"cross_entropy: targets must be integer class ids, got dtype {targets.dtype}")
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"cross_entropy: targets of shape {targets.shape} do not match logits of "
                         f"shape {logits.shape}: expected targets of shape {logits.shape[:-1]}")
    keep = np.ones(targets.shape, bool) if ignore_index is None else targets != ignore_index
    bad = keep & ((targets < 0) | (targets >= vocab))
    if bad.any():
        raise ValueError(f"cross_entropy: target {targets[bad][0]} is out of range for {vocab} classes "
                         f"(expected ids in [0, {vocab}){'' if ignore_index is None else f' or {ignore_index}'})")
    count = int(keep.sum())
    if count == 0:
        raise ValueError("cross_entropy: every target equals ignore_index: the mean is undefined")

    rows = logits.data.reshape(-1, vocab)                              # (N, V)
    picked = np.where(keep, targets, 0).reshape(-1)                    # (N,)
    shifted = rows - rows.max(axis=1, keepdims=True)                   # no overflow in exp
    log_sum = np.log(np.exp(shifted).sum(axis=1))                      # (N,)
    losses = log_sum - shifted[np.arange(len(picked)), picked]         # -log p[target]
    weights = keep.reshape(-1).astype(rows.dtype) / count              # 1/count, 0 if ignored
    loss = (losses * weights).sum(dtype=rows.dtype)

    def vjp(g):  # d loss / d logits = (softmax(logits) - onehot(target)) / count
        grad = np.exp(shifted - log_sum[:, None])
        grad[np.arange(len(picked)), picked] -= 1
        grad *= (g * weights)[:, None]
        return grad.reshape(logits.shape)
    return make_op("cross_entropy", loss, (logits,), (vjp,))


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    """(x - mean) / sqrt(var + eps) over the last axis, then * weight + bias."""
    channels = x.shape[-1]
    data = x.data.reshape(-1, channels)                             # (N, C): every row at once
    average = np.full((channels, 1), 1 / channels, data.dtype)     # rows @ average: row means,
    xhat = data - data @ average                                    # faster than .mean(-1)
    variance = np.vecdot(xhat, xhat)[:, None] / channels            # (N, 1), with no (N, C) temporary
    rstd = 1 / np.sqrt(variance + eps)                              # 1/sigma
    xhat *= rstd
    out = xhat * weight.data if weight is not None else xhat.copy()
    if bias is not None:
        out += bias.data

    # Backward. With gh = dL/dxhat = g * weight, xhat = (x - mean) / sigma gives
    #   dL/dx = (gh - mean(gh) - xhat * mean(gh * xhat)) / sigma,
    #   dL/dweight = sum over rows of g * xhat,   dL/dbias = sum over rows of g.
    # Row means of gh = g * weight are g @ (weight / C): a matrix-vector product on g
    # itself, so gh * xhat is never formed. g * xhat is formed once, for the weight's
    # gradient and x's, whose vjp works out both (x's vjp runs first: inputs are visited
    # in order) and keeps the small ones for the weight and bias vjps.
    weighted_average = average if weight is None else (weight.data / channels)[:, None]   # (C, 1)
    ones = np.ones(len(data), data.dtype)   # ones @ rows sums the rows: faster than .sum(axis=0)
    saved = {}

    def grad_x(g):
        rows = g.reshape(-1, channels)
        g_xhat = rows * xhat
        saved["g"], saved["weight"], saved["bias"] = g, ones @ g_xhat, ones @ rows
        np.multiply(xhat, g_xhat @ weighted_average, out=g_xhat)   # xhat * mean(gh * xhat)
        grad = rows * weight.data if weight is not None else rows.copy()   # gh
        grad -= rows @ weighted_average                                  # - mean(gh)
        grad -= g_xhat
        grad *= rstd
        return grad.reshape(x.shape)

    def parameter_grad(name):
        def vjp(g):
            if saved.get("g") is not g:   # x needs no gradient, so its vjp did not run
                grad_x(g)
            return saved[name].copy()     # a copy: backward may add into what a vjp returns
        return vjp

    inputs = [x] + [p for p in (weight, bias) if p is not None]
    vjps = [grad_x]
    if weight is not None:
        vjps.append(parameter_grad("weight"))   # d out / d weight = xhat
    if bias is not None:
        vjps.append(parameter_grad("bias"))     # d out / d bias = 1
    return make_op("layer_norm", out.reshape(x.shape), tuple(inputs), tuple(vjps))


def dropout(x, p, training=True, rng=None):
    """Zero each element with probability p and scale the rest by 1/(1-p), so the
    expected value is unchanged; identity when not training or p == 0."""
    if not 0 <= p < 1:
        raise ValueError(f"dropout: p must be in [0, 1), got {p}")
    if not training or p == 0:
        return x
    keep = (rng or nn_rng.current()).random(x.shape) >= p
    scale = (keep / (1 - p)).astype(x.dtype)
    return make_op("dropout", x.data * scale, (x,), (lambda g: g * scale,))   # d/dx = mask / (1-p)


@functools.lru_cache(maxsize=16)
def causal_mask(t, s, dtype):
    """(t, s) additive mask: 0 where query i may look at key j (j <= i + s - t), -inf after.
    Cached, so the mask is built once per sequence length rather than every step."""
    allowed = np.tril(np.ones((t, s), bool), k=s - t)
    mask = np.where(allowed, 0, -np.inf).astype(dtype)
    mask.flags.writeable = False
    return mask


def scaled_dot_product_attention(q, k, v, causal=True, return_weights=False, dropout_p=0.0,
                                 training=True, rng=None):
    """softmax(q k^T / sqrt(d) + mask) v for q (..., T, d), k (..., S, d), v (..., S, dv).

    With causal=True, query i attends only to keys j <= i (aligned at the end when S > T).
    Returns out (..., T, dv), and with return_weights also the attention weights
    (..., T, S) as an ndarray.
    """
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2] or q.ndim < 2:
        raise ValueError(f"scaled_dot_product_attention: q {q.shape}, k {k.shape}, v {v.shape} do not "
                         "fit: expected q (..., T, d), k (..., S, d), v (..., S, dv)")
    scale = np.asarray(1 / np.sqrt(q.shape[-1]), dtype=q.dtype)
    q_scaled = q.data * scale                 # (..., T, d): cheaper to scale than the (T, S) scores
    # numpy hands a batched product to BLAS at full speed only when its right operand is
    # contiguous (a transposed view runs ~1.7x slower), so k^T and v are made so; and
    # v^T and k, for the backward, when it runs
    transposed = lambda a: np.ascontiguousarray(np.swapaxes(a, -1, -2))
    k_t, v_data = transposed(k.data), np.ascontiguousarray(v.data)   # (..., d, S), (..., S, dv)
    ones = np.ones((k.shape[-2], 1), q.dtype)  # x @ ones sums rows: several times faster than .sum(-1)

    def scores():                             # (..., T, S)
        s = q_scaled @ k_t
        if causal:
            s += causal_mask(q.shape[-2], k.shape[-2], s.dtype)
        return s

    # softmax over each row, in place. Subtracting a constant from a row leaves its softmax
    # unchanged; the max of each head's whole (T, S) block is one (and ~20x faster to find
    # in numpy than every row's max), and since it is >= each row's max, exp cannot overflow.
    # A row far below its head's max could underflow to all zeros: then redo with row maxima.
    weights = scores()
    weights -= weights.max(axis=(-2, -1), keepdims=True)
    np.exp(weights, out=weights)
    totals = weights @ ones
    if (totals < 1e-30).any():
        weights = scores()
        weights -= weights.max(axis=-1, keepdims=True)
        np.exp(weights, out=weights)
        totals = weights @ ones
    weights *= 1 / totals                                          # (..., T, S), rows sum to 1
    dropped, drop_scale = weights, None
    if dropout_p and training:
        keep = (rng or nn_rng.current()).random(weights.shape) >= dropout_p
        drop_scale = (keep / (1 - dropout_p)).astype(weights.dtype)   # mask / (1-p)
        dropped = weights * drop_scale
    out = dropped @ v_data                                         # (..., T, dv)

    saved = {}

    def grad_scores(g):
        """dL/d(q_scaled k^T), computed once per backward for both q's and k's vjps."""
        if saved.get("g") is not g:
            # out = A v with A = dropout(W): dL/dA = g v^T; through dropout: dL/dW = dL/dA * mask/(1-p)
            grad = g @ transposed(v_data)
            if drop_scale is not None:
                grad *= drop_scale
            # softmax: dL/ds = W * (dL/dW - sum_j dL/dW_j W_j); masked entries have W = 0
            grad -= np.vecdot(grad, weights)[..., None]
            grad *= weights
            saved["g"], saved["grad"] = g, grad
        return saved["grad"]

    def grad_q(g):  # s = (q * scale) k^T: ds/dq = k * scale
        grad = grad_scores(g) @ np.ascontiguousarray(k.data)
        grad *= scale
        return grad

    out_tensor = make_op("scaled_dot_product_attention", out, (q, k, v),
                         (grad_q,
                          lambda g: np.swapaxes(grad_scores(g), -1, -2) @ q_scaled,   # ds/dk = q * scale
                          lambda g: np.swapaxes(dropped, -1, -2) @ g))                # d(A v)/dv = A^T
    return (out_tensor, weights) if return_weights else out_tensor
