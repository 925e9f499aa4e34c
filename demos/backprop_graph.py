"""The backprop graph of a transformer block: every step of the math, then what fusing changes.

    python demos/backprop_graph.py [--out DIR]

Runs one pre-LN TransformerBlock (x = x + attn(ln1(x)); x = x + ffn(ln2(x))) forward and
backward on a tiny input (1 sequence of 4 tokens, 8 channels, 2 heads) twice: inside
tg.composed(), where every fused op runs as its composition of primitive ops, and as
training runs it, with the fused ops. Draws, each as SVG and PNG:
  attention_composed  the attention layer alone, composed: q, k and v, then the scores,
                      the causal mask, the softmax and the weighted sum, each in a cluster
  block_composed      the whole block composed: the layer norms and GELU step by step too
  block_fused         the same block with the fused ops, one node each
  block_collapsed     the block with each sub-module (ln1, attn, ln2, ffn) folded into a box
                      (the PNG, with matplotlib: its two residual steps side by side)
  gpt_collapsed       a 2-layer GPT with each block folded: the whole model on one page
  attention_steps     (with matplotlib) one head's attention on small q, k, v, its forward
                      numbers shown, in three rows: scores and mask, softmax, weighted sum
and block_composed.html: the composed block's backward, step by step, in a browser.
Every nn.Module call opens a tg.scope with the module's name; the drawing clusters by it.
"""
import argparse
import contextlib
from pathlib import Path

import numpy as np

import _common
import nn
import tensorgrad as tg


def graph_of(make_module, x, composed):
    """make_module()(x).sum(), forward and backward, composed or fused; returns the loss (its
    graph kept, for the drawings and the stepper page) and the module."""
    nn.manual_seed(0)
    module = make_module()
    with tg.composed() if composed else contextlib.nullcontext():
        loss = module(x).sum()
    loss.label = "loss"
    loss.backward(retain_graph=True)
    return loss, module


def block():
    """The block drawn: 8 channels, 2 heads."""
    return nn.TransformerBlock(dim=8, n_heads=2)


def block_input():
    """x of shape (B, T, C) = (1, 4, 8): one sequence of 4 tokens."""
    x = tg.randn(1, 4, 8, seed=0, requires_grad=True)
    x.label = "x"
    return x


def gpt_graph():
    nn.manual_seed(0)
    model = nn.GPT(vocab_size=10, block_size=8, n_layer=2, n_head=2, n_embd=8)
    idx = np.array([[1, 2, 3, 4]])
    _, loss = model(idx, targets=np.array([[2, 3, 4, 5]]))
    loss.label = "loss"
    loss.backward()
    return loss


def attention_steps(out_dir):
    """softmax(q kᵀ/√d + mask) v on one head of 3 positions, composed, its numbers shown, in
    three rows (a slide's shape): 1. scores and the causal mask; 2. softmax; 3. the weighted
    sum, the steps before each row folded into boxes. Forward only: with the gradients too the
    boxes are twice as tall, and the picture too small to read on a slide. Returns the PNG's
    path, or None without matplotlib."""
    q, k, v = (tg.randn(1, 3, 2, seed=seed, requires_grad=True) for seed in range(3))
    q.label, k.label, v.label = "q", "k", "v"
    with tg.composed():
        out = nn.functional.scaled_dot_product_attention(q, k, v)
    out.label = "out"
    masked = next(t for t in tg.backward_order(out) if t.op == "masked_fill")
    masked.label = "masked scores"
    weights = next(t for t in tg.backward_order(out) if t.label == "weights")
    steps = [("1. scores = q kᵀ / √d, then the causal mask: -inf where a query would see a later key",
              masked, None),
             ("2. softmax of each row: exp, sum, divide (the row max subtracted first)", weights,
              ["scores", "mask"]),
             ("3. the values weighted by it", out, ["scores", "mask", "softmax"])]
    rows = [(title, tg.render_graph(last, out_dir / f"attention_steps_{n}.png", show_grad=False, collapse=folded))
            for n, (title, last, folded) in enumerate(steps, 1)]
    return _common.arrange_drawings(rows, out_dir / "attention_steps.png")


def block_in_halves(out_dir):
    """block_collapsed on a slide: one row is too long, so the block's two residual steps,
    h = x + attn(ln1(x)) and h + ffn(ln2(h)) (TransformerBlock.forward's two lines, each module
    in a scope of its name as inside the block), top to bottom, side by side. The second
    starts from a copy of h, a leaf where its drawing begins; backward runs through both, the
    first from the copy's gradient. Returns the PNG's path, or None without matplotlib."""
    nn.manual_seed(0)
    block = nn.TransformerBlock(dim=8, n_heads=2)   # the same weights and input as main()'s block
    x = tg.randn(1, 4, 8, seed=0, requires_grad=True)
    x.label = "x"

    def residual(x, norm, layer):    # x + layer(norm(x))
        with tg.scope(norm):
            normed = getattr(block, norm)(x)
        with tg.scope(layer):
            change = getattr(block, layer)(normed)
        return x + change

    h = residual(x, "ln1", "attn")
    h_copy = tg.Tensor(h.data, requires_grad=True)
    h.label = h_copy.label = "h"
    loss = residual(h_copy, "ln2", "ffn").sum()
    loss.label = "loss"
    loss.backward()
    h.backward(h_copy.grad)
    titles = {"1. h = x + attn(ln1(x))": h, "2. h + ffn(ln2(h)), summed": loss}
    halves = [(title, tg.render_graph(root, out_dir / f"block_collapsed_{n}.png", collapse="modules",
                                      show_data=False, rankdir="TB"))
              for n, (title, root) in enumerate(titles.items(), 1)]
    return _common.arrange_drawings(halves, out_dir / "block_collapsed.png", side_by_side=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="out/backprop_graph", help="folder for the pictures")
    args = parser.parse_args()
    out = Path(args.out)

    x = block_input()
    graphs = {}
    for composed in (True, False):
        loss, module = graph_of(block, x, composed)
        graphs[composed] = loss, {name: p.grad.copy() for name, p in module.named_parameters()}, x.grad.copy()
        if composed:   # the page, while x.grad is this graph's
            page = tg.render_graph(loss, out / "block_composed.html", show_data=False, rankdir="TB")
        x.grad = None
    attention_loss, _ = graph_of(lambda: nn.MultiHeadAttention(dim=8, n_heads=2), x, composed=True)

    count = {composed: sum(1 for t in tg.backward_order(graphs[composed][0]) if t.op) for composed in graphs}
    composed_ops = sorted({t.op for t in tg.backward_order(graphs[True][0]) if t.op})
    fused_ops = sorted({t.op for t in tg.backward_order(graphs[False][0]) if t.op} - set(composed_ops))
    difference = max(np.abs(graphs[True][1][name] - graphs[False][1][name]).max() for name in graphs[True][1])
    difference = max(difference, np.abs(graphs[True][2] - graphs[False][2]).max())
    print(f"one TransformerBlock, forward and backward on x of shape {x.shape}:")
    print(f"  composed (inside tg.composed()): {count[True]} ops, all primitive: {', '.join(composed_ops)}")
    print(f"  fused (as training runs it):     {count[False]} ops; each of {', '.join(fused_ops)} is one node "
          f"with a hand-derived backward")
    print(f"  the same gradients either way: largest difference over x and every parameter {difference:.1e} "
          f"(float32 rounding)")

    pictures = [("attention_composed", attention_loss, dict(show_data=False, rankdir="TB")),
                ("block_composed", graphs[True][0], dict(show_data=False, rankdir="TB")),
                ("block_fused", graphs[False][0], dict(show_data=False, rankdir="TB")),
                ("block_collapsed", graphs[False][0], dict(collapse="modules", show_data=False)),
                ("gpt_collapsed", gpt_graph(), dict(collapse="modules", show_data=False, rankdir="TB"))]
    for name, loss, options in pictures:
        for suffix in (".svg", ".png"):
            print(f"wrote {tg.render_graph(loss, out / (name + suffix), **options)}")
    halves = block_in_halves(out)   # block_collapsed.png again, in two halves: one row is too long for a slide
    print(f"wrote {halves}" if halves else "(matplotlib is not installed: block_collapsed.png is one long row)")
    print(f"wrote {page}: open it in a browser to step through the composed block's backward, "
          f"{count[True]} steps (keys ← → Home End)")
    steps = attention_steps(out)
    print(f"wrote {steps}" if steps else "(matplotlib is not installed: no attention_steps.png; "
          "`pip install \".[plots]\"` to draw it)")
    print("each box: label | shape dtype | grad (mean, std, norm for big tensors); ellipses are ops;\n"
          "clusters are the modules and, composed, the steps of attention (scores, mask, softmax,\n"
          "weighted_sum); purple boxes are folded modules: their ops hidden, their outputs beside them")


if __name__ == "__main__":
    main()
