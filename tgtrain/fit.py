"""A short run in memory, for experiments that need a trained model and no files: the main
job's step (DataParallel's forward_backward, the clipped gradient, step(), warmup and cosine
decay of the learning rate) without its checkpoints, locks, evaluations and logs.

    model, loss = tgtrain.fit(model, corpus.train, steps=800, block_size=32, batch_size=16)
"""
import time

import numpy as np
from threadpoolctl import threadpool_limits

import nn
import tensorgrad as tg
from nn import data

from .parallel import DataParallel


def fit(model, split, steps, block_size, batch_size, lr=2e-3, grad_clip=1.0, seed=0, processes=1,
        label="training"):
    """Train `model` for `steps` steps of AdamW (betas (0.9, 0.99), weight decay 0.1, warmup
    over the first 5% of the steps, cosine decay to lr / 10) on random windows of
    `block_size` tokens of `split` (an int array), the gradients clipped to grad_clip.
    Prints the mean loss of the last 20 steps four times. Returns (model in eval mode, that
    mean at the end)."""
    optimizer = nn.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.99), weight_decay=0.1)
    rng = np.random.default_rng(seed)
    started, recent = time.perf_counter(), []
    threads = tg.get_num_threads()
    tg.set_num_threads(1 if processes > 1 else threads)   # the processes are the parallelism, as in the job
    try:
        with threadpool_limits(1):   # small matrices multiply fastest on one BLAS thread (and so do processes)
            parallel = DataParallel(model, processes, optimizer)
            for step in range(steps):
                optimizer.lr = nn.optim.cosine_lr(step, lr, lr / 10, max(1, steps // 20), steps)
                x, y = data.get_batch(split, block_size, batch_size, rng)
                optimizer.zero_grad()
                recent = (recent + [parallel.forward_backward(x, y)])[-20:]
                parallel.step(max_norm=grad_clip)   # clip_grad_norm, then optimizer.step()
                if (step + 1) % max(1, steps // 4) == 0 or step + 1 == steps:
                    print(f"  {label}: step {step + 1}/{steps}, loss {np.mean(recent):.3f} "
                          f"({time.perf_counter() - started:.0f} s)", flush=True)
            parallel.close()
    finally:
        tg.set_num_threads(threads)
    model.eval()
    return model, float(np.mean(recent))
