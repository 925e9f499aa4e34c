"""Solutions to exercise 08."""


def layer_norm_vjp(g, x_hat, sigma, w):
    g_hat = g * w                                           # the gradient reaching x̂
    grad_x = (g_hat - g_hat.mean(axis=-1, keepdims=True)
              - x_hat * (g_hat * x_hat).mean(axis=-1, keepdims=True)) / sigma
    return grad_x, (g * x_hat).sum(axis=0), g.sum(axis=0)   # w and b: summed over the rows they were stretched along
