"""The main job's training run, done by PyTorch: the peer figure for the benchmarks page.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/torch_train.py [--threads 2] [--max_iters 2000]

Trains bench/torch_gpt.py's twin of nn.GPT with everything else taken from the main job:
the same corpus and split (nn.data), the same batches (one seeded numpy stream), the same
AdamW, warmup + cosine schedule (nn.optim.cosine_lr) and gradient clipping, the defaults
of demos/train_chargpt.py's Config. Prints the same `final val loss (full split)` (the mean
over every next-token prediction of the validation split), the wall time, tokens/s and
peak resident memory, so the two jobs can be compared line by line.
"""
import argparse
import os
import resource
import sys
import time
from dataclasses import fields

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "demos"))
from torch_gpt import TorchGPT, adamw  # noqa: E402
from tgtrain.flags import Config  # noqa: E402

import nn  # noqa: E402
from nn import data  # noqa: E402


def full_split_loss(model, split, block_size, batch_size):
    """Mean cross-entropy over all len(split) - 1 predictions, on train_chargpt.py's windows."""
    total = 0.0
    model.eval()
    with torch.no_grad():
        for xb, yb in data.whole_split_batches(split, block_size, batch_size):
            total += model(torch.from_numpy(xb), torch.from_numpy(yb))[1].item() * xb.size
    model.train()
    return total / (len(split) - 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--max_iters", type=int, default=Config.max_iters)
    parser.add_argument("--data", default=Config.data)
    args = parser.parse_args()
    config = Config(max_iters=args.max_iters, data=args.data)
    torch.set_num_threads(args.threads)
    torch.manual_seed(config.seed)

    text, about = data.load_corpus(config.data)
    corpus = data.prepare(text, config.block_size, name=config.data)
    print(f"corpus: {about}\n{corpus.summary()}")
    print(f"pytorch {torch.__version__}, {args.threads} threads; config: "
          + ", ".join(f"{f.name} {getattr(config, f.name)}" for f in fields(Config)
                      if f.name not in ("data", "out", "resume", "sample_every")))
    model = TorchGPT(corpus.tokenizer.vocab_size, config.block_size, config.n_layer, config.n_head,
                     config.n_embd)
    optimizer = adamw(model, config.lr, (config.beta1, config.beta2), config.weight_decay)
    batch_rng = np.random.default_rng([config.seed, 0])

    start = time.perf_counter()
    for step in range(config.max_iters):
        lr = nn.optim.cosine_lr(step, config.lr, config.min_lr, config.warmup_iters, config.max_iters)
        for group in optimizer.param_groups:
            group["lr"] = lr
        x, y = data.get_batch(corpus.train, config.block_size, config.batch_size, batch_rng)
        _, loss = model(torch.from_numpy(x), torch.from_numpy(y))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        if step % config.eval_interval == 0:
            print(f"step {step}: train loss {loss.item():.4f} (this batch)", flush=True)
    train_seconds = time.perf_counter() - start
    full = full_split_loss(model, corpus.val, config.block_size, config.batch_size)
    tokens = config.max_iters * config.batch_size * config.block_size
    print(f"final val loss (full split): {full:.4f}")
    print(f"training: {train_seconds:.1f} s for {config.max_iters} iterations, {tokens / train_seconds:,.0f} tokens/s; "
          f"total wall {time.perf_counter() - start:.1f} s; "
          f"peak resident memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
