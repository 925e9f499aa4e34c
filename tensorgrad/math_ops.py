"""More math on tensors: sin, cos, clip, minimum, std, cumsum, logsumexp, argmax/argmin,
and casts (astype; PyTorch's x.float(), x.long(), x.to(...)).
Each is a function of a tensor and, as x.sin(), a Tensor method (tensorgrad/__init__.py);
each has its forward, its vjp and its local derivative together, as the core ops in
tensor.py do, or is a composition of them (std, minimum), written like the math.
"""
import numpy as np

from .pytorch import check_device, torch_names
from .tensor import Tensor, _axes, _floating, _keep, _result_dtype, make_op, maximum

__all__ = ["sin", "cos", "clip", "clamp", "std", "cumsum", "logsumexp", "argmax", "argmin", "astype", "to"]


@_floating
def sin(x):
    data = x.data
    return make_op("sin", np.sin(data), (x,), vjps=(lambda g: g * np.cos(data),),
                   rules=("d(sin x)/dx = cos x",), fresh=True)


@_floating
def cos(x):
    data = x.data
    return make_op("cos", np.cos(data), (x,), vjps=(lambda g: -g * np.sin(data),),
                   rules=("d(cos x)/dx = -sin x",), fresh=True)


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
    inside = np.ones(x.shape, bool)   # where the value is x's own, and so is its gradient
    if lo is not None:
        inside &= x.data >= lo.data
    if hi is not None:
        inside &= x.data <= hi.data
    out = np.clip(x.data, None if lo is None else lo.data, None if hi is None else hi.data).astype(dtype)
    return make_op("clip", out, (x,), vjps=(lambda g: g * inside,),
                   rules=("d clip(x)/dx = 1 where min ≤ x ≤ max, else 0",), fresh=True)


clamp = clip


def minimum(a, b):
    """Elementwise min of a and b: min(a, b) = -max(-a, -b), so a tie shares the gradient."""
    return -maximum(-a, -b)


@torch_names
def std(x, axis=None, keepdims=False, ddof=0):
    """Standard deviation: √var (numpy's ddof=0; PyTorch's default is correction=1)."""
    return x.var(axis, keepdims, ddof=ddof).sqrt()


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
    m = np.max(x.data, axis=axes, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):   # log 0 = -inf: every term was e^-inf
        out = np.log(np.exp(x.data - m).sum(axis=axes, keepdims=True)) + m
    data = x.data
    return make_op("logsumexp", out if keepdims else out.squeeze(axes), (x,),
                   vjps=(lambda g: _keep(g, axes, keepdims) * np.exp(data - out),),
                   rules=("d logsumexp(x)/dx_i = e^x_i / Σ_j e^x_j = softmax(x)_i",), fresh=True)


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
    return Tensor(np.asarray(find(x.data, axis=axis, keepdims=keepdims), dtype=np.int64))


# ---- casts: x.astype(np.float64); PyTorch's x.double(), x.long(), x.to("cpu") -------------
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
    """PyTorch's x.to(...): a device ("cpu"), a dtype, both, or another tensor's dtype."""
    for arg in args:
        if isinstance(arg, str):
            device = arg
        elif isinstance(arg, Tensor):   # another tensor: take its dtype
            dtype = arg.dtype
        else:
            dtype = arg
    check_device(device, "to")
    return x if dtype is None else astype(x, dtype)


