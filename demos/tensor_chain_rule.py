"""The chain rule on matrices: why a matmul's backward is `grad @ W.T` and `x.T @ grad`.

    python demos/tensor_chain_rule.py [--out DIR]

Builds z = x @ W, y = softmax(z) and a cross-entropy loss on small matrices, runs backward,
and checks the gradients three ways: what backward computed, the matmul backward formulas
applied by hand to z.grad, and finite differences. Then draws the tensor graph, and writes
backprop.html: a page that steps through backward node by node in a browser.
"""
import argparse
from pathlib import Path

import numpy as np

import _common
import tensorgrad as tg

TARGETS = np.array([1, 3])   # the right class of each of the two rows
SCOPES = ("log softmax(x @ W)", "cross-entropy")


def forward(x, W):
    """loss = mean over rows of -log softmax(x @ W)[row, target]; returns (z, loss). Its two
    halves in scopes (SCOPES): the picture draws each in its own row, the other folded."""
    with tg.scope(SCOPES[0]):
        z = x @ W
        z.label = "z = x @ W"
        y = z.softmax(axis=-1)
        y.label = "y = softmax(z)"
        log_y = y.log()
        log_y.label = "log y"
    with tg.scope(SCOPES[1]):
        picked = log_y * tg.tensor(np.eye(4)[TARGETS], dtype=np.float64, label="one-hot targets")
        loss = -picked.sum() / len(TARGETS)
    loss.label = "loss"
    return z, loss


def make_inputs():
    """x: 2 rows of 3 features, W: 3 features -> 4 classes, the same numbers on every run."""
    rng = np.random.default_rng(0)
    x = tg.tensor(rng.standard_normal((2, 3)), requires_grad=True, label="x")
    W = tg.tensor(rng.standard_normal((3, 4)), requires_grad=True, label="W")
    return x, W


def finite_differences(x, W, which, eps=1e-6):
    """d loss / d (x or W), one element at a time: (loss(v + eps) - loss(v - eps)) / 2 eps."""
    arrays = {"x": x.copy(), "W": W.copy()}
    grad = np.zeros_like(arrays[which])
    for i in np.ndindex(grad.shape):
        losses = []
        for shift in (eps, -eps):
            arrays[which][i] += shift
            with tg.no_grad():
                losses.append(forward(tg.tensor(arrays["x"]), tg.tensor(arrays["W"]))[1].item())
            arrays[which][i] -= shift
        grad[i] = (losses[0] - losses[1]) / (2 * eps)
    return grad


def compare(name, ways):
    """Print each way's gradient and return the largest difference from backward's."""
    print(f"\nd loss / d {name}:")
    for way, grad in ways.items():
        print(f"  {way}:\n" + "\n".join("    " + row for row in np.array2string(grad, precision=5).split("\n")))
    reference = ways["backward"]
    return max(np.abs(grad - reference).max() for grad in ways.values())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="out/tensor_chain_rule", help="folder for the pictures")
    args = parser.parse_args()

    x, W = make_inputs()
    z, loss = forward(x, W)
    loss.backward(retain_graph=True)   # the graph kept: the page at the end applies its vjps
    print(f"z = x @ W: {x.shape} @ {W.shape} -> {z.shape};  y = softmax(z);  loss = {loss.item():.6f}")
    print("backward reaches z before x and W, so z.grad = dloss/dz (shaped like z) is known there.")
    print("z[i, j] = sum_k x[i, k] W[k, j], so dz[i, j]/dW[k, j] = x[i, k] and dz[i, j]/dx[i, k] = W[k, j];")
    print("the chain rule sums z.grad times these over every z[i, j] they touch, which is a matmul:")
    print("  dloss/dW = x.T @ z.grad   (3, 2) @ (2, 4) -> (3, 4), the shape of W")
    print("  dloss/dx = z.grad @ W.T   (2, 4) @ (4, 3) -> (2, 3), the shape of x")

    worst = max(
        compare("W", {"backward": W.grad, "x.T @ z.grad": x.data.T @ z.grad,
                      "finite differences": finite_differences(x.data, W.data, "W")}),
        compare("x", {"backward": x.grad, "z.grad @ W.T": z.grad @ W.data.T,
                      "finite differences": finite_differences(x.data, W.data, "x")}))
    print(f"\nlargest difference between the three ways: {worst:.1e}")
    if worst > 1e-6:
        raise SystemExit("the three ways disagree")

    out = Path(args.out)
    print(f"wrote {tg.render_graph(loss, out / 'graph.svg', order=True)}")
    # one row is too long for a slide: graph.png draws each half in a row, the other half folded
    # (without matplotlib, the graph in one row)
    titles = ["1. z = x @ W, y = softmax(z), log y (the cross-entropy folded into a box)",
              "2. the cross-entropy: loss = -mean of log y at the targets (the first steps folded)"]
    rows = [(title, tg.render_graph(loss, out / f"graph_{n}.png", order=True, collapse=[SCOPES[2 - n]]))
            for n, title in enumerate(titles, 1)]
    png = _common.arrange_drawings(rows, out / "graph.png") or tg.render_graph(loss, out / "graph.png", order=True)
    print(f"wrote {png}")
    print("each box: [backward-order number] name | shape dtype | data | grad; ellipses are ops; "
          "the grey box is a constant (no grad)")
    page = tg.render_graph(loss, out / "backprop.html")
    print(f"wrote {page}: open it in a browser to step through backward (keys ← → Home End)")


if __name__ == "__main__":
    main()
