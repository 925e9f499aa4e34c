"""Claim 7: attention is quadratic in the sequence length.

Every query is scored against every key, so one attention layer computes and keeps a
T x T matrix of weights per head: time and memory grow as T^2. We time one forward and one
backward of tensorgrad's F.scaled_dot_product_attention as T doubles from 64 to 2048, track
its peak memory with tracemalloc (numpy reports its array allocations to it), fit the
exponent of T by least squares on log-log axes, and do the same for the layer's linear
projections (q, k, v = x W), which grow only linearly.

The verdict is decided by peak memory: tracemalloc counts every allocation exactly, so its
exponent is the same on every run, and a class sees the same conclusion every time. Time
flickers with whatever else the machine runs: it is the best of several repeats, and its
exponent is printed with a 95% interval over this run's repeats (a bootstrap, seeded); on a
busy machine another run can land outside it.

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
    """(forward seconds of each repeat, backward seconds of each repeat, peak bytes of forward +
    backward)."""
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
    return np.array(fwd), np.array(bwd), peak


def time_exponent(lengths, repeats, resamples=2000, seed=0):
    """The exponent of the best time against T, and its 95% interval: a bootstrap that redraws
    each length's repeats (with replacement), takes the best of the draw, and refits."""
    rng = np.random.default_rng(seed)
    best = power_law_exponent(lengths, [r.min() for r in repeats])
    draws = [power_law_exponent(lengths, [rng.choice(r, len(r)).min() for r in repeats]) for _ in range(resamples)]
    low, high = np.percentile(draws, [2.5, 97.5])
    return best, low, high


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
        rows.append([T, f"{a[0].min() * 1e3:.2f}", f"{a[1].min() * 1e3:.2f}", f"{a[2] / 2 ** 20:.2f}",
                     f"{4 * n_heads * T * T / 2 ** 20:.2f}", f"{(p[0].min() + p[1].min()) * 1e3:.2f}",
                     f"{p[2] / 2 ** 20:.2f}"])
    text = table(["T", "attn forward ms", "attn backward ms", "attn peak MiB", "one T x T weights MiB",
                  "projection fwd+bwd ms", "projection peak MiB"], rows)
    # exponents over T >= 256, where fixed per-call costs no longer dominate
    fit_from = [T for T in lengths if T >= 256] if len(lengths) > 3 else lengths
    exponents, rows = {}, []
    for what in ("attention", "projection"):
        for index, kind in [(0, "forward time"), (1, "backward time")]:
            best, low, high = time_exponent(fit_from, [results[what, T][index] for T in fit_from])
            exponents[f"{what} {kind}"] = best
            rows.append([f"{what} {kind}", f"{best:.2f}", f"{low:.2f} to {high:.2f} (this run's repeats)"])
        memory = power_law_exponent(fit_from, [results[what, T][2] for T in fit_from])
        exponents[f"{what} peak memory"] = memory
        rows.append([f"{what} peak memory", f"{memory:.2f}", "exact (the same every run)"])
    text += (f"\n\nfitted exponent k in cost ~ T^k (least squares on log-log, T >= {fit_from[0]}):\n"
             + table(["", "k", "95% interval"], rows))
    memory = exponents["attention peak memory"]
    quadratic = 1.7 <= memory <= 2.3
    conclusion = (f"{'supported' if quadratic else 'not supported'}: for T >= {fit_from[0]} attention's peak memory "
                  f"grows as T^{memory:.2f} (2 = quadratic), the projections' as "
                  f"T^{exponents['projection peak memory']:.2f}; memory is counted exactly, so this verdict is "
                  f"the same on every run. Time, which moves with the machine's load (95% intervals in the "
                  f"table): attention's forward grows as T^{exponents['attention forward time']:.2f} and its "
                  f"backward as T^{exponents['attention backward time']:.2f}, the projections' forward as "
                  f"T^{exponents['projection forward time']:.2f}. At T = {lengths[-1]} one "
                  f"attention layer holds {results['attention', lengths[-1]][2] / 2 ** 20:.0f} MiB at its peak.")
    txt = write_report(args.out, NAME, "Claim 7: attention is quadratic", text, conclusion)

    png = None
    plt = pyplot()
    if plt:
        fig, (ax1, ax2) = plt.subplots(1, 2)
        Ts = np.array(lengths, float)
        for index, label, color in [(0, "attention forward", "tab:blue"), (1, "attention backward", "tab:orange")]:
            ys = [results["attention", T][index].min() * 1e3 for T in lengths]
            k = exponents[f"{label} time"]
            ax1.loglog(Ts, ys, "o-", color=color, label=f"{label}: T^{k:.2f}")
        ys = [(results["projection", T][0].min() + results["projection", T][1].min()) * 1e3 for T in lengths]
        ax1.loglog(Ts, ys, "s--", color="gray", label="q,k,v projection fwd+bwd: "
                   f"T^{exponents['projection forward time']:.2f} (forward)")
        ref = results["attention", lengths[-1]][1].min() * 1e3
        ax1.loglog(Ts, ref * (Ts / Ts[-1]) ** 2, ":", color="black", lw=1, label="slope 2 (reference)")
        ax1.set(xlabel="sequence length T", ylabel="milliseconds (best of repeats)",
                title=f"time of one forward and backward\n(exponents fitted on T >= {fit_from[0]})")
        ax2.loglog(Ts, [results["attention", T][2] / 2 ** 20 for T in lengths], "o-", color="tab:red",
                   label=f"attention fwd+bwd peak: T^{exponents['attention peak memory']:.2f}")
        ax2.loglog(Ts, [results["projection", T][2] / 2 ** 20 for T in lengths], "s--", color="gray",
                   label=f"projection fwd+bwd peak: T^{exponents['projection peak memory']:.2f}")
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
