"""Exercise 01: the chain rule on one neuron (micrograd's), on numbers.

    n = x1·w1 + x2·w2 + b          every value a number: a 0-d tensor, shape ()
    o = tanh(n)

Backward starts from do/do = 1 and walks back through the ops. Each op knows only its
local derivative; it receives g = dL/d(out), the gradient of its output, and passes back
each input's share, g times the local derivative (the chain rule):

    dL/d(input) = g · d(out)/d(input)

tanh is done for you below. Write the vjps of add and mul: each gets g, a, b (numbers,
0-d arrays) and returns the pair (dL/da, dL/db). Then:

    python exercises/check.py 1       grades them
    python exercises/01_neuron.py     runs the neuron with your ops: prints the chain rule
                                      and the gradients micrograd's README shows
"""
import numpy as np

import lab
import tensorgrad as tg


def tanh(x):
    """tanh(x): the pattern every op of the lab follows. The forward is numpy; make_op
    joins the result to the graph with one vjp per input; `rules` is the local derivative
    as text, which the chain-rule trace prints."""
    out = np.tanh(x.data)
    return tg.make_op("tanh", out, (x,), vjps=(lambda g: tanh_vjp(g, out),), rules=("d(tanh x)/dx = 1 - tanh²(x)",))


def tanh_vjp(g, out):
    """dL/dx = g · (1 - tanh(x)²), and tanh(x) is the forward's output: no need to recompute it."""
    return g * (1 - out ** 2)


def add(a, b):
    """out = a + b."""
    return tg.make_op("add", a.data + b.data, (a, b), vjps=lambda g: add_vjp(g, a.data, b.data))


def add_vjp(g, a, b):
    """g = dL/d(out); return (dL/da, dL/db)."""
    raise NotImplementedError("exercise 01: write add_vjp")


def mul(a, b):
    """out = a · b."""
    return tg.make_op("mul", a.data * b.data, (a, b), vjps=lambda g: mul_vjp(g, a.data, b.data))


def mul_vjp(g, a, b):
    """g = dL/d(out); return (dL/da, dL/db)."""
    raise NotImplementedError("exercise 01: write mul_vjp")


def neuron(x1, x2, w1, w2, b):
    """o = tanh(x1·w1 + x2·w2 + b), made of your ops."""
    return tanh(add(add(mul(x1, w1), mul(x2, w2)), b))


CHECKS = [lab.Case(add, a=(), b=()), lab.Case(mul, a=(), b=()), lab.Case(neuron, x1=(), x2=(), w1=(), w2=(), b=())]


if __name__ == "__main__":
    # micrograd's example: o = 0.7071, and backward gives x1 -1.5, w1 1.0, x2 0.5, w2 0.0, b 0.5
    values = {"x1": 2.0, "x2": 0.0, "w1": -3.0, "w2": 1.0, "b": 6.8813735870195432}
    leaves = {name: tg.tensor(v, requires_grad=True, label=name) for name, v in values.items()}
    o = neuron(**leaves)
    o.label = "o"
    print(f"o = {o.item():.4f}")
    o.backward(trace=True)
    print("  ".join(f"d o/d{name} = {leaf.grad.item():.4f}" for name, leaf in leaves.items()))
