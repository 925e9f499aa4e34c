"""nn.functional: the transformer's functions, each written twice, side by side.

The composed body builds the function from the engine's primitive ops, written like the
math a textbook shows; it runs inside `tg.composed()`, so drawings and traces show every
step. The fused body is one node in the graph: its numpy work passes over memory as few
times as it can (in place where safe) and its backward is derived by hand, stated beside
it; training uses it, because it is faster. Tests prove the two equal in value and in
every input's gradient.

Attention, written the same two ways, lives with the model that uses it, in
nn/transformer.py; nn/__init__.py names it here too (F.scaled_dot_product_attention, as
PyTorch's torch.nn.functional does), with its causal masks F.future_positions and
F.future_penalty.
"""
import numpy as np

import tensorgrad as tg
from tensorgrad import Tensor, devices, make_op, threads
from tensorgrad.pytorch import torch_names

from . import rng as nn_rng


def linear(x, weight, bias=None):
    """x @ weight + bias for x (..., in), weight (in, out), bias (out,)."""
    if x.shape[-1] != weight.shape[0]:
        raise ValueError(f"linear: input of shape {x.shape} has {x.shape[-1]} features, "
                         f"expected {weight.shape[0]} (weight of shape {weight.shape})")
    devices.same("linear", *(t.data for t in (x, weight, bias) if t is not None))
    if tg.is_composed():
        return x @ weight if bias is None else x @ weight + bias
    # fused: the bias is added into the product in place, not into a second
    # activation-sized array
    rows = x.data.reshape(-1, x.shape[-1])                         # (N, in): every row at once
    out = rows @ weight.data                                       # (N, out)
    if bias is not None:
        out += bias.data
    flat = lambda g: g.reshape(-1, g.shape[-1])                    # dL/dout as (N, out)
    ones = np.ones(len(rows), rows.dtype, like=rows)               # ones @ g: g's rows summed by BLAS
    inputs = (x, weight) if bias is None else (x, weight, bias)
    vjps = (lambda g: (flat(g) @ weight.data.T).reshape(x.shape),
            lambda g: rows.T @ flat(g),
            lambda g: ones @ flat(g))
    rules = ("dL/dx = g @ Wᵀ", "dL/dW = xᵀ @ g (summed over the rows)", "dL/db = Σ_rows g")
    return make_op("linear", out.reshape(*x.shape[:-1], weight.shape[1]), inputs,
                   vjps=vjps[:len(inputs)], rules=rules[:len(inputs)])


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
    targets = devices.array(targets.data if isinstance(targets, Tensor) else targets)
    vocab = logits.shape[-1]
    if targets.dtype.kind not in "iu":
        raise TypeError(f"cross_entropy: targets must be integer class ids, got dtype {targets.dtype}")
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"cross_entropy: targets of shape {targets.shape} do not match logits of "
                         f"shape {logits.shape}: expected targets of shape {logits.shape[:-1]}")
    devices.same("cross_entropy", logits.data, targets)
    keep = np.ones(targets.shape, bool, like=targets) if ignore_index is None else targets != ignore_index
    bad = keep & ((targets < 0) | (targets >= vocab))
    if bad.any():
        raise ValueError(f"cross_entropy: target {targets[bad][0]} is out of range for {vocab} classes "
                         f"(expected ids in [0, {vocab}){'' if ignore_index is None else f' or {ignore_index}'})")
    count = targets.size if ignore_index is None else int(keep.sum())
    if count == 0:
        raise ValueError("cross_entropy: every target equals ignore_index: the mean is undefined")
    picked = np.where(keep, targets, 0).reshape(-1)                    # (N,) target ids (0 if ignored)
    weights = keep.reshape(-1).astype(logits.dtype) / count            # 1/count, 0 if ignored
    positions = np.arange(len(picked), like=picked)                    # (N,) 0, 1, ..., N-1

    if tg.is_composed():
        log_probs = logits.log_softmax(axis=-1).reshape(-1, vocab)     # (N, V)
        log_p_target = log_probs[positions, picked]                    # (N,): log p[target]
        return -(log_p_target * weights).sum()                         # the mean over kept positions

    # fused: one pass for the log-sum-exp, no (N, V) log-probabilities kept
    rows = logits.data.reshape(-1, vocab)                              # (N, V)
    shifted = rows - rows.max(axis=1, keepdims=True)                   # no overflow in exp
    log_sum = np.log(np.exp(shifted).sum(axis=1))                      # (N,)
    losses = log_sum - shifted[positions, picked]                      # -log p[target]
    loss = (losses * weights).sum(dtype=rows.dtype)

    def vjp(g):
        grad = np.exp(shifted - log_sum[:, None])                      # softmax(logits)
        grad[positions, picked] -= 1
        grad *= (g * weights)[:, None]
        return grad.reshape(logits.shape)
    return make_op("cross_entropy", loss, (logits,), vjps=(vjp,),
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
    devices.same("layer_norm", *(t.data for t in (x, weight, bias) if t is not None))
    channels = x.shape[-1]
    data = threads.rows(x.data)
    out, xhat, rstd = layer_norm_rows(data, weight, bias, eps)

    # With gh = dL/dxhat = g·weight, xhat = (x - mean)/σ gives
    #   dL/dx = (gh - mean(gh) - xhat·mean(gh·xhat)) / σ,
    #   dL/dweight = Σ_rows g·xhat,   dL/dbias = Σ_rows g.
    # Row means of gh = g·weight are g @ (weight / C): a matrix-vector product on g itself,
    # so gh·xhat is never formed; g·xhat is formed once, for the weight's gradient and x's.
    weighted_average = (np.full((channels, 1), 1 / channels, data.dtype, like=data) if weight is None   # (C, 1)
                        else (weight.data / channels)[:, None])
    ones = np.ones(len(data), data.dtype, like=data)   # ones @ rows sums the rows with BLAS

    def backward(g):   # every input's gradient at once: they share g·xhat
        rows = threads.rows(g)
        g_xhat = rows * xhat   # one pass: cheaper here than handing half of it to a thread
        grad_weight = ones @ g_xhat if weight is not None and weight.requires_grad else None
        grad_bias = ones @ rows if bias is not None and bias.requires_grad else None
        grad_x = np.empty(data.shape, data.dtype, like=data) if x.requires_grad else None

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
                          *(rule for _, rule in parameters)))


def layer_norm_rows(data, weight, bias, eps):
    """layer_norm's fused forward on rows (N, C), in cache-sized tiles shared across the cores
    (threads.by_rows). Returns (out, xhat, 1/σ (N, 1)): the backward reads the last two."""
    channels = data.shape[-1]
    average = np.full((channels, 1), 1 / channels, data.dtype, like=data)   # rows @ average: row means,
                                                                             # faster than .mean(-1) (BLAS)
    xhat, rstd = np.empty(data.shape, data.dtype, like=data), np.empty((len(data), 1), data.dtype, like=data)
    out = np.empty(data.shape, data.dtype, like=data)

    def forward(data, xhat, rstd, out):                         # on a block of rows
        np.subtract(data, data @ average, out=xhat)
        variance = devices.row_dot(xhat, xhat)[:, None] / channels   # (n, 1), with no (n, C) temporary
        np.sqrt(variance + eps, out=rstd)
        np.divide(1, rstd, out=rstd)                            # 1/σ
        xhat *= rstd
        np.multiply(xhat, 1 if weight is None else weight.data, out=out)
        if bias is not None:
            out += bias.data
    threads.by_rows(forward, data, xhat, rstd, out)
    return out, xhat, rstd


def dropout(x, p, training=True, rng=None):
    """Zero each element with probability p and scale the rest by 1/(1-p), so the
    expected value is unchanged; identity when not training or p == 0."""
    if not 0 <= p < 1:
        raise ValueError(f"dropout: p must be in [0, 1), got {p}")
    if not training or p == 0:
        return x
    keep = devices.uniform(x.shape, x.data, rng or nn_rng.current()) >= p   # drawn on x's device
    scale = (keep / (1 - p)).astype(x.dtype)
    return make_op("dropout", x.data * scale, (x,), vjps=(lambda g: g * scale,),
                   rules=("d dropout(x)/dx = mask/(1-p)",))
