"""Making tensors: from data, filled with a value, ranges, and random draws.

Floats default to float32 (python floats, lists of them, float ranges); integer data stays
integer (token ids). `device=` is PyTorch's: "cpu" (numpy arrays, the default) or "cuda"
(CuPy arrays on the GPU; devices.py). A filled tensor or a range is made on its device; data
and random draws are made on the host, then copied there, so one seed draws the same numbers
on both.

Random draws without a seed= come from one generator, which tg.manual_seed(s) reseeds
(PyTorch's torch.manual_seed): nn's parameter init and dropout draw from it too, so one
seed makes a whole run repeatable.
"""
import numpy as np

from . import devices
from .tensor import DEFAULT_FLOAT, Tensor, _as_array, _shape_arg

generator = np.random.default_rng()


def manual_seed(seed):
    """Reseed the generator in place (every module that holds it sees the new stream)."""
    generator.bit_generator.state = np.random.PCG64(seed).state


def _drawing(seed):
    """The generator to draw from: a new one for an explicit seed, else the shared one."""
    return generator if seed is None else np.random.default_rng(seed)


# ---- from data ------------------------------------------------------------------------
def tensor(data, dtype=None, requires_grad=False, device=None, label=None):
    """A new tensor holding a copy of `data`; python floats become float32."""
    array = _as_array(data, dtype).copy()
    return _on(devices.of(array) if device is None else devices.parse(device), array, requires_grad, label)


def _on(device, array, requires_grad=False, label=None):
    """A tensor of `array` on `device` (copied there if it is not)."""
    return Tensor(devices.to(array, device), requires_grad=requires_grad, label=label)


def zeros(*shape, dtype=DEFAULT_FLOAT, requires_grad=False, device=None):
    return full(_shape_arg(shape), 0, dtype, requires_grad, device)


def ones(*shape, dtype=DEFAULT_FLOAT, requires_grad=False, device=None):
    return full(_shape_arg(shape), 1, dtype, requires_grad, device)


def full(shape, fill_value, dtype=None, requires_grad=False, device=None):
    """A tensor of `shape` holding `fill_value` everywhere; its dtype is the value's (a
    python float: float32) unless given."""
    dtype = _as_array(fill_value).dtype if dtype is None else dtype
    xp = devices.module(devices.parse(device, "full"))   # numpy, or CuPy: made where it lives
    return Tensor(xp.full(_shape_arg((shape,)), fill_value, dtype), requires_grad=requires_grad)


def zeros_like(t, dtype=None, requires_grad=False):
    return full_like(t, 0, dtype, requires_grad)


def ones_like(t, dtype=None, requires_grad=False):
    return full_like(t, 1, dtype, requires_grad)


def full_like(t, fill_value, dtype=None, requires_grad=False):
    """A tensor of t's shape, dtype (or `dtype`) and device holding `fill_value`."""
    array = _as_array(t)
    return full(array.shape, fill_value, array.dtype if dtype is None else dtype, requires_grad, devices.of(array))


def arange(start, stop=None, step=1, dtype=None, device=None):
    """np.arange: integers (int64) for integer arguments (positions, token ids); float32 when
    any argument is a float, as in PyTorch."""
    xp = devices.module(devices.parse(device, "arange"))   # numpy, or CuPy: made where it lives
    values = xp.arange(start, stop, step) if stop is not None else xp.arange(start)
    if dtype is None and values.dtype.kind == "f":
        dtype = DEFAULT_FLOAT
    return Tensor(values, dtype=dtype)


def one_hot(ids, num_classes=-1):
    """Row i is all 0 but a 1 at ids[i] (int64, as PyTorch's F.one_hot); num_classes=-1
    takes the largest id + 1. No gradient: ids are integers."""
    ids = _as_array(ids)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"one_hot: ids must be integers, got dtype {ids.dtype}")
    if num_classes == -1:
        num_classes = int(ids.max()) + 1 if ids.size else 0
    if ids.size and (ids.min() < 0 or ids.max() >= num_classes):
        raise ValueError(f"one_hot: ids must be in [0, {num_classes}), got ids from {ids.min()} to {ids.max()}")
    return Tensor((ids[..., None] == np.arange(num_classes, like=ids)).astype(np.int64))


# ---- random draws ---------------------------------------------------------------------
def randn(*shape, seed=None, dtype=DEFAULT_FLOAT, requires_grad=False, device=None):
    """Standard normal samples; the same seed gives the same numbers."""
    data = _drawing(seed).standard_normal(_shape_arg(shape), dtype=np.float64).astype(dtype)
    return _on(devices.parse(device, "randn"), data, requires_grad)


def rand(*shape, seed=None, dtype=DEFAULT_FLOAT, requires_grad=False, device=None):
    """Uniform samples in [0, 1)."""
    data = _drawing(seed).random(_shape_arg(shape), dtype=np.float64).astype(dtype)
    return _on(devices.parse(device, "rand"), data, requires_grad)


def randint(low, high=None, size=(), seed=None, dtype=np.int64, device=None):
    """Integers drawn uniformly from [low, high): randint(high, size) or randint(low, high,
    size), as PyTorch's."""
    device = devices.parse(device, "randint")
    if high is None or isinstance(high, (tuple, list)):   # randint(high, size)
        low, high, size = 0, low, size if high is None else high
    if not low < high:
        raise ValueError(f"randint: expected low < high, got low {low} and high {high}")
    return _on(device, _drawing(seed).integers(low, high, _shape_arg((size,))).astype(dtype))


def multinomial(probs, num_samples, replacement=False, seed=None):
    """`num_samples` ids drawn from each row of `probs` (1-d: one distribution; 2-d: one per
    row), id i with probability probs[i] / sum(probs): how generate() picks the next token.
    Without replacement no id is drawn twice in a row's samples. The draw is made on the host;
    the ids come back on probs' device."""
    probs = _as_array(probs)
    p = devices.to(probs, "cpu").astype(np.float64)
    if p.ndim not in (1, 2) or p.shape[-1] == 0:
        raise ValueError(f"multinomial: probs must be 1-d or 2-d with at least one category, got shape {p.shape}")
    if not np.isfinite(p).all() or (p < 0).any() or (p.sum(-1) <= 0).any():
        raise ValueError("multinomial: probs must be finite and non-negative, with a positive sum in each row")
    if not replacement and num_samples > np.count_nonzero(p, axis=-1).min():
        raise ValueError(f"multinomial: cannot draw {num_samples} samples without replacement from a row "
                         f"with {np.count_nonzero(p, axis=-1).min()} nonzero probabilities")
    rng, rows = _drawing(seed), p.reshape(-1, p.shape[-1])
    drawn = [rng.choice(len(row), num_samples, replace=replacement, p=row / row.sum()) for row in rows]
    return _on(devices.of(probs), np.array(drawn, dtype=np.int64).reshape(*p.shape[:-1], num_samples))
