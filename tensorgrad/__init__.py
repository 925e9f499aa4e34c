"""tensorgrad: a small, readable, tensor-level reverse-mode autodiff engine on numpy.

    import tensorgrad as tg
    x = tg.tensor([[1., 2.], [3., 4.]], requires_grad=True)
    loss = (x @ x).tanh().sum()
    loss.backward()            # x.grad now holds dloss/dx
"""
from . import math_ops, shape_ops
from .autograd import backward_order, composed, detect_anomaly, is_composed, no_grad, scope
from .creation import (arange, full, full_like, manual_seed, multinomial, one_hot, ones, ones_like, rand,
                       randint, randn, tensor, zeros, zeros_like)
from .draw import draw_graph
from .render import render_graph
from .dtypes import (bool, double, float, float16, float32, float64, half, int, int8, int16, int32, int64,
                     long, uint8)
from .explore import Explorer, explore
from .gradcheck import GradcheckError, gradcheck
from .math_ops import argmax, argmin, astype, clamp, clip, cos, cumsum, logsumexp, minimum, sin, std, var
from .pytorch import cuda
from .shape_ops import expand, flatten, gather, permute, squeeze, tril, triu, unsqueeze, view
from .tensor import Tensor, cat, make_op, maximum, stack, where
from .threads import get_num_threads, set_num_threads

# The ops outside the core are Tensor methods too: x.squeeze() is shape_ops.squeeze(x), and
# x.float() is x.astype(np.float32) under PyTorch's name.
for _module in (shape_ops, math_ops):
    for _name in _module.__all__:
        setattr(Tensor, _name, getattr(_module, _name))
for _name, _dtype in math_ops.CASTS.items():
    setattr(Tensor, _name, math_ops.cast_to(_dtype))
Tensor.cuda, Tensor.cpu = math_ops.cuda, math_ops.cpu   # methods only: tg.cuda is PyTorch's namespace

# Every method is a function too, as in PyTorch and numpy: tg.exp(x) is x.exp().
exp, log, sqrt, abs, tanh, sigmoid, relu, gelu = (Tensor.exp, Tensor.log, Tensor.sqrt, Tensor.abs,
                                                  Tensor.tanh, Tensor.sigmoid, Tensor.relu, Tensor.gelu)
softmax, log_softmax, sum, mean, max, min = (Tensor.softmax, Tensor.log_softmax, Tensor.sum, Tensor.mean,
                                             Tensor.max, Tensor.min)
reshape, transpose, swapaxes, matmul, split = (Tensor.reshape, Tensor.transpose, Tensor.swapaxes,
                                               Tensor.__matmul__, Tensor.split)

__all__ = [
    "Tensor", "tensor", "zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "randn", "rand",
    "randint", "multinomial", "manual_seed", "arange", "one_hot", "cat", "stack", "where", "maximum",
    "minimum", "make_op", "no_grad", "detect_anomaly", "composed", "is_composed", "scope",
    "backward_order", "gradcheck", "GradcheckError", "draw_graph", "render_graph", "explore", "Explorer",
    "set_num_threads", "get_num_threads", "cuda",
    *shape_ops.__all__, *math_ops.__all__,
    "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "gelu", "softmax", "log_softmax", "mean",
    "reshape", "transpose", "swapaxes", "matmul", "split",
    "float16", "half", "float32", "float64", "double", "int8", "int16", "uint8", "int32", "int64", "long",
]   # tg.sum, tg.max, tg.min, tg.abs, tg.float, tg.int, tg.bool exist, but `import *` would hide Python's
