"""Pieces shared by the demos: the attention-article demos' reports, and loading a model.

Each attention demo (demos/attention_*.py) measures one claim and reports it the same way: a
short table on stdout, the conclusion the numbers support, a text copy of the table, and a
PNG figure when matplotlib is installed. The two demos that need a trained character model
train a small one here, on text every Python installation has: the docstrings of its
standard library, or read one with load_model: a train_chargpt.py checkpoint, or a Hugging
Face GPT-2 folder (ours exported, or GPT-2's own).
"""
import argparse
import os
import time

import numpy as np


# ---- command line and output ---------------------------------------------------------------
def parse_args(name, description, add_arguments=None):
    """`--out DIR` (default out/<name>/) and `--quick` (a tiny configuration for smoke tests)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", default=os.path.join("out", name),
                        help=f"folder for the figure and the table (default: out/{name}/)")
    parser.add_argument("--quick", action="store_true",
                        help="a tiny configuration that runs in seconds (for the smoke test)")
    if add_arguments:
        add_arguments(parser)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.quick:
        print("--quick: a tiny configuration that checks the demo runs; its numbers are not evidence")
    return args


def table(headers, rows):
    """A plain-text table: one header line, a rule, then the rows (cells already strings)."""
    cells = [list(map(str, headers))] + [list(map(str, row)) for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(cell.rjust(width) for cell, width in zip(row, widths)) for row in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def write_report(out, name, title, text, conclusion):
    """Print the table and the conclusion, and save both to <out>/<name>.txt. Returns the path."""
    report = f"{title}\n\n{text}\n\nConclusion: {conclusion}\n"
    print(f"\n{text}\n\nConclusion: {conclusion}")
    path = os.path.join(out, f"{name}.txt")
    with open(path, "w", encoding="utf-8") as file:
        file.write(report)
    return path


def pyplot():
    """matplotlib.pyplot on a file-only backend, or None when matplotlib is not installed."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save_figure(fig, out, name):
    """Write fig to <out>/<name>.png and close it. Returns the path."""
    path = os.path.join(out, f"{name}.png")
    fig.savefig(path, dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt
    plt.close(fig)
    return path


def finish(paths, started):
    """The closing lines: where the files are and how long it took."""
    for path in paths:
        if path:
            print(f"wrote {path}")
    if len([p for p in paths if p]) == 1:
        print("(matplotlib is not installed: no figure; `pip install matplotlib` to draw one)")
    print(f"done in {time.perf_counter() - started:.1f} s")


# ---- numbers ---------------------------------------------------------------------------------
def power_law_exponent(x, y):
    """The slope of log y against log x by least squares: y ~ c x^slope."""
    slope, _ = np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)
    return float(slope)


# ---- a small character model, trained on the spot ----------------------------------------------
def local_text(source=None):
    """(text, description): `source` as nn.data.load_corpus reads it (a file's path, or
    "shakespeare"), else the docstrings of this Python's standard library
    (nn.data.fallback_corpus: every installation has them, nothing to download)."""
    from nn import data
    if source:
        return data.load_corpus(source)
    text = data.fallback_corpus()
    return text, f"the docstrings of this Python's standard library ({len(text):,} characters)"


def train_char_model(corpus, steps, block_size, batch_size, n_layer, n_head, n_embd, pos="learned",
                     model_block_size=None, lr=2e-3, seed=0, label="training"):
    """A GPT trained with AdamW (warmup, cosine decay, clipping) on windows of `block_size`
    characters of corpus.train (an nn.data.CharData). model_block_size, when larger, gives
    the model a longer position table than it ever trains on. Returns (model, final loss)."""
    import nn
    from nn import data
    nn.manual_seed(seed)
    model = nn.GPT(corpus.tokenizer.vocab_size, model_block_size or block_size, n_layer, n_head, n_embd,
                   pos=pos)
    optimizer = nn.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.99), weight_decay=0.1)
    rng = np.random.default_rng(seed)
    started, recent = time.perf_counter(), []
    for step in range(steps):
        optimizer.lr = nn.optim.cosine_lr(step, lr, lr / 10, max(1, steps // 20), steps)
        x, y = data.get_batch(corpus.train, block_size, batch_size, rng)
        _, loss = model(x, y)
        optimizer.zero_grad()
        loss.backward()
        nn.optim.clip_grad_norm(model.parameters(), 1.0)
        optimizer.step()
        recent = (recent + [loss.item()])[-20:]
        if (step + 1) % max(1, steps // 4) == 0 or step + 1 == steps:
            print(f"  {label}: step {step + 1}/{steps}, loss {np.mean(recent):.3f} "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
    model.eval()
    return model, float(np.mean(recent))


# ---- a trained model from disk ----------------------------------------------------------------
def load_model(path):
    """(model, tokenizer, meta) from a checkpoint of demos/train_chargpt.py, or from a Hugging
    Face GPT-2 folder (nn.GPT.from_gpt2; meta is empty). A folder's tokenizer is the character
    vocabulary nn.export.to_gpt2 writes, or else its tokenizer.json read by the `tokenizers`
    library (GPT-2's byte-level BPE)."""
    import nn
    if not os.path.isdir(path):
        from train_chargpt import load_checkpoint
        return load_checkpoint(path)
    model = nn.GPT.from_gpt2(path)
    return model, nn.export.char_tokenizer(path) or SubwordTokenizer(os.path.join(path, nn.export.TOKENIZER)), {}


class SubwordTokenizer:
    """A tokenizer.json of the `tokenizers` library with CharTokenizer's encode and decode."""

    def __init__(self, path):
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise SystemExit(f"{path}: reading this tokenizer needs the tokenizers library: pip install tokenizers")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{os.path.dirname(path)} has no {os.path.basename(path)}: no tokenizer")
        self._tokenizer = Tokenizer.from_file(path)
        self.vocab_size = self._tokenizer.get_vocab_size()

    def encode(self, text):
        return np.array(self._tokenizer.encode(text).ids, dtype=np.int64)

    def decode(self, ids):
        return self._tokenizer.decode([int(i) for i in ids])
