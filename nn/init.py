"""nn.init: fill a tensor in place, as PyTorch's torch.nn.init does (the trailing _ says "in
place"). A model's own initialisation calls these on its layers' weights, usually through
model.apply(fn):

    def init_weights(module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

Each writes into tensor.data (its dtype and shape kept) and returns the tensor; none builds
graph, so a parameter can be refilled at any time. The random ones draw from nn's generator,
which nn.manual_seed seeds, so a seeded model starts from the same weights every run.
"""
import numpy as np

from tensorgrad import Tensor

from . import rng


def normal_(tensor, mean=0.0, std=1.0):
    """Fill with draws from the normal distribution N(mean, std²)."""
    if not std >= 0:
        raise ValueError(f"nn.init.normal_: std must be >= 0, got {std}")
    return _fill("normal_", tensor, lambda shape: rng.generator.normal(mean, std, shape), random=True)


def uniform_(tensor, a=0.0, b=1.0):
    """Fill with draws from the uniform distribution on [a, b)."""
    if not a <= b:
        raise ValueError(f"nn.init.uniform_: expected a <= b for the range [a, b), got a={a}, b={b}")
    return _fill("uniform_", tensor, lambda shape: rng.generator.uniform(a, b, shape), random=True)


def constant_(tensor, val):
    """Fill with the number `val`."""
    return _fill("constant_", tensor, lambda shape: val)


def zeros_(tensor):
    return constant_(tensor, 0)


def ones_(tensor):
    return constant_(tensor, 1)


def _fill(name, tensor, values, random=False):
    """Write values(tensor's shape) into the tensor's own array and return the tensor. In
    place: the tensor stays the object a module and its optimizer hold."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"nn.init.{name}: expected a Tensor (a layer's weight), got {type(tensor).__name__}: "
                        "wrap an array as tg.tensor(array)")
    if random and tensor.dtype.kind != "f":   # the draws would be cut to whole numbers
        raise TypeError(f"nn.init.{name}: expected a float tensor, got dtype {tensor.dtype}: "
                        "draw into a float tensor, then cast it")
    tensor.data[...] = values(tensor.shape)
    return tensor
