"""Claim 4: without positional encodings, attention cannot see word order.

Self-attention treats its input as a set: permute the tokens and the outputs come out
permuted the same way (permutation equivariance). So "I see you" and "you see I" give
the same set of vectors: "I" gets the same vector in both. Adding positional encodings
(learned or sinusoidal) to the token embeddings breaks the symmetry and the vectors
differ. We build a small encoder from nn pieces (two pre-LN TransformerBlocks with
non-causal attention), in float64, and measure both; and we show that a causal mask on
its own already breaks the symmetry, which is why a decoder-only GPT with pos="none" can
still learn something about order.

    python demos/attention_order.py [--out DIR] [--quick]
"""
import time

import numpy as np

import nn

from _common import SLIDE, finish, parse_args, pyplot, save_figure, table, write_report

NAME = "attention_order"
WORDS = ["I", "see", "you"]


class Encoder(nn.Module):
    """Token embedding (+ positions) -> n_layer TransformerBlocks, attention causal or not:
    a GPT without its head, and with causal=False an encoder, every position seeing all."""

    def __init__(self, vocab_size, dim, n_heads, n_layer, pos, max_len, causal):
        self.tok_emb = nn.Embedding(vocab_size, dim)
        self.pos_emb = {"none": None, "learned": nn.Embedding(max_len, dim),
                        "sinusoidal": nn.SinusoidalPositionalEncoding(max_len, dim)}[pos]
        self.blocks = nn.ModuleList(nn.TransformerBlock(dim, n_heads, causal=causal) for _ in range(n_layer))

    def forward(self, ids, observe=None):
        """ids (B, T) -> (B, T, C). observe: None, or a dict to fill, as GPT's forward does,
        with what is inside each block, by its name ("blocks.0": TransformerBlock.forward's)."""
        x = self.tok_emb(ids)                                   # (B, T, C)
        if self.pos_emb is not None:
            x = x + self.pos_emb(np.arange(ids.shape[1]))       # (B, T, C) + (T, C)
        for i, block in enumerate(self.blocks):
            x = block(x) if observe is None else block(x, observe.setdefault(f"blocks.{i}", {}))
        return x


SETTINGS = [("none", False, "no positions"), ("learned", False, "learned positions"),
            ("sinusoidal", False, "sinusoidal positions"), ("none", True, "no positions, causal mask")]


def main():
    args = parse_args(NAME, "Claim 4: without positional encodings attention cannot see order")
    started = time.perf_counter()
    dim, heads, layers, seq_len = (16, 2, 1, 8) if args.quick else (32, 4, 2, 16)
    n_perms = 5 if args.quick else 50
    print(f"Claim 4: without positions, permuting the input permutes the output "
          f"({layers} non-causal TransformerBlocks, dim {dim}, {heads} heads, float64)")
    sentence_a = np.array([[0, 1, 2]])   # I see you
    sentence_b = np.array([[2, 1, 0]])   # you see I: the same tokens, positions 0 and 2 swapped
    where_b = [2, 1, 0]                  # word w sits at position where_b[w] in sentence b
    rng = np.random.default_rng(0)

    rows, distances = [], {}
    for pos, causal, label in SETTINGS:
        nn.manual_seed(0)
        model = Encoder(50, dim, heads, layers, pos, max_len=seq_len, causal=causal).to(np.float64)
        h_a = model(sentence_a).data[0]                          # (3, C): vectors of I, see, you
        h_b = model(sentence_b).data[0][where_b]                 # the same words' vectors in "you see I"
        scale = np.linalg.norm(h_a, axis=1).mean()
        distances[label] = np.linalg.norm(h_a[:, None] - h_b[None], axis=-1) / scale
        same_word = np.diag(distances[label])
        # many random sequences and permutations: max |f(P x) - P f(x)| relative to |f(x)|
        worst = 0.0
        for _ in range(n_perms):
            ids = rng.integers(0, 50, (1, seq_len))
            perm = rng.permutation(seq_len)
            out, out_perm = model(ids).data[0], model(ids[:, perm]).data[0]
            worst = max(worst, np.abs(out_perm - out[perm]).max() / np.abs(out).max())
        pooled = np.abs(h_a.mean(0) - h_b.mean(0)).max() / scale
        rows.append([label, f"{same_word[0]:.1e}", f"{same_word[1]:.1e}", f"{same_word[2]:.1e}",
                     f"{pooled:.1e}", f"{worst:.1e}"])
    text = table(["setting", "|h(I) A-B|", "|h(see) A-B|", "|h(you) A-B|", "|mean-pool A-B|",
                  f"max |f(Px)-Pf(x)| ({n_perms} perms, T={seq_len})"], rows)
    text += ("\n\nA = 'I see you', B = 'you see I'; |h(w) A-B| is the distance between word w's output vectors "
             "in the two sentences,\nrelative to the mean vector length; 1e-16 is float64 rounding, i.e. identical."
             "\nlearned positions here are the table at initialisation: training changes its values, not the fact "
             "that each position adds its own vector."
             "\ncausal mask: query i sees only keys 0..i, so the first token always attends to itself alone: the "
             "mask itself marks positions,\nand a causal model without positional encodings is not permutation "
             "equivariant.")
    gap = {label: np.diag(d).max() for label, d in distances.items()}
    blind = gap["no positions"] < 1e-10
    seeing = min(gap["learned positions"], gap["sinusoidal positions"]) > 1e-3
    conclusion = ((("supported" if blind and seeing else "not supported") +
                   f": without positions, each word's vector is the same in both sentences up to "
                   f"{gap['no positions']:.0e} (rounding) and permuting any input permutes the output; with "
                   f"learned or sinusoidal positions they differ by {gap['learned positions']:.2f} and "
                   f"{gap['sinusoidal positions']:.2f} of a vector's length; a causal mask alone also breaks the "
                   f"symmetry ({gap['no positions, causal mask']:.2f})."))
    txt = write_report(args.out, NAME, "Claim 4: attention without positions cannot see order", text, conclusion)

    png = None
    plt = pyplot()
    if plt:
        fig, axes = plt.subplots(1, 4, figsize=(SLIDE[0], 5.6))
        vmax = max(d.max() for d in distances.values())
        for ax, (label, d) in zip(axes, distances.items()):
            im = ax.imshow(d, cmap="magma_r", vmin=0, vmax=vmax)
            for i in range(3):
                for j in range(3):
                    ax.text(j, i, f"{d[i, j]:.2f}" if d[i, j] >= 0.005 else "0", ha="center", va="center",
                            fontsize=14, color="white" if d[i, j] > vmax / 2 else "black",
                            fontweight="bold" if i == j else "normal")
            ax.set_xticks(range(3), WORDS)
            ax.set_yticks(range(3), WORDS)
            same = "identical" if np.diag(d).max() < 1e-10 else "different"
            ax.set_title(f"{label}\n(same words: {same})")
        fig.supxlabel("word's vector in 'you see I'")
        fig.supylabel("word's vector in 'I see you'")
        fig.colorbar(im, ax=axes, fraction=0.015, pad=0.02, shrink=0.8, label="distance / mean |h|")
        fig.suptitle("Output vectors of the same words in 'I see you' and 'you see I' (diagonal: same word)")
        png = save_figure(fig, args.out, NAME)
    finish([txt, png], started)


if __name__ == "__main__":
    main()
