"""Exercise 04: elementwise functions on tensors: exp, log, tanh.

    out = f(x), element by element       x and out: the same shape, any shape

out[i] depends on x[i] alone, so the Jacobian d out/dx is diagonal, and its vjp needs no
matrix: dL/dx = g · f'(x), element by element, in x's shape. What is f' for each, and can
you write it with the forward's output (which the op keeps) rather than recompute it?

    exp:   f(x) = e^x
    log:   f(x) = ln x       (x > 0)
    tanh:  f(x) = (e^x - e^-x) / (e^x + e^-x)

Write the three vjps: each gets g, x and out, and returns dL/dx.
`python exercises/check.py 4` grades them.
"""
import numpy as np

import lab
import tensorgrad as tg


def exp(x):
    out = np.exp(x.data)
    return tg.make_op("exp", out, (x,), vjps=(lambda g: exp_vjp(g, x.data, out),))


def exp_vjp(g, x, out):
    """g = dL/d(out); return dL/dx."""
    raise NotImplementedError("exercise 04: write exp_vjp")


def log(x):
    out = np.log(x.data)
    return tg.make_op("log", out, (x,), vjps=(lambda g: log_vjp(g, x.data, out),))


def log_vjp(g, x, out):
    """g = dL/d(out); return dL/dx."""
    raise NotImplementedError("exercise 04: write log_vjp")


def tanh(x):
    out = np.tanh(x.data)
    return tg.make_op("tanh", out, (x,), vjps=(lambda g: tanh_vjp(g, x.data, out),))


def tanh_vjp(g, x, out):
    """g = dL/d(out); return dL/dx."""
    raise NotImplementedError("exercise 04: write tanh_vjp")


CHECKS = [
    lab.Case(exp, x=(3, 4)),
    lab.Case(log, x=lab.positive(3, 4)),
    lab.Case(tanh, x=(2, 3, 2)),
]
