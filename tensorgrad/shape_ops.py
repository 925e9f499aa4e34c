"""Ops that move values without computing new ones: squeeze, unsqueeze, flatten, expand,
tril/triu, gather. Each is a function of a tensor and, as x.squeeze(), a Tensor method
(tensorgrad/__init__.py). Their backward moves the gradient back where each value came
from. Those that only give the same values another shape are compositions of reshape (and
gather of indexing), so backward and the drawings show reshape's (getitem's) chain rule.
"""
import math

import numpy as np

from .autograd import broadcasts_to
from .pytorch import torch_names
from .tensor import Tensor, _axes, _shape_arg, make_op

__all__ = ["squeeze", "unsqueeze", "flatten", "expand", "tril", "triu", "gather", "view", "permute", "contiguous"]


@torch_names
def squeeze(x, axis=None):
    """Drop the axes of size 1 (all of them, or the ones named). numpy's rule: naming an
    axis whose size is not 1 is an error (PyTorch leaves it)."""
    if axis is None:
        axes = tuple(i for i, n in enumerate(x.shape) if n == 1)
    else:
        axes = _axes("squeeze", axis, x.ndim)
        if any(x.shape[a] != 1 for a in axes):
            raise ValueError(f"squeeze: axis {axis} of a tensor of shape {x.shape} does not have size 1")
    return x.reshape(tuple(n for i, n in enumerate(x.shape) if i not in axes))


@torch_names
def unsqueeze(x, axis):
    """Insert an axis of size 1 at `axis` (of the result): (3, 4).unsqueeze(0) is (1, 3, 4)."""
    (axis,) = _axes("unsqueeze", axis, x.ndim + 1)
    return x.reshape(x.shape[:axis] + (1,) + x.shape[axis:])


def flatten(x, start_dim=0, end_dim=-1):
    """Merge the axes start_dim..end_dim (both included) into one: PyTorch's flatten; a
    0-d tensor becomes shape (1,)."""
    if x.ndim == 0:
        return x.reshape(1)
    (start,), (end,) = _axes("flatten", start_dim, x.ndim), _axes("flatten", end_dim, x.ndim)
    if start > end:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} (shape {x.shape})")
    return x.reshape(x.shape[:start] + (math.prod(x.shape[start:end + 1]),) + x.shape[end + 1:])


def expand(x, *sizes):
    """x broadcast to `sizes` (PyTorch's expand: -1 keeps an axis' size, new axes go in
    front); no copy. Backward sums the gradient over the copies, as broadcasting's."""
    sizes = _shape_arg(sizes)
    lead = len(sizes) - x.ndim
    shape = tuple(x.shape[i - lead] if n == -1 and i >= lead else n for i, n in enumerate(sizes))
    if lead < 0 or min(shape, default=0) < 0 or not broadcasts_to(x.shape, shape):
        raise ValueError(f"expand: a tensor of shape {x.shape} cannot be expanded to {sizes}: each "
                         "axis keeps its size or grows from 1, and new axes go in front")
    return make_op("expand", np.broadcast_to(x.data, shape), (x,), vjps=(lambda g: g,),
                   rules=("dL/dx = g summed over the copies",))   # backward sums them (unbroadcast)


@torch_names
def tril(x, k=0):
    """The lower triangle of the last two axes: entries on or below diagonal k, 0 above."""
    return _triangle("tril", np.tril, x, k, "on or below")


@torch_names
def triu(x, k=0):
    """The upper triangle of the last two axes: entries on or above diagonal k, 0 below."""
    return _triangle("triu", np.triu, x, k, "on or above")


def _triangle(op, keep, x, k, where):
    if x.ndim < 2:
        raise ValueError(f"{op}: needs a tensor of at least 2 axes (a matrix, or a batch of them), "
                         f"got shape {x.shape}")
    return make_op(op, keep(x.data, k), (x,), vjps=(lambda g: keep(g, k),),
                   rules=(f"d {op}(x)/dx = 1 {where} diagonal {k}, else 0",))


@torch_names
def gather(x, axis, index):
    """PyTorch's gather: out[i][j] = x[index[i][j]][j] for axis 0 (x[i][index[i][j]] for
    axis 1), at every position of `index`, which has x's number of axes. It is indexing:
    x[the positions of index, with index's values along `axis`], and backward is indexing's
    (a value picked twice gets both gradients)."""
    index = np.asarray(index.data if isinstance(index, Tensor) else index)
    if x.ndim == 0:   # PyTorch takes a 0-d x and index as one element along axis 0
        _axes("gather", axis, 0)
        return gather(x.reshape(1), 0, index.reshape(1)).reshape(())
    (axis,) = _axes("gather", axis, x.ndim)
    if index.dtype.kind not in "iu":
        raise TypeError(f"gather: index must be integers, got dtype {index.dtype}")
    if index.ndim != x.ndim:
        raise ValueError(f"gather: index must have as many axes as the tensor ({x.ndim}), got shape {index.shape}")
    if any(m > n for i, (m, n) in enumerate(zip(index.shape, x.shape)) if i != axis):
        raise ValueError(f"gather: index of shape {index.shape} is larger than the tensor's {x.shape} "
                         f"along an axis other than {axis}")
    if index.size and (index.min() < -x.shape[axis] or index.max() >= x.shape[axis]):
        raise IndexError(f"gather: index values from {index.min()} to {index.max()} are out of range "
                         f"for axis {axis} of size {x.shape[axis]}")
    positions = list(np.ogrid[tuple(slice(n) for n in index.shape)])   # each axis' own positions
    positions[axis] = index
    return x[tuple(positions)]


# ---- PyTorch's names for numpy's reshape and transpose ------------------------------------
def view(x, *shape):
    """PyTorch's view: reshape (numpy's reshape copies only when it must)."""
    try:
        return x.reshape(*shape)
    except ValueError as error:   # named as the learner wrote it
        raise ValueError(f"view (reshape): {str(error).removeprefix('reshape: ')}") from None


def permute(x, *axes):
    """PyTorch's permute: transpose with every axis named (numpy's transpose)."""
    return x.transpose(_shape_arg(axes))


def contiguous(x):
    """PyTorch's contiguous(): x itself; numpy's reshape and ops take any layout."""
    return x
