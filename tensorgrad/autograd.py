"""The graph side of the engine: grad modes, scopes, and the backward pass.

An op's output Tensor remembers its inputs (``_parents``) and how to send a gradient back
to each (``_vjps``): one vector-Jacobian product per input, a function that takes
g = dL/d(output) and returns dL/d(input); or, for an op whose inputs' gradients share
work, one function that returns all of them. backward() visits the graph from the loss
towards the leaves, in an order where every node comes after all the nodes that consume
it, and applies the chain rule at each node:

    input.grad += vjp(node.grad)        (upstream gradient × local derivative)
"""
import contextlib
import threading

import numpy as np

from . import devices


class _Modes(threading.local):
    """Switches read by every op. Each thread has its own, starting from these defaults (as
    in PyTorch): a thread that turns gradients off, or opens a scope, does so for itself."""
    grad_enabled = True   # False inside no_grad(): ops build no graph
    anomaly = False       # True inside detect_anomaly(): every op checks for nan/inf
    composed = False      # True inside composed(): fused ops run as their compositions
    scope = ()            # names of the open scope() blocks, outermost first
    replay = None         # inside replaying(): the Replay that make_op hands each new tensor


modes = _Modes()


@contextlib.contextmanager
def _switched(mode, value):
    """Set one of the modes for the duration of a with-block (or a decorated function)."""
    previous = getattr(modes, mode)
    setattr(modes, mode, value)
    try:
        yield
    finally:
        setattr(modes, mode, previous)


def no_grad():
    """Inside this block (or a function decorated with it), ops build no graph."""
    return _switched("grad_enabled", False)


def detect_anomaly():
    """Inside this block, the first op whose forward or backward makes nan/inf raises
    FloatingPointError naming that op and its input shapes. Slow: for debugging only."""
    return _switched("anomaly", True)


def composed():
    """Inside this block, every fused op (softmax, log_softmax, gelu, and nn.functional's
    linear, layer_norm, cross_entropy, scaled_dot_product_attention) runs as its
    composition of primitive ops, written beside its fused body: drawings and traces then
    show every step of the math. Values and gradients are the same (tests prove it);
    outside the block, training uses the fused ops, which are faster."""
    return _switched("composed", True)


def replaying(replay):
    """Inside this block make_op calls `replay(op, out, inputs)` for every tensor it makes, in
    order, before returning it: how gradcheck re-runs a function with one tensor's data moved."""
    return _switched("replay", replay)


def is_composed():
    """True inside `with composed():` (on this thread)."""
    return modes.composed


class scope:
    """`with scope(name):` tags every op made inside with `name` (nested scopes join: "h.0"
    then "attn"). nn.Module calls open one per module; graph drawings cluster and collapse
    by it. A class, which is cheaper than a generator-based contextmanager: every module
    call of a training step opens one."""
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


def broadcasts_to(shape, target):
    """True when numpy broadcasting stretches an array of `shape` to `target`."""
    return len(shape) <= len(target) and all(
        n == m or n == 1 for n, m in zip(reversed(shape), reversed(target)))


def describe(node):
    """'mul' or 'mul in h.0.attn', and the shapes it took: for error messages."""
    where = f" in {'.'.join(node._scope)}" if node._scope else ""
    shapes = ", ".join(str(p.shape) for p in node._parents)
    return f"'{node._op}'{where} (inputs of shapes {shapes})"


def check_finite(op, array, what, inputs):
    """The detect_anomaly() check: raise if `array` holds nan or inf, naming op as the one
    that made it; unless an input already held one (a leaf, or a tensor made outside the
    block): then op only passed it on, and the message says to look at that input."""
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        kind = "nan" if np.isnan(array).any() else "inf"
        shapes = ", ".join(str(t.shape) for t in inputs)
        came_in = next((f": its input {i} already held nan or inf (made outside detect_anomaly(), or given): look there"
                        for i, t in enumerate(inputs) if t.dtype.kind == "f" and not np.isfinite(t.data).all()), "")
        raise FloatingPointError(
            f"detect_anomaly: {what} of op '{op}' contains {kind} "
            f"(inputs of shapes {shapes}; first bad element at "
            f"{tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])}){came_in}")


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


def backward(root, grad=None, retain_graph=False, intermediate_grads=True):
    """Fill .grad of every tensor that `root` depends on and that requires grad.

    Leaves accumulate across calls (`+=`, as in PyTorch); an intermediate node's .grad
    holds the gradient of the latest backward. Unless retain_graph, each node's vjps
    (and the arrays they saved) are dropped as soon as the node is done, so memory is
    released as backward goes and a second backward through it is an error.
    With intermediate_grads=False (PyTorch's way), an intermediate's .grad is dropped too,
    once it has been sent on to the node's inputs: only the leaves keep one, and the
    backward holds only the gradients still on their way (for a training step whose graph
    nobody looks at, as tgtrain.parallel's parts: their peak memory falls by a third).
    """
    order = backward_order(root)
    seed = first_gradient(root, grad)
    for node in order:
        if node._parents:
            check_not_freed(node)
            node.grad = None   # an intermediate's grad is this call's, not a sum over calls
    root.grad = seed if root.grad is None else devices.array(root.grad + seed)   # 0-d + 0-d: a scalar

    gradients = Accumulator()
    for node in order:
        if not node._parents:   # a leaf: nothing is left to send back
            continue
        if gradients.check and node.grad is not None:   # each part was checked, but finite parts can sum to inf
            check_finite(node._op, node.grad, "the gradient (summed, or given to backward) of the output",
                         node._parents)
        for index, contribution in enumerate(input_gradients(node._vjps, node._parents, node.grad, node)):
            if contribution is not None:
                gradients.add(node, index, contribution)   # input.grad += upstream × local
        if not retain_graph:
            node._vjps = None
        if not intermediate_grads:
            node.grad = None


def input_gradients(vjps, inputs, upstream, node=None):
    """dL/d(input) for each of an op's inputs (None for those that need no gradient), from
    the op's vjps and g = dL/d(output) = `upstream`.

    While the vjps run, g and what the forward saved for them are read-only: g may be another
    tensor's gradient too, and a saved array overwritten (`s *= g`) would give the right
    gradient once and a wrong one at the next backward through the graph. numpy refuses the
    write; the error is raised again naming `node`'s op (when given) and the input. What a
    vjp returns that was read-only then (g, a saved array, a view of either) stays read-only,
    so backward knows it is not a new array (Accumulator). No upstream (every vjp into this
    node returned None): no gradient reaches the inputs either. CuPy's arrays have no
    read-only flag: on a GPU nothing is locked, and the CPU's tests guard the vjps."""
    if upstream is None:
        return [None] * len(inputs)
    g = upstream.view()
    locking = type(g) is np.ndarray
    if locking:
        g.flags.writeable = False
    saved = lock(saved_arrays(vjps, inputs, node)) if locking else []
    gradients = []
    try:
        if callable(vjps):   # one backward for all the inputs: their gradients share work
            gradients = [grad if x.requires_grad else None for x, grad in zip(inputs, vjps(g))]
        else:
            for x, vjp in zip(inputs, vjps):
                gradients.append(vjp(g) if x.requires_grad else None)
        return [grad.view() if type(grad) is np.ndarray and not grad.flags.writeable else grad
                for grad in gradients]   # a view made while locked stays read-only after
    except ValueError as error:   # numpy's "assignment destination is read-only", "output array is ..."
        if node is None or not str(error).endswith("is read-only"):
            raise
        raise ValueError(wrote_into_g(node, None if callable(vjps) else len(gradients))) from error
    finally:
        unlock(saved)


def saved_arrays(vjps, inputs, node):
    """What the forward saved for the vjps: the op's inputs and output, and the arrays the
    vjps hold (in their closures: `lambda g: g * b` holds b): numpy's arrays only, as the
    input of a move from a GPU (x.cpu()) is CuPy's, which has no read-only flag."""
    arrays = [t.data for t in inputs] + ([] if node is None else [node.data])
    for vjp in (vjps,) if callable(vjps) else vjps:
        arrays += [cell.cell_contents for cell in vjp.__closure__ or ()]
    return [array for array in arrays if type(array) is np.ndarray]


def lock(arrays):
    """Make `arrays` read-only; returns those that were writable (for unlock)."""
    locked = [array for array in arrays if array.flags.writeable]
    for array in locked:
        array.flags.writeable = False
    return locked


def unlock(arrays):
    """Make `arrays` writable again. numpy refuses a view while the array it views is still
    read-only, so such a view waits for a second pass, after its base."""
    waiting = []
    for array in arrays:
        try:
            array.flags.writeable = True
        except ValueError:
            waiting.append(array)
    if waiting and len(waiting) < len(arrays):
        unlock(waiting)


class Accumulator:
    """`input.grad += contribution` for one backward pass: the one place where gradients are
    added. What it computes is the plain rule,

        x.grad = contribution if x.grad is None else x.grad + contribution

    with the contribution first brought to x's shape (a gradient in the broadcast shape is
    summed down: unbroadcast; any other shape is the vjp's mistake, reported here) and dtype.
    How it computes it is faster (add_in_place). A leaf's .grad is always an array of its
    own, so updating it in place (clipping, an optimizer) changes nothing else. A Scatter
    (the gradient of x[index]: zero but at the picked places) is added where it is nonzero.
    """

    def __init__(self):
        self.owned = set()           # ids of tensors whose .grad only this pass holds
        self.check = modes.anomaly   # detect_anomaly(): read once, not on every edge

    def add(self, node, index, contribution):
        x = node._parents[index]
        if type(contribution) is Scatter:
            if self.check:
                check_finite(node._op, contribution.values, f"the backward's gradient for input {index}", node._parents)
            contribution.add_into(self.writable_grad(x))
            return
        contribution, new = self.shaped(node, index, contribution)
        if self.check:
            check_finite(node._op, contribution, f"the backward's gradient for input {index}", node._parents)
        if x.grad is None:
            x.grad = contribution if new or x._parents else contribution.copy()   # a leaf's: its own
            if new or not x._parents:
                self.owned.add(id(x))
        else:
            x.grad = self.add_in_place(x, contribution, new)

    def shaped(self, node, index, contribution):
        """The contribution in its input's shape and dtype, and whether it is new: only this
        pass holds it. A read-only one is g, or what the forward saved, or a view of either
        (input_gradients): others hold it. Summing and casting make new arrays."""
        x = node._parents[index]
        if type(contribution) is not np.ndarray:   # a numpy scalar, from 0-d arithmetic; a CuPy array
            contribution = devices.array(contribution)
        new = type(contribution) is np.ndarray and contribution.flags.writeable   # on a GPU: never known new
        if contribution.shape != x.data.shape:
            if not broadcasts_to(x.data.shape, contribution.shape):
                raise ValueError(wrong_shape(node, index, contribution.shape))
            contribution, new = unbroadcast(contribution, x.data.shape), True
        if contribution.dtype != x.data.dtype:
            contribution, new = contribution.astype(x.data.dtype), True
        return contribution, new

    def add_in_place(self, x, contribution, new):
        """x.grad + contribution, written into an array this pass owns where there is one:
        numpy updates an array in place faster than it writes a new one, and a transformer's
        gradients are its largest arrays. Never into an array others may hold (g, what the
        forward saved, a leaf's .grad from an earlier backward that a user may keep)."""
        if id(x) in self.owned:
            x.grad += contribution
            return x.grad
        self.owned.add(id(x))
        if new:
            contribution += x.grad
            return contribution
        return devices.array(x.grad + contribution)   # numpy adds two 0-d arrays into a scalar

    def writable_grad(self, x):
        """x.grad as an array this pass owns: zeros, or a copy of the gradient so far."""
        if id(x) not in self.owned:
            x.grad = np.zeros_like(x.data) if x.grad is None else x.grad.copy()
            self.owned.add(id(x))
        return x.grad


class Scatter:
    """A gradient that is zero except at `index`, where it is `values`: what the vjp of
    x[index] returns. backward adds it into x's gradient in place, so three slices of one
    tensor (q, k and v of an attention layer) cost one array of its size for their
    gradients, not three arrays to fill with zeros and then add up."""
    __slots__ = ("index", "values", "repeats")

    def __init__(self, index, values, repeats):
        self.index, self.values, self.repeats = index, values, repeats

    def add_into(self, grad):
        if not self.repeats:
            grad[self.index] += self.values
        elif type(self.index) is np.ndarray:   # rows picked by one array of ids: an embedding's lookup
            add_rows(grad, self.index, self.values)
        else:
            np.add.at(grad, self.index, self.values)   # a position picked twice gets both

    def dense(self, shape, dtype):
        """The whole gradient, as an array of `shape`."""
        grad = np.zeros(shape, dtype, like=self.values)
        self.add_into(grad)
        return grad


def add_rows(grad, rows, values):
    """grad[rows[i]] += values[i] for every i, a row picked twice getting both (np.add.at's
    result, several times faster): sort the ids so that each row's picks are one run, sum
    each run (np.add.reduceat), then add each row's sum once."""
    rows = rows.reshape(-1) % len(grad)   # a negative id counts from the end: the same row
    values = values.reshape(len(rows), *grad.shape[1:])
    order = np.argsort(rows, kind="stable")
    rows, values = rows[order], values[order]
    starts = np.flatnonzero(np.diff(rows, prepend=-1))   # where each row's run begins
    if len(starts) < len(rows):   # some row picked more than once (an embedding's repeated ids)
        rows, values = rows[starts], np.add.reduceat(values, starts, axis=0)
    grad[rows] += values


def dense(contribution, shape, dtype):
    """A vjp's result as an array of `shape`: a Scatter filled in, a broadcast one summed down."""
    if isinstance(contribution, Scatter):
        return contribution.dense(shape, dtype)
    contribution = devices.array(contribution)
    return contribution if contribution.shape == shape else unbroadcast(contribution, shape)


def first_gradient(root, grad):
    """dL/d(root) to start from, as an array of this pass's own: 1 for a one-element root,
    else `grad`, which must have root's shape."""
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
        return np.ones_like(root.data)
    given = grad.data if hasattr(grad, "requires_grad") else grad   # a Tensor, or an array
    grad = devices.to(devices.array(given, root.data.dtype), root.device).copy()
    if grad.shape != root.shape:
        raise ValueError(f"backward: grad has shape {grad.shape} but the tensor has shape {root.shape}")
    return grad


def check_not_freed(node):
    if node._vjps is None:
        raise RuntimeError(
            f"backward: trying to go back through op {describe(node)} a second time, but its "
            "saved values were freed by the first backward(); call backward(retain_graph=True) "
            "the first time if you need to backward through a graph twice")


def wrote_into_g(node, index):
    """The error for a vjp that wrote into the read-only g (index None: the op's one backward)."""
    label = "" if index is None or not node._parents[index].label else f" ({node._parents[index].label!r})"
    which = "backward" if index is None else f"vjp for input {index}{label}"
    return (f"backward of op {describe(node)}: its {which} wrote into a read-only array: g = dL/d(output), or "
            "the op's output or an input, which backward hands over read-only: a vjp must not write into g: it may "
            "be shared (it is the output's .grad, and another input's vjp gets it too); nor into what the forward "
            "saved: the next backward would use the changed values; compute a new array instead (g * out, not "
            "g *= out or out *= g)")


def wrong_shape(node, index, shape):
    """The error for a vjp whose gradient cannot be summed down to its input's shape."""
    x = node._parents[index]
    hint = " (the input's shape reversed: a transpose too many, or one missing?)" if shape == x.shape[::-1] else ""
    return (f"backward of op {describe(node)}: the gradient for input {index}"
            f"{f' ({x.label!r})' if x.label else ''}, of shape {x.shape}, came back with shape "
            f"{shape}{hint}; a vjp must return dL/d(input) in the input's shape, or in a shape that "
            "the input broadcasts to (backward then sums it down)")
