"""Exercise 07: cross-entropy from logits.

    logits: (N, C), one row of scores per example; targets: (N,), the right class of each
    p = softmax(logits) along each row
    loss = mean over the N rows of -log p[i, targets[i]]                 loss: ()
         = mean over i of (log Σ_j e^(logits[i, j]) - logits[i, targets[i]])

The second line is how the forward computes it (with the row max taken out of the
log-sum-exp, as softmax does), and the easier one to differentiate: take d/d logits[i, j]
of one row's term, then remember the mean. One fused op, rather than softmax, log and a
pick, is how every framework does it: the gradient comes out short, and never divides by
a p that has rounded to 0.

Write cross_entropy_vjp: it gets g (a number: the loss is 0-d), the logits, the targets
and p, and returns dL/dlogits, (N, C). `python exercises/check.py 7` grades it.

한국어
------
연습 07: logits에서 바로 계산하는 교차 엔트로피.

    logits: (N, C), 예제마다 점수 한 행;  targets: (N,), 각 예제의 정답 클래스
    p = softmax(logits), 각 행을 따라
    loss = N개 행에 대한 -log p[i, targets[i]]의 평균                       loss: ()
         = i에 대한 (log Σ_j e^(logits[i, j]) - logits[i, targets[i]])의 평균

두 번째 줄이 순전파가 계산하는 방식이고(softmax처럼 log-sum-exp에서 행의 최댓값을 빼 둡니다),
미분하기도 더 쉽습니다: 한 행의 항을 logits[i, j]로 미분한 다음, 평균을 잊지 마세요. softmax,
log, 고르기를 따로 두지 않고 하나로 합친 연산이 모든 프레임워크가 쓰는 방식입니다: 기울기가
짧게 나오고, 0으로 반올림된 p로 나누는 일도 없습니다.

cross_entropy_vjp를 작성하세요: g(손실이 0차원이므로 숫자), logits, targets, p를 받아
dL/dlogits (N, C)를 돌려줍니다. `python exercises/check.py 7`이 채점합니다.
"""
import numpy as np

import lab
import tensorgrad as tg


def cross_entropy(logits, targets):
    """The mean over rows of -log softmax(logits)[row, target]; targets: int array (N,)."""
    z = logits.data - logits.data.max(axis=-1, keepdims=True)
    log_sum_exp = np.log(np.exp(z).sum(axis=-1))
    rows = np.arange(len(targets))
    loss = np.mean(log_sum_exp - z[rows, targets])
    p = np.exp(z - log_sum_exp[:, None])
    return tg.make_op("cross_entropy", loss, (logits,), vjps=(lambda g: cross_entropy_vjp(g, logits.data, targets, p),))


def cross_entropy_vjp(g, logits, targets, p):
    """g = dL/d(loss), a number; return dL/dlogits, (N, C)."""
    raise NotImplementedError("exercise 07: write cross_entropy_vjp")


CHECKS = [
    lab.Case(cross_entropy, logits=(4, 5), targets=np.array([1, 0, 4, 1])),
    lab.Case(cross_entropy, logits=(1, 3), targets=np.array([2])),
]
