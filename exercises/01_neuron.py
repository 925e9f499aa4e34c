"""Exercise 01: the chain rule on one neuron (micrograd's), on numbers.

    n = x1·w1 + x2·w2 + b          every value a number: a 0-d tensor, shape ()
    o = tanh(n)

Backward starts from do/do = 1 and walks back through the ops. Each op knows only its
local derivative; it receives g = dL/d(out), the gradient of its output, and passes back
each input's share, g times the local derivative (the chain rule):

    dL/d(input) = g · d(out)/d(input)

tanh is done for you below. Write the vjps of add and mul: each gets g, a, b (numbers,
0-d arrays) and returns the pair (dL/da, dL/db). Then:

    python exercises/check.py 1       grades them
    python exercises/01_neuron.py     runs the neuron with your ops: prints the chain rule
                                      and the gradients micrograd's README shows

한국어
------
연습 01: 뉴런 하나(micrograd의 뉴런)에서, 숫자로 해 보는 연쇄 법칙.

    n = x1·w1 + x2·w2 + b          모든 값이 숫자: 0차원 텐서, shape ()
    o = tanh(n)

역전파는 do/do = 1에서 출발해 연산을 하나씩 거슬러 올라갑니다. 각 연산은 자기 국소 미분만
압니다. 연산은 출력의 기울기 g = dL/d(out)을 받아, 입력마다 제 몫인 g 곱하기 국소 미분을
돌려보냅니다(연쇄 법칙):

    dL/d(input) = g · d(out)/d(input)

tanh는 아래에 미리 해 두었습니다. add와 mul의 vjp를 작성하세요: 각각 g, a, b(숫자, 0차원
배열)를 받아 (dL/da, dL/db) 쌍을 돌려줍니다. 그다음:

    python exercises/check.py 1       채점합니다 (--lang ko를 붙이면 한국어로)
    python exercises/01_neuron.py     내 연산으로 뉴런을 돌려, 연쇄 법칙의 과정과
                                      micrograd의 README에 나오는 기울기를 출력합니다
"""
import numpy as np

import lab
import tensorgrad as tg


def tanh(x):
    """tanh(x): the pattern every op of the lab follows. The forward is numpy; make_op
    joins the result to the graph with one vjp per input; `rules` is the local derivative
    as text, which the chain-rule trace prints."""
    out = np.tanh(x.data)
    return tg.make_op("tanh", out, (x,), vjps=(lambda g: tanh_vjp(g, out),), rules=("d(tanh x)/dx = 1 - tanh²(x)",))


def tanh_vjp(g, out):
    """dL/dx = g · (1 - tanh(x)²), and tanh(x) is the forward's output: no need to recompute it."""
    return g * (1 - out ** 2)


def add(a, b):
    """out = a + b."""
    return tg.make_op("add", a.data + b.data, (a, b), vjps=lambda g: add_vjp(g, a.data, b.data))


def add_vjp(g, a, b):
    """g = dL/d(out); return (dL/da, dL/db)."""
    raise NotImplementedError("exercise 01: write add_vjp")


def mul(a, b):
    """out = a · b."""
    return tg.make_op("mul", a.data * b.data, (a, b), vjps=lambda g: mul_vjp(g, a.data, b.data))


def mul_vjp(g, a, b):
    """g = dL/d(out); return (dL/da, dL/db)."""
    raise NotImplementedError("exercise 01: write mul_vjp")


def neuron(x1, x2, w1, w2, b):
    """o = tanh(x1·w1 + x2·w2 + b), made of your ops."""
    return tanh(add(add(mul(x1, w1), mul(x2, w2)), b))


CHECKS = [lab.Case(add, a=(), b=()), lab.Case(mul, a=(), b=()), lab.Case(neuron, x1=(), x2=(), w1=(), w2=(), b=())]


if __name__ == "__main__":
    # micrograd's example: o = 0.7071, and backward gives x1 -1.5, w1 1.0, x2 0.5, w2 0.0, b 0.5
    values = {"x1": 2.0, "x2": 0.0, "w1": -3.0, "w2": 1.0, "b": 6.8813735870195432}
    leaves = {name: tg.tensor(v, requires_grad=True, label=name) for name, v in values.items()}
    o = neuron(**leaves)
    o.label = "o"
    print(f"o = {o.item():.4f}")
    o.backward(trace=True)
    print("  ".join(f"d o/d{name} = {leaf.grad.item():.4f}" for name, leaf in leaves.items()))
