"""Solutions to exercise 05."""


def matmul_vjp(g, a, b):
    # dL/da[i, p] = Σ_j g[i, j] b[p, j] = (g @ bᵀ)[i, p];  dL/db[p, j] = Σ_i a[i, p] g[i, j] = (aᵀ @ g)[p, j]
    return g @ b.T, a.T @ g


def transpose_vjp(g, x):
    return g.T                   # out[j, i] = x[i, j]: the gradient goes back to where each value came from
