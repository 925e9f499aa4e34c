"""The gradient health's picture (out/chargpt.health.png), drawn from a HealthLog's rows."""
import time

import numpy as np

from nn.atomic import write_atomically

from .health_measures import GELU_TAIL
from .outputs import printable


def plot_health(health, path):
    """The gradient health beside the checkpoint (out/chargpt.health.png), when matplotlib is
    installed, in four panels: the update ratio of each weight matrix over time against the
    rule of thumb 1e-3; the gradient norm of each layer at each measured step; per block, the
    std of the residual stream and the share of GELU inputs in the flat tails, over time.
    Its time counts in health.seconds, the cost of watching."""
    started = time.perf_counter()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    series = {}   # name (a parameter's or a block's) -> its rows, in step order
    for row in health.rows:
        series.setdefault(row["name"], []).append(row)
    if not series:   # stopped before the first measurement
        return
    matrices = [name for name, shape in health.shapes.items() if len(shape) >= 2]
    blocks = [name for name in series if name not in health.shapes]
    layers = list(dict.fromkeys(layer_of(name) for name in health.shapes))
    steps = [row["step"] for row in series[matrices[0]]]

    with plt.rc_context({"font.size": 14, "legend.fontsize": 12}):   # readable on a slide
        fig, ((ratio_ax, norm_ax), (std_ax, tail_ax)) = plt.subplots(2, 2, figsize=(16, 9), layout="constrained")
        fig.suptitle(f"{printable(path.name)}: gradient health at each evaluation's step")

        # the matrices only: a bias or a LayerNorm starts at 0s or 1s, whose spread is 0
        colours = dict(zip(dict.fromkeys(map(kind_of, matrices)), plt.cm.tab10.colors))
        for name in matrices:
            ratios = np.array([row["update_ratio"] for row in series[name]])
            with np.errstate(divide="ignore"):   # a matrix left without a gradient: log10(0), not drawn
                ratio_ax.plot(steps, np.log10(ratios), marker="o", markersize=4, color=colours[kind_of(name)])
        for kind, colour in colours.items():
            ratio_ax.plot([], [], color=colour, label=kind)
        ratio_ax.axhline(-3, color="black", linestyle="--", label="rule of thumb: -3")
        ratio_ax.set(xlabel="step", ylabel="log10(update std / weight std)",
                     title="update ratio of each weight matrix (a line per block)")
        ratio_ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1))

        cmap = plt.cm.viridis
        for i, step in enumerate(steps):   # each layer's norm: sqrt of its parameters' squared norms
            squares = dict.fromkeys(layers, 0.0)
            for name in health.shapes:
                squares[layer_of(name)] += (series[name][i]["grad_norm"] or 0.0) ** 2
            norm_ax.plot(layers, np.sqrt(list(squares.values())), marker="o",
                         color=cmap(i / max(1, len(steps) - 1)))
        # a log scale needs a norm > 0 (a one-character vocabulary has a loss of 0, and no gradient)
        drawn = any(row["grad_norm"] for name in health.shapes for row in series[name])
        norm_ax.set(yscale="log" if drawn else "linear", ylabel="gradient norm (before clipping)",
                    title="gradient norm of each layer")
        norm_ax.tick_params(axis="x", labelrotation=30)
        colourbar = fig.colorbar(plt.cm.ScalarMappable(matplotlib.colors.Normalize(steps[0], steps[-1]), cmap),
                                 ax=norm_ax)
        colourbar.set_label("step")

        depth = plt.cm.plasma
        for j, block in enumerate(blocks):
            colour = depth(j / max(1, len(blocks)))
            std_ax.plot(steps, [row["residual_std"] for row in series[block]], marker="o", color=colour,
                        label=f"block {block}")
            tail_ax.plot(steps, [100 * row["gelu_tail_fraction"] for row in series[block]], marker="o",
                         color=colour, label=f"block {block}")
        std_ax.set(xlabel="step", ylabel="std", title="residual stream after each block")
        tail_ax.set(xlabel="step", ylabel="% of inputs", ylim=(0, None),
                    title=f"GELU inputs in the flat tails, |x| > {GELU_TAIL:g}")
        std_ax.legend()
        tail_ax.legend()
        write_atomically(path, lambda file: fig.savefig(file, format="png", dpi=120))   # 1920 x 1080 px
    plt.close(fig)
    health.seconds += time.perf_counter() - started


def layer_of(name):
    """The layer a parameter belongs to: "h.2" for "h.2.attn.qkv.weight", "tok_emb" for
    "tok_emb.weight"."""
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "h" else parts[0]


def kind_of(name):
    """A parameter's name without its block: "attn.qkv.weight" for "h.2.attn.qkv.weight"."""
    return name.split(".", 2)[2] if name.startswith("h.") else name
