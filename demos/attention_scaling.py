"""Claim 2: why divide q.k by sqrt(d_k).

For q and k with unit-variance entries, q.k is a sum of d_k unit-variance terms, so its
variance grows in proportion to d_k. Fed to softmax unscaled, those ever larger scores
saturate it (the largest weight goes to 1) and the gradient through it shrinks toward
zero; divided by sqrt(d_k) the scores keep variance 1 and both stay steady. We measure
the score variance, the largest attention weight and, with tensorgrad's backward, the
gradient reaching q and k, for d_k = 4 ... 1024, scaled and not.

    python demos/attention_scaling.py [--out DIR] [--quick]
"""
import time

import numpy as np

import tensorgrad as tg
from nn import functional as F

from _common import finish, parse_args, power_law_exponent, pyplot, save_figure, table, write_report

NAME = "attention_scaling"


def attention(q, k, v, scale):
    """softmax(q k^T * scale) v, composed from tensorgrad's primitive ops. (scale is 1 for the
    unscaled variant; F.scaled_dot_product_attention always uses 1/sqrt(d_k).)"""
    scores = (q @ k.transpose(0, 2, 1)) * scale        # (B, T, T)
    weights = scores.softmax(axis=-1)                   # rows sum to 1
    return weights @ v, scores, weights


def measure(d_k, scaled, batch, T, d_v, seed):
    """Score variance, mean largest weight, and the per-vector norms of dL/dq_i and dL/dk_j
    for L = sum(out * r) with a fixed random r (a random direction to push the output in)."""
    rng = np.random.default_rng(seed)
    q = tg.tensor(rng.standard_normal((batch, T, d_k)), requires_grad=True)
    k = tg.tensor(rng.standard_normal((batch, T, d_k)), requires_grad=True)
    v = tg.tensor(rng.standard_normal((batch, T, d_v)), requires_grad=True)
    r = rng.standard_normal((batch, T, d_v))
    out, scores, weights = attention(q, k, v, 1 / np.sqrt(d_k) if scaled else 1.0)
    (out * r).sum().backward()
    return dict(var=scores.data.var(), max_w=weights.data.max(-1).mean(),
                gq=np.linalg.norm(q.grad, axis=-1).ravel(), gk=np.linalg.norm(k.grad, axis=-1).ravel(),
                out=out.data, q=q, k=k, v=v)


def main():
    args = parse_args(NAME, "Claim 2: why attention divides q.k by sqrt(d_k)")
    started = time.perf_counter()
    dims = [4, 64, 1024] if args.quick else [4, 8, 16, 32, 64, 128, 256, 512, 1024]
    batch, T, d_v = (8, 16, 16) if args.quick else (64, 32, 64)
    print(f"Claim 2: dividing by sqrt(d_k) keeps softmax and its gradient steady "
          f"({batch} sequences of {T} tokens, q, k ~ N(0, 1), d_v = {d_v})")

    results = {}
    for d_k in dims:
        for scaled in (False, True):
            results[d_k, scaled] = measure(d_k, scaled, batch, T, d_v, seed=d_k)
    # the composed version with scaling must be the fused op of nn.functional
    last = results[dims[-1], True]
    fused = F.scaled_dot_product_attention(last["q"].detach(), last["k"].detach(), last["v"].detach(), causal=False)
    fused_gap = np.abs(fused.data - last["out"]).max()

    # A row of the gradient is "starved" when it gets under 1% of what the scaled version gives
    # a typical row: softmax is so saturated there that almost nothing flows back to it.
    floor = 0.01 * np.median(results[dims[0], True]["gq"])
    med = {key: (np.median(r["gq"]), np.median(r["gk"])) for key, r in results.items()}
    starved = {d_k: (results[d_k, False]["gq"] < floor).mean() for d_k in dims}
    rows = []
    for d_k in dims:
        raw, sc = results[d_k, False], results[d_k, True]
        rows.append([d_k, f"{raw['var']:.1f}", f"{sc['var']:.2f}", f"{raw['max_w']:.3f}", f"{sc['max_w']:.3f}",
                     f"{med[d_k, False][0]:.2e}", f"{med[d_k, True][0]:.2f}", f"{raw['gq'].mean():.1f}",
                     f"{starved[d_k]:.0%}", f"{med[d_k, False][1]:.2e}", f"{med[d_k, True][1]:.2f}"])
    text = table(["d_k", "var q.k", "var scaled", "max w", "max w scaled", "med |dL/dq|", "scaled",
                  "mean |dL/dq|", "starved q rows", "med |dL/dk|", "scaled"], rows)
    var_slope = power_law_exponent(dims, [results[d, False]["var"] for d in dims])
    maxw_scaled = [results[d, True]["max_w"] for d in dims]
    gq_scaled = [med[d, True][0] for d in dims]
    text += (f"\n\nvariance of the unscaled scores ~ d_k^{var_slope:.2f} (1.00 means proportional to d_k)"
             f"\n|dL/dq| and |dL/dk|: median (and mean) over the {len(results[dims[0], True]['gq'])} query or "
             f"key vectors; starved: under 1% of the scaled median ({floor:.3f})"
             f"\nunscaled, the typical (median) row first gains from the growing |k| ~ sqrt(d_k), peaks at "
             f"d_k = {dims[int(np.argmax([med[d, False][0] for d in dims]))]},\nthen gets less and less as softmax "
             f"saturates; the MEAN stays large only because the few rows whose top two scores\nnearly tie "
             f"still pass a gradient (times |k|)"
             f"\nscaled, the fused F.scaled_dot_product_attention gives the same output "
             f"(max difference {fused_gap:.1e})")
    steady = max(gq_scaled) / min(gq_scaled) < 2 and max(maxw_scaled) - min(maxw_scaled) < 0.15
    saturates = results[dims[-1], False]["max_w"] > 0.9 and med[dims[-1], False][0] < 0.1 * gq_scaled[-1]
    conclusion = (
        f"{'supported' if steady and saturates and abs(var_slope - 1) < 0.1 else 'not (fully) supported'}: "
        f"var(q.k) grows as d_k^{var_slope:.2f}; unscaled, the largest weight goes from "
        f"{results[dims[0], False]['max_w']:.2f} (d_k={dims[0]}) to {results[dims[-1], False]['max_w']:.2f} "
        f"(d_k={dims[-1]}), the median |dL/dq| from {med[dims[0], False][0]:.2f} to "
        f"{med[dims[-1], False][0]:.1e} and {starved[dims[-1]]:.0%} of the query rows are starved; scaled, "
        f"the largest weight stays in {min(maxw_scaled):.2f}-{max(maxw_scaled):.2f} and the median |dL/dq| in "
        f"{min(gq_scaled):.2f}-{max(gq_scaled):.2f}.")
    txt = write_report(args.out, NAME, "Claim 2: why divide by sqrt(d_k)", text, conclusion)

    png = None
    plt = pyplot()
    if plt:
        fig, axes = plt.subplots(1, 3)
        style = {False: dict(color="tab:red", marker="o", label="unscaled  q.k"),
                 True: dict(color="tab:blue", marker="s", label="scaled  q.k / sqrt(d_k)")}
        for scaled in (False, True):
            series = [results[d, scaled] for d in dims]
            axes[0].plot(dims, [s["var"] for s in series], **style[scaled])
            axes[1].plot(dims, [s["max_w"] for s in series], **style[scaled])
            axes[2].plot(dims, [med[d, scaled][0] for d in dims], color=style[scaled]["color"],
                         marker=style[scaled]["marker"], label=f"{'scaled' if scaled else 'unscaled'}: |dL/dq|")
            axes[2].plot(dims, [med[d, scaled][1] for d in dims], color=style[scaled]["color"], marker="^",
                         ls=":", label=f"{'scaled' if scaled else 'unscaled'}: |dL/dk|")
        axes[2].plot(dims, [results[d, False]["gq"].mean() for d in dims], color="tab:red", alpha=0.35,
                     lw=1, ls="--", label="unscaled: MEAN |dL/dq| (a few near-tie rows)")
        axes[0].plot(dims, dims, "--", color="gray", lw=1, label="d_k")
        axes[0].set(xscale="log", yscale="log", title="variance of the scores\n", ylabel="var(score)")
        axes[1].axhline(1 / T, color="gray", lw=0.8, ls="--", label=f"uniform 1/T = {1 / T:.3f}")
        axes[1].set(xscale="log", ylim=(0, 1.05), title="largest attention weight\n(mean over rows)",
                    ylabel="max weight")
        axes[2].set(xscale="log", yscale="log", title="gradient reaching q (solid)\nand k (dotted)",
                    ylabel="median |dL/dq_i|, |dL/dk_j|")
        for ax in axes:
            ax.set_xlabel("d_k")
            ax.set_xticks(dims[::2], [str(d) for d in dims[::2]])
            ax.minorticks_off()
        handles = {label: handle for ax in axes for handle, label in zip(*ax.get_legend_handles_labels())}
        fig.legend(handles.values(), handles.keys(), loc="outside lower center", ncols=3)
        png = save_figure(fig, args.out, NAME)
    finish([txt, png], started)


if __name__ == "__main__":
    main()
