"""Where a tensor's numbers live: "cpu" (numpy arrays) or "cuda" (CuPy arrays, on a GPU).

The ops are written once, with numpy's calls, and numpy hands a CuPy array to CuPy's own
routines: its ufuncs (np.exp(x), x * y: NEP 13), its functions (np.sum, np.where,
np.matmul: NEP 18) and array creation given `like=` (np.zeros(shape, like=x): NEP 35).
What numpy cannot hand over is here, in one place: making an array from python values,
moving an array between devices, and importing CuPy (only when cuda is asked for).

CuPy never turns an array into numpy's behind your back (np.asarray(gpu_array) is an error),
so arrays cross between the devices here, by name (`to`); what else crosses is one number read
back (loss.item(), the answer to a check such as `(ids < 0).any()`).
"""
import sys

import numpy as np

INSTALL = 'pip install "tensorgrad[cuda]"'


def cupy():
    """The cupy module, imported on first use; without it, an error of one line saying how
    to install it."""
    try:
        import cupy
    except ImportError:
        raise RuntimeError(f"device 'cuda' needs CuPy, which is not installed: {INSTALL} "
                           "(CuPy's wheel for CUDA 12, cupy-cuda12x)") from None
    return cupy


def is_available():
    """Whether a GPU can be used: CuPy imports and sees a CUDA device."""
    try:
        return cupy().cuda.runtime.getDeviceCount() > 0
    except Exception:   # no CuPy, no driver, no device: CuPy raises errors of its own kinds
        return False


def parse(device, op="tensor"):
    """'cpu' or 'cuda' from what PyTorch's device= takes: "cpu", "cuda", "cuda:0" (tensorgrad
    uses one GPU, the first), a torch.device, or None (the CPU)."""
    name = "cpu" if device is None else str(device)
    if name in ("cuda", "cuda:0"):
        return "cuda"
    if name != "cpu":
        raise ValueError(f"{op}: device must be 'cpu' or 'cuda' ('cuda:0'), got {device!r}")
    return name


def is_device(arg):
    """Whether an argument of PyTorch's to(...) names a device: a name ("cuda") or a
    torch.device (what else it takes is a dtype, or a tensor)."""
    return isinstance(arg, str) or type(arg).__name__ == "device"


def module(device):
    """The array module that makes arrays on `device` ('cpu': numpy, 'cuda': CuPy), for the
    arrays made from nothing but a shape and a value (zeros, full, arange)."""
    return cupy() if device == "cuda" else np


def on_gpu(array):
    """Whether `array` is a CuPy array. CuPy is never imported to answer: if nothing has
    imported it, nothing can be on the GPU."""
    cupy = sys.modules.get("cupy")
    return cupy is not None and isinstance(array, cupy.ndarray)


def of(array):
    """The device an array lives on: 'cuda' or 'cpu'."""
    return "cuda" if on_gpu(array) else "cpu"


def to(array, device):
    """`array` on `device` ('cpu' or 'cuda'): itself where it already is, else a copy there
    (host to GPU, or GPU to host)."""
    if of(array) == device:
        return array
    return cupy().asarray(array) if device == "cuda" else array.get()


def array(data, dtype=None):
    """An array for `data`: a numpy or CuPy array as it is (cast to `dtype` if given), anything
    else (a list, a python or numpy number) made into a numpy array."""
    if on_gpu(data):
        return data if dtype is None else data.astype(dtype, copy=False)
    return np.asarray(data) if dtype is None else np.asarray(data, dtype=dtype)


def row_dot(a, b):
    """Σ_j a_ij·b_ij for each row i, with no temporary of a's size: numpy's vecdot; CuPy has
    none, so there it is the sum of the products."""
    return np.vecdot(a, b) if type(a) is np.ndarray else (a * b).sum(axis=-1)


def uniform(shape, like, generator):
    """Numbers drawn uniformly from [0, 1), of `shape`, on like's device: on the CPU from
    `generator` (numpy's); on the GPU from a CuPy generator seeded from it, so that the one
    seed still decides them and no array crosses from the host."""
    if not on_gpu(like):
        return generator.random(shape)
    return cupy().random.default_rng(int(generator.integers(2**63))).random(shape)


def same(op, *arrays):
    """An op's arrays must live on one device: else an error naming the op and both devices."""
    devices = {of(a) for a in arrays}
    if len(devices) > 1:
        shapes = ", ".join(f"{of(a)} {a.shape}" for a in arrays)
        raise RuntimeError(f"{op}: expected all tensors on one device, got cpu and cuda ({shapes}): "
                           "move one with .to('cuda') or .to('cpu')")
