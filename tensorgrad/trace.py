"""The chain rule, printed: what backward does at each node, in the order it does it.

    loss.backward(trace=True)

prints, for every op node from the loss back to the leaves, the node's upstream gradient
and, for each input, "input.grad += upstream × local derivative = contribution", with the
op's rule for that input (the formula written where the op is defined). The numbers of the
local derivative are not looked up in a table: they are measured by feeding the op's own
vjp one unit upstream gradient per output element, so what is printed is exactly what
backward computes. For tensors it is a Jacobian (shown elementwise when it is diagonal).

The trace wraps each node's vjps in a printing one and runs the ordinary backward.
"""
import sys

import numpy as np

from . import autograd, devices
from . import names

JACOBIAN_LIMIT = 256   # print a Jacobian up to this many entries
NODE_LIMIT = 200       # a trace is for small graphs: stop printing after this many nodes


def trace_backward(root, grad=None, retain_graph=False, file=None, intermediate_grads=True):
    """root.backward(grad, retain_graph, intermediate_grads=...), printing the chain rule at every node."""
    file = file or sys.stdout
    order = autograd.backward_order(root)
    number = {id(node): i for i, node in enumerate(order, 1)}
    # a name with spaces in brackets: "(ln1 › x - mean).grad", not "ln1 › x - mean.grad"
    name = lambda t: f"({names.name(t)})" if " " in names.name(t) else names.name(t)
    printed = []   # the nodes printed so far

    def printing(node, vjps):
        """node's vjps as one backward that also prints what it sends to each input."""
        def backward_and_print(upstream):
            gradients = autograd.input_gradients(vjps, node.parents, upstream)
            printed.append(node)
            if len(printed) == NODE_LIMIT + 1:
                print(f"... (trace stops here: the graph has {len(order)} nodes)", file=file)
            if len(printed) <= NODE_LIMIT:
                inputs = ", ".join(name(p) for p in node.parents)
                print(f"[{number[id(node)]}] {name(node)} = {node.op}({inputs})    "
                      f"{name(node)}.grad = {_show(upstream)}", file=file)
                for index, (parent, contribution) in enumerate(zip(node.parents, gradients)):
                    if contribution is not None:
                        local = lambda g, index=index: autograd.input_gradients(vjps, node.parents, g)[index]
                        print("      " + _edge(name(node), name(parent), node, parent, local, contribution,
                                               node.rules[index] if node.rules else None), file=file)
            return gradients
        return backward_and_print

    print(f"backward from {name(root)}: each input's grad += upstream grad × local derivative",
          file=file)
    original = {id(node): node.vjps for node in order if node.parents}
    for node in order:
        if node.parents and node.vjps is not None:
            node._vjps = printing(node, node.vjps)
    try:
        autograd.backward(root, grad, retain_graph, intermediate_grads)
    finally:
        for node in order:   # what backward did not free gets its own vjps back
            if node.parents and node.vjps is not None:
                node._vjps = original[id(node)]
    leaves = [n for n in order if not n.parents]
    if leaves:
        print("leaves: " + ", ".join(f"[{number[id(n)]}] {name(n)}.grad = {_show(n.grad)}" for n in leaves),
              file=file)


def _edge(out_name, in_name, node, parent, vjp, contribution, rule):
    """One line of the chain rule for the edge parent -> node, ending with the op's rule."""
    contribution = autograd.dense(contribution, parent.shape, parent.dtype)
    head = f"{in_name}.grad += {out_name}.grad"
    local = f"d{out_name}/d{in_name}"
    rule = f"    [{node.op}: {rule}]" if rule else f"    [{node.op}: local derivative from its vjp]"
    kind, derivative = local_derivative(vjp, node.data, parent.data)
    if kind is None:
        return (f"{head} × {local} (a {node.shape} -> {parent.shape} Jacobian, too big to print) "
                f"= tensor of shape {contribution.shape}, norm {np.linalg.norm(contribution):.4g}{rule}")
    if kind == "scalar":
        return f"{head} × {local} = {_show(node.grad)} × {_show(derivative)} = {_show(contribution)}{rule}"
    if kind == "elementwise":
        return (f"{head} · {local} (elementwise) = {_show(node.grad)} · "
                f"{_show(derivative)} = {_show(contribution)}{rule}")
    return (f"{head} @ {local} (Jacobian, {node.data.size} × {parent.data.size}) = "
            f"{_show(node.grad.reshape(-1))} @ {_show(derivative)} = {_show(contribution)}{rule}")


def local_derivative(vjp, out, x):
    """d out / d x, the local derivative that `vjp` (g -> dL/dx) applies, measured from the
    vjp itself (so it is what backward computes), as (kind, numbers):
    ("scalar", a number) when out and x are one number each; ("elementwise", an array
    shaped like x) when each output depends only on the input at its place (a diagonal
    Jacobian); ("jacobian", an (out.size, x.size) matrix) otherwise; (None, None) when the
    Jacobian has more than JACOBIAN_LIMIT entries. The trace and the explorer page show it."""
    if out.size * x.size > JACOBIAN_LIMIT:
        return None, None
    jacobian = _jacobian(vjp, out, x)
    if out.size == 1 and x.size == 1:
        return "scalar", jacobian[0, 0]
    if out.shape == x.shape and np.count_nonzero(jacobian - np.diag(np.diag(jacobian))) == 0:
        return "elementwise", np.diag(jacobian).reshape(x.shape)
    return "jacobian", jacobian


def _jacobian(vjp, out, x):
    """d out / d x as a (out.size, x.size) matrix: row i is the vjp of the i-th unit vector."""
    rows = []
    for i in range(out.size):
        unit = np.zeros(out.size, out.dtype, like=out)   # on the graph's device, for its vjp
        unit[i] = 1
        row = autograd.dense(vjp(unit.reshape(out.shape)), x.shape, x.dtype).reshape(-1)
        rows.append(devices.to(row, "cpu"))
    return np.array(rows)


def _show(value):
    value = devices.to(devices.array(value), "cpu")   # printed from the host
    if value.size == 1:
        return f"{value.item():.4g}"
    return np.array2string(value, precision=4, suppress_small=True, threshold=64,
                           separator=", ").replace("\n", "")
