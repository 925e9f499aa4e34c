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

한국어
------
연습 06: softmax와 그 벡터-야코비안 곱.

    s = softmax(x), 마지막 축을 따라      x, s: (N, C), 각 행을 따로
    s_i = e^(x_i) / Σ_j e^(x_j)           (한 행 안에서)

순전파는 먼저 각 행의 최댓값을 뺍니다: 어떤 상수 c에 대해서도 softmax(x - c) = softmax(x)이고,
c = max(x)이면 어떤 e^x도 넘치지(overflow) 않습니다. 역전파에서는 달라지는 것이 없습니다.

연습 04와 달리, 모든 s_i는 합을 통해 같은 행의 모든 x_j에 달려 있습니다:

    ds_i/dx_j = s_i · (δ_ij - s_j)          (δ_ij는 i = j일 때 1, 아니면 0)

그래서 각 행의 야코비안은 C × C 행렬 전체입니다. 그런데 vjp인 dL/dx_j = Σ_i g_i · ds_i/dx_j에는
그 행렬이 전혀 필요 없습니다: 야코비안을 대입하고 δ 항을 나머지와 떼어 놓으면, dL/dx의 각
행은 원소별 곱 몇 개와 행을 따라 하는 합 하나로 나옵니다.

softmax_vjp를 작성하세요: g (N, C)와 s(순전파의 출력)를 받아 dL/dx (N, C)를 돌려줍니다.
`python exercises/check.py 6`이 채점합니다.
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
