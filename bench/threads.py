"""What tensorgrad's threads and tiles (tensorgrad/threads.py) buy each op they split: the fused
GELU and LayerNorm (forward + backward) and AdamW's step, on one thread with whole arrays, on one
thread in tiles (as by_rows cuts them), and on --threads threads, for the nanoGPT CPU config's
sizes and a wider model's.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/threads.py [--threads 2] [--rounds 3]

Before each timed call a matrix product runs on BLAS's --threads threads, as in a training
step: OpenBLAS's threads then spin for a while on the cores that tensorgrad's threads want.
Freed memory is kept for reuse (tgtrain.keep_freed_memory), as in the training job, so that each
call's new arrays are not fresh pages from the system: faulting those in is slow, and with
threads it would look as if the threads paid. Each figure is the median of 100 calls, the best
over --rounds alternating rounds. The split costs a fixed hand-over per call (a thread woken,
Python's lock passed back and forth for each numpy call), so it pays only on work large enough:
MIN_ELEMENTS_PER_THREAD says where. AdamW's step splits whole parameters across the threads
and tiles each parameter's rows.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nn  # noqa: E402
import tensorgrad as tg  # noqa: E402
import tgtrain  # noqa: E402
from nn import functional as F  # noqa: E402
from tensorgrad import threads  # noqa: E402


def median_ms(call, warm_blas, calls=100):
    times = []
    for _ in range(calls):
        warm_blas()
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def cases(n_embd, rows=12 * 64):
    """{name: call} for one model width: the activations of a batch of 12 x 64 tokens."""
    rng = np.random.default_rng(0)
    hidden = tg.tensor(rng.standard_normal((rows, 4 * n_embd), dtype=np.float32), requires_grad=True)
    h = tg.tensor(rng.standard_normal((rows, n_embd), dtype=np.float32), requires_grad=True)
    weight, bias = (tg.tensor(rng.standard_normal(n_embd, dtype=np.float32), requires_grad=True) for _ in range(2))
    nn.manual_seed(0)
    model = nn.GPT(65, 64, 4, 4, n_embd)
    optimizer = nn.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
    for p in model.parameters():
        p.grad = np.full_like(p.data, 1e-3)

    def gelu():
        out = hidden.gelu()
        out.backward(np.ones_like(out.data))

    def layer_norm():
        out = F.layer_norm(h, weight, bias)
        out.backward(np.ones_like(out.data))
    return {f"gelu ({rows}, {4 * n_embd})": gelu, f"layer_norm ({rows}, {n_embd})": layer_norm,
            f"AdamW step ({model.num_parameters():,} parameters)": optimizer.step}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2, help="threads to compare with one (default 2)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    args = parser.parse_args()
    from gpt_step import cpu_model, cpu_ticks, limit_threads, stolen_share
    blas = limit_threads(args.threads)
    tgtrain.keep_freed_memory()
    print(f"CPU: {cpu_model()}; numpy {np.__version__}, BLAS: {blas}")
    print(f"MIN_ELEMENTS_PER_THREAD = {threads.MIN_ELEMENTS_PER_THREAD:,}, "
          f"TILE_ELEMENTS = {threads.TILE_ELEMENTS:,}\n")
    ticks = cpu_ticks()
    a = np.ones((768, 128), np.float32)
    b = np.ones((128, 512), np.float32)
    # (title, threads, tile elements): whole arrays on one thread, tiles on one, tiles on --threads
    variants = [("1 thread, whole ms", 1, sys.maxsize), ("1 thread, tiles ms", 1, threads.TILE_ELEMENTS),
                (f"{args.threads} threads ms", args.threads, threads.TILE_ELEMENTS)]
    print(f"{'op (forward + backward)':36s}" + "".join(f"{title:>19s}" for title, _, _ in variants) +
          f"{'tiles/whole':>12s}{'threads/1':>10s}")
    for n_embd in (128, 384):
        for name, call in cases(n_embd).items():
            best = [np.inf] * len(variants)
            for _ in range(args.rounds):
                for i, (_, count, tile) in enumerate(variants):
                    tg.set_num_threads(count)
                    threads.TILE_ELEMENTS = tile
                    best[i] = min(best[i], median_ms(call, lambda: a @ b))
            threads.TILE_ELEMENTS = variants[1][2]
            print(f"{name:36s}" + "".join(f"{ms:19.2f}" for ms in best) +
                  f"{best[1] / best[0]:12.2f}{best[2] / best[1]:10.2f}", flush=True)
    print(f"CPU time taken by the host (steal) during the timings: {stolen_share(ticks, cpu_ticks())}")


if __name__ == "__main__":
    main()
