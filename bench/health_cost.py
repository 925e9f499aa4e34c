"""What watching the gradient health costs demos/train_chargpt.py, measured against its own step.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/health_cost.py [--rounds 100]

The default job's step (nanoGPT's CPU model, batch split across 2 processes, clip, AdamW)
runs in one process, alternately without and with tgtrain.health's measurement around the
update (a forward of the batch without a graph, the gradient norms, a copy of the weights,
the update ratios and the CSV rewritten), so drifting machine load hits both alike. Then
the health picture is drawn once, as the job draws it at the end. The cost at the default
settings: 8 measurements (steps 0, 250, ..., 1750) and one picture over 2000 steps.
"""
import argparse
import os
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "demos")]
import nn  # noqa: E402
import tgtrain  # noqa: E402
from gpt_step import CONFIG, GRAD_CLIP, OPTIMIZER  # noqa: E402
from tgtrain.flags import Config  # noqa: E402
from tgtrain.health import plot_health  # noqa: E402

STEPS, MEASURED = Config.max_iters, -(-Config.max_iters // Config.eval_interval)   # 2000 steps, 8 measured


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=100, help="pairs of steps, one plain and one measured")
    parser.add_argument("--processes", type=int, default=Config.processes, help="as train_chargpt's --processes")
    args = parser.parse_args()

    config = dict(CONFIG)
    batch_size, vocab_size = config.pop("batch_size"), config["vocab_size"]
    nn.manual_seed(0)
    model = nn.GPT(**config)
    optimizer = nn.optim.AdamW(model.parameters(), **OPTIMIZER)
    if args.processes > 1:
        threadpool_limits(1)
    parallel = tgtrain.parallel.DataParallel(model, args.processes, optimizer)
    folder = tempfile.mkdtemp()
    health = tgtrain.health.HealthLog(model, os.path.join(folder, "bench.health.csv"))
    per_step = len(health.shapes) + config["n_layer"]   # rows: one per parameter and block
    rng = np.random.default_rng(0)
    seconds = {False: [], True: []}
    for i in range(args.rounds):
        for measured in (False, True) if i % 2 else (True, False):
            x, y = rng.integers(0, vocab_size, (2, batch_size, config["block_size"]))
            health.rows = health.rows[-(MEASURED - 1) * per_step:]   # the CSV stays the size of the job's
            start = time.perf_counter()
            optimizer.zero_grad()
            parallel.forward_backward(x, y)
            with health.measure(i, x) if measured else nullcontext():
                parallel.step(max_norm=GRAD_CLIP)
            seconds[measured].append(time.perf_counter() - start)
    parallel.close()
    step, watched = np.median(seconds[False]), np.median(seconds[True])
    try:   # imported already when the job draws: it drew the loss picture first
        import matplotlib.pyplot  # noqa: F401
    except ImportError:
        print("(matplotlib is not installed: the picture is not drawn and costs nothing)")
    start = time.perf_counter()
    plot_health(health, Path(folder) / "bench.health.png")
    drawing = time.perf_counter() - start

    measuring = watched - step
    total = MEASURED * measuring + drawing
    print(f"a step: {step * 1000:.1f} ms; with the measurement: {watched * 1000:.1f} ms (median of {args.rounds} "
          f"each, alternating), so one measurement costs {measuring / step:.2f} of a step")
    print(f"drawing the picture: {drawing:.2f} s = {drawing / step:.0f} steps")
    print(f"at the default settings ({MEASURED} measurements and one picture in {STEPS} steps): "
          f"{total / (STEPS * step):.2%} of the training time ({MEASURED * measuring / (STEPS * step):.2%} "
          f"measuring, {drawing / (STEPS * step):.2%} drawing)")


if __name__ == "__main__":
    main()
