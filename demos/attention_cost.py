"""Claim 7: attention is quadratic in the sequence length.

Every query is scored against every key, so one attention layer computes and keeps a
T x T matrix of weights per head: time and memory grow as T^2. We time one forward and one
backward of tensorgrad's F.scaled_dot_product_attention as T doubles from 64 to 2048, track
its peak memory with tracemalloc (numpy reports its array allocations to it), fit the
exponent of T by least squares on log-log axes, and do the same for the layer's linear
projections (q, k, v = x W), which grow only linearly.

    python demos/attention_cost.py [--out DIR] [--quick]
"""
import time
import tracemalloc

import numpy as np

import tensorgrad as tg
from nn import functional as F

from _common import finish, parse_args, power_law_exponent, pyplot, save_figure, table, write_report

NAME = "attention_cost"


def attention_step(T, n_heads, head_dim, rng):
    """Make inputs, then return a function that runs one forward and one backward."""
    shape = (1, n_heads, T, head_dim)
    q, k, v = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    g = rng.standard_normal(shape).astype(np.float32)

    def forward():
        leaves = [tg.Tensor(a, requires_grad=True) for a in (q, k, v)]
        return F.scaled_dot_product_attention(*leaves, causal=True), leaves
    return forward, g


def projection_step(T, n_heads, head_dim, rng):
    """The same layer's q, k, v projection x @ W_qkv: linear in T."""
    C = n_heads * head_dim
    x = rng.standard_normal((1, T, C)).astype(np.float32)
    w = rng.standard_normal((C, 3 * C)).astype(np.float32) / np.sqrt(C)
    g = rng.standard_normal((1, T, 3 * C)).astype(np.float32)

    def forward():
        leaves = [tg.Tensor(x, requires_grad=True), tg.Tensor(w, requires_grad=True)]
        return leaves[0] @ leaves[1], leaves
    return forward, g


def measure(make_step, T, n_heads, head_dim, repeats):
    """(best forward seconds, best backward seconds, peak bytes of forward + backward)."""
    forward, g = make_step(T, n_heads, head_dim, np.random.default_rng(T))
    fwd, bwd = [], []
    out, _ = forward()   # a warm-up run: first calls pay for caches, BLAS threads, page faults
    out.backward(g)
    for _ in range(repeats):
        t0 = time.perf_counter()
        out, _ = forward()
        t1 = time.perf_counter()
        out.backward(g)
        t2 = time.perf_counter()
        fwd.append(t1 - t0)
        bwd.append(t2 - t1)
    tracemalloc.start()
    tracemalloc.reset_peak()
    out, leaves = forward()
    out.backward(g)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return min(fwd), min(bwd), peak


def main():
    args = parse_args(NAME, "Claim 7: attention's time and memory grow as T^2")
    started = time.perf_counter()
    lengths = [64, 128, 256] if args.quick else [64, 128, 256, 512, 1024, 2048]
    n_heads, head_dim = 4, 32
    print(f"Claim 7: one causal attention forward + backward, {n_heads} heads of {head_dim} dims, batch 1, "
          f"float32; time = best of the repeats (the CPU may be shared: timings are noisy)")

    results = {}
    for T in lengths:
        repeats = 7 if T <= 512 else 5
        results["attention", T] = measure(attention_step, T, n_heads, head_dim, repeats)
        results["projection", T] = measure(projection_step, T, n_heads, head_dim, repeats)
        print(f"  T = {T}: done", flush=True)

    rows = []
    for T in lengths:
        a, p = results["attention", T], results["projection", T]
        rows.append([T, f"{a[0] * 1e3:.2f}", f"{a[1] * 1e3:.2f}", f"{a[2] / 2 ** 20:.2f}",
                     f"{4 * n_heads * T * T / 2 ** 20:.2f}", f"{(p[0] + p[1]) * 1e3:.2f}", f"{p[2] / 2 ** 20:.2f}"])
    text = table(["T", "attn forward ms", "attn backward ms", "attn peak MiB", "one T x T weights MiB",
                  "projection fwd+bwd ms", "projection peak MiB"], rows)
    # exponents: over all lengths, and over T >= 256 where fixed per-call costs no longer dominate
    fit_from = [T for T in lengths if T >= 256] if len(lengths) > 3 else lengths
    exponents = {}
    for what, index, label in [("attention", 0, "attention forward time"), ("attention", 1, "attention backward time"),
                               ("attention", 2, "attention peak memory"), ("projection", 0, "projection forward time"),
                               ("projection", 1, "projection backward time"),
                               ("projection", 2, "projection peak memory")]:
        exponents[label] = (power_law_exponent(lengths, [results[what, T][index] for T in lengths]),
                            power_law_exponent(fit_from, [results[what, T][index] for T in fit_from]))
    text += "\n\nfitted exponent k in cost ~ T^k (least squares on log-log):\n" + table(
        ["", f"all T ({lengths[0]}-{lengths[-1]})", f"T >= {fit_from[0]}"],
        [[label, f"{e_all:.2f}", f"{e_big:.2f}"] for label, (e_all, e_big) in exponents.items()])
    attn = [exponents[f"attention {x}"][1] for x in ("forward time", "backward time", "peak memory")]
    quadratic = all(1.7 <= e <= 2.3 for e in attn)
    conclusion = (f"{'supported' if quadratic else 'not clearly supported'}: for T >= {fit_from[0]} attention's "
                  f"forward time grows as T^{attn[0]:.2f}, its backward as T^{attn[1]:.2f} and its peak memory as "
                  f"T^{attn[2]:.2f} (2 = quadratic); the linear projections grow as "
                  f"T^{exponents['projection forward time'][1]:.2f} (time) and "
                  f"T^{exponents['projection peak memory'][1]:.2f} (memory). At T = {lengths[-1]} one attention "
                  f"layer holds {results['attention', lengths[-1]][2] / 2 ** 20:.0f} MiB at its peak.")
    txt = write_report(args.out, NAME, "Claim 7: attention is quadratic", text, conclusion)

    png = None
    plt = pyplot()
    if plt:
        fig, (ax1, ax2) = plt.subplots(1, 2)
        Ts = np.array(lengths, float)
        for index, label, color in [(0, "attention forward", "tab:blue"), (1, "attention backward", "tab:orange")]:
            ys = [results["attention", T][index] * 1e3 for T in lengths]
            k = exponents[f"{label} time"][1]
            ax1.loglog(Ts, ys, "o-", color=color, label=f"{label}: T^{k:.2f}")
        ys = [sum(results["projection", T][:2]) * 1e3 for T in lengths]
        ax1.loglog(Ts, ys, "s--", color="gray", label="q,k,v projection fwd+bwd: "
                   f"T^{power_law_exponent(fit_from, [sum(results['projection', T][:2]) for T in fit_from]):.2f}")
        ref = results["attention", lengths[-1]][1] * 1e3
        ax1.loglog(Ts, ref * (Ts / Ts[-1]) ** 2, ":", color="black", lw=1, label="slope 2 (reference)")
        ax1.set(xlabel="sequence length T", ylabel="milliseconds (best of repeats)",
                title=f"time of one forward and backward\n(exponents fitted on T >= {fit_from[0]})")
        ax2.loglog(Ts, [results["attention", T][2] / 2 ** 20 for T in lengths], "o-", color="tab:red",
                   label=f"attention fwd+bwd peak: T^{exponents['attention peak memory'][1]:.2f}")
        ax2.loglog(Ts, [results["projection", T][2] / 2 ** 20 for T in lengths], "s--", color="gray",
                   label=f"projection fwd+bwd peak: T^{exponents['projection peak memory'][1]:.2f}")
        ax2.loglog(Ts, 4 * n_heads * Ts ** 2 / 2 ** 20, ":", color="black", lw=1,
                   label=f"one float32 T x T matrix per head ({n_heads} heads)")
        ax2.set(xlabel="sequence length T", ylabel="MiB (tracemalloc peak)",
                title=f"peak memory of forward + backward\n(exponents fitted on T >= {fit_from[0]})")
        for ax in (ax1, ax2):
            ax.set_xticks(lengths, [str(T) for T in lengths])
            ax.minorticks_off()
            ax.grid(alpha=0.3)
            ax.legend()
        png = save_figure(fig, args.out, NAME)
    finish([txt, png], started)


if __name__ == "__main__":
    main()
