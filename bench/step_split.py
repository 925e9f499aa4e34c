"""Where one training step's time goes, tensorgrad's and the hand-written one's
(bench/numpy_step.py): matrix products, each op's other numpy work, gradient accumulation,
graph building, the Python between ops, and the optimizer.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/step_split.py [--rows 6] [--steps 30] [--processes 2]

One process on one BLAS thread trains the default model on --rows rows (6: what each of the
main job's 2 processes does with its half of the batch of 12): tensorgrad with the loop of your
own that docs/main-job.md shows, the hand-written step with its own. With --processes 2, each
engine splits a batch of 2 x --rows rows across 2 processes of one BLAS thread each, as the main job does
(tgtrain.parallel.DataParallel, and the hand-written step's own split); the table is then the
first process's step, with four rows more for what the split costs it: copying the
gradients the other process adds up into shared memory (tensorgrad only: the hand-written
step writes them there in the first place), adding up its group of the processes'
gradients (the hand-written step also takes the gradient's norm there; tensorgrad's is in
clip_grad_norm, the optimizer row), the copy of its group's weights and optimizer state
that lets a run survive a worker killed mid-update (tensorgrad only: tgtrain.parallel.KeptState),
and waiting for the other process's replies. Each moment of a step
is charged to the innermost timed region open then: each op's forward and its vjps (the
fused ops, and the primitives the model uses), make_op (graph building), backward's
gradient accumulation, the optimizer; what is left is the Python between them (module
calls, scopes, the backward loop). The matrix products (the GEMMs; vector products such
as ones @ g count as passes) are replayed alone after each step, with the step's shapes on
contiguous operands: what they cost at full BLAS speed; each op's row is its time less
its products' (so a product slowed by its operands' layout shows in its op's row). Timers
cost a little: the script prints the step's time without them too. Last, the step's MFU
(bench/gpt_step.py's, on one thread) and its bound: the MFU the step would reach if
everything but the replayed products took no time. Timings on a shared
machine drift: compare shares, not runs.
"""
import argparse
import collections
import importlib
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nn  # noqa: E402
import tgtrain  # noqa: E402
import numpy_step  # noqa: E402
import tensorgrad  # noqa: E402
from gpt_step import (CONFIG, GRAD_CLIP, OPTIMIZER, batches, cpu_ticks, gpt, limit_threads, matmul_rate,  # noqa: E402
                      numpy_trainer, step_flops, stolen_share, tensorgrad_trainer)
from nn import functional as F  # noqa: E402
from tensorgrad import autograd  # noqa: E402

# (row title, the regions it adds up, the op whose matrix products it excludes)
ROWS = [("matrix products (GEMMs, replayed alone)", (), None),
        ("linear: bias and its gradient", ("linear",), "linear"),
        ("layer_norm", ("layer_norm",), None),
        ("attention: mask, softmax, copies", ("scaled_dot_product_attention",), "attention"),
        ("gelu", ("gelu",), None),
        ("cross_entropy", ("cross_entropy",), None),
        ("embedding, residual adds, reshapes, slices", ("getitem", "add", "reshape", "transpose"), None),
        ("gradient accumulation (backward's +=, scatters)", ("accumulate",), None),
        ("graph building (make_op: nodes, vjp closures)", ("graph building",), None),
        ("Python between ops, and the rest", ("other",), None),
        ("optimizer (clip_grad_norm, AdamW)", ("optimizer",), None)]
# what splitting the batch across processes adds (--processes 2 and more)
DATA_PARALLEL_ROWS = [("parallel: gradients copied to shared memory", ("publish",), None),
                      ("parallel: adding up the processes' gradients", ("sum",), None),
                      ("parallel: the update's undo copy (KeptState)", ("keep",), None),
                      ("parallel: waiting for the other processes", ("waiting",), None)]


class Clock:
    """Exclusive time per region: each moment goes to the innermost region open then, or
    to "other" when none is."""

    def __init__(self):
        self.totals, self.stack, self.mark = collections.Counter(), ["other"], time.perf_counter()

    def enter(self, name):
        now = time.perf_counter()
        self.totals[self.stack[-1]] += now - self.mark
        self.stack.append(name)
        self.mark = now

    def leave(self):
        now = time.perf_counter()
        self.totals[self.stack.pop()] += now - self.mark
        self.mark = now

    def timed(self, name, function):
        def timed_function(*args, **kwargs):
            self.enter(name)
            try:
                return function(*args, **kwargs)
            finally:
                self.leave()
        return timed_function


def gemm_shapes(config, rows):
    """(op, left shape, right shape) of every matrix product of one step, forward and
    backward: each linear's x W, g Wᵀ and xᵀ g; attention's q kᵀ and W v, then Wᵀ g, g vᵀ,
    dL/ds k and dL/dsᵀ q."""
    C, T, nh = config["n_embd"], config["block_size"], config["n_head"]
    N, hs = rows * T, C // nh
    linears = [(C, 3 * C), (C, C), (C, 4 * C), (4 * C, C)] * config["n_layer"] + [(C, config["vocab_size"])]
    shapes = []
    for fan_in, fan_out in linears:
        shapes += [("linear", (N, fan_in), (fan_in, fan_out)), ("linear", (N, fan_out), (fan_out, fan_in)),
                   ("linear", (fan_in, N), (N, fan_out))]
    heads = (rows, nh)
    for _ in range(config["n_layer"]):
        shapes += [("attention", (*heads, T, hs), (*heads, hs, T)), ("attention", (*heads, T, T), (*heads, T, hs)),
                   ("attention", (*heads, T, T), (*heads, T, hs)), ("attention", (*heads, T, hs), (*heads, hs, T)),
                   ("attention", (*heads, T, T), (*heads, T, hs)), ("attention", (*heads, T, T), (*heads, T, hs))]
    return shapes


class Products:
    """The step's matrix products on arrays of their shapes: run() times each alone, in a
    step's order, adding into seconds[op]."""

    def __init__(self, config, rows):
        rng = np.random.default_rng(0)
        self.products = [(op, rng.standard_normal(a, np.float32), rng.standard_normal(b, np.float32))
                         for op, a, b in gemm_shapes(config, rows)]
        self.outs = [np.matmul(a, b) for _, a, b in self.products]
        self.seconds = collections.Counter()

    def run(self):
        for (op, a, b), out in zip(self.products, self.outs):
            start = time.perf_counter()
            np.matmul(a, b, out=out)
            self.seconds[op] += time.perf_counter() - start


def instrument_tensorgrad(clock):
    """Time every op the model uses, forward and vjps, make_op and backward's accumulation;
    and tgtrain.parallel's steps (the optimizer's too), for a data-parallel step. Call it before
    DataParallel forks its workers: they then time themselves as this process does, and
    run as fast (or as slowly)."""
    ops = [(F, "linear", "linear"), (F, "layer_norm", "layer_norm"), (F, "cross_entropy", "cross_entropy"),
           (nn.transformer, "scaled_dot_product_attention", "scaled_dot_product_attention"), (tensorgrad.Tensor, "gelu", "gelu"),
           (tensorgrad.Tensor, "__getitem__", "getitem"), (tensorgrad.Tensor, "__add__", "add"),
           (tensorgrad.Tensor, "reshape", "reshape"), (tensorgrad.Tensor, "transpose", "transpose")]
    for owner, attribute, op in ops:
        setattr(owner, attribute, clock.timed(op, getattr(owner, attribute)))
    ops_module = importlib.import_module("tensorgrad.tensor")   # (tensorgrad.tensor is also the function)
    make_op = ops_module.make_op

    def make_timed_op(op, data, inputs, vjps, *args, **kwargs):   # each vjp timed under its op's name
        vjps = clock.timed(op, vjps) if callable(vjps) else tuple(clock.timed(op, vjp) for vjp in vjps)
        return make_op(op, data, inputs, vjps, *args, **kwargs)
    ops_module.make_op = F.make_op = nn.transformer.make_op = clock.timed("graph building", make_timed_op)
    autograd.Accumulator.add = clock.timed("accumulate", autograd.Accumulator.add)
    parallel = tgtrain.parallel
    for attribute, region in [("_publish_grads", "publish"), ("_sum", "sum"), ("clip_grad_norm", "optimizer")]:
        setattr(parallel, attribute, clock.timed(region, getattr(parallel, attribute)))
    tgtrain.workers.receive = clock.timed("waiting", tgtrain.workers.receive)   # where the step waits for its workers
    parallel.KeptState.keep = clock.timed("keep", parallel.KeptState.keep)
    nn.optim.Optimizer.step = clock.timed("optimizer", nn.optim.Optimizer.step)


def tensorgrad_step(model, processes=1, clock=None):
    """The loop of your own (docs/main-job.md), its optimizer phase timed when a clock is
    given; with processes > 1,
    the main job's step, split across them by tgtrain.parallel (gpt_step.py's, whose optimizer
    instrument_tensorgrad times)."""
    if processes > 1:
        return tensorgrad_trainer(model, processes)[0]
    optimizer = nn.optim.AdamW(model.parameters(), **OPTIMIZER)

    def update():
        nn.optim.clip_grad_norm(model.parameters(), GRAD_CLIP)
        optimizer.step()
    if clock:
        update = clock.timed("optimizer", update)

    def step(x, y):
        optimizer.zero_grad()
        _, loss = model(x, y)
        loss.backward()
        update()
    return step


def instrument_numpy(clock, processes=1):
    """Time the hand-written step's layers (forward and backward under one name), its
    optimizer, and with processes > 1 its split: before the trainer forks its workers."""
    for function, op in [("linear", "linear"), ("linear_backward", "linear"), ("layer_norm", "layer_norm"),
                         ("layer_norm_backward", "layer_norm"), ("attention", "scaled_dot_product_attention"),
                         ("attention_backward", "scaled_dot_product_attention"), ("gelu", "gelu"),
                         ("gelu_backward", "gelu"), ("cross_entropy", "cross_entropy")]:
        setattr(numpy_step, function, clock.timed(op, getattr(numpy_step, function)))
    trainer = numpy_step.NumpyTrainer
    # _sum: with one process only the gradient's norm; with more, adding up the processes' too
    trainer._sum = clock.timed("optimizer" if processes == 1 else "sum", trainer._sum)
    trainer._update = clock.timed("optimizer", trainer._update)    # clip's scale and AdamW
    numpy_step.receive = clock.timed("waiting", numpy_step.receive)


def seconds_per_step(step, config, rows, steps, clock=None, warmup=3, processes=1):
    """Mean seconds per step on batches of rows x processes rows. With a clock: also
    {region: mean seconds per step} and {op: mean seconds of its matrix products on `rows`
    rows}, replayed in a region of their own after each step (so that the machine's
    drifting load hits both alike), or with processes > 1 after all the steps (the other
    processes would idle through each replay, and an idle core comes back slow)."""
    data = batches(dict(config, batch_size=rows * processes), warmup + steps)
    for x, y in data[:warmup]:
        step(x, y)
    products = Products(config, rows)
    if clock:
        clock.totals.clear()
        clock.mark = time.perf_counter()
    total = 0.0
    for x, y in data[warmup:]:
        start = time.perf_counter()
        step(x, y)
        total += time.perf_counter() - start
        if clock and processes == 1:
            clock.timed("replay", products.run)()
    if clock and processes > 1:
        for _ in range(steps):
            clock.timed("replay", products.run)()
    if not clock:
        return total / steps
    regions = {name: t / steps for name, t in clock.totals.items() if name != "replay"}
    return total / steps, regions, {op: t / steps for op, t in products.seconds.items()}


def split(rows, regions, gemms):
    """The rows' seconds: regions added up, each op's matrix products moved to the first row."""
    return [sum(gemms.values()) if not names else
            sum(regions.get(name, 0.0) for name in names) - (gemms[op] if op else 0.0)
            for _, names, op in rows]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=CONFIG["batch_size"] // 2,
                        help="rows of the batch (default 6: one of the main job's 2 processes' part)")
    parser.add_argument("--steps", type=int, default=30, help="timed steps (default 30)")
    parser.add_argument("--processes", type=int, default=1,
                        help="split each step across this many processes, as the main job (default 1)")
    args = parser.parse_args()
    processes = args.processes
    if processes < 1:
        parser.error(f"--processes must be at least 1, got {processes}")
    blas = limit_threads(1)
    tgtrain.memory.keep_freed_memory()
    print(f"numpy {np.__version__}, BLAS: {blas}")
    ticks = cpu_ticks()
    config = CONFIG
    rows = ROWS + (DATA_PARALLEL_ROWS if processes > 1 else [])
    # first without timers, then with them (instrumented before the workers fork)
    run = dict(config=config, rows=args.rows, steps=args.steps, processes=processes)
    plain = {"tensorgrad": seconds_per_step(tensorgrad_step(gpt(config), processes), **run),
             "numpy": seconds_per_step(numpy_trainer(gpt(config), processes)[0], **run)}
    found = {}
    clock = Clock()
    instrument_tensorgrad(clock)
    found["tensorgrad"] = seconds_per_step(tensorgrad_step(gpt(config), processes, clock), clock=clock, **run)
    clock = Clock()
    instrument_numpy(clock, processes)
    found["numpy"] = seconds_per_step(numpy_trainer(gpt(config), processes)[0], clock=clock, **run)

    where = ("one process" if processes == 1 else
             f"{processes} processes of {args.rows} rows each (the first process's step)")
    print(f"one training step of the nanoGPT CPU config on {args.rows * processes} rows, {where}, one BLAS "
          f"thread each; ms per step (mean of {args.steps})\n")
    print(f"{'':50s} {'tensorgrad':>16s} {'numpy by hand':>16s}")
    columns = {engine: split(rows, regions, gemms) for engine, (_, regions, gemms) in found.items()}
    for i, (title, _, _) in enumerate(rows):
        cells = [f"{1e3 * columns[e][i]:8.2f} {columns[e][i] / found[e][0]:6.1%}" for e in ("tensorgrad", "numpy")]
        print(f"{title:50s} {cells[0]:>16s} {cells[1]:>16s}")
    for title, figures in [("total, with the timers", {e: found[e][0] for e in found}),
                           ("total, without them", plain)]:
        print(f"{title:50s} {1e3 * figures['tensorgrad']:8.2f} {'':7s} {1e3 * figures['numpy']:8.2f}")
    print(f"{'tensorgrad / numpy (without timers)':50s} {plain['tensorgrad'] / plain['numpy']:8.2f}")
    # MFU on this process's rows and its one BLAS thread; "bound": were the products all it did
    flops, rate = step_flops(**dict(config, batch_size=args.rows)), matmul_rate() * 1e9
    for title, seconds in [("MFU (without timers)", plain), ("MFU bound: the matrix products alone",
                                                             {e: sum(found[e][2].values()) for e in found})]:
        print(f"{title:50s} {flops / seconds['tensorgrad'] / rate:8.0%} {'':7s} {flops / seconds['numpy'] / rate:8.0%}")
    print(f"(MFU: the step's matmul FLOPs a second over numpy's float32 matmul rate on one thread, {rate / 1e9:.0f} "
          f"GFLOP/s, measured now)")
    print(f"CPU time taken by the host (steal) during the timings: {stolen_share(ticks, cpu_ticks())}")


if __name__ == "__main__":
    main()
