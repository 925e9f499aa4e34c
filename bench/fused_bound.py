"""How close could fusing bring tensorgrad to the hand-written step? Each TransformerBlock is
made one node whose forward and backward are bench/numpy_step.py's block and block_backward,
the hand-written code itself, and the step is timed against the hand-written one.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/fused_bound.py [--rounds 4]

The variants, each in a fresh process:
- as it is: the model as nn builds it;
- blocks fused: each block one node; the engine still builds and runs the rest (the
  embeddings, ln_f, the head, cross-entropy), and tgtrain.parallel still splits the batch and
  the update;
- blocks fused, no undo copy: also without tgtrain.parallel.KeptState's copy of each process's
  group just before its update.
In each process, tensorgrad's data-parallel step (2 processes of one BLAS thread each, as the
main job) and the hand-written one's alternate in blocks of --steps steps, 4 blocks each; the
process prints the median of each engine's block medians. The variants alternate for
--rounds rounds, and each row is the median over the rounds. What stays between the last
row and 1 is the step outside the blocks.

A fused block is not how nn is written (it hides q, k, v and every step of the math from the
graph); this measures what such fusion could buy at most, it is not a way to train.
"""
import argparse
import functools
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nn  # noqa: E402
import tgtrain  # noqa: E402
import numpy_step  # noqa: E402
import tensorgrad as tg  # noqa: E402
from nn import functional as F  # noqa: E402
from gpt_step import CONFIG, batches, gpt, limit_threads, numpy_trainer, tensorgrad_trainer  # noqa: E402

VARIANTS = {"as it is": (), "blocks fused": ("fuse",), "blocks fused, no undo copy": ("fuse", "no keep")}


@functools.lru_cache(maxsize=None)
def block_parameters(block):
    """The block's parameters in numpy_step's order (looked up once per block)."""
    named = dict(block.named_parameters())
    return [named[name] for name in numpy_step.BLOCK_NAMES]


def fused_block_forward(block, x):
    """TransformerBlock.forward as one node: numpy_step.block forward, block_backward back."""
    B, T, C = x.shape
    params = block_parameters(block)
    arrays = {name: p.data for name, p in zip(numpy_step.BLOCK_NAMES, params)}
    mask = F.future_penalty(T, T, x.dtype)                 # 0, and -inf where a key is later
    out = x.data.reshape(B * T, C).copy()                  # the block updates its stream in place
    saved = numpy_step.block(out, arrays, B, T, block.attn.n_heads, mask)

    def backward(g):
        dx = g.reshape(B * T, C).copy()
        grads = {name: np.empty_like(array) for name, array in arrays.items()}
        numpy_step.block_backward(dx, saved, arrays, grads, B, T, block.attn.n_heads, np.ones(B * T, x.dtype))
        return [dx.reshape(B, T, C)] + [grads[name] for name in numpy_step.BLOCK_NAMES]
    return tg.make_op("fused block", out.reshape(B, T, C), (x, *params), vjps=backward)


def apply(variant):
    """Patch nn for `variant` (in this process only)."""
    changes = VARIANTS[variant]
    if "fuse" in changes:
        nn.transformer.TransformerBlock.forward = fused_block_forward
    if "no keep" in changes:
        tgtrain.parallel.KeptState.keep = lambda kept, k: None


def child(variant, steps, blocks=4, processes=2):
    """In a fresh process: print the median ms of tensorgrad's and the hand-written step's blocks."""
    tgtrain.memory.keep_freed_memory()
    apply(variant)
    config = dict(CONFIG, batch_size=6 * processes)
    engines = [tensorgrad_trainer(gpt(config), processes)[0], numpy_trainer(gpt(config), processes)[0]]
    data = batches(config, steps + 3)
    medians = [[], []]
    for _ in range(blocks):
        for engine, step in enumerate(engines):
            times = []
            for x, y in data:
                start = time.perf_counter()
                step(x, y)
                times.append(time.perf_counter() - start)
            medians[engine].append(np.median(times[3:]))   # the first steps of a block warm up
    print(*(1e3 * float(np.median(m)) for m in medians))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4, help="processes per variant, alternating (default 4)")
    parser.add_argument("--steps", type=int, default=20, help="steps per block (default 20)")
    parser.add_argument("--child", choices=list(VARIANTS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    blas = limit_threads(1)
    if args.child:
        return child(args.child, args.steps)
    print(f"numpy {np.__version__}, BLAS: {blas}; the nanoGPT CPU config, 2 processes of one BLAS thread each")
    found = {variant: [] for variant in VARIANTS}
    for _ in range(args.rounds):
        for variant in VARIANTS:
            out = subprocess.run([sys.executable, __file__, "--child", variant, "--steps", str(args.steps)],
                                 capture_output=True, text=True, check=True)
            found[variant].append([float(ms) for ms in out.stdout.split()[-2:]])
    print(f"\n{'variant':28s} {'tensorgrad ms':>13s} {'numpy ms':>9s} {'tg/np':>6s}   each round's tg/np")
    for variant, rounds in found.items():
        tg_ms, np_ms = np.median(rounds, axis=0)
        ratios = " ".join(f"{t / n:.2f}" for t, n in rounds)
        print(f"{variant:28s} {tg_ms:13.1f} {np_ms:9.1f} {np.median([t / n for t, n in rounds]):6.2f}   {ratios}")


if __name__ == "__main__":
    main()
