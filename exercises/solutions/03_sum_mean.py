"""Solutions to exercise 03."""
import numpy as np


def sum_vjp(g, x, axis, keepdims):
    if not keepdims:
        g = np.expand_dims(g, axis)        # the summed axes back, with size 1
    return np.broadcast_to(g, x.shape)     # every element of a sum gets its output's g


def mean_vjp(g, x, axis, keepdims):
    n = int(np.prod([x.shape[a] for a in axis]))   # the elements averaged into each output
    return sum_vjp(g, x, axis, keepdims) / n
