"""Solutions to exercise 09."""
import numpy as np


def attention_vjp(g, q, k, v, weights):
    d = q.shape[-1]
    grad_v = weights.T @ g                                    # 4. out = weights @ v
    grad_weights = g @ v.T
    grad_scores = weights * (grad_weights - (grad_weights * weights).sum(axis=-1, keepdims=True))   # 3. softmax
    # 2. the mask: masked weights are 0, so grad_scores is already 0 there
    grad_q = grad_scores @ k / np.sqrt(d)                     # 1. scores = q @ kᵀ / √d
    grad_k = grad_scores.T @ q / np.sqrt(d)
    return grad_q, grad_k, grad_v
