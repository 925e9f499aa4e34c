"""Solutions to exercise 10."""
import numpy as np


def embedding_vjp(g, table, ids):
    grad = np.zeros_like(table)
    np.add.at(grad, ids, g)      # a row picked twice gets both rows of g (grad[ids] += g would keep one)
    return grad
