"""The chain rule, node by node, on micrograd's neuron: o = tanh(x1*w1 + x2*w2 + b).

    python demos/chain_rule.py [--out DIR]

Builds the expression from 0-d tensors, prints what backward does at each node (the
chain-rule trace), draws the graph with every value's data and grad and the order backward
visits the nodes in, checks each gradient against a finite-difference estimate, and writes
backprop.html: a page that steps through backward node by node in a browser.
"""
import argparse
from pathlib import Path

import numpy as np

import tensorgrad as tg

INPUTS = {"x1": 2.0, "x2": 0.0, "w1": -3.0, "w2": 1.0, "b": 6.8813735870195432}  # o = 1/sqrt(2)


def neuron(x1, x2, w1, w2, b):
    """o = tanh(x1*w1 + x2*w2 + b), each step labelled as in micrograd's drawing."""
    def named(t, label):
        t.label = label
        return t
    x1w1 = named(x1 * w1, "x1w1")
    x2w2 = named(x2 * w2, "x2w2")
    x1w1x2w2 = named(x1w1 + x2w2, "x1w1x2w2")
    n = named(x1w1x2w2 + b, "n")
    return named(n.tanh(), "o")


def make_leaves():
    """The five inputs as float64 leaves, labelled (float64: the finite differences below are
    accurate to many digits)."""
    return {name: tg.tensor(v, requires_grad=True, dtype=np.float64, label=name) for name, v in INPUTS.items()}


def finite_difference(name, eps=1e-6):
    """do/d(name) ~ (o(name + eps) - o(name - eps)) / 2 eps, the others held fixed."""
    def o_at(shift):
        values = dict(INPUTS, **{name: INPUTS[name] + shift})
        with tg.no_grad():
            return neuron(**{k: tg.tensor(v, dtype=np.float64) for k, v in values.items()}).item()
    return (o_at(eps) - o_at(-eps)) / (2 * eps)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="out/chain_rule", help="folder for the pictures")
    args = parser.parse_args()

    leaves = make_leaves()
    o = neuron(**leaves)
    print(f"forward: o = tanh(x1*w1 + x2*w2 + b) = {o.item():.6f}\n")

    print("backward, node by node (the numbers match the [n] in the picture):")
    o.backward(trace=True, retain_graph=True)   # the graph kept: the page below applies its vjps

    print("\ngradients: backward vs finite differences (o(v + eps) - o(v - eps)) / 2 eps")
    worst = 0.0
    for name, leaf in leaves.items():
        estimate = finite_difference(name)
        worst = max(worst, abs(leaf.grad.item() - estimate))
        print(f"  do/d{name:<3} backward {leaf.grad.item(): .8f}   finite difference {estimate: .8f}")
    print(f"largest difference: {worst:.1e}")
    if worst > 1e-6:
        raise SystemExit("backward and finite differences disagree")

    out = Path(args.out)
    for picture in (out / "graph.svg", out / "graph.png"):
        tg.render_graph(o, picture, order=True)
        print(f"wrote {picture}")
    print("each box: [backward-order number] name | shape dtype | data | grad; ellipses are ops")
    page = tg.render_graph(o, out / "backprop.html")
    print(f"wrote {page}: open it in a browser to step through backward (keys ← → Home End)")


if __name__ == "__main__":
    main()
