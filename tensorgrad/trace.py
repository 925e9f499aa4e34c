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
import os
import sys

import numpy as np

from . import autograd

JACOBIAN_LIMIT = 256   # print a Jacobian up to this many entries
NODE_LIMIT = 200       # a trace is for small graphs: stop printing after this many nodes
DEPTH = 3              # a node's name spells out the ops of its scope this many deep, then "…"
# ops that names write as math on their inputs' names, each with its precedence (brackets go
# around a weaker operand); any other op reads op(inputs)
SYMBOLS = {"add": ("{} + {}", 1), "sub": ("{} - {}", 1), "mul": ("{} · {}", 2), "div": ("{} / {}", 2),
           "matmul": ("{} @ {}", 2), "neg": ("-{}", 3), "pow": ("{}^{}", 4), "transpose": ("{}ᵀ", 5),
           "getitem": ("{}[…]", 5)}


def trace_backward(root, grad=None, retain_graph=False, file=None, intermediate_grads=True):
    """root.backward(grad, retain_graph, intermediate_grads=...), printing the chain rule at every node."""
    file = file or sys.stdout
    order = autograd.backward_order(root)
    number = {id(node): i for i, node in enumerate(order, 1)}
    # a name with spaces in brackets: "(ln1 › x - mean).grad", not "ln1 › x - mean.grad"
    name = lambda t: f"({_name(t)})" if " " in _name(t) else _name(t)
    printed = []   # the nodes printed so far

    def printing(node, vjps):
        """node's vjps as one backward that also prints what it sends to each input."""
        def backward_and_print(upstream):
            gradients = autograd.input_gradients(vjps, node._parents, upstream)
            printed.append(node)
            if len(printed) == NODE_LIMIT + 1:
                print(f"... (trace stops here: the graph has {len(order)} nodes)", file=file)
            if len(printed) <= NODE_LIMIT:
                inputs = ", ".join(name(p) for p in node._parents)
                print(f"[{number[id(node)]}] {name(node)} = {node._op}({inputs})    "
                      f"{name(node)}.grad = {_show(upstream)}", file=file)
                for index, (parent, contribution) in enumerate(zip(node._parents, gradients)):
                    if contribution is not None:
                        local = lambda g, index=index: autograd.input_gradients(vjps, node._parents, g)[index]
                        print("      " + _edge(name(node), name(parent), node, parent, local, contribution,
                                               node._rules[index] if node._rules else None), file=file)
            return gradients
        return backward_and_print

    print(f"backward from {name(root)}: each input's grad += upstream grad × local derivative",
          file=file)
    original = {id(node): node._vjps for node in order if node._parents}
    for node in order:
        if node._parents and node._vjps is not None:
            node._vjps = printing(node, node._vjps)
    try:
        autograd.backward(root, grad, retain_graph, intermediate_grads)
    finally:
        for node in order:   # what backward did not free gets its own vjps back
            if node._parents and node._vjps is not None:
                node._vjps = original[id(node)]
    leaves = [n for n in order if not n._parents]
    if leaves:
        print("leaves: " + ", ".join(f"[{number[id(n)]}] {name(n)}.grad = {_show(n.grad)}" for n in leaves),
              file=file)


def _edge(out_name, in_name, node, parent, vjp, contribution, rule):
    """One line of the chain rule for the edge parent -> node, ending with the op's rule."""
    contribution = autograd.dense(contribution, parent.shape, parent.dtype)
    head = f"{in_name}.grad += {out_name}.grad"
    local = f"d{out_name}/d{in_name}"
    rule = f"    [{node._op}: {rule}]" if rule else f"    [{node._op}: local derivative from its vjp]"
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
        unit = np.zeros(out.size, out.dtype)
        unit[i] = 1
        rows.append(autograd.dense(vjp(unit.reshape(out.shape)), x.shape, x.dtype).reshape(-1))
    return np.array(rows)


def _name(t):
    """What the trace, the drawing and the stepper page call a tensor: its label; without one,
    an op's output is the scope it was made in, then the op written on its inputs as the math
    reads ("ln1 › var + 1e-05", "attn.scores › q @ kᵀ", "ffn › 0.5 · fc(…) · (1 + tanh(…))"),
    where an input made in a scope inside that one is named by it ("fc(…)"); a leaf is named by
    its shape, a constant by its value."""
    path = "" if t.label or not t._op else _dotted(t._scope)
    return (f"{path} › " if path else "") + _math(t, t._scope if path else ())


def _math(t, scope, depth=0, outer=None):
    """t as it reads in the name of a node made inside `scope`. `outer`: (op, precedence, left?)
    of the symbol t is an operand of, where t is bracketed unless it binds tighter or is the
    left operand of the same op ("a - b - c", "a - (b - c)")."""
    if t.label:
        text, op, level = _inside(t.label, scope), None, 0 if " " in t.label else 9
    elif not t._op:
        return f"leaf{t.shape}" if t.requires_grad else f"{t.data.item():.4g}" if t.size == 1 else f"const{t.shape}"
    # DEPTH ops deep, or made outside the node's scope: "…"; the output of a scope inside it: that scope's name
    elif t._scope != scope or depth == DEPTH:
        common = len(os.path.commonprefix([t._scope, scope]))
        return "…" if common == len(t._scope) else _inside(_dotted(t._scope[:common + 1]), scope[:common]) + "(…)"
    elif SYMBOLS.get(t._op, ("",))[0].count("{}") != len(t._parents):
        return f"{t._op}({', '.join(_math(p, scope, depth + 1) for p in t._parents)})"
    else:
        (template, level), op = SYMBOLS[t._op], t._op
        text = template.format(*(_math(p, scope, depth + 1, (op, level, i == 0)) for i, p in enumerate(t._parents)))
    bracket = outer and (level < outer[1] or level == outer[1] and not (op == outer[0] and outer[2]))
    return f"({text})" if bracket else text


def _inside(name, scope):
    """A dotted name as it reads inside `scope`: "weight" for "attn.qkv.weight" in attn.qkv."""
    prefix = _dotted(scope) + "."
    return name[len(prefix):] if scope and name.startswith(prefix) else name


def _dotted(path):
    """'h.0.attn' for the scope path ('h.0', 'attn'), and for ('h.0', 'h.0.attn') too, where
    the scopes were opened with full dotted names."""
    name = ""
    for part in path:
        name = part if not name or part.startswith(name + ".") else f"{name}.{part}"
    return name


def _show(value):
    value = np.asarray(value)
    if value.size == 1:
        return f"{value.item():.4g}"
    return np.array2string(value, precision=4, suppress_small=True, threshold=64,
                           separator=", ").replace("\n", "")
