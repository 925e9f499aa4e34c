"""Exercise 02: broadcasting, and why gradients are summed back.

    out = a + b          a: (4, 3), b: (3,)  ->  out: (4, 3)

numpy broadcasting lines the shapes up from the right and stretches b along the axes it
lacks (and along any axis where it has size 1): b is used as if it were

    [[b0, b1, b2],
     [b0, b1, b2],      4 copies, one per row of a
     [b0, b1, b2],
     [b0, b1, b2]]

So a broadcast is an op of its own, a copy, hidden inside the +. Here it is made plain:
broadcast_to(x, shape) is that copy, and add and mul of any two tensors that broadcast
are your same-shape ops of exercise 01 applied to the two copies. b0 reaches the loss
through its 4 copies; the chain rule adds up every path, so dL/db0 is the sum of the 4
copies' gradients, and dL/db has b's shape, (3,).

Write broadcast_vjp: it gets g (the broadcast shape) and x, and returns dL/dx in x's
shape: g summed over the axes the broadcast put in front, and over the axes where x has
size 1 (keeping those, with size 1). `python exercises/check.py 2` grades it, then add
and mul as a whole (so exercise 01 must pass too).
"""
import numpy as np

import lab
import tensorgrad as tg

same_shape = lab.load(1)   # exercise 01: add and mul of tensors of one shape


def broadcast_to(x, shape):
    """out = x copied out to `shape`, as numpy broadcasting does."""
    return tg.make_op("broadcast_to", np.broadcast_to(x.data, shape), (x,), vjps=(lambda g: broadcast_vjp(g, x.data),))


def broadcast_vjp(g, x):
    """g = dL/d(out), the broadcast shape; return dL/dx, x's shape."""
    raise NotImplementedError("exercise 02: write broadcast_vjp")


def add(a, b):
    """a + b, broadcasting: 01's add of the two copies."""
    shape = np.broadcast_shapes(a.shape, b.shape)
    return same_shape.add(broadcast_to(a, shape), broadcast_to(b, shape))


def mul(a, b):
    """a · b, broadcasting: 01's mul of the two copies."""
    shape = np.broadcast_shapes(a.shape, b.shape)
    return same_shape.mul(broadcast_to(a, shape), broadcast_to(b, shape))


CHECKS = [
    lab.Case(broadcast_to, x=(3,), shape=[4, 3]),        # copies down the rows: sum over axis 0
    lab.Case(broadcast_to, x=(4, 1), shape=[4, 3]),      # a column copied across: sum over axis 1, keep it
    lab.Case(broadcast_to, x=(), shape=[2, 3]),          # a number copied everywhere
    lab.Case(broadcast_to, x=(2, 1, 3), shape=[5, 2, 4, 3]),
    lab.Case(add, a=(4, 3), b=(3,)),
    lab.Case(mul, a=(2, 1, 3), b=(4, 1)),
]
