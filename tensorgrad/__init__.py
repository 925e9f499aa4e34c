"""tensorgrad: a small, readable, tensor-level reverse-mode autodiff engine on numpy.

    import tensorgrad as tg
    x = tg.tensor([[1., 2.], [3., 4.]], requires_grad=True)
    loss = (x @ x).tanh().sum()
    loss.backward()            # x.grad now holds dloss/dx
"""
from .autograd import backward_order, composed, detect_anomaly, is_composed, no_grad, scope
from .draw import draw_graph, render_graph
from .explore import Explorer, explore
from .gradcheck import GradcheckError, gradcheck
from .threads import get_num_threads, set_num_threads
from .tensor import Tensor, arange, cat, make_op, maximum, ones, randn, stack, tensor, where, zeros

__all__ = [
    "Tensor", "tensor", "zeros", "ones", "randn", "arange", "cat", "stack", "where", "maximum",
    "make_op", "no_grad", "detect_anomaly", "composed", "is_composed", "scope", "backward_order",
    "gradcheck", "GradcheckError",
    "draw_graph", "render_graph", "explore", "Explorer", "set_num_threads", "get_num_threads",
]
