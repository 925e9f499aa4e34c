"""What the main job measures and shows of its model: the loss of each split (estimate_loss,
at every evaluation, and full_split_loss, once at the end) and a sample of generated text;
and how a batch reaches the model's device (to_device)."""
import sys

import numpy as np
from tqdm import tqdm

import tensorgrad as tg
from nn import data

SAMPLE_CHARS = 200   # length of the samples printed while training


def to_device(batch, device):
    """A batch (x, y) of host arrays on `device`, moved as nanoGPT's loop moves it (`x, y =
    x.to(device), y.to(device)`): on cuda, the only copies to the GPU a step makes. On the
    CPU the arrays go as they are (the data-parallel processes split them)."""
    if device == "cpu":
        return batch
    return tuple(tg.Tensor(array).to(device) for array in batch)   # no host copy first


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
                batch = data.get_batch(getattr(corpus, split), config.block_size, config.batch_size, rng)
                x, y = to_device(batch, config.device)
                batch_losses.append(parallel.loss(x, y))
            losses[split] = float(np.mean(batch_losses))
    finally:
        parallel.model.train()
    return losses


def full_split_loss(parallel, split, block_size, batch_size, interrupt, device="cpu"):
    """Mean cross-entropy of all len(split) - 1 next-token predictions of `split`, each
    predicted once from the tokens before it in its window (data.whole_split_batches), as
    in sampling from scratch, each batch moved to `device`. Returns None if Ctrl-C
    interrupts it."""
    total = 0.0   # summed over predictions in float64: no drift over 1e5 terms
    parallel.model.eval()
    for xb, yb in tqdm(data.whole_split_batches(split, block_size, batch_size),
                       desc="full val split", leave=False, disable=not on_a_terminal()):
        if interrupt.requested:
            break
        xb, yb = to_device((xb, yb), device)
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
