"""Claim 10: attention is scale-hungry: it needs data, and more data to use more parameters.

The same character GPT (2 layers, 4 heads) at three widths, each trained for the same number
of steps on 1%, 10% and 100% of a corpus's training split, and evaluated on the same
validation text. A part is taken from 100 evenly spaced stretches of the split, so that 1%
samples the whole corpus rather than its first few files. Next to them, a model with no
attention and one strong assumption: a trigram count table (each character predicted from
the two before it, from counts of the same part of the text).

    python demos/attention_scale.py [--data PATH] [--steps N] [--out DIR] [--quick]

Nine models of 1500 steps: about 85 s on 2 shared cores (--quick: seconds). The lecture's §8
runs one part of it: its §4 model trained again on 1% of the text (train_on, losses).
"""
import sys
import time

import numpy as np

import tensorgrad as tg
from nn import data

from _common import finish, local_text, parse_args, pyplot, save_figure, table, train_char_model, write_report
from tgtrain.flags import POSITIVE_COUNT

NAME = "attention_scale"
FRACTIONS = (0.01, 0.1, 1.0)
WIDTHS = (16, 32, 64)            # n_embd of the three models; 2 layers and 4 heads each
BLOCK, BATCH, LR = 32, 16, 6e-3
COLORS = ("tab:green", "tab:blue", "tab:purple")


def add_arguments(parser):
    parser.add_argument("--data", help="a UTF-8 text file to train on, or 'shakespeare' (default: the "
                                       "docstrings of Python's standard library)")
    parser.add_argument("--steps", type=POSITIVE_COUNT, default=None, help="training steps per model (default 1500)")


def part(split, fraction, pieces=100):
    """`fraction` of split (an int array): the first `fraction` of each of `pieces` equal
    stretches, put together, so that a small part still samples the whole text. All of it
    when fraction >= 1."""
    if fraction >= 1:
        return split
    stretch = len(split) // pieces
    keep = max(int(stretch * fraction), BLOCK + 1)
    return np.concatenate([split[i * stretch:i * stretch + keep] for i in range(pieces)])


def mean_loss(model, split, block_size, n_windows, rng, batch=64):
    """The model's mean next-token loss (nats) over n_windows random windows of split."""
    starts = rng.integers(0, len(split) - block_size - 1, n_windows)
    losses = []
    with tg.no_grad():
        for i in range(0, n_windows, batch):
            windows = split[starts[i:i + batch, None] + np.arange(block_size + 1)]
            losses.append(model(windows[:, :-1], windows[:, 1:])[1].item() * len(windows))
    return float(np.sum(losses) / n_windows)


def ngram_loss(train, val, vocab_size, order=3, alpha=0.1):
    """Mean loss (nats) on val of an n-gram count table made from train: each token
    predicted from the order - 1 before it, p(c | context) = (count(context, c) + alpha) /
    (count(context) + alpha V). No attention, no training: one assumption (only the last
    order - 1 tokens matter) and counting."""
    def contexts(ids):
        n = len(ids) - (order - 1)
        key = np.zeros(n, np.int64)
        for i in range(order - 1):
            key = key * vocab_size + ids[i:i + n]
        return key, ids[order - 1:]

    def count(keys, query):
        found, counts = np.unique(keys, return_counts=True)
        at = np.minimum(np.searchsorted(found, query), len(found) - 1)
        return np.where(found[at] == query, counts[at], 0)

    context, following = contexts(train)
    val_context, val_following = contexts(val)
    pairs = count(context * vocab_size + following, val_context * vocab_size + val_following)
    p = (pairs + alpha) / (count(context, val_context) + alpha * vocab_size)
    return float(-np.log(p).mean())


def losses(model, train_text, val, n_windows=256):
    """dict(train: the model's mean loss on the text it trained on, val: on the validation
    split), each over the same number of windows of BLOCK, drawn by the same seed."""
    return dict(train=mean_loss(model, train_text, BLOCK, n_windows, np.random.default_rng(1)),
                val=mean_loss(model, val, BLOCK, n_windows, np.random.default_rng(1)))


def train_on(corpus, fraction, steps, n_embd, lr=LR, n_windows=256, seed=0, label=None, **model):
    """The n_embd-wide GPT (2 layers and 4 heads unless `model`, nn.GPT's keywords, says
    otherwise) trained by tgtrain.fit for `steps` steps of BATCH windows of BLOCK characters on
    `fraction` of corpus.train (part()). Returns dict(characters, parameters, train, val
    (losses()), model)."""
    text = part(corpus.train, fraction)
    size = dict(dict(n_layer=2, n_head=4), **model)
    net, _ = train_char_model(data.CharData(corpus.tokenizer, text, corpus.val), steps, BLOCK, BATCH,
                              n_embd=n_embd, lr=lr, seed=seed, label=label or f"{fraction:.0%}, n_embd {n_embd}",
                              **size)
    return dict(characters=len(text), parameters=sum(p.data.size for p in net.parameters()),
                **losses(net, text, corpus.val, n_windows), model=net)


def main():
    args = parse_args(NAME, "Claim 10: attention is scale-hungry", add_arguments)
    started = time.perf_counter()
    steps = args.steps or (20 if args.quick else 1500)
    widths = (8, 16) if args.quick else WIDTHS
    n_windows = 32 if args.quick else 512
    print(f"Claim 10: the same GPT at {len(widths)} widths on 1%, 10% and 100% of a corpus, {steps} steps each")
    try:
        text, about = local_text(args.data)
        print(f"corpus: {about}")
        corpus = data.prepare(text, BLOCK, name=args.data or "the docstring corpus")
        least = int(100 * (BLOCK + 1) / FRACTIONS[0] / 0.9) + 1   # 1% of the training split: 100 stretches of a window
        if len(text) < least:
            raise data.DataError(f"{args.data}: {len(text):,} characters are too few to train on 1% of them (100 "
                                 f"stretches of at least {BLOCK + 1} characters): use a text of at least {least:,}")
    except data.DataError as error:
        sys.exit(f"attention_scale.py: error: {error}")
    V = corpus.tokenizer.vocab_size

    runs, counted = {}, {}
    for fraction in FRACTIONS:
        counted[fraction] = ngram_loss(part(corpus.train, fraction), corpus.val, V)
        for n_embd in widths:
            runs[fraction, n_embd] = train_on(corpus, fraction, steps, n_embd, n_windows=n_windows)
    small, big = widths[0], widths[-1]
    rows = [[f"{fraction:.0%}", f"{runs[fraction, small]['characters']:,}",
             *(f"{runs[fraction, w]['train']:.2f} / {runs[fraction, w]['val']:.2f}" for w in widths),
             f"{counted[fraction]:.2f}"] for fraction in FRACTIONS]
    text = table(["part", "characters", *(f"n_embd {w}: {runs[1.0, w]['parameters']:,} params" for w in widths),
                  "trigram table"], rows)
    text += (f"\n\ncells: mean next-character loss (nats) on the model's own training text / on the validation "
             f"split ({len(corpus.val):,} characters), over {n_windows} windows of {BLOCK};\neach model: 2 layers, "
             f"4 heads, {steps} AdamW steps of {BATCH} windows of {BLOCK} characters (tgtrain.fit, peak lr {LR}); a part "
             f"is the first 1% (10%) of each of 100 even stretches of the training split\ntrigram table: each "
             f"character from the two before it, add-0.1 counts of the same part, on the whole validation split")
    val = {key: run["val"] for key, run in runs.items()}
    more_data = all(val[0.01, w] > val[1.0, w] for w in widths)
    crossing = val[0.01, big] > val[0.01, small] and val[1.0, big] < val[1.0, small]
    table_wins = counted[0.01] < val[0.01, big] and val[1.0, big] < counted[1.0]
    verdict = "supported" if more_data and crossing else "not supported"
    conclusion = (f"{verdict}: the widest model's validation loss with 1%, 10% and 100% of the text is "
                  + ", ".join(f"{val[f, big]:.2f}" for f in FRACTIONS)
                  + f" (on its own 1% part, {runs[0.01, big]['characters']:,} characters: "
                  f"{runs[0.01, big]['train']:.2f}"
                  + (", learnt by heart" if runs[0.01, big]["train"] < val[0.01, big] - 0.5 else "")
                  + "); with 1% it is "
                  f"{'worse' if val[0.01, big] > val[0.01, small] else 'no worse'} than the narrowest model "
                  f"({val[0.01, big]:.2f} vs {val[0.01, small]:.2f}), with 100% "
                  f"{'better' if val[1.0, big] < val[1.0, small] else 'no better'} ({val[1.0, big]:.2f} vs "
                  f"{val[1.0, small]:.2f})" + (": more parameters pay only with more data" if crossing else "")
                  + f". A trigram count table, with no attention, gets {counted[0.01]:.2f} with 1% and "
                  f"{counted[1.0]:.2f} with 100%"
                  + (": with little text counting beats the widest attention model, with all of it attention wins."
                     if table_wins else "."))
    txt = write_report(args.out, NAME, "Claim 10: attention is scale-hungry", text, conclusion)

    png = None
    plt = pyplot()
    if plt:
        fig, (ax1, ax2) = plt.subplots(1, 2)
        characters = [runs[fraction, small]["characters"] for fraction in FRACTIONS]
        for width, color in zip(widths, COLORS):
            ax1.plot(characters, [val[f, width] for f in FRACTIONS], "o-", color=color, lw=2,
                     label=f"n_embd {width}: {runs[1.0, width]['parameters'] / 1000:.0f}k parameters")
            ax1.plot(characters, [runs[f, width]["train"] for f in FRACTIONS], "o:", color=color, alpha=0.6)
        ax1.plot(characters, [counted[f] for f in FRACTIONS], "s--", color="gray", lw=2, label="trigram count table")
        ax1.plot([], [], "k:", label="dotted: on its own training text")
        ax1.set(xscale="log", xlabel="characters of training text (1%, 10%, 100%)",
                ylabel="next-character loss (nats)", title="loss on new text against the data")
        ax1.set_xticks(characters, [f"{c / 1000:,.0f}k" for c in characters])
        ax1.minorticks_off()
        ax1.legend()
        parameters = [runs[1.0, width]["parameters"] for width in widths]
        for fraction, color, marker in zip(FRACTIONS, ("tab:red", "tab:orange", "black"), "o^s"):
            ax2.plot(parameters, [val[fraction, w] for w in widths], "-", marker=marker, color=color, lw=2,
                     label=f"{fraction:.0%} of the text ({runs[fraction, small]['characters']:,} characters)")
        ax2.set(xscale="log", xlabel="parameters", ylabel="next-character loss on new text (nats)",
                title="loss on new text against the parameters")
        ax2.set_xticks(parameters, [f"{p / 1000:.0f}k" for p in parameters])
        ax2.minorticks_off()
        ax2.legend()
        fig.suptitle(f"The same GPT at three widths, {steps} steps each, on parts of {len(corpus.train):,} characters")
        png = save_figure(fig, args.out, NAME)
    finish([txt, png], started)


if __name__ == "__main__":
    main()
