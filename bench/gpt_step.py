"""One GPT training step (forward, backward, grad clip, AdamW): tensorgrad vs PyTorch, and vs
the same step written by hand in numpy.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/gpt_step.py [--threads 2] [--scaling] [--memory] [--fixed]

Both engines train the same model (bench/torch_gpt.py is nn.GPT's twin, weights copied
over) on the same batches with the same optimizer, each on --threads cores: tensorgrad
splits the batch across that many processes of one BLAS thread each (tgtrain.parallel, as
demos/train_chargpt.py trains), PyTorch splits each op across that many threads.
"numpy" is bench/numpy_step.py: the same step with every gradient derived by hand, no
autodiff, its batch split across the same processes; tensorgrad / numpy is the engine's
own cost. For the default model the script also times one process each: tensorgrad's
step (tgtrain.parallel with one process) and the hand-written one on --threads BLAS threads
(tensorgrad's elementwise passes on as many of its own threads, tensorgrad.threads),
and a loop of your own as docs/main-job.md writes it (`tgtrain.keep_freed_memory()`, then
`logits, loss = model(x, y)`, `loss.backward()`, clip, `opt.step()`, no tgtrain.parallel).
Each engine runs in a fresh process of
its own: in one process, OpenBLAS's worker threads (numpy) and PyTorch's OpenMP threads
spin-wait for work on the same two cores and slow each other down. The processes
alternate for --rounds rounds, so drifting machine load hits both alike; each figure is
the median over rounds of each process's median step. MFU is the step's matmul FLOPs per
second over the float32 matmul rate numpy reaches on this machine: measured before each round
(the rate swings from minute to minute on a shared machine), the median of those.
On a virtual machine it also prints the share of the CPUs' time the host took for others
while the engines ran (steal, from /proc/stat): a run with more than a few percent swings.
--fixed times tensorgrad and the hand-written step on a model so small (n_embd 16, block 8,
one row per process) that numpy's arithmetic is next to nothing: what is left is each step's
fixed cost (Python: building the graph, calling each vjp, the processes' messages), and
tensorgrad's minus the hand-written one's is the engine's share of it (the default model runs
the same ops and messages, so about the same share). It does so split across --threads
processes and in one process on one row: how much more the same Python costs with the other
process running beside it.
--memory reports each engine's peak resident memory over a 200-step run (tensorgrad's
with its worker processes': their peaks added, so pages they share count twice). PyTorch is
optional: without it, tensorgrad's and the hand-written step's figures are printed.
"""
import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nn  # noqa: E402
import tensorgrad  # noqa: E402
import tgtrain  # noqa: E402

CONFIG = dict(vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128, batch_size=12)
OPTIMIZER = dict(lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
GRAD_CLIP = 1.0


def limit_threads(threads):
    """Run BLAS and tensorgrad's elementwise work (tensorgrad.threads) on `threads` threads;
    returns a description of the BLAS: its library, version, kernel and threads."""
    tensorgrad.set_num_threads(threads)
    try:
        from threadpoolctl import threadpool_info, threadpool_limits
    except ImportError:
        return "unknown (pip install threadpoolctl to see and set it; BLAS threads not limited)"
    threadpool_limits(threads)
    return ", ".join(f"{i['internal_api']} {i.get('version')} ({i.get('architecture')}, {i['num_threads']} threads)"
                     for i in threadpool_info() if i["user_api"] == "blas")


def cpu_model():
    """The CPU's model name, as /proc/cpuinfo (Linux) or the platform module says it."""
    try:
        with open("/proc/cpuinfo") as info:
            return next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def cpu_ticks(path="/proc/stat"):
    """(stolen, all) clock ticks of every CPU since boot, from Linux's /proc/stat, or None
    where there is none. On a virtual machine, "stolen" is time the host gave to other
    machines while this one had work: a run's figures swing with it."""
    try:
        with open(path) as stat:
            user, nice, system, idle, iowait, irq, softirq, steal = map(int, stat.readline().split()[1:9])
    except (OSError, ValueError):
        return None
    return steal, user + nice + system + idle + iowait + irq + softirq + steal


def stolen_share(start, end):
    """The share of the CPUs' time the host took between two cpu_ticks() readings, as text."""
    if start is None or end is None or end[1] == start[1]:
        return "unknown (no /proc/stat)"
    share = (end[0] - start[0]) / (end[1] - start[1])
    return f"{share:.1%}" + ("; above a few percent, the run's figures are not to be trusted" if share > 0.03 else "")


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


# the engines a child process can run: those that split the batch across --threads processes
# of one BLAS thread each, and those that run in one process on --threads BLAS threads
DATA_PARALLEL = ("tensorgrad", "numpy")
ONE_PROCESS = ("tensorgrad-1", "numpy-1", "readme")
ENGINES = DATA_PARALLEL + ("pytorch",) + ONE_PROCESS


def gpt(config):
    nn.manual_seed(0)
    return nn.GPT(config["vocab_size"], config["block_size"], config["n_layer"], config["n_head"],
                  config["n_embd"])


def tensorgrad_trainer(model, processes=1):
    """The training step of demos/train_chargpt.py: the batch split across `processes`.
    Returns (step, worker pids)."""
    optimizer = nn.optim.AdamW(model.parameters(), **OPTIMIZER)
    parallel = tgtrain.parallel.DataParallel(model, processes, optimizer)

    def step(x, y):
        optimizer.zero_grad()
        loss = parallel.forward_backward(x, y)
        parallel.step(max_norm=GRAD_CLIP)   # clip_grad_norm, then optimizer.step()
        return loss
    return step, [process.pid for _, process in parallel.workers]


def readme_loop(model):
    """The loop of your own (docs/main-job.md), step by step, without tgtrain.parallel.
    Returns (step, no pids)."""
    optimizer = nn.optim.AdamW(model.parameters(), **OPTIMIZER)

    def step(x, y):
        logits, loss = model(x, y)
        optimizer.zero_grad()
        loss.backward()
        nn.optim.clip_grad_norm(model.parameters(), GRAD_CLIP)
        optimizer.step()
        return loss.item()
    return step, []


def numpy_trainer(model, processes=1):
    """bench/numpy_step.py's hand-written step on a copy of the model. Returns (step, worker pids)."""
    from numpy_step import NumpyTrainer
    trainer = NumpyTrainer(model, processes, **OPTIMIZER, max_norm=GRAD_CLIP)
    return trainer.step, [process.pid for _, process in trainer.workers]


def torch_trainer(tg_model, threads):
    import torch
    from torch_gpt import TorchGPT, adamw, copy_weights
    torch.set_num_threads(threads)
    config = tg_model.config
    model = TorchGPT(config["vocab_size"], config["block_size"], config["n_layer"], config["n_head"],
                     config["n_embd"])
    copy_weights(tg_model, model)
    optimizer = adamw(model, **OPTIMIZER)   # decay on matrices only, as nn.optim.AdamW

    def step(x, y):
        _, loss = model(torch.from_numpy(x), torch.from_numpy(y))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        optimizer.step()
        return loss.item()
    return step, []


def child(engine, config, steps, threads, warmup=3):
    """In a fresh process: train `steps` steps; print the median ms per step and peak MiB.
    Only the pytorch child imports torch. Every child keeps freed memory for reuse, as the
    training job and a loop of your own do (tgtrain.keep_freed_memory; PyTorch's own allocator does
    so anyway)."""
    tgtrain.keep_freed_memory()
    model = gpt(config)
    processes = threads if engine in DATA_PARALLEL else 1
    make = {"tensorgrad": tensorgrad_trainer, "tensorgrad-1": tensorgrad_trainer, "numpy": numpy_trainer,
            "numpy-1": numpy_trainer, "readme": lambda model, _: readme_loop(model),
            "pytorch": lambda model, _: torch_trainer(model, threads)}[engine]
    step, workers = make(model, processes)
    times = []
    for i, (x, y) in enumerate(batches(config, warmup + steps)):
        start = time.perf_counter()
        step(x, y)
        if i >= warmup:
            times.append(time.perf_counter() - start)
    print(1e3 * float(np.median(times)), tgtrain.memory.peak_resident_mib(workers))


def run_child(engine, config, steps, threads):
    """(median ms per step, peak MiB) of `engine` training in a fresh process."""
    out = subprocess.run([sys.executable, __file__, "--child", engine, "--config", json.dumps(config),
                          "--steps", str(steps), "--threads", str(threads)],
                         capture_output=True, text=True, check=True)
    ms, mib = map(float, out.stdout.split()[-2:])
    return ms, mib


def compare(config, steps, threads, rounds, engines, rates=None):
    """{engine: median over rounds of its median ms per step}, the engines' processes alternating;
    with a list `rates`, numpy's matmul rate is measured into it before each round."""
    times = {engine: [] for engine in engines}
    for _ in range(rounds):
        if rates is not None:
            rates.append(matmul_rate(0.5))
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
    parser.add_argument("--fixed", action="store_true", help="also the fixed cost of a step, on a tiny model")
    parser.add_argument("--child", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    args = parser.parse_args()
    # tensorgrad's processes split the batch (tgtrain.parallel), each multiplying on one BLAS core, as
    # demos/train_chargpt.py runs, and so do the hand-written step's; PyTorch's threads split each op
    blas = limit_threads(1 if args.child in DATA_PARALLEL else args.threads)
    if args.child:
        return child(args.child, json.loads(args.config), args.steps, args.threads)

    has_torch = importlib.util.find_spec("torch") is not None
    peers = ["numpy", "pytorch"] if has_torch else ["numpy"]
    print(f"CPU: {cpu_model()}, {len(os.sched_getaffinity(0))} cores for this process")
    print(f"numpy {np.__version__}, BLAS: {blas}; tensorgrad's elementwise threads: {tensorgrad.get_num_threads()}")
    print(f"pytorch {'installed' if has_torch else 'not installed'}; {args.threads} threads each "
          f"(tensorgrad: data-parallel processes with one BLAS thread each; pytorch: intra-op threads); "
          f"{args.rounds} rounds of {args.steps} steps per engine")
    for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if name in os.environ:
            print(f"warning: {name} is set; on this team's machines it halves numpy's matmul speed")
    ticks = cpu_ticks()
    all_rates = []   # numpy's float32 matmul GFLOP/s, measured before each round
    print()

    configs = [("nanoGPT CPU config", CONFIG)]
    if args.scaling:
        configs += [(f"n_embd {c}", dict(CONFIG, n_embd=c)) for c in (256, 384)]
        configs += [(f"block_size {t}", dict(CONFIG, block_size=t)) for t in (128, 256)]
    print(f"{'configuration':22s} {'tensorgrad ms':>13s} {'tokens/s':>9s} {'MFU':>5s} "
          f"{'pytorch ms':>10s} {'ratio tg/pt':>11s} {'numpy ms':>9s} {'ratio tg/np':>11s}")
    one_process = None
    for title, config in configs:
        # for the default model, the one-process engines join the same alternation
        extra = list(ONE_PROCESS) if config is CONFIG else []
        rates = []
        ms = compare(config, args.steps, args.threads, args.rounds, ["tensorgrad", *peers, *extra], rates)
        all_rates += rates
        if extra:
            one_process = ms
        tokens = config["batch_size"] * config["block_size"]
        mfu = step_flops(**config) / (ms["tensorgrad"] / 1e3) / (float(np.median(rates)) * 1e9)
        line = f"{title:22s} {ms['tensorgrad']:13.1f} {tokens / ms['tensorgrad'] * 1e3:9.0f} {mfu:5.0%}"
        line += (f" {ms['pytorch']:10.1f} {ms['tensorgrad'] / ms['pytorch']:11.2f}" if has_torch
                 else f" {'-':>10s} {'-':>11s}")
        line += f" {ms['numpy']:9.1f} {ms['tensorgrad'] / ms['numpy']:11.2f}"
        print(line, flush=True)

    print(f"numpy float32 matmul, measured before each round: median {np.median(all_rates):.0f} GFLOP/s "
          f"({min(all_rates):.0f}-{max(all_rates):.0f}); each MFU is over its configuration's median")
    ms = one_process
    print(f"\none process each, nanoGPT CPU config: tensorgrad and numpy on {args.threads} BLAS threads"
          + (f" (pytorch: the figure above, {args.threads} threads)" if has_torch else ""))
    print(f"{'step':44s} {'ms':>6s} {'ratio to numpy':>14s} {'ratio to pytorch':>16s}")
    rows = [("tensorgrad (tgtrain.parallel, one process)", "tensorgrad-1"), ("numpy (bench/numpy_step.py)", "numpy-1"),
            ("a loop of your own (docs/main-job.md)", "readme")]
    for title, engine in rows:
        line = f"{title:44s} {ms[engine]:6.1f} {ms[engine] / ms['numpy-1']:14.2f}"
        line += f" {ms[engine] / ms['pytorch']:16.2f}" if has_torch else f" {'-':>16s}"
        print(line)
    print(f"a loop of your own / tensorgrad's one-process step: {ms['readme'] / ms['tensorgrad-1']:.2f}")
    print(f"CPU time taken by the host (steal) during the timings: {stolen_share(ticks, cpu_ticks())}", flush=True)

    if args.fixed:
        tiny = dict(CONFIG, n_embd=16, block_size=8, batch_size=args.threads)   # a row per process
        split = compare(tiny, args.steps, args.threads, args.rounds, list(DATA_PARALLEL))
        alone = compare(dict(tiny, batch_size=1), args.steps, args.threads, args.rounds, ["tensorgrad-1", "numpy-1"])
        print(f"\nfixed cost of a step (n_embd {tiny['n_embd']}, block_size {tiny['block_size']}, one row per "
              f"process): {args.threads} processes: tensorgrad {split['tensorgrad']:.2f} ms, numpy "
              f"{split['numpy']:.2f} ms, the engine's own {split['tensorgrad'] - split['numpy']:.2f} ms a step; "
              f"one process: tensorgrad {alone['tensorgrad-1']:.2f} ms, numpy {alone['numpy-1']:.2f} ms, the "
              f"engine's own {alone['tensorgrad-1'] - alone['numpy-1']:.2f} ms", flush=True)

    if args.memory:
        print("\npeak resident memory of a 200-step training run (fresh process each):")
        for engine in ["tensorgrad", *peers]:
            print(f"  {engine:10s} {run_child(engine, CONFIG, 200, args.threads)[1]:6.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
