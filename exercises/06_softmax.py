"""Exercise 06: softmax and its vector-Jacobian product.

    s = softmax(x) along the last axis      x, s: (N, C), each row on its own
    s_i = e^(x_i) / Σ_j e^(x_j)             (within one row)

The forward subtracts each row's max first: softmax(x - c) = softmax(x) for any constant
c, and with c = max(x) no e^x can overflow. That changes nothing in the backward.

Unlike exercise 04, every s_i depends on every x_j of its row, through the sum:

    ds_i/dx_j = s_i · (δ_ij - s_j)          (δ_ij = 1 when i = j, else 0)

so each row's Jacobian is a full C × C matrix. The vjp, dL/dx_j = Σ_i g_i · ds_i/dx_j,
needs none of it: put the Jacobian in, split the δ term from the rest, and each row of
dL/dx comes out as a few elementwise products and one sum over the row.

Write softmax_vjp: it gets g (N, C) and s (the forward's output) and returns dL/dx (N, C).
`python exercises/check.py 6` grades it.
"""
import numpy as np

import lab
import tensorgrad as tg


def softmax(x):
    """softmax along the last axis."""
    e = np.exp(x.data - x.data.max(axis=-1, keepdims=True))
    s = e / e.sum(axis=-1, keepdims=True)
    return tg.make_op("softmax", s, (x,), vjps=(lambda g: softmax_vjp(g, s),))


def softmax_vjp(g, s):
    """g = dL/ds, (N, C); return dL/dx, (N, C)."""
    raise NotImplementedError("exercise 06: write softmax_vjp")


CHECKS = [
    lab.Case(softmax, x=(4, 5)),
    lab.Case(softmax, x=(1, 3)),
    lab.Case(softmax, x=(2, 3, 4)),   # rows of a 3-d tensor: the last axis, as above
]
