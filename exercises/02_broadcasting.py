"""Exercise 02: broadcasting, and why gradients are summed back.

    out = a + b          a: (4, 3), b: (3,)  ->  out: (4, 3)

numpy broadcasting lines the shapes up from the right and stretches b along the axes it
lacks (and along any axis where it has size 1): b is used as if it were

    [[b0, b1, b2],
     [b0, b1, b2],      4 copies, one per row of a
     [b0, b1, b2],
     [b0, b1, b2]]

So a broadcast is an op of its own, a copy, hidden inside the +. Here it is made plain:
broadcast_to(x, shape) is that copy, and add and mul of any two tensors that broadcast
are your same-shape ops of exercise 01 applied to the two copies. b0 reaches the loss
through its 4 copies; the chain rule adds up every path, so dL/db0 is the sum of the 4
copies' gradients, and dL/db has b's shape, (3,).

Write broadcast_vjp: it gets g (the broadcast shape) and x, and returns dL/dx in x's
shape: g summed over the axes the broadcast put in front, and over the axes where x has
size 1 (keeping those, with size 1). `python exercises/check.py 2` grades it, then add
and mul as a whole (so exercise 01 must pass too).

한국어
------
연습 02: 브로드캐스팅, 그리고 기울기를 다시 더해 주는 이유.

    out = a + b          a: (4, 3), b: (3,)  ->  out: (4, 3)

numpy 브로드캐스팅은 shape를 오른쪽부터 맞추고, b에 없는 축을 따라(그리고 b의 크기가 1인
축을 따라) b를 늘립니다. b는 마치 다음 배열처럼 쓰입니다:

    [[b0, b1, b2],
     [b0, b1, b2],      a의 행마다 하나씩, 4벌
     [b0, b1, b2],
     [b0, b1, b2]]

그러니 브로드캐스트는 + 안에 숨어 있는 별도의 연산, 곧 복사입니다. 여기서는 그것을 드러내
놓았습니다: broadcast_to(x, shape)가 그 복사이고, 서로 브로드캐스트되는 두 텐서의 add와 mul은
두 복사본에 연습 01의 같은 shape 연산을 적용한 것입니다. b0은 4개의 복사본을 거쳐 손실에
닿습니다. 연쇄 법칙은 모든 경로를 더하므로, dL/db0은 4개 복사본의 기울기를 더한 값이고
dL/db의 shape는 b와 같은 (3,)입니다.

broadcast_vjp를 작성하세요: g(브로드캐스트된 shape)와 x를 받아 x의 shape로 dL/dx를
돌려줍니다. 브로드캐스트가 앞에 붙인 축들과, x의 크기가 1인 축들(이 축은 크기 1로 남겨
둡니다)을 따라 g를 더하면 됩니다. `python exercises/check.py 2`가 이것을 채점한 다음 add와
mul을 전체로 검사합니다(그러니 연습 01도 통과해야 합니다).
"""
import numpy as np

import lab
import tensorgrad as tg

same_shape = lab.load(1)   # exercise 01: add and mul of tensors of one shape


def broadcast_to(x, shape):
    """out = x copied out to `shape`, as numpy broadcasting does."""
    return tg.make_op("broadcast_to", np.broadcast_to(x.data, shape), (x,), vjps=(lambda g: broadcast_vjp(g, x.data),))


def broadcast_vjp(g, x):
    """g = dL/d(out), the broadcast shape; return dL/dx, x's shape."""
    raise NotImplementedError("exercise 02: write broadcast_vjp")


def add(a, b):
    """a + b, broadcasting: 01's add of the two copies."""
    shape = np.broadcast_shapes(a.shape, b.shape)
    return same_shape.add(broadcast_to(a, shape), broadcast_to(b, shape))


def mul(a, b):
    """a · b, broadcasting: 01's mul of the two copies."""
    shape = np.broadcast_shapes(a.shape, b.shape)
    return same_shape.mul(broadcast_to(a, shape), broadcast_to(b, shape))


CHECKS = [
    lab.Case(broadcast_to, x=(3,), shape=[4, 3]),        # copies down the rows: sum over axis 0
    lab.Case(broadcast_to, x=(4, 1), shape=[4, 3]),      # a column copied across: sum over axis 1, keep it
    lab.Case(broadcast_to, x=(), shape=[2, 3]),          # a number copied everywhere
    lab.Case(broadcast_to, x=(2, 1, 3), shape=[5, 2, 4, 3]),
    lab.Case(add, a=(4, 3), b=(3,)),
    lab.Case(mul, a=(2, 1, 3), b=(4, 1)),
]
