"""nn.functional: the transformer's functions, each written twice, side by side.

The composed body builds the function from the engine's primitive ops, written like the
math a textbook shows; it runs inside `tg.composed()`, so drawings and traces show every
step. The fused body is one node in the graph: its numpy work passes over memory as few
times as it can (in place where safe) and its backward is derived by hand, stated beside
it; training uses it, because it is faster. Tests prove the two equal in value and in
every input's gradient.
"""
import functools

import numpy as np

import tensorgrad as tg
from tensorgrad import Tensor, make_op, threads
from tensorgrad.pytorch import torch_names

from . import rng as nn_rng


def linear(x, weight, bias=None):
    """x @ weight + bias for x (..., in), weight (in, out), bias (out,)."""
    if x.shape[-1] != weight.shape[0]:
        raise ValueError(f"linear: input of shape {x.shape} has {x.shape[-1]} features, "
                         f"expected {weight.shape[0]} (weight of shape {weight.shape})")
    if tg.is_composed():
        return x @ weight if bias is None else x @ weight + bias
    # fused: the bias is added into the product in place, not into a second
    # activation-sized array
    rows = x.data.reshape(-1, x.shape[-1])                         # (N, in): every row at once
    out = rows @ weight.data                                       # (N, out)
    if bias is not None:
        out += bias.data
    flat = lambda g: g.reshape(-1, g.shape[-1])                    # dL/dout as (N, out)
    ones = np.ones(len(rows), rows.dtype)                          # ones @ g: g's rows summed by BLAS
    inputs = (x, weight) if bias is None else (x, weight, bias)
    vjps = (lambda g: (flat(g) @ weight.data.T).reshape(x.shape),
            lambda g: rows.T @ flat(g),
            lambda g: ones @ flat(g))
    rules = ("dL/dx = g @ Wᵀ", "dL/dW = xᵀ @ g (summed over the rows)", "dL/db = Σ_rows g")
    return make_op("linear", out.reshape(*x.shape[:-1], weight.shape[1]), inputs,
                   vjps=vjps[:len(inputs)], rules=rules[:len(inputs)], fresh=True)


@torch_names   # F.softmax(x, dim=-1), as PyTorch spells it, or axis=-1
def softmax(x, axis=-1):
    return x.softmax(axis)


@torch_names
def log_softmax(x, axis=-1):
    return x.log_softmax(axis)


one_hot = tg.one_hot   # integer ids -> int64 rows of 0s and 1s: the engine's, under PyTorch's F.one_hot


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
    picked = np.where(keep, targets, 0).reshape(-1)                    # (N,) target ids (0 if ignored)
    weights = keep.reshape(-1).astype(logits.dtype) / count            # 1/count, 0 if ignored

    if tg.is_composed():
        log_probs = logits.log_softmax(axis=-1).reshape(-1, vocab)     # (N, V)
        log_p_target = log_probs[np.arange(len(picked)), picked]       # (N,): log p[target]
        return -(log_p_target * weights).sum()                         # the mean over kept positions

    # fused: one pass for the log-sum-exp, no (N, V) log-probabilities kept
    rows = logits.data.reshape(-1, vocab)                              # (N, V)
    shifted = rows - rows.max(axis=1, keepdims=True)                   # no overflow in exp
    log_sum = np.log(np.exp(shifted).sum(axis=1))                      # (N,)
    losses = log_sum - shifted[np.arange(len(picked)), picked]         # -log p[target]
    loss = (losses * weights).sum(dtype=rows.dtype)

    def vjp(g):
        grad = np.exp(shifted - log_sum[:, None])                      # softmax(logits)
        grad[np.arange(len(picked)), picked] -= 1
        grad *= (g * weights)[:, None]
        return grad.reshape(logits.shape)
    return make_op("cross_entropy", loss, (logits,), vjps=(vjp,), fresh=True,
                   rules=("dL/dlogits = (softmax(logits) - onehot(target)) / N",))


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    """(x - mean) / sqrt(var + eps) over the last axis, then * weight + bias."""
    if tg.is_composed():
        mean = x.mean(axis=-1, keepdims=True)
        centred = x - mean
        var = (centred ** 2).mean(axis=-1, keepdims=True)
        rstd = 1 / (var + eps).sqrt()                                   # 1/σ
        xhat = centred * rstd
        for tensor, name in [(mean, "mean"), (var, "var"), (rstd, "1/σ"), (xhat, "xhat")]:
            tensor.label = name
        out = xhat if weight is None else xhat * weight                 # scale
        return out if bias is None else out + bias                      # shift

    # fused: the rows, (N, C), in cache-sized tiles shared across the cores (threads.by_rows)
    channels = x.shape[-1]
    data = threads.rows(x.data)
    average = np.full((channels, 1), 1 / channels, data.dtype)   # rows @ average: row means, faster
                                                                  # than .mean(-1) (a BLAS product)
    xhat, rstd = np.empty(data.shape, data.dtype), np.empty((len(data), 1), data.dtype)
    out = np.empty(data.shape, data.dtype)

    def forward(data, xhat, rstd, out):                         # on a block of rows
        np.subtract(data, data @ average, out=xhat)
        variance = np.vecdot(xhat, xhat)[:, None] / channels    # (n, 1), with no (n, C) temporary
        np.sqrt(variance + eps, out=rstd)
        np.divide(1, rstd, out=rstd)                            # 1/σ
        xhat *= rstd
        np.multiply(xhat, 1 if weight is None else weight.data, out=out)
        if bias is not None:
            out += bias.data
    threads.by_rows(forward, data, xhat, rstd, out)

    # With gh = dL/dxhat = g·weight, xhat = (x - mean)/σ gives
    #   dL/dx = (gh - mean(gh) - xhat·mean(gh·xhat)) / σ,
    #   dL/dweight = Σ_rows g·xhat,   dL/dbias = Σ_rows g.
    # Row means of gh = g·weight are g @ (weight / C): a matrix-vector product on g itself,
    # so gh·xhat is never formed; g·xhat is formed once, for the weight's gradient and x's.
    weighted_average = average if weight is None else (weight.data / channels)[:, None]   # (C, 1)
    ones = np.ones(len(data), data.dtype)   # ones @ rows sums the rows with BLAS

    def backward(g):   # every input's gradient at once: they share g·xhat
        rows = threads.rows(g)
        g_xhat = rows * xhat   # one pass: cheaper here than handing half of it to a thread
        grad_weight = ones @ g_xhat if weight is not None and weight.requires_grad else None
        grad_bias = ones @ rows if bias is not None and bias.requires_grad else None
        grad_x = np.empty(data.shape, data.dtype) if x.requires_grad else None

        def input_gradient(g, xhat, rstd, g_xhat, grad_x):      # on a block of rows
            np.multiply(xhat, g_xhat @ weighted_average, out=g_xhat)           # xhat·mean(gh·xhat)
            np.multiply(g, 1 if weight is None else weight.data, out=grad_x)   # gh
            grad_x -= g @ weighted_average                                     # - mean(gh)
            grad_x -= g_xhat
            grad_x *= rstd
        if x.requires_grad:
            threads.by_rows(input_gradient, rows, xhat, rstd, g_xhat, grad_x)
            grad_x = grad_x.reshape(x.shape)
        return [grad_x] + [grad for p, grad in ((weight, grad_weight), (bias, grad_bias)) if p is not None]

    parameters = [(p, rule) for p, rule in ((weight, "dL/dweight = Σ_rows g·xhat"), (bias, "dL/dbias = Σ_rows g"))
                  if p is not None]
    return make_op("layer_norm", out.reshape(x.shape), (x, *(p for p, _ in parameters)), vjps=backward,
                   rules=("dL/dx = (gh - mean(gh) - xhat·mean(gh·xhat)) / σ, gh = g·weight",
                          *(rule for _, rule in parameters)), fresh=True)


def dropout(x, p, training=True, rng=None):
    """Zero each element with probability p and scale the rest by 1/(1-p), so the
    expected value is unchanged; identity when not training or p == 0."""
    if not 0 <= p < 1:
        raise ValueError(f"dropout: p must be in [0, 1), got {p}")
    if not training or p == 0:
        return x
    keep = (rng or nn_rng.current()).random(x.shape) >= p
    scale = (keep / (1 - p)).astype(x.dtype)
    return make_op("dropout", x.data * scale, (x,), vjps=(lambda g: g * scale,),
                   rules=("d dropout(x)/dx = mask/(1-p)",), fresh=True)


@functools.lru_cache(maxsize=16)
def future_positions(t, s):
    """(t, s) boolean mask, True where key j comes after query i (j > i + s - t): what a
    causal query may not look at. Cached, so it is built once per sequence length."""
    future = ~np.tril(np.ones((t, s), bool), k=s - t)
    future.flags.writeable = False
    return future


@functools.lru_cache(maxsize=16)
def future_penalty(t, s, dtype):
    """The causal mask as numbers to add to the scores: -inf on future_positions(t, s), 0
    elsewhere (one pass over the scores, faster than writing -inf where a mask says)."""
    penalty = np.where(future_positions(t, s), -np.inf, 0).astype(dtype)
    penalty.flags.writeable = False
    return penalty


def heads_side_by_side(shape, dtype):
    """An empty array of `shape` (..., heads, T, dv), laid out in memory as (..., T, heads,
    dv): where MultiHeadAttention puts the heads next, so that its reshape of
    out.transpose(0, 2, 1, 3) to (B, T, C) is a view, not a copy. Any other shape comes
    laid out as it is."""
    if len(shape) < 3:
        return np.empty(shape, dtype)
    return np.swapaxes(np.empty(shape[:-3] + (shape[-2], shape[-3], shape[-1]), dtype), -3, -2)


def scaled_dot_product_attention(q, k, v, causal=True, return_weights=False, dropout_p=0.0,
                                 training=True, rng=None):
    """softmax(q kᵀ / √d + mask) v for q (..., T, d), k (..., S, d), v (..., S, dv).

    With causal=True, query i attends only to keys j <= i (aligned at the end when S > T).
    Returns out (..., T, dv), and with return_weights also the attention weights
    (..., T, S) as an ndarray.
    """
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2] or q.ndim < 2:
        raise ValueError(f"scaled_dot_product_attention: q {q.shape}, k {k.shape}, v {v.shape} do not "
                         "fit: expected q (..., T, d), k (..., S, d), v (..., S, dv)")
    T, S, d = q.shape[-2], k.shape[-2], q.shape[-1]
    drop = dropout_p and training

    if tg.is_composed():
        with tg.scope("scores"):         # how well each query matches each key
            scores = q @ k.swapaxes(-2, -1) / np.sqrt(d)                  # (..., T, S)
        scores.label = "scores"
        if causal:
            with tg.scope("mask"):       # a query may not look at later keys
                scores = scores.masked_fill(future_positions(T, S), -np.inf)
        with tg.scope("softmax"):        # each row of scores into a distribution over the keys
            # a constant shift leaves softmax unchanged; the row max keeps e^x from overflowing
            shift = Tensor(scores.data.max(axis=-1, keepdims=True))
            e = (scores - shift).exp()
            weights = e / e.sum(axis=-1, keepdims=True)                   # (..., T, S), rows sum to 1
        weights.label = "weights"
        attended = weights
        if drop:
            with tg.scope("dropout"):
                attended = dropout(weights, dropout_p, training, rng)
        with tg.scope("weighted_sum"):   # each output: the values averaged by the weights
            out = attended @ v                                            # (..., T, dv)
        return (out, weights.data) if return_weights else out

    # fused: one node. 1/√d is folded into the copy of kᵀ the product needs anyway (numpy
    # hands a batched product to BLAS at full speed only when its right operand's last axis
    # is contiguous, which kᵀ's is not), so neither q nor the bigger (T, S) scores take a
    # pass of their own; the backward folds it into vᵀ the same way.
    scale = np.asarray(1 / np.sqrt(d), dtype=q.dtype)
    scaled_transpose = lambda a: np.multiply(np.swapaxes(a, -1, -2), scale,
                                             out=np.empty(a.shape[:-2] + a.shape[:-3:-1], a.dtype))
    k_t = scaled_transpose(k.data)                                      # (..., d, S): kᵀ/√d
    ones = np.ones((S, 1), q.dtype)   # x @ ones sums the rows with BLAS, faster than .sum(-1)

    def scores():                                                        # (..., T, S)
        s = q.data @ k_t
        if causal:
            s += future_penalty(T, S, s.dtype)                           # -inf on the later keys
        return s

    # softmax over each row, in place. Any constant per row may be subtracted; the max of
    # each head's whole (T, S) block is one (much cheaper to find in numpy than every
    # row's), and since it is >= each row's max, exp cannot overflow. A row far below its
    # head's max could underflow to all zeros: then redo it with the row maxima.
    weights = scores()
    weights -= weights.max(axis=(-2, -1), keepdims=True)
    np.exp(weights, out=weights)
    totals = weights @ ones
    if (totals < 1e-30).any():
        weights = scores()
        weights -= weights.max(axis=-1, keepdims=True)
        np.exp(weights, out=weights)
        totals = weights @ ones
    weights *= 1 / totals                                               # (..., T, S), rows sum to 1
    attended, drop_scale = weights, None
    if drop:
        keep = (rng or nn_rng.current()).random(weights.shape) >= dropout_p
        drop_scale = (keep / (1 - dropout_p)).astype(weights.dtype)    # mask / (1-p)
        attended = weights * drop_scale
    out = heads_side_by_side(q.shape[:-1] + v.shape[-1:], q.dtype)      # (..., T, dv)
    np.matmul(attended, v.data, out=out)

    def backward(g):   # q's and k's gradients share dL/dscores: computed once
        grad_q = grad_k = None
        grad_v = np.swapaxes(attended, -1, -2) @ g if v.requires_grad else None   # d(A v)/dv = Aᵀ
        if q.requires_grad or k.requires_grad:
            # out = A v with A = dropout(W): dL/dA = g vᵀ; through dropout: dL/dW = dL/dA·mask/(1-p).
            # With vᵀ/√d, `grad` below is 1/√d times what its comments name: the 1/√d that
            # ds/dq = k/√d and ds/dk = q/√d carry
            grad = g @ scaled_transpose(v.data)
            if drop_scale is not None:
                grad *= drop_scale
            # softmax: dL/ds = W·(dL/dW - Σ_j dL/dW_j·W_j); masked entries have W = 0
            grad -= np.vecdot(grad, weights)[..., None]
            grad *= weights
            grad_q = grad @ k.data if q.requires_grad else None                       # dL/dq = dL/ds k/√d
            grad_k = np.swapaxes(grad, -1, -2) @ q.data if k.requires_grad else None   # dL/dk = dL/dsᵀ q/√d
        return grad_q, grad_k, grad_v

    out_tensor = make_op("scaled_dot_product_attention", out, (q, k, v), vjps=backward, fresh=True,
                         rules=("dL/dq = dL/ds @ k / √d, dL/ds = W·(dL/dW - Σ_j dL/dW_j·W_j), dL/dW = g @ vᵀ",
                                "dL/dk = (dL/ds)ᵀ @ q / √d",
                                "dL/dv = Wᵀ @ g"))
    return (out_tensor, weights) if return_weights else out_tensor
