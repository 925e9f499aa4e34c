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

한국어
------
연습 08: 레이어 정규화(layer norm).

    x: (N, C); w, b: (C,)                    x의 각 행을 따로 정규화합니다
    μ = 행의 평균,  σ = sqrt(행의 분산 + ε)  (분산: 행마다 (x - μ)²의 평균)
    x̂ = (x - μ) / σ                          (N, C): 각 행의 평균은 0, 분산은 ~1
    y = x̂ · w + b                            (N, C): w와 b는 행들을 따라 브로드캐스트

dL/db와 dL/dw: b와 w는 N개의 행을 따라 늘어나므로(연습 02), 그 기울기는 행들에 대한 합이고
shape는 (C,)입니다.

이 연습의 핵심은 dL/dx입니다. x_i는 세 경로로 y에 닿습니다: x_i - μ를 통해 직접, μ를 통해
(행의 모든 x가 μ를 움직입니다), 그리고 σ를 통해(마찬가지입니다). x̂에 닿는 기울기
ĝ = g · w에서 출발해 다음을 쓰세요:

    dμ/dx_i = 1/C          dσ/dx_i = (x_i - μ) / (C·σ) = x̂_i / C

세 항을 모으면 dL/dx는 1/σ에 (ĝ에서 행에 대한 평균 두 개를 뺀 것)을 곱한 꼴로 나옵니다.

layer_norm_vjp를 작성하세요: g (N, C), x̂, σ (N, 1), w를 받아 (dL/dx, dL/dw, dL/db)를
돌려줍니다. `python exercises/check.py 8`이 채점합니다.
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
