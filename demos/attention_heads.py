"""Claim 5: the heads of a trained character model attend to different things.

We run one sentence through a trained character-level GPT and draw the attention map of
every head of every layer (MultiHeadAttention keeps them in `last_weights`). To put a
number on "different", each head gets a profile (how far back it looks, how spread out it
is, how much it puts on the character itself, the one before, the first one) and we
measure how far apart the heads' maps are (Jensen-Shannon divergence, averaged over rows
and pairs of heads), next to the same model before training.

    python demos/attention_heads.py [--checkpoint out/chargpt.safetensors] [--text "..."] [--out DIR] [--quick]

With --checkpoint it reads a model written by demos/train_chargpt.py, or a Hugging Face GPT-2
folder (demos/export_gpt2.py's, or GPT-2's own weights: its tokens are then subwords, and
"spaces" are the tokens that start with one); without one it trains a small model on the
spot on the docstrings of Python's standard library (under a minute).
"""
import itertools
import sys
import time

import numpy as np

import nn
import tensorgrad as tg
from nn import data

from _common import (HANGUL, SLIDE, finish, load_model, local_text, parse_args, pyplot, save_figure, table,
                     train_char_model, write_report)
from tgtrain.flags import POSITIVE, POSITIVE_COUNT

NAME = "attention_heads"
SENTENCE = "Return the sum of a and b."   # short enough to label every character on a slide
ROLE = 0.5   # a head "does" something when over half its weight, on average, goes there


def add_arguments(parser):
    parser.add_argument("--checkpoint", help="a checkpoint written by demos/train_chargpt.py, or a GPT-2 folder "
                                             "(default: train a small model on the spot)")
    parser.add_argument("--text", default=SENTENCE, help=f"the input sentence (default: {SENTENCE!r})")
    parser.add_argument("--steps", type=POSITIVE_COUNT, default=None,
                        help="training steps of the on-the-spot model (default 1500, 30 with --quick)")
    parser.add_argument("--lr", type=POSITIVE, default=6e-3, help="its peak learning rate (default 6e-3)")


def attention_maps(model, ids):
    """[(layer, head, weights (T, T))] for one forward of ids (T,)."""
    with tg.no_grad():
        model(ids[None])
    return [(layer, head, block.attn.last_weights[0, head])
            for layer, block in enumerate(model.h) for head in range(block.attn.n_heads)]


def profile(w, pieces):
    """What a head does on this input, the text of each token in `pieces` (rows 2.. only: row
    0 can only look at itself, and for row 1 the first token is also the previous one): its
    mean look-back distance, its entropy (nats), how its weight splits between the token
    itself, the previous one, 2-3 back and further back, its weight on the first token, and
    its weight on spaces (tokens that start with one) against the share of them it could see
    (a head that ignored them would get that share).
    Its pattern names what it does when the numbers show it (role), else how far it looks."""
    T = len(w)
    rows, i, j = w[2:], np.arange(2, T)[:, None], np.arange(T)[None]
    back = i - j                                                   # how far back each key is
    space = np.array([piece.startswith(" ") for piece in pieces])
    stats = dict(distance=(rows * back).sum(1).mean(),
                 entropy=-(rows * np.log(np.where(rows > 0, rows, 1))).sum(1).mean(),
                 self=rows[back == 0].mean(), prev=rows[back == 1].mean(),
                 near=(rows * ((back >= 2) & (back <= 3))).sum(1).mean(), far=(rows * (back > 3)).sum(1).mean(),
                 first=rows[:, 0].mean(), spaces=(rows * space).sum(1).mean(),
                 space_share=np.mean([space[:t + 1].mean() for t in range(2, T)]))
    stats["pattern"], stats["pattern_weight"] = role(stats)
    return stats


def role(stats):
    """(pattern, the weight that shows it) of a head, decided from its weights: the previous
    character, the first character, the character itself or the spaces when it puts over
    ROLE of its weight there; otherwise (how far back it looks, "near" when under 0.4 of its
    weight goes further than 3 back, else "far", and whether it seeks or avoids spaces
    against their share; None)."""
    likes = stats["spaces"] / max(stats["space_share"], 1e-9)
    for key, name in (("prev", "previous character"), ("first", "first character"), ("self", "itself")):
        if stats[key] > ROLE:
            return name, stats[key]
    if stats["spaces"] > ROLE and likes > 1.4:
        return "spaces", stats["spaces"]
    reach = "near" if stats["far"] < 0.4 else "far"
    return reach + (", seeks spaces" if likes > 1.4 else ", avoids spaces" if likes < 0.7 else ""), None


def mean_js(maps):
    """Jensen-Shannon divergence (nats, 0 = same, ln 2 = disjoint) between the rows of every
    pair of heads, averaged over rows and pairs."""
    def js(p, q):
        m = (p + q) / 2
        kl = lambda a: (a * np.log(np.where(a > 0, a, 1) / np.where(m > 0, m, 1))).sum(-1)
        return 0.5 * (kl(p) + kl(q))
    return float(np.mean([js(a[1:], b[1:]).mean() for (_, _, a), (_, _, b) in itertools.combinations(maps, 2)]))


def main():
    args = parse_args(NAME, "Claim 5: heads of a trained model attend to different things", add_arguments)
    started = time.perf_counter()
    print("Claim 5: the heads of a trained character model attend to different things")
    if args.checkpoint:
        try:
            model, tokenizer, meta = load_model(args.checkpoint)
        except (ValueError, FileNotFoundError) as error:   # CheckpointError is a ValueError
            sys.exit(f"attention_heads.py: error: {error}")
        model.eval()
        loss = meta.get("val_loss")
        source = (f"checkpoint {args.checkpoint} (step {meta.get('step', '?')}"
                  + (f", val loss {loss:.2f})" if isinstance(loss, (int, float)) else ")"))
        print(f"model: {source}")
    else:
        text, about = local_text()
        print(f"no --checkpoint: training a small model on {about}")
        corpus = data.prepare(text, 64)
        steps = args.steps or (30 if args.quick else 1500)   # ~25 s on a laptop CPU
        size = dict(n_layer=2, n_head=4, n_embd=32 if args.quick else 64)
        model, loss = train_char_model(corpus, steps, block_size=64, batch_size=8, lr=args.lr, label="training",
                                       **size)
        tokenizer = corpus.tokenizer
        source = (f"a {size['n_layer']}-layer, {size['n_head']}-head, {size['n_embd']}-dim model trained here for "
                  f"{steps} steps on stdlib docstrings (train loss {loss:.2f})")
    config = model.config
    unit = "characters" if isinstance(tokenizer, data.CharTokenizer) else "tokens"
    try:
        ids = tokenizer.encode(args.text)
    except ValueError as error:
        sys.exit(f"attention_heads.py: error: {error}; choose a --text the model can read")
    if len(ids) > config["block_size"]:
        ids = ids[: config["block_size"]]
        print(f"note: --text is longer than the model's block_size {config['block_size']}: using its first "
              f"{len(ids)} {unit}")
    pieces = [tokenizer.decode([i]) for i in ids]   # a character each, or a subword
    sentence = tokenizer.decode(ids)
    maps = attention_maps(model, ids)
    nn.manual_seed(12345)
    untrained = nn.GPT(**config)
    untrained.eval()
    js_trained, js_untrained = mean_js(maps), mean_js(attention_maps(untrained, ids))

    rows, patterns, titles = [], [], []
    for layer, head, w in maps:
        p = profile(w, pieces)
        patterns.append(p["pattern"])
        shown = p["pattern_weight"]
        titles.append(f"layer {layer}, head {head}\n{p['pattern']}" + (f" ({shown:.2f})" if shown is not None else ""))
        rows.append([layer, head, f"{p['distance']:.1f}", f"{p['entropy']:.2f}", f"{p['self']:.2f}",
                     f"{p['prev']:.2f}", f"{p['near']:.2f}", f"{p['far']:.2f}", f"{p['first']:.2f}",
                     f"{p['spaces']:.2f} ({p['space_share']:.2f})", p["pattern"]])
    text = table(["layer", "head", "mean distance", "entropy", "itself", "previous", "2-3 back", "further",
                  "first", "on spaces (share)", "pattern"], rows)
    text += (f"\n\ninput: {sentence!r} ({len(ids)} {unit})\nmodel: {source}"
             f"\nitself ... first: mean weight a {unit[:-1]} (the third onwards) puts there; on spaces: weight on "
             f"space characters (the share of spaces it can see"
             f"{'' if unit == 'characters' else '; here: tokens that start with one'})\npattern: what a head does where over {ROLE} of its "
             f"weight goes to one place (previous character, first character, itself, spaces), else how far it looks"
             f" (near: under 0.4 of its weight further than 3 back; far: more) and whether it seeks or avoids spaces"
             f"\nmean Jensen-Shannon divergence between the maps of two heads: trained {js_trained:.3f}, the same "
             f"model untrained {js_untrained:.3f}\n(0 = identical maps, ln 2 = 0.693 = disjoint; untrained, every "
             f"head is a near-uniform average of what it can see)")
    distinct = len(set(patterns))
    supported = js_trained > 0.1 and js_trained > 3 * js_untrained and distinct >= 2
    conclusion = (f"{'supported' if supported else 'not supported'}: the trained heads' maps differ from each "
                  f"other (JS {js_trained:.2f} on average, against {js_untrained:.3f} before training) and fall "
                  f"into {distinct} distinct pattern{'s' if distinct != 1 else ''} among {len(maps)} heads: "
                  + "; ".join(f"{patterns.count(q)} {q}" for q in dict.fromkeys(patterns)) + ".")
    txt = write_report(args.out, NAME, "Claim 5: attention heads attend to different things", text, conclusion)

    png = None
    plt = pyplot(hangul=bool(HANGUL.search(sentence)))
    if plt:
        n_layer, n_head = config["n_layer"], config["n_head"]
        T = len(ids)
        fig, axes = plt.subplots(n_layer, n_head, squeeze=False)
        labels = [piece.replace(" ", "·").replace("\n", "↵").replace("\t", "→") for piece in pieces]
        side = min(0.9 * SLIDE[0] / n_head, (SLIDE[1] - 2) / n_layer)   # a square map's side, inches
        every = -(-T // int(side * 72 / 7.5))    # each character labelled if 7.5 pt apart fit, else every n-th
        later = np.concatenate([w[2:][np.tril(np.ones((T - 2, T), bool), k=2)] for _, _, w in maps])
        vmax = float(np.percentile(later, 99.5))     # rows 0 and 1 (weights near 1) would wash out the rest
        for (layer, head, w), title in zip(maps, titles):
            ax = axes[layer, head]
            image = ax.imshow(np.ma.masked_where(np.triu(np.ones((T, T), bool), k=1), w), cmap="Blues", vmin=0,
                              vmax=vmax)
            ax.set_title(title, fontsize=13)
            ax.set_xticks(range(0, T, every), labels[::every] if layer == n_layer - 1 else [], family="monospace")
            ax.set_yticks([])
            ax.tick_params(length=0, pad=2)
        fig.supylabel(f"row: the {unit[:-1]} that looks")
        fig.supxlabel(f"column: the {unit[:-1]} it looks at")
        fig.colorbar(image, ax=axes, shrink=0.8, label=f"attention weight (colour capped at {vmax:.2f})")
        fig.suptitle(f"Every head's attention for {sentence!r}: row i looks at column j <= i (spaces shown as ·)\n"
                     f"mean JS divergence between heads {js_trained:.2f} (untrained {js_untrained:.3f})\n{source}")
        png = save_figure(fig, args.out, NAME)
    finish([txt, png], started)


if __name__ == "__main__":
    main()
