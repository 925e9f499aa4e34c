"""Claim 3: attention weights are a probability distribution, and the output is an expectation.

Each row of softmax(q k^T / sqrt(d)) is non-negative and sums to 1, so query i holds a
distribution over the positions j; its output is the expected value E_{j ~ w_i}[v_j], the
weighted average of the values. We check every property on tensorgrad's
F.scaled_dot_product_attention (causal and not), compare its output with an explicit
Python loop sum_j w_ij v_j, and draw j from w_i at random to watch the sample mean of v_j
converge to the output.

    python demos/attention_expectation.py [--out DIR] [--quick]
"""
import time

import numpy as np

import tensorgrad as tg
from nn import functional as F

from _common import SLIDE, finish, parse_args, power_law_exponent, pyplot, save_figure, table, write_report

NAME = "attention_expectation"


def explicit_weighted_sum(weights, values):
    """out_i = sum_j w_ij v_j, one term at a time: the definition, no matmul."""
    T, S = weights.shape
    out = np.zeros((T, values.shape[1]))
    for i in range(T):
        for j in range(S):
            out[i] += weights[i, j] * values[j]
    return out


def check(rng, T, d, d_v, causal):
    """Attention on random float64 q, k, v: the numbers that say 'distribution' and 'average'."""
    q, k = (tg.tensor(rng.standard_normal((T, d))) for _ in range(2))
    v = rng.standard_normal((T, d_v))
    out, w = F.scaled_dot_product_attention(q, k, tg.tensor(v), causal=causal, return_weights=True)
    loop = explicit_weighted_sum(w, v)
    allowed = np.tril(np.ones((T, T), bool)) if causal else np.ones((T, T), bool)
    # an average of the attended values lies inside their range, coordinate by coordinate
    lo = np.array([v[allowed[i]].min(0) for i in range(T)])
    hi = np.array([v[allowed[i]].max(0) for i in range(T)])
    inside = ((out.data >= lo - 1e-12) & (out.data <= hi + 1e-12)).all()
    return dict(min_w=w[allowed].min(), sum_err=np.abs(w.sum(-1) - 1).max(),
                masked=np.abs(w[~allowed]).max() if (~allowed).any() else 0.0,
                loop_err=np.abs(out.data - loop).max(), inside=inside, w=w, v=v, out=out.data)


def main():
    args = parse_args(NAME, "Claim 3: attention weights are a distribution and the output an expectation")
    started = time.perf_counter()
    rng = np.random.default_rng(0)
    sizes = [(8, 16, 2), (64, 32, 16)] if args.quick else [(8, 16, 2), (64, 32, 16), (256, 64, 64)]
    print("Claim 3: rows of attention weights are distributions; the output is E_{j~w_i}[v_j] (float64)")

    rows, results = [], {}
    for T, d, d_v in sizes:
        for causal in (False, True):
            r = results[T, causal] = check(rng, T, d, d_v, causal)
            rows.append([T, d, d_v, "causal" if causal else "full", f"{r['min_w']:.1e}", f"{r['sum_err']:.1e}",
                         f"{r['masked']:.0e}" if causal else "-", f"{r['loop_err']:.1e}",
                         "yes" if r["inside"] else "NO"])
    text = table(["T", "d", "d_v", "mask", "min unmasked weight", "max |row sum - 1|", "max masked weight",
                  "max |out - loop sum|", "out within range of attended v"], rows)

    # Monte Carlo: draw positions j ~ w_i and average v_j; the error should fall as n^(-1/2)
    demo = results[8, True]
    i = 7                                     # the last query of the causal T=8 case sees all 8 keys
    ns = [10, 100, 1000] if args.quick else [10, 100, 1000, 10000, 100000]
    errors = []
    for n in ns:
        trials = [np.abs(demo["v"][rng.choice(8, size=n, p=demo["w"][i] / demo["w"][i].sum())].mean(0)
                         - demo["out"][i]).max() for _ in range(50)]
        errors.append(float(np.mean(trials)))
    slope = power_law_exponent(ns, errors)
    text += ("\n\nsample mean of v_j for j drawn from w_i (query 7 of the causal T=8 case), against the output:\n"
             + table(["draws n", "mean |sample mean - out|"], [[n, f"{e:.2e}"] for n, e in zip(ns, errors)])
             + f"\nerror ~ n^{slope:.2f} (-0.5 is the law of large numbers for an expectation)")
    ok = all(r["min_w"] > 0 and r["sum_err"] < 1e-12 and r["masked"] == 0 and r["loop_err"] < 1e-12
             and r["inside"] for r in results.values())
    worst = max(max(r["sum_err"], r["loop_err"]) for r in results.values())
    conclusion = (f"{'supported' if ok and abs(slope + 0.5) < 0.15 else 'not supported'}: in every case the "
                  f"weights are > 0, each row sums to 1 and the output equals the explicit weighted sum "
                  f"(worst error {worst:.1e}, float64 rounding); masked weights are exactly 0; drawing "
                  f"positions from a row and averaging their values converges to the output as n^{slope:.2f}.")
    txt = write_report(args.out, NAME, "Claim 3: attention as an expectation", text, conclusion)

    png = None
    plt = pyplot()
    if plt:
        fig, axes = plt.subplots(1, 3, figsize=(SLIDE[0], 6.2))
        w = demo["w"]
        shown = np.ma.masked_where(np.triu(np.ones_like(w, bool), k=1), w)   # masked: left blank
        im = axes[0].imshow(shown, cmap="viridis", vmin=0, vmax=1)
        axes[0].set(xlabel="key position j", ylabel="query position i",
                    title="causal weights w_ij (T = 8)\nblank = masked")
        axes[0].set_xticks(range(8))
        sums = axes[0].secondary_yaxis("right")      # each row's sum beside it
        sums.set_yticks(range(8), [f"sum {total:.3f}" for total in w.sum(-1)])
        sums.tick_params(length=0)
        fig.colorbar(im, ax=axes[0], location="bottom", shrink=0.8, label="weight w_ij")
        v, out = demo["v"], demo["out"]
        axes[1].scatter(v[:, 0], v[:, 1], s=2000 * w[i] + 10, color="tab:orange", alpha=0.6,
                        edgecolor="black", label="values v_j (area ~ w_7j)")
        for j in range(8):
            axes[1].annotate(f"{w[i, j]:.2f}", v[j], textcoords="offset points", xytext=(8, 6), fontsize=12)
        loop = explicit_weighted_sum(w[i:i + 1], v)[0]
        axes[1].scatter(*out[i], marker="*", s=300, color="tab:blue", zorder=3, label="attention output (query 7)")
        axes[1].scatter(*loop, marker="x", s=120, color="red", zorder=4, label="explicit  sum_j w_7j v_j")
        axes[1].set(xlabel="v[0]", ylabel="v[1]", title="the output is the\nweighted average of the values")
        axes[1].legend(loc="upper center", bbox_to_anchor=(0.5, -0.12))
        axes[2].loglog(ns, errors, "o-", label="measured")
        axes[2].loglog(ns, errors[0] * (np.array(ns) / ns[0]) ** -0.5, "--", color="gray", label="n^-1/2")
        axes[2].set(xlabel="positions drawn from w_7", ylabel="|mean of the drawn v_j - output|",
                    title=f"Monte Carlo\nerror ~ n^{slope:.2f}")
        axes[2].legend()
        png = save_figure(fig, args.out, NAME)
    finish([txt, png], started)


if __name__ == "__main__":
    main()
