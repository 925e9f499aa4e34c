"""Exercise 03: sum and mean along an axis.

    out = x.sum(axis)       x: (4, 3);  axis=0 -> out (3,),  axis=None -> out (),
                            keepdims=True keeps the summed axis with size 1: (1, 3)
    out = x.mean(axis)      the sum divided by n, the number of elements in each sum

Each x[i, j] goes into exactly one output element, once. So its gradient is that output's
g (times 1 for a sum, times what for a mean?): g is spread back over the summed axes, and
dL/dx has x's shape. np.expand_dims(g, axis) puts a summed axis back (with size 1) and
np.broadcast_to(..., x.shape) copies g along it; with keepdims the axis is still there.

Write the vjps: each gets g (out's shape), x, axis (the summed axes as a tuple of
non-negative ints: axis=None arrives as every axis) and keepdims, and returns dL/dx.
`python exercises/check.py 3` grades them.

한국어
------
연습 03: 축을 따라 하는 sum과 mean.

    out = x.sum(axis)       x: (4, 3);  axis=0 -> out (3,),  axis=None -> out (),
                            keepdims=True는 더한 축을 크기 1로 남깁니다: (1, 3)
    out = x.mean(axis)      합을 n, 곧 각 합에 들어간 원소의 수로 나눈 것

x[i, j]는 정확히 하나의 출력 원소에 한 번 들어갑니다. 그러므로 그 기울기는 그 출력의 g입니다
(sum이면 1을 곱하고, mean이면 무엇을 곱할까요?). g를 더한 축들을 따라 다시 펼치면 dL/dx는
x의 shape가 됩니다. np.expand_dims(g, axis)는 더한 축을 크기 1로 되살리고,
np.broadcast_to(..., x.shape)는 그 축을 따라 g를 복사합니다. keepdims가 True이면 그 축은
이미 남아 있습니다.

두 vjp를 작성하세요: 각각 g(out의 shape), x, axis(더한 축들을 음이 아닌 정수의 tuple로:
axis=None은 모든 축으로 들어옵니다), keepdims를 받아 dL/dx를 돌려줍니다.
`python exercises/check.py 3`이 채점합니다.
"""
import numpy as np

import lab
import tensorgrad as tg


def sum_over(x, axis=None, keepdims=False):
    """out = x.sum(axis, keepdims)."""
    axis = _axes(axis, x.ndim)
    return tg.make_op("sum", x.data.sum(axis=axis, keepdims=keepdims), (x,),
                      vjps=(lambda g: sum_vjp(g, x.data, axis, keepdims),))


def mean_over(x, axis=None, keepdims=False):
    """out = x.mean(axis, keepdims)."""
    axis = _axes(axis, x.ndim)
    return tg.make_op("mean", x.data.mean(axis=axis, keepdims=keepdims), (x,),
                      vjps=(lambda g: mean_vjp(g, x.data, axis, keepdims),))


def sum_vjp(g, x, axis, keepdims):
    """g = dL/d(out), out's shape; return dL/dx, x's shape."""
    raise NotImplementedError("exercise 03: write sum_vjp")


def mean_vjp(g, x, axis, keepdims):
    """g = dL/d(out), out's shape; return dL/dx, x's shape."""
    raise NotImplementedError("exercise 03: write mean_vjp")


def _axes(axis, ndim):
    """axis as a tuple of non-negative ints (every axis for None)."""
    axes = range(ndim) if axis is None else (axis,) if isinstance(axis, int) else axis   # a list or tuple
    return tuple(a % ndim for a in axes)


CHECKS = [
    lab.Case(sum_over, x=(4, 3), axis=1),   # the last axis: g (4,) does not broadcast back to (4, 3) by luck
    lab.Case(sum_over, x=(4, 3)),
    lab.Case(sum_over, x=(2, 3, 4), axis=[0, 2], keepdims=True),   # a list: a tuple would be a shape
    lab.Case(mean_over, x=(4, 3), axis=1),
    lab.Case(mean_over, x=(4, 3)),
    lab.Case(mean_over, x=(2, 3, 4), axis=-1, keepdims=True),
]
