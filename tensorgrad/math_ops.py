"""More math on tensors: sin, cos, clip, minimum, std, cumsum, logsumexp, argmax/argmin,
and casts (astype; PyTorch's x.float(), x.long(), x.to(...)).
Each is a function of a tensor and, as x.sin(), a Tensor method (tensorgrad/__init__.py);
each has its forward, its vjp and its local derivative together, as the core ops in
tensor.py do, or is a composition of them (std, minimum), written like the math.
"""
import math

import numpy as np

from . import devices
from .autograd import modes
from .pytorch import torch_names
from .tensor import Tensor, _axes, _floating, _keep, _kept_max, _result_dtype, make_op, pick_elementwise

__all__ = ["sin", "cos", "clip", "clamp", "var", "std", "cumsum", "logsumexp", "argmax", "argmin", "astype",
           "to"]


@_floating
def sin(x):
    data = x.data
    return make_op("sin", np.sin(data), (x,), vjps=(lambda g: g * np.cos(data),),
                   rules=("d(sin x)/dx = cos x",))


@_floating
def cos(x):
    data = x.data
    return make_op("cos", np.cos(data), (x,), vjps=(lambda g: -g * np.sin(data),),
                   rules=("d(cos x)/dx = -sin x",))


def clip(x, min=None, max=None):
    """x with every value below `min` raised to it and above `max` lowered to it (numpy's
    clip, PyTorch's clamp; either bound may be None, a number or a tensor)."""
    if min is None and max is None:
        raise ValueError("clip: give min, max or both")
    lo, hi = (None if bound is None else x._lift(bound) for bound in (min, max))
    if any(bound is not None and bound.requires_grad for bound in (lo, hi)):
        raise TypeError("clip: the bounds are constants here; for a bound that learns, write "
                        "tg.minimum(tg.maximum(x, low), high)")
    dtype = _result_dtype(x, *(bound for bound in (lo, hi) if bound is not None))
    inside = np.ones(x.shape, bool, like=x.data)   # where the value is x's own, and so is its gradient
    if lo is not None:
        inside &= x.data >= lo.data
    if hi is not None:
        inside &= x.data <= hi.data
    out = np.clip(x.data, None if lo is None else lo.data, None if hi is None else hi.data).astype(dtype)
    return make_op("clip", out, (x,), vjps=(lambda g: g * inside,),
                   rules=("d clip(x)/dx = 1 where min ≤ x ≤ max, else 0",))


clamp = clip


def minimum(a, b):
    """Elementwise min of a and b; where they tie, each gets half the gradient."""
    return pick_elementwise("minimum", np.minimum, np.greater, a, b,
                            rules=("d min(a,b)/da = 1 if a < b, 1/2 on a tie, else 0",
                                   "d min(a,b)/db = 1 if b < a, 1/2 on a tie, else 0"))


@_floating
@torch_names
def var(x, axis=None, keepdims=False, ddof=0):
    """Variance, the mean of (x - mean(x))²: numpy's ddof=0, the population's (PyTorch's
    default is correction=1); with ddof, the squares' sum over n - ddof. Fused: one node."""
    axes = _axes("var", axis, x.ndim)
    n = math.prod(x.shape[a] for a in axes)   # the values each variance takes
    if modes.composed:   # the formula, op by op
        squares = (x - x.mean(axis, keepdims=True)) ** 2
        return squares.sum(axis, keepdims) / (n - ddof) if ddof else squares.mean(axis, keepdims)
    centred, variance = _centred_and_var(x, axes, ddof, keepdims)
    with np.errstate(divide="ignore"):   # n - ddof = 0: inf, as the variance's own nan says
        scale = np.float64(2) / (n - ddof)
    # d/dx_i Σ_j (x_j - m)² / (n - ddof) = 2(x_i - m)/(n - ddof): the terms through m sum to 0
    return make_op("var", variance.astype(x.dtype), (x,), vjps=(lambda g: _keep(g, axes, keepdims) * centred * scale,),
                   rules=("d var(x)/dx_i = 2(x_i - mean)/(n - ddof)",))


@_floating
@torch_names
def std(x, axis=None, keepdims=False, ddof=0):
    """Standard deviation, √var (numpy's ddof=0; PyTorch's default is correction=1). Fused:
    where x is constant its gradient is 0, as in PyTorch (√'s own would be inf there)."""
    axes = _axes("std", axis, x.ndim)
    n = math.prod(x.shape[a] for a in axes)
    if modes.composed:   # the formula, op by op
        return var(x, axis, keepdims, ddof).sqrt()
    centred, variance = _centred_and_var(x, axes, ddof, keepdims=True)
    sd = np.sqrt(variance).astype(x.dtype)

    def vjp(g):   # d√v/dx_i = (dv/dx_i) / (2√v) = (x_i - mean) / ((n - ddof)·std)
        with np.errstate(divide="ignore", invalid="ignore"):
            return _keep(g, axes, keepdims) * np.where(sd == 0, 0, centred / ((n - ddof) * sd))
    return make_op("std", sd if keepdims else sd.squeeze(axes), (x,), vjps=(vjp,),
                   rules=("d std(x)/dx_i = (x_i - mean)/((n - ddof)·std), 0 where std = 0",))


def _centred_and_var(x, axes, ddof, keepdims):
    """x - mean(x), and the variance in float64 (a float32 x of 1e30 squares past float32's
    range; PyTorch's float32 variance does not overflow there either)."""
    mean = x.data.mean(axis=axes, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):   # n - ddof <= 0: nan, as PyTorch's
        variance = np.var(x.data, axis=axes, ddof=ddof, keepdims=keepdims, dtype=np.float64)
    return x.data - mean, devices.array(variance)


@torch_names
def cumsum(x, axis=None):
    """Running sums along `axis`: out_j = x_0 + ... + x_j. Without an axis, over the
    flattened tensor (numpy's rule). Integers sum as int64, as in numpy and PyTorch."""
    axes = _axes("cumsum", axis, x.ndim)
    if axis is None or x.ndim == 0:   # flattened; a 0-d x with axis 0 keeps its shape ()
        flat = cumsum(x.reshape(-1), 0)
        return flat if axis is None else flat.reshape(())
    (axis,) = axes
    # x_i reaches every out_j with j >= i, so dL/dx_i = Σ_{j>=i} g_j: a running sum from the end
    return make_op("cumsum", np.cumsum(x.data, axis), (x,),
                   vjps=(lambda g: np.flip(np.cumsum(np.flip(g, axis), axis), axis),),
                   rules=("d out_j/dx_i = 1 for j ≥ i: dL/dx_i = g summed from i to the end",))


@_floating
@torch_names
def logsumexp(x, axis=None, keepdims=False):
    """log Σ e^x over `axis`, as m + log Σ e^(x - m) with m = max(x), so no e^x overflows
    (an m that is ±inf is left out: all -inf gives -inf)."""
    axes = _axes("logsumexp", axis, x.ndim)
    m = _kept_max(x.data, axes)
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):   # log 0 = -inf: every term was e^-inf
        out = np.log(np.exp(x.data - m).sum(axis=axes, keepdims=True)) + m
    data = x.data
    return make_op("logsumexp", out if keepdims else out.squeeze(axes), (x,),
                   vjps=(lambda g: _keep(g, axes, keepdims) * np.exp(data - out),),
                   rules=("d logsumexp(x)/dx_i = e^x_i / Σ_j e^x_j = softmax(x)_i",))


@torch_names
def argmax(x, axis=None, keepdims=False):
    """Where the largest value is (the first, on a tie), as int64; no gradient: an index."""
    return _arg_extreme("argmax", np.argmax, x, axis, keepdims)


@torch_names
def argmin(x, axis=None, keepdims=False):
    """Where the smallest value is (the first, on a tie), as int64; no gradient."""
    return _arg_extreme("argmin", np.argmin, x, axis, keepdims)


def _arg_extreme(op, find, x, axis, keepdims):
    if x.size == 0:
        raise ValueError(f"{op}: cannot search an empty tensor of shape {x.shape}")
    axes = _axes(op, axis, x.ndim)   # checked: in range
    axis = axes[0] if axis is not None and axes else None
    return Tensor(devices.array(find(x.data, axis=axis, keepdims=keepdims), np.int64))


# ---- casts and moves: x.astype(np.float64); PyTorch's x.double(), x.long(), x.to("cuda") --
def astype(x, dtype):
    """x's values in `dtype` (numpy's astype). A cast between floats passes the gradient back
    (in x's dtype); a cast to integers or bool cuts the graph, as integers get no gradient."""
    dtype = np.dtype(dtype)
    if dtype == x.dtype:
        return x
    out = x.data.astype(dtype)
    if dtype.kind not in "fc":
        return Tensor(out)
    return make_op("astype", out, (x,), vjps=(lambda g: g,),   # backward casts it to x's dtype
                   rules=("d cast(x)/dx = 1: g, in x's dtype",))


CASTS = {"float": np.float32, "double": np.float64, "half": np.float16, "long": np.int64,
         "int": np.int32, "bool": np.bool_}


def cast_to(dtype):
    """x.float(), x.long()...: PyTorch's names for x.astype(dtype)."""
    def cast(x):
        return astype(x, dtype)
    cast.__doc__ = f"x as {np.dtype(dtype).name}: x.astype({np.dtype(dtype).name})"
    return cast


def to(x, *args, dtype=None, device=None):
    """PyTorch's x.to(...): a device ("cpu", "cuda"), a dtype, both, or another tensor's
    device and dtype."""
    for arg in args:
        if devices.is_device(arg):   # "cuda", or a torch.device
            device = arg
        elif isinstance(arg, Tensor):   # another tensor: take its device and dtype
            device, dtype = arg.device, arg.dtype
        else:
            dtype = arg
    if device is not None:
        x = move(x, devices.parse(device, "to"))
    return x if dtype is None else astype(x, dtype)


def move(x, device):
    """x on `device`: itself if it is there, else a copy there that is in the graph, so the
    gradient goes back to x's own device (a copy too)."""
    home = x.device
    if device == home:
        return x
    return make_op("to", devices.to(x.data, device), (x,), vjps=(lambda g: devices.to(g, home),),
                   rules=(f"d x/dx = 1: g, copied back from {device} to {home}",))


def cuda(x):
    """x on the GPU: x.to("cuda")."""
    return move(x, "cuda")


def cpu(x):
    """x on the CPU: x.to("cpu")."""
    return move(x, "cpu")


