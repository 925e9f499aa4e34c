"""The chain rule, printed: what backward does at each node, in the order it does it.

    loss.backward(trace=True)

prints, for every op node from the loss back to the leaves, the node's upstream gradient
and, for each input, "input.grad += upstream x local derivative = contribution". The local
derivative is not looked up in a table: it is measured by feeding the op's own vjp one
unit upstream gradient per output element, so what is printed is exactly what backward
computes. For tensors it is a Jacobian (shown elementwise when it is diagonal).
"""
import sys

import numpy as np

from . import autograd

JACOBIAN_LIMIT = 256   # print a Jacobian up to this many entries
NODE_LIMIT = 200       # a trace is for small graphs: stop printing after this many nodes


def trace_backward(root, grad=None, retain_graph=False, file=None):
    """root.backward(grad, retain_graph), printing the chain rule at every node."""
    file = file or sys.stdout
    order = autograd.backward_order(root)
    number = {id(node): i + 1 for i, node in enumerate(order)}
    names = {id(node): _name(node, number[id(node)]) for node in order}
    name = lambda t: names.get(id(t)) or _constant_name(t)
    printed = {"node": None, "count": 0}

    def on_edge(node, parent, vjp, contribution):
        if printed["node"] is not node:
            printed["node"] = node
            printed["count"] += 1
            if printed["count"] == NODE_LIMIT + 1:
                print(f"... (trace stops here: the graph has {len(order)} nodes)", file=file)
            if printed["count"] <= NODE_LIMIT:
                inputs = ", ".join(name(p) for p in node._parents)
                print(f"[{number[id(node)]}] {name(node)} = {node._op}({inputs})    "
                      f"{name(node)}.grad = {_show(node.grad)}", file=file)
        if printed["count"] <= NODE_LIMIT:
            print("      " + _edge(name(node), name(parent), node, parent, vjp, contribution), file=file)

    print(f"backward from {name(root)}: each input's grad += upstream grad x local derivative",
          file=file)
    autograd.backward(root, grad, retain_graph, on_edge)
    leaves = [n for n in order if not n._parents]
    if leaves:
        print("leaf gradients: " + ", ".join(f"{name(n)}.grad = {_show(n.grad)}" for n in leaves), file=file)


def _edge(out_name, in_name, node, parent, vjp, contribution):
    """One line of the chain rule for the edge parent -> node."""
    head = f"{in_name}.grad += {out_name}.grad"
    local = f"d{out_name}/d{in_name}"
    if node.data.size * parent.data.size > JACOBIAN_LIMIT:
        return (f"{head} x {local} (a {node.shape} -> {parent.shape} Jacobian, too big to print) "
                f"= tensor of shape {contribution.shape}, norm {np.linalg.norm(contribution):.4g}")
    jacobian = _jacobian(vjp, node.data, parent.data)
    if node.data.size == 1 and parent.data.size == 1:
        return (f"{head} x {local} = {_show(node.grad)} x {_show(jacobian[0, 0])} "
                f"= {_show(contribution)}")
    if node.shape == parent.shape and np.count_nonzero(jacobian - np.diag(np.diag(jacobian))) == 0:
        return (f"{head} * {local} (elementwise) = {_show(node.grad)} * "
                f"{_show(np.diag(jacobian).reshape(parent.shape))} = {_show(contribution)}")
    return (f"{head} @ {local} (Jacobian, {node.data.size} x {parent.data.size}) = "
            f"{_show(node.grad.reshape(-1))} @ {_show(jacobian)} = {_show(contribution)}")


def _jacobian(vjp, out, x):
    """d out / d x as a (out.size, x.size) matrix: row i is the vjp of the i-th unit vector."""
    rows = []
    for i in range(out.size):
        unit = np.zeros(out.size, out.dtype)
        unit[i] = 1
        row = vjp(unit.reshape(out.shape))
        row = row.dense(x.shape, x.dtype) if isinstance(row, autograd.Scatter) else np.asarray(row)
        rows.append(autograd.unbroadcast(row, x.shape).reshape(-1) if row.shape != x.shape else row.reshape(-1))
    return np.array(rows)


def _name(node, number):
    if node.label:
        return node.label
    return f"{node._op}{number}" if node._op else f"leaf{number}"


def _constant_name(t):
    return t.label or (f"{t.data.item():.4g}" if t.data.size == 1 else f"const{t.shape}")


def _show(value):
    value = np.asarray(value)
    if value.size == 1:
        return f"{value.item():.4g}"
    return np.array2string(value, precision=4, suppress_small=True, threshold=64,
                           separator=", ").replace("\n", "")
