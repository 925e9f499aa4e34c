"""Claim 8: positional encodings generalize poorly past the length a model was trained on.

We train small character GPTs on windows of L characters and evaluate them on windows of
up to 4L, recording the loss at every position. With sinusoidal encodings the model is built
with a 4L-row table (the formula gives every position a vector) but only ever sees the
first L in training. A learned table has no rows past L at all: position L cannot even be
looked up, so that model is evaluated up to L only. For comparison, a model with no
positional encoding (pos="none"), which only knows order through the causal mask.

    python demos/attention_length.py [--data PATH] [--train_len L] [--steps N] [--out DIR] [--quick]
"""
import sys
import time

import numpy as np

import tensorgrad as tg
from nn import data

from _common import finish, local_text, parse_args, pyplot, save_figure, table, train_char_model, write_report
from tgtrain.flags import POSITIVE_COUNT

NAME = "attention_length"
COLORS = {"sinusoidal": "tab:blue", "none": "tab:green", "learned": "tab:orange"}


def add_arguments(parser):
    parser.add_argument("--data", help="a UTF-8 text file to train on, or 'shakespeare' (default: the "
                                       "docstrings of Python's standard library)")
    parser.add_argument("--train_len", type=POSITIVE_COUNT, default=None, help="L, the training length (default 32)")
    parser.add_argument("--steps", type=POSITIVE_COUNT, default=None, help="training steps per model (default 800)")


def per_position_loss(model, split, length, n_windows, rng, batch=32):
    """Mean next-token loss (nats) at each position 0..length-1 of n_windows random windows."""
    starts = rng.integers(0, len(split) - length - 1, n_windows)
    total = np.zeros(length)
    with tg.no_grad():
        for i in range(0, n_windows, batch):
            windows = split[starts[i:i + batch, None] + np.arange(length + 1)]   # (b, length + 1)
            logits, _ = model(windows[:, :-1])
            z = logits.data.astype(np.float64)
            z -= z.max(-1, keepdims=True)
            log_p = z - np.log(np.exp(z).sum(-1, keepdims=True))
            picked = np.take_along_axis(log_p, windows[:, 1:, None], -1)[..., 0]      # (b, length)
            total -= picked.sum(0)
    return total / n_windows


def main():
    args = parse_args(NAME, "Claim 8: positional encodings generalize poorly past the trained length",
                      add_arguments)
    started = time.perf_counter()
    L = args.train_len or (8 if args.quick else 32)
    steps = args.steps or (20 if args.quick else 800)
    n_windows = 32 if args.quick else 512
    size = dict(n_layer=2, n_head=4, n_embd=32 if args.quick else 64)
    print(f"Claim 8: trained on {L} characters, evaluated on up to {4 * L}")
    try:
        text, about = local_text(args.data)
        print(f"corpus: {about}")
        corpus = data.prepare(text, 4 * L, name=args.data or "the docstring corpus")
    except data.DataError as error:
        sys.exit(f"attention_length.py: error: {error}")

    curves, notes = {}, {}
    for pos in ("sinusoidal", "none", "learned"):
        model_len = L if pos == "learned" else 4 * L
        model, _ = train_char_model(corpus, steps, block_size=L, batch_size=16, pos=pos, model_block_size=model_len,
                                    lr=6e-3, label=f"pos={pos}", **size)
        eval_len = 4 * L
        if pos == "learned":
            try:
                model(corpus.val[None, :L + 1])
            except ValueError as error:     # GPT refuses: no row L in a table of L rows
                notes[pos] = str(error)
                print(f"  pos=learned at length {L + 1}: ValueError: {error}")
            eval_len = L
        curves[pos] = per_position_loss(model, corpus.val, eval_len, n_windows, np.random.default_rng(1))

    def mean(pos, lo, hi):
        c = curves[pos]
        return f"{c[lo:hi].mean():.3f}" if hi <= len(c) else "cannot run"
    bins = [(L // 2, L), (L, 2 * L), (2 * L, 3 * L), (3 * L, 4 * L)]
    rows = [[f"{lo}-{hi - 1}" + (" (trained)" if hi <= L else ""), *(mean(pos, lo, hi) for pos in curves)]
            for lo, hi in [(0, L // 2)] + bins]
    text = table(["positions", "sinusoidal (4L table)", "none", f"learned ({L}-row table)"], rows)
    text += (f"\n\nmean next-token loss (nats) at each position of {n_windows} validation windows of {4 * L} "
             f"characters;\n{size['n_layer']} layers, {size['n_head']} heads, {size['n_embd']} dims, {steps} "
             f"AdamW steps of 16 windows of L = {L} for each model; the first positions have the least "
             f"context,\nso the fair reference for what lies past L is the trained positions just before it "
             f"({L // 2}-{L - 1}).\nlearned positions: the table has {L} rows and GPT refuses longer input: "
             f"{notes.get('learned', '(it did not refuse: unexpected)')}")
    reference = {pos: curves[pos][L // 2:L].mean() for pos in curves}
    past = {pos: curves[pos][L:].mean() for pos in ("sinusoidal", "none")}
    worse = {pos: past[pos] / reference[pos] - 1 for pos in past}
    conclusion = (f"{'supported' if worse['sinusoidal'] > 0.05 else 'not supported'} for sinusoidal positions: "
                  f"past the trained length the loss is {worse['sinusoidal']:+.0%} against positions "
                  f"{L // 2}-{L - 1} ({past['sinusoidal']:.2f} vs {reference['sinusoidal']:.2f} nats; "
                  f"{curves['sinusoidal'][3 * L:].mean():.2f} at {3 * L}-{4 * L - 1}); the learned table cannot "
                  f"go past {L} at all; without positional encoding the change is {worse['none']:+.0%} "
                  f"({past['none']:.2f} vs {reference['none']:.2f}).")
    txt = write_report(args.out, NAME, "Claim 8: positional encodings past the trained length", text, conclusion)

    png = None
    plt = pyplot()
    if plt:
        fig, ax = plt.subplots()
        ax.axvspan(-0.5, L - 0.5, color="0.92", label=f"trained lengths (positions 0-{L - 1})")
        for pos, curve in curves.items():
            name = {"sinusoidal": f"sinusoidal ({4 * L}-row table, first {L} trained)",
                    "none": "no positional encoding", "learned": f"learned ({L}-row table)"}[pos]
            ax.plot(np.arange(len(curve)), curve, color=COLORS[pos], lw=1.6, label=name)
        ax.annotate(f"learned: no row for position {L},\nthe model cannot run past it",
                    xy=(L - 1, curves["learned"][-1]), xytext=(0.3, 0.06), textcoords="axes fraction",
                    color=COLORS["learned"], arrowprops=dict(arrowstyle="->", color=COLORS["learned"]))
        for k in (2, 3):
            ax.axvline(k * L - 0.5, color="0.8", lw=0.8, ls=":")
        ax.set(xlabel="position in the window (= characters of context - 1)", ylabel="next-token loss (nats)",
               title=f"Trained on {L} characters, evaluated on {4 * L}: loss at each position",
               xlim=(-0.5, 4 * L - 0.5))
        ax.legend(loc="lower right")
        png = save_figure(fig, args.out, NAME)
    finish([txt, png], started)


if __name__ == "__main__":
    main()
