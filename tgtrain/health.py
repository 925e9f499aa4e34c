"""Gradient health: a few numbers, measured now and then during training, that show whether
the gradients and updates are sound before the loss shows that they are not.

    health_measures.py   the numbers: gradient norms, update ratios, the residual stream and
                         the GELU inputs in its flat tails, around one optimizer update
    health.py            HealthLog: those numbers at the steps measured, kept as rows
    health_csv.py        the rows' file (out/chargpt.health.csv), written and read back
    health_plot.py       their picture (out/chargpt.health.png)

In a training loop of your own:

    health = tgtrain.health.HealthLog(model, "health.csv")
    ...
    loss.backward()
    if step % 100 == 0:
        with health.measure(step, x):   # gradients and activations now, the update on exit
            optimizer.step()
    else:
        optimizer.step()

(or health.before_update(step, x), then the update, then health.after_update(), as the main
job writes it). It also works with tgtrain.parallel.DataParallel: forward_backward leaves the
summed gradients in this process, and step() updates the shared weights in place, so the
weights copied before it and read after it are the ones the workers changed.
"""
import time
from contextlib import contextmanager
from pathlib import Path

from .health_csv import COLUMNS, read_csv, write_csv
from .health_measures import GELU_TAIL, block_stats, gelu_tail_fraction, grad_norms, snapshot, update_ratios
from .health_plot import plot_health

__all__ = ["HealthLog", "COLUMNS", "read_csv", "write_csv", "GELU_TAIL", "block_stats", "gelu_tail_fraction",
           "grad_norms", "snapshot", "update_ratios", "plot_health"]


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
        self.before = None   # what before_update read, until after_update

    def before_update(self, step, idx):
        """Before the optimizer's update at `step`: the gradients, and on the batch idx the
        blocks' activations, and a copy of the weights."""
        started = time.perf_counter()
        self.before = step, grad_norms(self.model), block_stats(self.model, idx), snapshot(self.model)
        self.seconds += time.perf_counter() - started

    def after_update(self):
        """After that update: how far it moved each weight; the step's rows kept and written."""
        started = time.perf_counter()
        (step, norms, blocks, weights), self.before = self.before, None
        ratios = update_ratios(weights, self.model)
        row = dict.fromkeys(COLUMNS)
        self.rows += [{**row, "step": step, "name": name, "grad_norm": norms[name], "update_ratio": ratios[name]}
                      for name in norms]
        self.rows += [{**row, "step": step, "name": name, "residual_std": std, "gelu_tail_fraction": tails}
                      for name, (std, tails) in blocks.items()]
        if self.path:
            write_csv(self.rows, self.path)
        self.seconds += time.perf_counter() - started

    @contextmanager
    def measure(self, step, idx):
        """Wrap the optimizer's update at `step` (before_update, the block, after_update): an
        update that fails records nothing."""
        self.before_update(step, idx)
        yield
        self.after_update()
