"""One GPT training step (forward, backward, grad clip, AdamW): tensorgrad vs PyTorch.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/gpt_step.py [--threads 2] [--scaling] [--memory]

Both engines train the same model (bench/torch_gpt.py is nn.GPT's twin, weights copied
over) on the same batches with the same optimizer, each on --threads cores: tensorgrad
splits the batch across that many processes of one BLAS thread each (nn.parallel, as
demos/train_chargpt.py trains), PyTorch splits each op across that many threads.
Each engine runs in a fresh process of
its own: in one process, OpenBLAS's worker threads (numpy) and PyTorch's OpenMP threads
spin-wait for work on the same two cores and slow each other down. The processes
alternate for --rounds rounds, so drifting machine load hits both alike; each figure is
the median over rounds of each process's median step. MFU is the step's matmul FLOPs per
second over the float32 matmul rate numpy reaches on this machine, measured at the start.
--memory reports each engine's peak resident memory over a 200-step run (tensorgrad's
with its worker processes': their peaks added, so pages they share count twice). PyTorch is
optional: without it only tensorgrad's figures are printed.
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nn  # noqa: E402

CONFIG = dict(vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128, batch_size=12)
OPTIMIZER = dict(lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
GRAD_CLIP = 1.0


def limit_threads(threads):
    """Run BLAS on `threads` threads; returns a description of the BLAS."""
    try:
        from threadpoolctl import threadpool_info, threadpool_limits
    except ImportError:
        return "unknown (pip install threadpoolctl to see and set it; BLAS threads not limited)"
    threadpool_limits(threads)
    return ", ".join(f"{i['internal_api']} {i.get('version')} ({i.get('architecture')}, {i['num_threads']} threads)"
                     for i in threadpool_info() if i["user_api"] == "blas")


def matmul_rate(seconds=1.0):
    """numpy's float32 matmul GFLOP/s on a shape like this model's layers (best of several)."""
    a = np.random.default_rng(0).standard_normal((768, 512), dtype=np.float32)
    b = np.random.default_rng(1).standard_normal((512, 512), dtype=np.float32)
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        for _ in range(10):
            a @ b
        best = max(best, 10 * 2 * a.shape[0] * a.shape[1] * b.shape[1] / (time.perf_counter() - start))
    return best / 1e9


def step_flops(vocab_size, block_size, n_layer, n_embd, batch_size, **_):
    """Matmul FLOPs of one training step: forward 2 * m * n * k per matmul, backward twice that."""
    tokens = batch_size * block_size
    linear = n_layer * (3 * n_embd * n_embd + n_embd * n_embd + 8 * n_embd * n_embd) + n_embd * vocab_size
    attention = n_layer * 2 * block_size * n_embd           # q k^T and weights v, per token
    return 3 * 2 * tokens * (linear + attention)


def batches(config, count, seed=0):
    rng = np.random.default_rng(seed)
    shape = (config["batch_size"], config["block_size"])
    return [(rng.integers(0, config["vocab_size"], shape), rng.integers(0, config["vocab_size"], shape))
            for _ in range(count)]


def tensorgrad_trainer(config, processes=1):
    """The training step of demos/train_chargpt.py: the batch split across `processes`.
    Returns (model, step, parallel)."""
    nn.manual_seed(0)
    model = nn.GPT(config["vocab_size"], config["block_size"], config["n_layer"], config["n_head"],
                   config["n_embd"])
    optimizer = nn.optim.AdamW(model.parameters(), **OPTIMIZER)
    parallel = nn.parallel.DataParallel(model, processes, optimizer)

    def step(x, y):
        optimizer.zero_grad()
        loss = parallel.forward_backward(x, y)
        parallel.step(max_norm=GRAD_CLIP)   # clip_grad_norm, then optimizer.step()
        return loss
    return model, step, parallel


def torch_trainer(config, tg_model, threads):
    import torch
    from torch_gpt import TorchGPT, copy_weights
    torch.set_num_threads(threads)
    model = TorchGPT(config["vocab_size"], config["block_size"], config["n_layer"], config["n_head"],
                     config["n_embd"])
    copy_weights(tg_model, model)
    optimizer = torch.optim.AdamW(model.parameters(), **OPTIMIZER)

    def step(x, y):
        _, loss = model(torch.from_numpy(x), torch.from_numpy(y))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        optimizer.step()
        return loss.item()
    return step


def child(engine, config, steps, threads, warmup=3):
    """In a fresh process: train `steps` steps; print the median ms per step and peak MiB.
    The tensorgrad child never imports torch. Both keep freed memory for reuse, as the
    training job does (nn/memory.py; PyTorch's own allocator does so anyway)."""
    nn.memory.keep_freed_memory()
    tg_model, step, parallel = tensorgrad_trainer(config, threads if engine == "tensorgrad" else 1)
    if engine == "pytorch":
        step = torch_trainer(config, tg_model, threads)
    times = []
    for i, (x, y) in enumerate(batches(config, warmup + steps)):
        start = time.perf_counter()
        step(x, y)
        if i >= warmup:
            times.append(time.perf_counter() - start)
    workers = [process.pid for _, process in parallel.workers] if engine == "tensorgrad" else []
    print(1e3 * float(np.median(times)), nn.memory.peak_resident_mib(workers))


def run_child(engine, config, steps, threads):
    """(median ms per step, peak MiB) of `engine` training in a fresh process."""
    out = subprocess.run([sys.executable, __file__, "--child", engine, "--config", json.dumps(config),
                          "--steps", str(steps), "--threads", str(threads)],
                         capture_output=True, text=True, check=True)
    ms, mib = map(float, out.stdout.split()[-2:])
    return ms, mib


def compare(config, steps, threads, rounds, engines):
    """{engine: median over rounds of its median ms per step}, the engines' processes alternating."""
    times = {engine: [] for engine in engines}
    for _ in range(rounds):
        for engine in engines:
            times[engine].append(run_child(engine, config, steps, threads)[0])
    return {engine: float(np.median(t)) for engine, t in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2, help="cores per engine (default 2)")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per process (default 30)")
    parser.add_argument("--rounds", type=int, default=3, help="processes per engine, alternating (default 3)")
    parser.add_argument("--scaling", action="store_true", help="also n_embd 256, 384 and block 128, 256")
    parser.add_argument("--memory", action="store_true", help="also peak memory of a 200-step run")
    parser.add_argument("--child", choices=["tensorgrad", "pytorch"], help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    args = parser.parse_args()
    # tensorgrad's processes split the batch (nn.parallel), each multiplying on one BLAS core, as
    # demos/train_chargpt.py runs; PyTorch's threads split each op
    blas = limit_threads(1 if args.child == "tensorgrad" else args.threads)
    if args.child:
        return child(args.child, json.loads(args.config), args.steps, args.threads)

    has_torch = importlib.util.find_spec("torch") is not None
    engines = ["tensorgrad", "pytorch"] if has_torch else ["tensorgrad"]
    print(f"numpy {np.__version__}, BLAS: {blas}")
    print(f"pytorch {'installed' if has_torch else 'not installed'}; {args.threads} threads each "
          f"(tensorgrad: data-parallel processes with one BLAS thread each; pytorch: intra-op threads); "
          f"{args.rounds} rounds of {args.steps} steps per engine")
    for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if name in os.environ:
            print(f"warning: {name} is set; on this team's machines it halves numpy's matmul speed")
    rate = matmul_rate()
    print(f"numpy float32 matmul: {rate:.0f} GFLOP/s\n")

    configs = [("nanoGPT CPU config", CONFIG)]
    if args.scaling:
        configs += [(f"n_embd {c}", dict(CONFIG, n_embd=c)) for c in (256, 384)]
        configs += [(f"block_size {t}", dict(CONFIG, block_size=t)) for t in (128, 256)]
    print(f"{'configuration':22s} {'tensorgrad ms':>13s} {'tokens/s':>9s} {'MFU':>5s} "
          f"{'pytorch ms':>10s} {'ratio tg/pt':>11s}")
    for title, config in configs:
        ms = compare(config, args.steps, args.threads, args.rounds, engines)
        tokens = config["batch_size"] * config["block_size"]
        mfu = step_flops(**config) / (ms["tensorgrad"] / 1e3) / (rate * 1e9)
        line = f"{title:22s} {ms['tensorgrad']:13.1f} {tokens / ms['tensorgrad'] * 1e3:9.0f} {mfu:5.0%}"
        if "pytorch" in ms:
            line += f" {ms['pytorch']:10.1f} {ms['tensorgrad'] / ms['pytorch']:11.2f}"
        print(line, flush=True)
    if args.memory:
        print("\npeak resident memory of a 200-step training run (fresh process each):")
        for engine in engines:
            print(f"  {engine:10s} {run_child(engine, CONFIG, 200, args.threads)[1]:6.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
