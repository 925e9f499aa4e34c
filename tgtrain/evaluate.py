"""What the main job measures and shows of its model: the loss of each split (estimate_loss,
at every evaluation, and full_split_loss, once at the end) and a sample of generated text."""
import sys

import numpy as np
from tqdm import tqdm

from nn import data

SAMPLE_CHARS = 200   # length of the samples printed while training


def estimate_loss(parallel, corpus, config, stopping=lambda: False):
    """Mean loss of eval_iters batches of each split, in eval mode without a graph, each
    batch split across the processes. The batches come from a generator reseeded each
    time: every evaluation sees the same batches (so two evaluations differ only by the
    model), and the training's stream of batches stays untouched (so a resumed run matches
    an unbroken one). None if stopping() turns true: it is asked before each batch, so a
    stop waits for one batch, not for the whole evaluation."""
    rng = np.random.default_rng([config.seed, 1])
    parallel.model.eval()
    losses = {}
    try:
        for split in ("train", "val"):
            batch_losses = []
            for _ in range(config.eval_iters):
                if stopping():
                    return None
                x, y = data.get_batch(getattr(corpus, split), config.block_size, config.batch_size, rng)
                batch_losses.append(parallel.loss(x, y))
            losses[split] = float(np.mean(batch_losses))
    finally:
        parallel.model.train()
    return losses


def full_split_loss(parallel, split, block_size, batch_size, interrupt):
    """Mean cross-entropy of all len(split) - 1 next-token predictions of `split`, each
    predicted once from the tokens before it in its window (data.whole_split_batches), as
    in sampling from scratch. Returns None if Ctrl-C interrupts it."""
    total = 0.0   # summed over predictions in float64: no drift over 1e5 terms
    parallel.model.eval()
    for xb, yb in tqdm(data.whole_split_batches(split, block_size, batch_size),
                       desc="full val split", leave=False, disable=not on_a_terminal()):
        if interrupt.requested:
            break
        total += parallel.loss(xb, yb) * xb.size   # the batch's mean loss times its predictions
    parallel.model.train()
    return None if interrupt.requested else total / (len(split) - 1)


def sample(model, tokenizer, seed, interrupt, length=SAMPLE_CHARS):
    """`length` characters that follow the smallest character (a newline in most texts), or
    None when a stop (Ctrl-C, SIGTERM: interrupt, a tgtrain.stops.Interrupt) comes first or
    meanwhile: a sample changes nothing, so it is dropped at once. Its own seeded generator:
    sampling never moves the training's random streams."""
    ids = interrupt.unless_stopped(lambda: model.generate(np.zeros((1, 1), dtype=np.int64), length, temperature=0.8,
                                                          top_k=200, seed=seed))
    return None if ids is None else tokenizer.decode(ids[0])


def on_a_terminal():
    """Whether the output is watched live: the progress bar redraws itself, which a log file
    would keep as thousands of lines."""
    return sys.stdout.isatty() and sys.stderr.isatty()
