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

한국어
------
연습 05: 행렬 곱(과 그에 필요한 전치).

    out = a @ b          a: (n, k), b: (k, m)  ->  out: (n, m)
    out[i, j] = Σ_p a[i, p] · b[p, j]

    out = x.T            x: (n, m)  ->  out: (m, n),   out[j, i] = x[i, j]

역전파는 shape가 (n, m)인 g = dL/d(out)을 받아, shape (n, k)인 dL/da와 shape (k, m)인
dL/db를 돌려줍니다. dL/da[i, p] = Σ_j g[i, j] · d out[i, j]/d a[i, p]를 j에 대한 합으로 써
보고, 그 합을 g와 b(또는 bᵀ)의 행렬 곱으로 읽어 보세요. b도 똑같이 합니다. shape가 검산
수단입니다: g와 b(또는 bᵀ)의 곱 가운데 a의 shape가 나오는 것은 하나뿐입니다.

matmul_vjp(쌍을 돌려줍니다)와 transpose_vjp를 작성하세요. `python exercises/check.py 5`가
채점합니다.
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
    lab.Case(matmul, a=(4, 3), b=(3, 2)),   # n, k, m all different: a transposed gradient has the wrong shape
    lab.Case(matmul, a=(1, 5), b=(5, 2)),   # one row
    lab.Case(matmul, a=(3, 1), b=(1, 4)),   # k = 1: an outer product
    lab.Case(transpose, x=(2, 5)),
]
