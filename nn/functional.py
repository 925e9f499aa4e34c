"""nn.functional: the transformer's functions as fused tensorgrad ops.

Each op here could be composed from the engine's primitives (tests check that it equals
that composition in value and gradient); fusing it means one node in the graph, one
numpy pass for the forward and a hand-derived backward, which is what makes training fast.
Every backward below states its derivation.
"""
import functools

import numpy as np

import tensorgrad as tg
from tensorgrad import Tensor, make_op

from .rng import generator


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
    data = x.data
    mean = data.mean(axis=-1, keepdims=True)
    centered = data - mean
    rstd = 1 / np.sqrt((centered * centered).mean(axis=-1, keepdims=True) + eps)  # 1/sigma
    xhat = centered * rstd
    out = xhat if weight is None else xhat * weight.data
    out = out if bias is None else out + bias.data
    inputs = [x] + [t for t in (weight, bias) if t is not None]

    def grad_x(g):
        # With gh = dL/dxhat = g * weight and n features, xhat = (x - mean) / sigma gives
        # dL/dx = (gh - mean(gh) - xhat * mean(gh * xhat)) / sigma
        gh = g if weight is None else g * weight.data
        return rstd * (gh - gh.mean(axis=-1, keepdims=True)
                       - xhat * (gh * xhat).mean(axis=-1, keepdims=True))
    vjps = [grad_x]
    if weight is not None:
        vjps.append(lambda g: g * xhat)   # d out / d weight = xhat (summed over rows by unbroadcast)
    if bias is not None:
        vjps.append(lambda g: g)          # d out / d bias = 1
    return make_op("layer_norm", out, tuple(inputs), tuple(vjps))


def dropout(x, p, training=True, rng=None):
    """Zero each element with probability p and scale the rest by 1/(1-p), so the
    expected value is unchanged; identity when not training or p == 0."""
    if not 0 <= p < 1:
        raise ValueError(f"dropout: p must be in [0, 1), got {p}")
    if not training or p == 0:
        return x
    keep = (rng or generator).random(x.shape) >= p
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
    scores = q.data @ np.swapaxes(k.data, -1, -2)                 # (..., T, S)
    scores *= scale
    if causal:
        scores += causal_mask(q.shape[-2], k.shape[-2], scores.dtype)
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores, out=scores)
    weights /= weights.sum(axis=-1, keepdims=True)                # (..., T, S), rows sum to 1
    dropped, drop_scale = weights, None
    if dropout_p and training:
        keep = (rng or generator).random(weights.shape) >= dropout_p
        drop_scale = (keep / (1 - dropout_p)).astype(weights.dtype)   # mask / (1-p)
        dropped = weights * drop_scale
    out = dropped @ v.data                                         # (..., T, dv)

    def attention_grads(g):
        # out = A v with A = dropout(W): dL/dA = g v^T; back through dropout: dL/dW = dL/dA * mask/(1-p)
        grad_w = g @ np.swapaxes(v.data, -1, -2)
        if drop_scale is not None:
            grad_w *= drop_scale
        # softmax: dL/dscores = W * (dL/dW - sum_j dL/dW_j W_j); masked entries have W = 0
        grad_scores = weights * (grad_w - (grad_w * weights).sum(axis=-1, keepdims=True))
        return grad_scores * scale                                 # scores = q k^T * scale

    saved = {}

    def grad_scores_once(g):  # q and k both need dL/dscores: compute it once per backward
        if saved.get("g") is not g:
            saved["g"], saved["grad"] = g, attention_grads(g)
        return saved["grad"]

    out_tensor = make_op("scaled_dot_product_attention", out, (q, k, v),
                         (lambda g: grad_scores_once(g) @ k.data,                          # d(q k^T)/dq = k
                          lambda g: np.swapaxes(grad_scores_once(g), -1, -2) @ q.data,     # d(q k^T)/dk = q
                          lambda g: np.swapaxes(dropped, -1, -2) @ g))                     # d(A v)/dv = A^T
    return (out_tensor, weights) if return_weights else out_tensor
