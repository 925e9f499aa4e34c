"""The layers: Linear, Embedding, LayerNorm, Dropout, activations, positional encodings."""
import numpy as np

from tensorgrad import Tensor, devices

from . import functional as F
from .module import Module, Parameter
from .rng import generator, initial


class Linear(Module):
    """y = x @ W + b, with W of shape (in_features, out_features).

    This is the attention article's layout (Q = X W_Q); PyTorch stores the transpose,
    so weights move between the two with `.T`. Initialised uniformly in +-1/sqrt(in)
    (PyTorch's default), which keeps the output variance near the input's."""

    def __init__(self, in_features, out_features, bias=True):
        bound = 1 / np.sqrt(in_features)
        shape = (in_features, out_features)
        self.weight = Parameter(initial(shape, lambda: generator.uniform(-bound, bound, shape)))
        self.bias = (Parameter(initial(out_features, lambda: generator.uniform(-bound, bound, out_features)))
                     if bias else None)

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)   # x @ W + b, fused

    def extra_repr(self):
        return f"{self.weight.shape[0]}, {self.weight.shape[1]}, bias={self.bias is not None}"


def check_ids(layer, ids, limit, what):
    """Integer ids as an array, every one in [0, limit): never a silent wrap-around. (One
    question to the array, whether any is outside, which on a GPU is one wait for its answer.)"""
    ids = ids.data if isinstance(ids, Tensor) else devices.array(ids)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{layer}: {what}s must be integers, got dtype {ids.dtype}")
    outside = (ids < 0) | (ids >= limit)
    if outside.any():
        bad = ids[outside][0]
        raise IndexError(f"{layer}: {what} {bad} is out of range: expected {what}s in [0, {limit})")
    return ids


class Embedding(Module):
    """A lookup table: row i is the vector of token i. Initialised N(0, 1) as in PyTorch."""

    def __init__(self, num_embeddings, dim):
        shape = (num_embeddings, dim)
        self.weight = Parameter(initial(shape, lambda: generator.standard_normal(shape)))

    def forward(self, ids):
        ids = check_ids("Embedding", ids, self.weight.shape[0], "id")
        return self.weight[ids]   # backward adds each row's gradient back (autograd.add_rows): repeated ids accumulate

    def extra_repr(self):
        return f"{self.weight.shape[0]}, {self.weight.shape[1]}"


class SinusoidalPositionalEncoding(Module):
    """The fixed encodings of "Attention Is All You Need": for position p and pair i,
    PE[p, 2i] = sin(p / 10000^(2i/dim)) and PE[p, 2i+1] = cos(p / 10000^(2i/dim)).
    No parameters; the table is a buffer (model.to moves it), not saved: forward(positions)
    returns the rows for those positions."""

    def __init__(self, max_len, dim):
        positions = np.arange(max_len)[:, None]
        frequencies = 1 / 10000 ** (np.arange(0, dim, 2) / dim)
        table = np.zeros((max_len, dim))
        table[:, 0::2] = np.sin(positions * frequencies)
        table[:, 1::2] = np.cos(positions * frequencies[: dim // 2])
        self.register_buffer("table", Tensor(table.astype(np.float32)), persistent=False)

    def forward(self, positions):
        positions = check_ids("SinusoidalPositionalEncoding", positions, len(self.table), "position")
        return self.table[positions]

    def extra_repr(self):
        return f"{self.table.shape[0]}, {self.table.shape[1]}"


class LayerNorm(Module):
    """Normalise the last axis to mean 0 and variance 1, then scale and shift."""

    def __init__(self, dim, eps=1e-5):
        self.weight = Parameter(np.ones(dim, np.float32))
        self.bias = Parameter(np.zeros(dim, np.float32))
        self.eps = eps

    def forward(self, x):
        return F.layer_norm(x, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.weight.shape[0]}, eps={self.eps}"


class Dropout(Module):
    def __init__(self, p=0.5):
        if not 0 <= p < 1:
            raise ValueError(f"Dropout: p must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


class GELU(Module):
    def forward(self, x):
        return x.gelu()


class ReLU(Module):
    def forward(self, x):
        return x.relu()


class Tanh(Module):
    def forward(self, x):
        return x.tanh()
