"""Gradient health: a few numbers, measured now and then during training, that show
whether the gradients and updates are sound before the loss shows that they are not.

Around one optimizer update (the gradients already computed):

- per parameter, the gradient's norm (before any clipping), and the update-to-weight
  ratio std(w_after - w_before) / std(w_before): how far the update moved the weights,
  relative to their spread. The rule of thumb (Karpathy's makemore lectures) is log10 of it
  near -3: each step changes a weight by about a thousandth of the weights' spread. Far
  above -3 the learning rate throws the weights around; far below they hardly learn.
- per transformer block, on one batch: the std of the residual stream after the block (it
  grows when the updates are too large), and the fraction of the block's GELU inputs in
  GELU's flat tails (see gelu_tail_fraction).

HealthLog keeps them as rows, one per step and parameter or block, and writes the rows to a
CSV. In a training loop of your own:

    health = train.health.HealthLog(model, "health.csv")
    ...
    loss.backward()
    if step % 100 == 0:
        with health.measure(step, x):   # gradients and activations now, the update on exit
            optimizer.step()
    else:
        optimizer.step()

It also works with train.parallel.DataParallel: forward_backward leaves the summed gradients
in this process, and step() updates the shared weights in place, so the weights copied
before it and read after it are the ones the workers changed.
"""
import csv
import io
import math
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

import tensorgrad as tg

from nn.atomic import open_regular, write_atomically

from .outputs import printable

COLUMNS = ("step", "name", "grad_norm", "update_ratio", "residual_std", "gelu_tail_fraction")
GELU_TAIL = 3.0   # |x| beyond which GELU is flat to about 1% (gelu_tail_fraction)


def grad_norms(model):
    """{parameter name: L2 norm of its gradient}, None for a parameter without one."""
    return {name: None if p.grad is None else float(np.linalg.norm(p.grad))
            for name, p in model.named_parameters()}


def snapshot(model):
    """{parameter name: a copy of its weights}, to compare with after an update."""
    return {name: p.data.copy() for name, p in model.named_parameters()}


def update_ratios(before, model):
    """{parameter name: std(w - before) / std(before)}, w the weights now. nan where the
    weights before had no spread (a bias of zeros, a LayerNorm's ones at initialization):
    a ratio to nothing is not defined."""
    ratios = {}
    for name, p in model.named_parameters():
        spread = before[name].std()
        ratios[name] = float((p.data - before[name]).std() / spread) if spread > 0 else math.nan
    return ratios


def gelu_tail_fraction(x):
    """The fraction of the GELU inputs x in GELU's flat tails, |x| > GELU_TAIL = 3.

    GELU(x) = x Phi(x) (and its tanh approximation, which x.gelu() computes) bends between
    about -3 and 3 and is a straight line outside: its slope differs most from 0 and 1 at
    x = -/+ sqrt(2) (-0.13 and 1.13) and comes closer to them ever after, to within 0.012
    at |x| = 3. Below -3 the unit is off: it outputs
    about 0 and passes back about 1% of the gradient it gets, so the weights feeding it
    barely learn. Above +3 it is the identity: its nonlinearity does nothing. A healthy
    MLP keeps nearly all its inputs in the bend; a fraction in the tails that grows as
    training goes means units dying or turning linear."""
    return float(np.mean(np.abs(x) > GELU_TAIL))


def block_stats(model, idx):
    """{block name ("h.0", ...): (std of the residual stream after the block, fraction of
    its GELU inputs in the flat tails)} of a GPT on token ids idx (B, T).

    GPT.forward's steps up to the last block, written out to keep each block's GELU
    inputs, without a graph and in eval mode (no dropout: no random numbers drawn, so a
    run that measures makes the same numbers as one that does not)."""
    was_training = model.training
    model.eval()
    stats = {}
    try:
        with tg.no_grad():
            x = model.tok_emb(idx)                                       # (B, T, C)
            if model.pos_emb is not None:
                x = x + model.pos_emb(np.arange(idx.shape[1]))
            x = model.drop(x)
            for i, block in enumerate(model.h):   # TransformerBlock.forward, one step at a time
                x = x + block.attn(block.ln1(x))
                hidden = block.ffn.fc(block.ln2(x))                      # GELU's inputs (B, T, 4C)
                x = x + block.ffn.dropout(block.ffn.proj(hidden.gelu()))
                stats[f"h.{i}"] = (float(x.data.std()), gelu_tail_fraction(hidden.data))
    finally:
        model.train(was_training)
    return stats


class HealthLog:
    """The gradient health of `model` at the steps measured, as rows of COLUMNS (None
    where a column does not apply to the row's parameter or block). Given a path, each
    measurement rewrites that CSV (atomically). resume_step: a run that continues at that
    step keeps the rows the CSV already has from the steps before it (read_csv, the file at
    most max_bytes bytes)."""

    def __init__(self, model, path=None, resume_step=None, max_bytes=None):
        self.model, self.path = model, Path(path) if path else None
        self.shapes = {name: p.shape for name, p in model.named_parameters()}
        self.rows = []
        if resume_step is not None and self.path and self.path.exists():
            self.rows = [row for row in read_csv(self.path, max_bytes) if row["step"] < resume_step]
        self.seconds = 0.0   # spent measuring and writing (a caller adds its drawing): the cost of watching

    @contextmanager
    def measure(self, step, idx):
        """Wrap the optimizer's update at `step`: reads the gradients and, on the batch idx,
        the blocks' activations before it, and the update ratios after it."""
        started = time.perf_counter()
        norms, blocks, before = grad_norms(self.model), block_stats(self.model, idx), snapshot(self.model)
        self.seconds += time.perf_counter() - started
        yield
        started = time.perf_counter()
        ratios = update_ratios(before, self.model)
        row = dict.fromkeys(COLUMNS)
        self.rows += [{**row, "step": step, "name": name, "grad_norm": norms[name], "update_ratio": ratios[name]}
                      for name in norms]
        self.rows += [{**row, "step": step, "name": name, "residual_std": std, "gelu_tail_fraction": tails}
                      for name, (std, tails) in blocks.items()]
        if self.path:
            self.write_csv(self.path)
        self.seconds += time.perf_counter() - started

    def write_csv(self, path):
        """The rows as CSV: a header of COLUMNS, numbers to 6 significant digits, an empty
        cell where a column does not apply."""
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(COLUMNS)
        for row in self.rows:
            writer.writerow([_cell(row[c]) for c in COLUMNS])
        write_atomically(path, lambda file: file.write(text.getvalue().encode()))


def _cell(value):
    return "" if value is None else f"{value:.6g}" if isinstance(value, float) else str(value)


def read_csv(path, max_bytes=None):
    """The rows of a CSV that HealthLog wrote (numbers as floats, the step an int), read as
    input: a regular file (nn.atomic.open_regular: a FIFO is refused, without waiting) of at
    most max_bytes bytes (None: any size), UTF-8 text of COLUMNS. Anything else is a ValueError
    naming the file (its text cut short: a damaged cell can be megabytes)."""
    with open_regular(path) as file:
        data = file.read(-1 if max_bytes is None else max_bytes + 1)
    if max_bytes is not None and len(data) > max_bytes:
        raise ValueError(f"{path}: more than {max_bytes:,} bytes, more than a gradient health log of a run here "
                         "can be")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: the gradient health log is damaged (byte {error.start} is not UTF-8)") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        columns = tuple(reader.fieldnames or ())
        rows = [_row(row) for row in reader] if columns == COLUMNS else None
    except (ValueError, csv.Error) as error:   # a row cut short, a cell that is not a number, one too large
        line = reader.line_num + isinstance(error, csv.Error)   # csv counts a line once it has read it whole
        raise ValueError(f"{path}: line {line} of the gradient health log is damaged ({str(error)[:200]})") from None
    if rows is None:
        raise ValueError(f"{path}: not a gradient health log: its columns are {str(list(columns))[:200]}, expected "
                         f"{list(COLUMNS)}")
    return rows


def _row(row):
    """One row of the log, its numbers read (ValueError unless each cell is one, where it must be)."""
    if None in row or None in row.values():   # more cells than columns, or fewer
        raise ValueError(f"{len(COLUMNS)} cells expected")
    return {"step": int(row["step"]), "name": row["name"],
            **{c: float(row[c]) if row[c] else None for c in COLUMNS[2:]}}


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
