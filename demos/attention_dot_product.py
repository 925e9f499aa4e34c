"""Claim 1: the dot product q.k measures relevance: it grows with the alignment of q and k.

We draw query/key pairs whose angle we choose (0 to 180 degrees) and whose lengths are
those of random Gaussian vectors, score them with tensorgrad (q * k).sum(-1), and look at
the score against the angle. Then one query looks at keys at different angles through
scaled dot-product attention: the better aligned a key, the more weight it gets.

    python demos/attention_dot_product.py [--out DIR] [--quick]
"""
import time

import numpy as np

import tensorgrad as tg
from nn import functional as F

from _common import finish, parse_args, pyplot, save_figure, table, write_report

NAME = "attention_dot_product"


def at_angle(q, angle, length, rng):
    """For each row of q, a vector of the given length at exactly `angle` (radians) from it,
    in a random direction: cos(angle) q_hat + sin(angle) u_hat, with u_hat orthogonal to q."""
    q_hat = q / np.linalg.norm(q, axis=-1, keepdims=True)
    u = rng.standard_normal(q.shape)
    u -= (u * q_hat).sum(-1, keepdims=True) * q_hat              # the part of u orthogonal to q
    u_hat = u / np.linalg.norm(u, axis=-1, keepdims=True)
    return length * (np.cos(angle) * q_hat + np.sin(angle) * u_hat)


def main():
    args = parse_args(NAME, __doc__.splitlines()[0])
    started = time.perf_counter()
    rng = np.random.default_rng(0)
    d = 64
    n = 40 if args.quick else 400
    degrees = np.arange(0, 181, 15 if args.quick else 5)
    print(f"Claim 1: the score q.k grows with the alignment of q and k (d = {d}, {n} pairs per angle)")

    angles, scores, cosines = [], [], []
    for deg in degrees:
        q = rng.standard_normal((n, d))
        k_length = np.linalg.norm(rng.standard_normal((n, d)), axis=1, keepdims=True)  # as a random k's
        k = at_angle(q, np.radians(deg), k_length, rng)
        score = (tg.tensor(q) * tg.tensor(k)).sum(axis=-1)      # q.k for every pair, in tensorgrad
        angles.append(np.full(n, deg))
        scores.append(score.data)
        cosines.append((q * k).sum(1) / np.linalg.norm(q, axis=1) / np.linalg.norm(k, axis=1))
    angles, scores, cosines = map(np.concatenate, (angles, scores, cosines))
    r_cos = np.corrcoef(scores, cosines)[0, 1]

    # what random pairs look like: in 64 dimensions they are nearly orthogonal
    q, k = rng.standard_normal((2, 5000, d))
    random_angles = np.degrees(np.arccos((q * k).sum(1) / np.linalg.norm(q, axis=1) / np.linalg.norm(k, axis=1)))

    # one query, keys of equal length at 0, 30, ..., 180 degrees: attention weight per key
    key_degrees = np.arange(0, 181, 30)
    q0 = rng.standard_normal(d)
    q0 *= np.sqrt(d) / np.linalg.norm(q0)
    keys = at_angle(np.tile(q0, (len(key_degrees), 1)), np.radians(key_degrees)[:, None], np.sqrt(d), rng)
    values = rng.standard_normal((len(key_degrees), 4))
    _, weights = F.scaled_dot_product_attention(tg.tensor(q0[None]), tg.tensor(keys), tg.tensor(values),
                                                causal=False, return_weights=True)
    weights = weights[0]

    rows = []
    for deg in range(0, 181, 30):
        s = scores[angles == deg]
        if s.size:
            rows.append([f"{deg}", f"{np.cos(np.radians(deg)):+.2f}", f"{s.mean():+7.1f}", f"{s.std():5.1f}",
                         f"{weights[list(key_degrees).index(deg)]:.2e}"])
    text = table(["angle (deg)", "cos", "mean q.k", "std q.k", "attention weight of a key at this angle"], rows)
    # the means every 30 degrees must fall (between neighbours 5 degrees apart near 0 and 180,
    # cos barely moves and the spread of the lengths can reorder them)
    monotone_scores = bool(np.all(np.diff([scores[angles == a].mean() for a in range(0, 181, 30)]) < 0))
    monotone_weights = bool(np.all(np.diff(weights) < 0))
    text += (f"\n\ncorrelation of q.k with cos(angle) over all {len(scores)} pairs: r = {r_cos:.3f} "
             f"(r^2 = {r_cos ** 2:.2f}: the rest of the spread comes from the vectors' lengths, since "
             f"q.k = |q||k|cos)\nrandom Gaussian pairs in {d} dimensions: angle {random_angles.mean():.1f} "
             f"+- {random_angles.std():.1f} deg (nearly orthogonal, score near 0 unless aligned)")
    if monotone_scores and monotone_weights:
        conclusion = (f"supported: the mean score falls steadily from {scores[angles == 0].mean():+.0f} "
                      f"at 0 deg to {scores[angles == 180].mean():+.0f} at 180 deg, r = {r_cos:.2f} with cos; "
                      f"the best-aligned key gets {weights[0]:.2f} of the attention, the opposite one "
                      f"{weights[-1]:.1e}.")
    else:
        conclusion = (f"not clean: mean score monotone in angle: {monotone_scores}, attention weight "
                      f"monotone: {monotone_weights} (r = {r_cos:.2f}).")
    txt = write_report(args.out, NAME, "Claim 1: dot product as relevance", text, conclusion)

    png = None
    plt = pyplot()
    if plt:
        fig, (ax1, ax2) = plt.subplots(1, 2, gridspec_kw=dict(width_ratios=[1.5, 1]))
        jitter = rng.uniform(-1.5, 1.5, len(angles))
        ax1.scatter(angles + jitter, scores, s=4, alpha=0.15, color="tab:blue", label="one (q, k) pair")
        means = [scores[angles == a].mean() for a in degrees]
        ax1.plot(degrees, means, color="black", lw=2, label="mean q.k")
        ax1.plot(degrees, d * np.cos(np.radians(degrees)), "--", color="tab:red", lw=1.2,
                 label=r"$d\,\cos\theta$  ($|q||k| \approx d$)")
        ax1.axhline(0, color="gray", lw=0.5)
        ax1.set(xlabel="angle between q and k (degrees)", ylabel="score q.k", xticks=range(0, 181, 30),
                title=f"q.k against the angle (d = {d}), r = {r_cos:.2f} with cos")
        ax1.legend(loc="upper right")
        ax2.bar([str(a) for a in key_degrees], weights, color="tab:orange")
        for i, w in enumerate(weights):
            ax2.text(i, w, f"{w:.2f}" if w >= 0.01 else f"{w:.0e}", ha="center", va="bottom", fontsize=12)
        ax2.set(xlabel="angle of the key from the query (degrees)", ylabel="attention weight",
                title="one query, seven keys: softmax(q.k / sqrt(d))")
        png = save_figure(fig, args.out, NAME)
    finish([txt, png], started)


if __name__ == "__main__":
    main()
