"""Exercise 09: attention, forward and backward, one head.

    q, k, v: (T, d), one row per position of the sequence
    1. scores  = q @ kᵀ / √d                     (T, T): how well query i matches key j
    2. masked  = scores, with -inf where j > i    (T, T): causal, a position sees no later one
    3. weights = softmax(masked), row by row      (T, T): each row sums to 1 (exercise 06)
    4. out     = weights @ v                      (T, d): each row a weighted mean of v's rows

One fused op, as nanoGPT's flash path is: backward goes through the same four steps in
reverse, each one an exercise you have done:

    4. out = weights @ v:  g gives dL/dv and dL/dweights             (exercise 05)
    3. softmax:            dL/dweights gives dL/dmasked               (exercise 06)
    2. mask:               a masked score does not reach the loss: what is its gradient?
                           (look at the weights there, and at what step 3 gave you)
    1. scores:             dL/dscores gives dL/dq and dL/dk; mind the 1/√d   (exercise 05)

With causal=False there is no step 2. Write attention_vjp: it gets g (T, d), q, k, v and
the forward's weights (T, T), and returns (dL/dq, dL/dk, dL/dv), each (T, d).
`python exercises/check.py 9` grades it.
"""
import numpy as np

import lab
import tensorgrad as tg


def attention(q, k, v, causal=True):
    """softmax(q @ kᵀ / √d, masked) @ v, for 2-d q, k, v."""
    T, d = q.shape
    scores = q.data @ k.data.T / np.sqrt(d)
    if causal:
        scores = np.where(np.triu(np.ones((T, T), dtype=bool), k=1), -np.inf, scores)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))   # e^-inf = 0: masked keys get weight 0
    weights = e / e.sum(axis=-1, keepdims=True)
    return tg.make_op("attention", weights @ v.data, (q, k, v),
                      vjps=lambda g: attention_vjp(g, q.data, k.data, v.data, weights))


def attention_vjp(g, q, k, v, weights):
    """g = dL/d(out), (T, d); return (dL/dq, dL/dk, dL/dv), each (T, d)."""
    raise NotImplementedError("exercise 09: write attention_vjp")


CHECKS = [
    lab.Case(attention, q=(4, 3), k=(4, 3), v=(4, 3)),
    lab.Case(attention, q=(5, 2), k=(5, 2), v=(5, 2), causal=False),
]
