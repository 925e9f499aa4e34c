"""The engine's two costs: per-op overhead on tiny tensors, and throughput on big ones.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/ops.py [--threads 2]

1. Overhead: a chain of 10,000 small ops (alternating x + c and x * c on a (4,) tensor),
   forward and backward, in microseconds per op: tensorgrad vs PyTorch eager.
2. Throughput: loss = softmax(x @ W).sum() on (1024, 1024) float32 matrices, forward
   and backward: tensorgrad vs the same arithmetic written out by hand in plain numpy
   (no autodiff at all) vs PyTorch. Target: tensorgrad within 1.2x of plain numpy.
Each figure is the median of several runs, all in one process. tensorgrad and numpy are
timed before torch is imported: torch's import adds ~10^5 objects that Python's cyclic
garbage collector would then scan while tensorgrad builds its graph, a cost no tensorgrad
user pays.
"""
import argparse
import time

import numpy as np

import tensorgrad as tg


def median_seconds(fn, repeats):
    fn()  # warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def chain_tensorgrad(length):
    x = tg.tensor(np.ones(4), requires_grad=True)
    y = x
    for i in range(length // 2):
        y = (y + 0.5) * 0.5
    y.sum().backward()


torch = None  # imported in main() after tensorgrad is timed


def chain_torch(length):
    x = torch.ones(4, requires_grad=True)
    y = x
    for i in range(length // 2):
        y = (y + 0.5) * 0.5
    y.sum().backward()


def big_tensorgrad(x, w):
    w = tg.Tensor(w, requires_grad=True)
    (tg.Tensor(x) @ w).softmax(-1).sum().backward()
    return w.grad


def big_numpy(x, w):
    """The same forward and backward, derived by hand: no graph, no autodiff."""
    scores = x @ w
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    s = e / e.sum(axis=-1, keepdims=True)
    total = s.sum()                                            # the forward's result  # noqa: F841
    grad_s = np.ones_like(s)                                   # d sum / d s = 1
    grad_scores = s * (grad_s - (grad_s * s).sum(axis=-1, keepdims=True))
    return x.T @ grad_scores                                   # d (x @ w) / d w = x^T g


def big_torch(x, w):
    w = torch.from_numpy(w).requires_grad_()
    (torch.from_numpy(x) @ w).softmax(-1).sum().backward()
    return w.grad


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--length", type=int, default=10_000, help="ops in the small chain")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    # W scaled by 1/sqrt(1024), as a layer is initialised: unit-variance scores. (Unscaled,
    # the scores' std is 32 and softmax makes float32 subnormals, which x86 computes ~100x
    # slower: every engine would be timing subnormal arithmetic instead of its own work.)
    x = rng.standard_normal((1024, 1024), dtype=np.float32)
    w = rng.standard_normal((1024, 1024), dtype=np.float32) / np.float32(32)
    assert np.allclose(big_tensorgrad(x, w), big_numpy(x, w), atol=1e-5)
    chain = median_seconds(lambda: chain_tensorgrad(args.length), 7) / args.length * 1e6
    big = median_seconds(lambda: big_tensorgrad(x, w), 15) * 1e3
    plain = median_seconds(lambda: big_numpy(x, w), 15) * 1e3

    global torch
    try:
        import torch
        torch.set_num_threads(args.threads)
        torch_chain = median_seconds(lambda: chain_torch(args.length), 7) / args.length * 1e6
        torch_big = median_seconds(lambda: big_torch(x, w), 15) * 1e3
    except ImportError:
        torch = None
    print(f"numpy {np.__version__}, pytorch {torch.__version__ if torch else 'not installed'}, "
          f"torch threads {args.threads}")
    print(f"\n1. per-op overhead: chain of {args.length:,} small ops, forward + backward")
    print(f"   tensorgrad {chain:6.2f} us/op")
    if torch is not None:
        print(f"   pytorch    {torch_chain:6.2f} us/op   ratio tensorgrad/pytorch {chain / torch_chain:.2f}")
    print("\n2. throughput: softmax(x @ W).sum() forward + backward, (1024, 1024) float32")
    print(f"   tensorgrad {big:6.2f} ms")
    print(f"   numpy      {plain:6.2f} ms   ratio tensorgrad/numpy {big / plain:.2f} (target <= 1.2)")
    if torch is not None:
        print(f"   pytorch    {torch_big:6.2f} ms   ratio tensorgrad/pytorch {big / torch_big:.2f}")


if __name__ == "__main__":
    main()
