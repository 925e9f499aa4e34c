"""The loss log beside the checkpoint: the evaluations so far as out/chargpt.csv, and their
curve as out/chargpt.png when matplotlib is installed."""
import csv
import io

import nn

from .outputs import outputs, printable


def write_csv(history, out):
    """The evaluations so far, beside the checkpoint: out/chargpt.csv (written whole to a
    temporary file and renamed: a kill never leaves it half written)."""
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(["step", "train_loss", "val_loss", "lr"])
    writer.writerows(history)
    nn.atomic.write_atomically(outputs(out).loss_csv, lambda file: file.write(text.getvalue().encode()))


def plot_losses(history, out):
    """The loss curve beside the checkpoint (out/chargpt.png), when matplotlib is installed
    and there are evaluations to draw (a run stopped before its first has none); without
    matplotlib, one line says that neither PNG is drawn (the health plot skips its own quietly)."""
    try:
        import matplotlib
        matplotlib.use("Agg")   # files only: no window, no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"no {outputs(out).loss_png.name} or {outputs(out).health_png.name}: matplotlib is not installed "
              '(pip install ".[plots]" draws them; the .csv logs are written)')
        return
    if not history:   # stopped before the first evaluation: no curve to draw
        return
    steps, train, val, _ = zip(*history)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(steps, train, label="train")
    ax.plot(steps, val, label="val")
    ax.set(xlabel="step", ylabel="loss", title=f"{printable(out.name)}: mean loss of the eval batches")
    ax.legend()
    nn.atomic.write_atomically(outputs(out).loss_png,
                               lambda file: fig.savefig(file, format="png", dpi=100, bbox_inches="tight"))
    plt.close(fig)
