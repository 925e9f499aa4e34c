"""Exercise 04: elementwise functions on tensors: exp, log, tanh.

    out = f(x), element by element       x and out: the same shape, any shape

out[i] depends on x[i] alone, so the Jacobian d out/dx is diagonal, and its vjp needs no
matrix: dL/dx = g · f'(x), element by element, in x's shape. What is f' for each, and can
you write it with the forward's output (which the op keeps) rather than recompute it?

    exp:   f(x) = e^x
    log:   f(x) = ln x       (x > 0)
    tanh:  f(x) = (e^x - e^-x) / (e^x + e^-x)

Write the three vjps: each gets g, x and out, and returns dL/dx.
`python exercises/check.py 4` grades them.

한국어
------
연습 04: 텐서에 원소별로 적용하는 함수: exp, log, tanh.

    out = f(x), 원소 하나하나에          x와 out: shape가 같고, shape는 무엇이든 됩니다

out[i]는 x[i]에만 달려 있으므로 야코비안 d out/dx는 대각 행렬이고, vjp에는 행렬이 필요
없습니다: dL/dx = g · f'(x), 원소별로, x의 shape로. 각 함수의 f'은 무엇이고, 다시 계산하는
대신 순전파의 출력(연산이 가지고 있습니다)으로 쓸 수 있을까요?

    exp:   f(x) = e^x
    log:   f(x) = ln x       (x > 0)
    tanh:  f(x) = (e^x - e^-x) / (e^x + e^-x)

세 vjp를 작성하세요: 각각 g, x, out을 받아 dL/dx를 돌려줍니다.
`python exercises/check.py 4`가 채점합니다.
"""
import numpy as np

import lab
import tensorgrad as tg


def exp(x):
    out = np.exp(x.data)
    return tg.make_op("exp", out, (x,), vjps=(lambda g: exp_vjp(g, x.data, out),))


def exp_vjp(g, x, out):
    """g = dL/d(out); return dL/dx."""
    raise NotImplementedError("exercise 04: write exp_vjp")


def log(x):
    out = np.log(x.data)
    return tg.make_op("log", out, (x,), vjps=(lambda g: log_vjp(g, x.data, out),))


def log_vjp(g, x, out):
    """g = dL/d(out); return dL/dx."""
    raise NotImplementedError("exercise 04: write log_vjp")


def tanh(x):
    out = np.tanh(x.data)
    return tg.make_op("tanh", out, (x,), vjps=(lambda g: tanh_vjp(g, x.data, out),))


def tanh_vjp(g, x, out):
    """g = dL/d(out); return dL/dx."""
    raise NotImplementedError("exercise 04: write tanh_vjp")


CHECKS = [
    lab.Case(exp, x=(3, 4)),
    lab.Case(log, x=lab.positive(3, 4)),
    lab.Case(tanh, x=(2, 3, 4)),
]
