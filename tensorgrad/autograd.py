"""The graph side of the engine: grad modes, scopes, and the backward pass.

An op's output Tensor remembers its inputs (``_parents``) and, for each input, a
vector-Jacobian product (``_vjps``): a function that takes g = dL/d(output) and returns
dL/d(input). backward() visits the graph from the loss towards the leaves, in an order
where every node comes after all the nodes that consume it, and applies the chain rule
at each node:

    input.grad += vjp(node.grad)        (upstream gradient x local derivative)
"""
import contextlib
import threading

import numpy as np


class _Modes(threading.local):
    """Switches read by every op. Each thread has its own (as in PyTorch), starting from
    these defaults, so threads can build separate graphs at the same time."""
    grad_enabled = True   # False inside no_grad(): ops build no graph
    anomaly = False       # True inside detect_anomaly(): every op checks for nan/inf
    scope = ()            # names of the open scope() blocks, outermost first


modes = _Modes()


@contextlib.contextmanager
def no_grad():
    """Inside this block (or a function decorated with it), ops build no graph."""
    previous = modes.grad_enabled
    modes.grad_enabled = False
    try:
        yield
    finally:
        modes.grad_enabled = previous


@contextlib.contextmanager
def detect_anomaly():
    """Inside this block, the first op whose forward or backward makes nan/inf raises
    FloatingPointError naming that op and its input shapes. Slow: for debugging only."""
    previous = modes.anomaly
    modes.anomaly = True
    try:
        yield
    finally:
        modes.anomaly = previous


class scope:
    """`with scope(name):` tags every op made inside with `name` (nested scopes join: "h.0"
    then "attn"). nn.Module calls open one per module; graph drawings cluster and collapse
    by it. A class rather than a generator-based contextmanager: every module call of a
    training step opens one, and this costs a third as much."""
    __slots__ = ("name", "previous")

    def __init__(self, name):
        self.name = str(name)

    def __enter__(self):
        self.previous = modes.scope
        modes.scope = self.previous + (self.name,)

    def __exit__(self, *exception):
        modes.scope = self.previous


def unbroadcast(grad, shape):
    """Sum `grad` down to `shape`: the backward of numpy broadcasting.

    Broadcasting copies an input along the leading axes it lacks and along its axes of
    size 1, so the gradient of each copy must be added back into the one original:
    sum away the extra leading axes, then sum (keepdims) over the size-1 axes.
    """
    extra = grad.ndim - len(shape)
    stretched = tuple(extra + i for i, n in enumerate(shape) if n == 1 and grad.shape[extra + i] != 1)
    summed = grad.sum(axis=tuple(range(extra)) + stretched, keepdims=True) if extra or stretched else grad
    return summed.reshape(shape)


def describe(node):
    """'mul' or 'mul in h.0.attn', and the shapes it took: for error messages."""
    where = f" in {'.'.join(node._scope)}" if node._scope else ""
    shapes = ", ".join(str(p.shape) for p in node._parents)
    return f"'{node._op}'{where} (inputs of shapes {shapes})"


def check_finite(op, array, what, inputs):
    """The detect_anomaly() check: raise if `array` holds nan or inf."""
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        kind = "nan" if np.isnan(array).any() else "inf"
        shapes = ", ".join(str(t.shape) for t in inputs)
        raise FloatingPointError(
            f"detect_anomaly: {what} of op '{op}' contains {kind} "
            f"(inputs of shapes {shapes}; first bad element at "
            f"{tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])})")


def backward_order(root):
    """Every node that needs a gradient on a path to `root`, root first, each node
    after all of its consumers: the reverse of a depth-first post-order. Iterative (a
    graph of any depth works) and following parents in their order (the same order on
    every run; an op's first input and what it came from are visited before its second)."""
    order, seen = [], set()
    stack = [(root, False)]
    while stack:
        node, parents_done = stack.pop()
        if parents_done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for parent in node._parents:  # the last pushed finishes first, so after reverse() the first parent leads
            if parent.requires_grad and id(parent) not in seen:
                stack.append((parent, False))
    order.reverse()
    return order


def backward(root, grad=None, retain_graph=False, on_edge=None):
    """Fill .grad of every tensor that `root` depends on and that requires grad.

    Leaves accumulate across calls (`+=`, as in PyTorch); an intermediate node's .grad
    holds the gradient of the latest backward. Unless retain_graph, each node's vjps
    (and the arrays they saved) are dropped as soon as the node is done, so memory is
    released as backward goes and a second backward through it is an error.
    `on_edge(node, parent, vjp, contribution)` is called on every edge when given
    (the chain-rule trace uses it); the plain path passes None.
    """
    if not root.requires_grad:
        raise RuntimeError(
            f"backward: this tensor (shape {root.shape}) does not require grad: none of the "
            "tensors it was made from has requires_grad=True, or it was made under no_grad()")
    if grad is None:
        if root.data.size != 1:
            raise RuntimeError(
                f"backward: grad can be implied only for a single-element output, but this tensor "
                f"has shape {root.shape}; pass backward(grad) with an array of that shape, "
                "or reduce it first (loss = y.sum())")
        grad = np.ones_like(root.data)
    else:
        grad = np.asarray(grad.data if hasattr(grad, "data") else grad, dtype=root.data.dtype)
        if grad.shape != root.shape:
            raise ValueError(f"backward: grad has shape {grad.shape} but the tensor has shape {root.shape}")

    order = backward_order(root)
    for node in order:
        if node._parents:
            if node._vjps is None:
                raise RuntimeError(
                    f"backward: trying to go back through op {describe(node)} a second time, but its "
                    "saved values were freed by the first backward(); call backward(retain_graph=True) "
                    "the first time if you need to backward through a graph twice")
            node.grad = None  # an intermediate's grad is this call's, not a sum over calls
    root.grad = grad.copy() if root.grad is None else root.grad + grad

    writable = set()   # ids of the tensors whose .grad is an array this call made: safe to add into
    anomaly = modes.anomaly   # read once: a thread-local lookup on every edge adds up
    for node in order:
        vjps = node._vjps
        if vjps is None:  # a leaf: its grad is complete
            continue
        upstream = node.grad
        for parent, vjp in zip(node._parents, vjps):
            if not parent.requires_grad:
                continue
            contribution = vjp(upstream)  # the chain rule: upstream grad x local derivative
            if type(contribution) is Scatter:
                if on_edge is None and not anomaly:   # add it where it is nonzero, in place
                    if id(parent) not in writable:   # an array of this call's own to add into
                        parent.grad = (np.zeros(parent.data.shape, parent.data.dtype) if parent.grad is None
                                       else parent.grad.copy())
                        writable.add(id(parent))
                    contribution.add_into(parent.grad)
                    continue
                contribution = contribution.dense(parent.data.shape, parent.data.dtype)
            if type(contribution) is not np.ndarray:
                contribution = np.asarray(contribution)
            if contribution.shape != parent.data.shape:
                contribution = unbroadcast(contribution, parent.data.shape)
            if contribution.dtype != parent.data.dtype:
                contribution = contribution.astype(parent.data.dtype)
            if anomaly:
                index = next(i for i, p in enumerate(node._parents) if p is parent)
                check_finite(node._op, contribution, f"the backward's gradient for input {index}",
                             node._parents)
            if on_edge is not None:
                on_edge(node, parent, vjp, contribution)
            fresh = contribution is not upstream and _owns(contribution)
            if parent.grad is None:
                # a leaf gets an array of its own, so updating it in place (clipping, an
                # optimizer) touches nothing else; an intermediate's grad may be shared
                if fresh or not parent._parents:
                    parent.grad = contribution if fresh else contribution.copy()
                    writable.add(id(parent))
                else:
                    parent.grad = contribution
                continue
            # the sum goes into an array this call made, if there is one: numpy writes a
            # fresh array more slowly than it adds in place
            if id(parent) in writable:
                parent.grad += contribution
            elif fresh:
                contribution += parent.grad
                parent.grad = contribution
            else:
                parent.grad = parent.grad + contribution
            writable.add(id(parent))
        if not retain_graph:
            node._vjps = None


class Scatter:
    """A gradient that is zero except at `index`, where it is `values`: what the vjp of
    x[index] returns. backward adds it into x's gradient in place, so three slices of one
    tensor (q, k and v of an attention layer) cost one array of its size for their
    gradients, not three arrays to fill with zeros and then add up."""
    __slots__ = ("index", "values", "repeats")

    def __init__(self, index, values, repeats):
        self.index, self.values, self.repeats = index, values, repeats

    def add_into(self, grad):
        if self.repeats:
            np.add.at(grad, self.index, self.values)   # a position picked twice gets both
        else:
            grad[self.index] += self.values

    def dense(self, shape, dtype):
        """The whole gradient, as an array of `shape`."""
        grad = np.zeros(shape, dtype)
        self.add_into(grad)
        return grad


def _owns(array):
    """True when `array` is a fresh, writable array, not a view of another."""
    return array.base is None and array.flags.writeable
