"""Exercise 05: matrix multiplication (and the transpose it needs).

    out = a @ b          a: (n, k), b: (k, m)  ->  out: (n, m)
    out[i, j] = Σ_p a[i, p] · b[p, j]

    out = x.T            x: (n, m)  ->  out: (m, n),   out[j, i] = x[i, j]

Backward gets g = dL/d(out), shape (n, m), and returns dL/da, shape (n, k), and dL/db,
shape (k, m). Write dL/da[i, p] = Σ_j g[i, j] · d out[i, j]/d a[i, p] as a sum over j,
then read the sum as a matrix product of g with b or bᵀ; do the same for b. The shapes
are the check: only one product of g with b (or bᵀ) has a's shape.

Write matmul_vjp (returns the pair) and transpose_vjp. `python exercises/check.py 5`
grades them.
"""
import lab
import tensorgrad as tg


def matmul(a, b):
    """out = a @ b, for 2-d a and b."""
    return tg.make_op("matmul", a.data @ b.data, (a, b), vjps=lambda g: matmul_vjp(g, a.data, b.data))


def matmul_vjp(g, a, b):
    """g = dL/d(out), (n, m); return (dL/da, dL/db): (n, k) and (k, m)."""
    raise NotImplementedError("exercise 05: write matmul_vjp")


def transpose(x):
    """out = x.T, for a 2-d x."""
    return tg.make_op("transpose", x.data.T, (x,), vjps=(lambda g: transpose_vjp(g, x.data),))


def transpose_vjp(g, x):
    """g = dL/d(out), (m, n); return dL/dx, (n, m)."""
    raise NotImplementedError("exercise 05: write transpose_vjp")


CHECKS = [
    lab.Case(matmul, a=(4, 3), b=(3, 2)),
    lab.Case(matmul, a=(3, 3), b=(3, 3)),   # square: a transposed gradient has the right shape here
    lab.Case(matmul, a=(1, 5), b=(5, 1)),
    lab.Case(transpose, x=(2, 5)),
]
