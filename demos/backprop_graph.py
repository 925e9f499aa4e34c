"""The backprop graph of a transformer block, drawn whole and folded by module.

    python demos/backprop_graph.py [--out DIR]

Runs one pre-LN TransformerBlock (x = x + attn(ln1(x)); x = x + ffn(ln2(x))) forward and
backward on a tiny input (1 sequence of 4 tokens, 8 channels, 2 heads) and renders its
graph three ways, each as SVG and PNG:
  block_expanded   every op, inside a labelled cluster per module that made it
  block_collapsed  each sub-module (ln1, attn, ln2, ffn) folded into one box
  gpt_collapsed    a 2-layer GPT with each block folded: the whole model on one page
Every nn.Module call opens a tg.scope with the module's name; the drawing clusters by it.
"""
import argparse
from pathlib import Path

import numpy as np

import nn
import tensorgrad as tg


def block_graph():
    """One block's forward and backward; returns the loss (its graph is kept for drawing)."""
    nn.manual_seed(0)
    block = nn.TransformerBlock(dim=8, n_heads=2)
    x = tg.randn(1, 4, 8, seed=0, requires_grad=True)    # (B, T, C)
    x.label = "x"
    loss = block(x).sum()
    loss.label = "loss"
    loss.backward()
    return loss


def gpt_graph():
    nn.manual_seed(0)
    model = nn.GPT(vocab_size=10, block_size=8, n_layer=2, n_head=2, n_embd=8)
    idx = np.array([[1, 2, 3, 4]])
    _, loss = model(idx, targets=np.array([[2, 3, 4, 5]]))
    loss.label = "loss"
    loss.backward()
    return loss


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="out/backprop_graph", help="folder for the pictures")
    args = parser.parse_args()
    out = Path(args.out)

    block_loss, gpt_loss = block_graph(), gpt_graph()
    ops = sum(1 for t in tg.backward_order(block_loss) if t._op)
    print(f"one TransformerBlock, forward and backward on x of shape (1, 4, 8): {ops} ops")
    pictures = [("block_expanded", block_loss, dict(collapse=None, show_data=False, rankdir="TB")),
                ("block_collapsed", block_loss, dict(collapse="modules", show_data=False)),
                ("gpt_collapsed", gpt_loss, dict(collapse="modules", show_data=False, rankdir="TB"))]
    for name, loss, options in pictures:
        for suffix in (".svg", ".png"):
            print(f"wrote {tg.render_graph(loss, out / (name + suffix), **options)}")
    print("each box: label | shape dtype | grad (mean, std, norm for big tensors); ellipses are ops;\n"
          "purple boxes are folded modules: their ops are hidden, their outputs drawn beside them")


if __name__ == "__main__":
    main()
