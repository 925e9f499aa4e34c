"""Exercise 08: layer norm.

    x: (N, C); w, b: (C,)                          each row of x normalized on its own
    μ = mean of the row,  σ = sqrt(var of the row + ε)       (var: mean of (x - μ)², per row)
    x̂ = (x - μ) / σ                                 (N, C): each row has mean 0, variance ~1
    y = x̂ · w + b                                   (N, C): w and b broadcast over the rows

dL/db and dL/dw: b and w are stretched over the N rows (exercise 02), so their gradients
are sums over the rows, in the shape (C,).

dL/dx is the exercise. x_i reaches y by three paths: directly through x_i - μ, through μ
(which every x of the row moves), and through σ (likewise). Start from ĝ = g · w, the
gradient reaching x̂, and use

    dμ/dx_i = 1/C          dσ/dx_i = (x_i - μ) / (C·σ) = x̂_i / C

Collect the three terms: dL/dx comes out as 1/σ times ĝ less two means over the row.

Write layer_norm_vjp: it gets g (N, C), x̂, σ (N, 1) and w, and returns
(dL/dx, dL/dw, dL/db). `python exercises/check.py 8` grades it.
"""
import numpy as np

import lab
import tensorgrad as tg

EPS = 1e-5


def layer_norm(x, w, b):
    """(x - μ) / σ · w + b, per row of x."""
    mu = x.data.mean(axis=-1, keepdims=True)
    sigma = np.sqrt(x.data.var(axis=-1, keepdims=True) + EPS)
    x_hat = (x.data - mu) / sigma
    return tg.make_op("layer_norm", x_hat * w.data + b.data, (x, w, b),
                      vjps=lambda g: layer_norm_vjp(g, x_hat, sigma, w.data))


def layer_norm_vjp(g, x_hat, sigma, w):
    """g = dL/dy, (N, C); return (dL/dx (N, C), dL/dw (C,), dL/db (C,))."""
    raise NotImplementedError("exercise 08: write layer_norm_vjp")


CHECKS = [
    lab.Case(layer_norm, x=(4, 5), w=(5,), b=(5,)),
    lab.Case(layer_norm, x=(2, 3), w=(3,), b=(3,)),
]
