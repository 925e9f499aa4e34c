"""Claim 6: residual connections and layer normalization keep gradients alive in a deep stack.

We stack 12 and 24 attention + feed-forward blocks built from nn pieces
(nn.MultiHeadAttention, nn.FeedForward, nn.LayerNorm), with and without the residual
connection and with and without LayerNorm, at initialization (nn's default fan-in init), and
push one fixed gradient into the top: L = sum(out * r) / N for a fixed random r. tensorgrad's
backward then gives, for every layer, the gradient of its parameters and of its input
(in float64, so that a vanishing gradient shows as a tiny number instead of float32's 0).

    python demos/attention_deep_gradients.py [--out DIR] [--quick]
"""
import time

import numpy as np

import nn
import tensorgrad as tg

from _common import finish, parse_args, pyplot, save_figure, table, write_report

NAME = "attention_deep_gradients"
CONFIGS = [(True, True, "residual + LayerNorm (pre-LN)"), (True, False, "residual only"),
           (False, True, "LayerNorm only"), (False, False, "neither")]


class Block(nn.Module):
    """attention then feed-forward, each optionally pre-normalized and/or added to a residual."""

    def __init__(self, dim, n_heads, residual, layernorm):
        self.residual, self.layernorm = residual, layernorm
        self.ln1, self.ln2 = (nn.LayerNorm(dim), nn.LayerNorm(dim)) if layernorm else (None, None)
        self.attn = nn.MultiHeadAttention(dim, n_heads)
        self.ffn = nn.FeedForward(dim)

    def sublayer(self, x, norm, layer):
        y = layer(norm(x) if norm is not None else x)
        return x + y if self.residual else y

    def forward(self, x):
        x = self.sublayer(x, self.ln1, self.attn)
        return self.sublayer(x, self.ln2, self.ffn)


def gradient_profile(depth, residual, layernorm, dim, n_heads, x, r):
    """Per layer: |dL/d params of the block| and |dL/d block input| (rms per element), and the
    rms of the stack's output."""
    nn.manual_seed(0)                               # the same weights for every configuration
    blocks = [Block(dim, n_heads, residual, layernorm).to(np.float64) for _ in range(depth)]
    h = tg.tensor(x, requires_grad=True)
    inputs = []
    for block in blocks:
        inputs.append(h)
        h = block(h)
    (h * r).sum().backward()
    param = [np.sqrt(sum((p.grad ** 2).sum() for p in b.parameters())) for b in blocks]
    act = [np.sqrt((t.grad ** 2).mean()) for t in inputs]
    return np.array(param), np.array(act), float(np.sqrt((h.data ** 2).mean()))


def main():
    args = parse_args(NAME, "Claim 6: residuals and LayerNorm keep gradients alive in deep stacks")
    started = time.perf_counter()
    depths = [4] if args.quick else [12, 24]
    dim, n_heads, B, T = (16, 2, 2, 8) if args.quick else (64, 4, 4, 32)
    print(f"Claim 6: gradient norm per layer at initialization, stacks of {depths} blocks "
          f"(dim {dim}, {n_heads} heads, batch {B} x {T} tokens)")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((B, T, dim))          # float64: a vanishing gradient shows as a tiny number
    r = rng.standard_normal((B, T, dim)) / (B * T)  # rather than underflowing to 0 as in float32

    results, rows = {}, []
    for depth in depths:
        for residual, layernorm, label in CONFIGS:
            param, act, out_rms = gradient_profile(depth, residual, layernorm, dim, n_heads, x, r)
            results[depth, label] = (param, act)
            rows.append([depth, label, f"{param[0]:.2e}", f"{param[-1]:.2e}", f"{param[0] / param[-1]:.1e}",
                         f"{act[0]:.2e}", f"{out_rms:.2e}"])
    text = table(["depth", "blocks", "|grad| layer 1", "|grad| last layer", "layer 1 / last",
                  "rms dL/dx at the input", "rms of the output"], rows)
    text += ("\n\n|grad|: norm of the gradient of all of a block's parameters; the same gradient enters the top "
             "of every stack,\nso the ratio layer 1 / last says how much of it survives the trip down "
             "(1 = all of it).")
    deepest = depths[-1]
    ratio = {label: results[deepest, label][0][0] / results[deepest, label][0][-1] for *_, label in CONFIGS}
    alive = 0.1 < ratio["residual + LayerNorm (pre-LN)"] < 10
    dead = ratio["neither"] < 1e-3 or ratio["neither"] > 1e3
    conclusion = (
        f"{'supported' if alive and dead else 'not as claimed'} at depth {deepest}: with residuals and "
        f"LayerNorm the first layer gets {ratio['residual + LayerNorm (pre-LN)']:.2f}x the last layer's gradient, "
        f"with neither {ratio['neither']:.1e}x (it vanishes). At initialization either one alone already keeps "
        f"it alive here (residual only {ratio['residual only']:.2f}x, LayerNorm only "
        f"{ratio['LayerNorm only']:.2f}x)")
    if len(depths) > 1:
        grow = {label: (results[depths[0], label][0][-1], results[deepest, label][0][-1]) for *_, label in CONFIGS}
        conclusion += (f", but with the residual alone the scale drifts with depth (last-layer |grad| "
                       f"{grow['residual only'][0]:.1f} at {depths[0]} blocks, {grow['residual only'][1]:.1f} at "
                       f"{deepest}; with LayerNorm too: {grow['residual + LayerNorm (pre-LN)'][0]:.1f} and "
                       f"{grow['residual + LayerNorm (pre-LN)'][1]:.1f}).")
    else:
        conclusion += "."
    txt = write_report(args.out, NAME, "Claim 6: residuals and LayerNorm keep gradients alive", text, conclusion)

    png = None
    plt = pyplot()
    if plt:
        fig, axes = plt.subplots(1, 2)
        colors = ["tab:green", "tab:blue", "tab:orange", "tab:red"]
        for color, (*_, label) in zip(colors, CONFIGS):
            param, act = results[deepest, label]
            layers = np.arange(1, deepest + 1)
            axes[0].semilogy(layers, param, "o-", ms=3, color=color, label=label)
            axes[1].semilogy(layers, act, "o-", ms=3, color=color, label=label)
        axes[0].set(title=f"gradient of each block's parameters ({deepest} blocks)",
                    ylabel="|dL/d params|")
        axes[1].set(title="gradient reaching each block's input", ylabel="rms of dL/dx")
        for ax in axes:
            ax.set_xlabel("layer (1 = nearest the input; the loss is above the last)")
            ax.grid(alpha=0.3, which="major")
        axes[0].legend()
        png = save_figure(fig, args.out, NAME)
    finish([txt, png], started)


if __name__ == "__main__":
    main()
