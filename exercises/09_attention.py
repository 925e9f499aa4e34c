"""Exercise 09: attention, forward and backward, one head.

    q, k, v: (T, d), one row per position of the sequence
    1. scores  = q @ kᵀ / √d                     (T, T): how well query i matches key j
    2. masked  = scores, with -inf where j > i    (T, T): causal, a position sees no later one
    3. weights = softmax(masked), row by row      (T, T): each row sums to 1 (exercise 06)
    4. out     = weights @ v                      (T, d): each row a weighted mean of v's rows

One fused op, as nanoGPT's flash path is: backward goes through the same four steps in
reverse, each one an exercise you have done:

    4. out = weights @ v:  g gives dL/dv and dL/dweights             (exercise 05)
    3. softmax:            dL/dweights gives dL/dmasked               (exercise 06)
    2. mask:               a masked score does not reach the loss: what is its gradient?
                           (look at the weights there, and at what step 3 gave you)
    1. scores:             dL/dscores gives dL/dq and dL/dk; mind the 1/√d   (exercise 05)

With causal=False there is no step 2. Write attention_vjp: it gets g (T, d), q, k, v and
the forward's weights (T, T), and returns (dL/dq, dL/dk, dL/dv), each (T, d).
`python exercises/check.py 9` grades it.

한국어
------
연습 09: 어텐션 헤드 하나의 순전파와 역전파.

    q, k, v: (T, d), 시퀀스의 위치마다 한 행
    1. scores  = q @ kᵀ / √d                (T, T): 쿼리 i가 키 j와 얼마나 잘 맞는지
    2. masked  = scores, j > i인 곳은 -inf  (T, T): 인과적(causal): 어떤 위치도 뒤를 보지 않음
    3. weights = softmax(masked), 행마다    (T, T): 각 행의 합은 1 (연습 06)
    4. out     = weights @ v                (T, d): 각 행은 v의 행들의 가중 평균

nanoGPT의 flash 경로처럼 하나로 합친 연산입니다: 역전파는 같은 네 단계를 거꾸로 지나가고,
각 단계는 이미 해 본 연습입니다:

    4. out = weights @ v:  g에서 dL/dv와 dL/dweights가 나옵니다                         (연습 05)
    3. softmax:            dL/dweights에서 dL/dmasked가 나옵니다                        (연습 06)
    2. mask:               마스크된 점수는 손실에 닿지 않습니다: 그 기울기는 무엇일까요?
                           (그 자리의 가중치와, 3단계가 준 값을 보세요)
    1. scores:             dL/dscores에서 dL/dq와 dL/dk가 나옵니다; 1/√d를 잊지 마세요  (연습 05)

causal=False이면 2단계가 없습니다. attention_vjp를 작성하세요: g (T, d), q, k, v와 순전파의
가중치 (T, T)를 받아 (dL/dq, dL/dk, dL/dv)를 각각 (T, d)로 돌려줍니다.
`python exercises/check.py 9`가 채점합니다.
"""
import numpy as np

import lab
import tensorgrad as tg


def attention(q, k, v, causal=True):
    """softmax(q @ kᵀ / √d, masked) @ v, for 2-d q, k, v."""
    T, d = q.shape
    scores = q.data @ k.data.T / np.sqrt(d)
    if causal:
        scores = np.where(np.triu(np.ones((T, T), dtype=bool), k=1), -np.inf, scores)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))   # e^-inf = 0: masked keys get weight 0
    weights = e / e.sum(axis=-1, keepdims=True)
    return tg.make_op("attention", weights @ v.data, (q, k, v),
                      vjps=lambda g: attention_vjp(g, q.data, k.data, v.data, weights))


def attention_vjp(g, q, k, v, weights):
    """g = dL/d(out), (T, d); return (dL/dq, dL/dk, dL/dv), each (T, d)."""
    raise NotImplementedError("exercise 09: write attention_vjp")


CHECKS = [
    lab.Case(attention, q=(4, 3), k=(4, 3), v=(4, 3), causal=True),   # T = 4 positions, d = 3
    lab.Case(attention, q=(5, 2), k=(5, 2), v=(5, 2), causal=False),
]
