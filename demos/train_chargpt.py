"""Train a character-level GPT on tensorgrad, the way nanoGPT trains shakespeare_char.

    python demos/train_chargpt.py                        # tiny shakespeare, nanoGPT's CPU configuration
    python demos/train_chargpt.py --data my.txt --max_iters 500
    python demos/train_chargpt.py --resume --max_iters 3000   # continue from --out
    python demos/sample_chargpt.py out/chargpt.safetensors --prompt "ROMEO:"
    python demos/export_gpt2.py out/chargpt.safetensors out/chargpt-gpt2   # for PyTorch / Hugging Face

Every eval_interval steps (and at the end) it prints `step N: train loss X, val loss Y`,
each the mean loss of eval_iters random batches, and writes the checkpoint --out; at the
end it prints the loss over the whole validation split and a sample. The loss log goes
beside the checkpoint (.csv, and .png when matplotlib is installed), and so does the
gradient health measured at each evaluation's step (.health.csv and .health.png, from
nn/health.py). Ctrl-C stops after the current step, writes the checkpoint and exits with
status 130; --resume continues from it exactly as if the run had never stopped (from an
.npz checkpoint of tensorgrad 0.1 too).
"""
import argparse
import csv
import math
import os
import signal
import sys
import time
from collections import namedtuple
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits
from tqdm import tqdm

import nn
from nn import data


def flag(default, help):
    return field(default=default, metadata={"help": help})


@dataclass
class Config:
    """The job's settings, one command-line flag each. The defaults are nanoGPT's CPU
    configuration for shakespeare_char (its README's "baby GPT" on a MacBook)."""
    # data
    data: str = flag("shakespeare", "'shakespeare' (downloaded once, then cached) or the path of a "
                                    "UTF-8 text file")
    # model
    n_layer: int = flag(4, "transformer blocks")
    n_head: int = flag(4, "attention heads per block")
    n_embd: int = flag(128, "embedding width (channels)")
    block_size: int = flag(64, "context length in characters")
    dropout: float = flag(0.0, "dropout probability in training")
    tie_weights: bool = flag(False, "the head reuses the token embedding's table, as GPT-2 and nanoGPT do "
                                    "(off by default: here the untied head reached the lower val loss)")
    # training
    batch_size: int = flag(12, "sequences per step")
    max_iters: int = flag(2000, "optimizer steps in all")
    lr: float = flag(1e-3, "peak learning rate (AdamW)")
    min_lr: float = flag(1e-4, "learning rate at the end of the cosine decay")
    warmup_iters: int = flag(100, "steps of linear warmup to lr")
    lr_decay_iters: int = flag(0, "step where the cosine decay reaches min_lr; 0 means max_iters (set "
                                  "it to the final length when a later --resume will extend this run)")
    beta1: float = flag(0.9, "AdamW beta1")
    beta2: float = flag(0.99, "AdamW beta2")
    weight_decay: float = flag(0.1, "AdamW weight decay (matrices and embeddings only)")
    grad_clip: float = flag(1.0, "clip the global gradient norm to this; 0 turns clipping off")
    seed: int = flag(1337, "seed of the initial weights, the batches and the samples")
    processes: int = flag(min(4, os.cpu_count() or 1),
                          "processes that share each batch and each evaluation (data parallel, each "
                          "multiplying matrices on one core); 1 runs the model on the whole batch "
                          "with numpy's own BLAS threads")
    # evaluation and output
    eval_interval: int = flag(250, "steps between evaluations (each also writes the checkpoint)")
    eval_iters: int = flag(20, "batches per split averaged at each evaluation")
    sample_every: int = flag(0, "steps between printed samples; 0 samples only at the end")
    out: str = flag("out/chargpt.safetensors", "checkpoint path; the loss log (.csv, .png) goes beside it")
    resume: bool = flag(False, "continue from the checkpoint at --out (flags given now override "
                               "its settings, except the model's shape)")


MODEL_FIELDS = ("n_layer", "n_head", "n_embd", "block_size", "dropout", "tie_weights")   # fixed once a model exists
SAMPLE_CHARS = 200   # length of the samples printed while training
Outputs = namedtuple("Outputs", "checkpoint loss_csv loss_png health_csv health_png")


def outputs(out):
    """Every file the job writes, named after --out: for out/chargpt.safetensors, the checkpoint
    itself, the loss log out/chargpt.csv and .png, the gradient health out/chargpt.health.csv
    and .health.png."""
    out = Path(out)
    return Outputs(out, out.with_suffix(".csv"), out.with_suffix(".png"), out.with_suffix(".health.csv"),
                   out.with_suffix(".health.png"))


def parse_config(argv=None):
    """The Config from the command line, plus the names of the flags actually given (a
    resumed run takes the rest from its checkpoint)."""
    parser = argparse.ArgumentParser(description=__doc__, argument_default=argparse.SUPPRESS,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in fields(Config):
        help = f"{f.metadata['help']} (default: {f.default})"
        if f.type is bool:
            parser.add_argument(f"--{f.name}", action="store_true", help=help)
        else:
            parser.add_argument(f"--{f.name}", type=f.type, metavar=f.type.__name__.upper(), help=help)
    given = vars(parser.parse_args(argv))   # only the flags on the command line (SUPPRESS)
    config = Config(**given)
    positive = ("n_layer", "n_head", "n_embd", "block_size", "batch_size", "eval_interval", "eval_iters", "processes")
    problems = [f"--{name} must be positive" for name in positive if getattr(config, name) <= 0]
    if config.n_embd % config.n_head:
        problems.append(f"--n_embd {config.n_embd} must be divisible by --n_head {config.n_head}")
    if not 0 <= config.dropout < 1:
        problems.append(f"--dropout must be in [0, 1), got {config.dropout}")
    if problems:
        parser.error("; ".join(problems))
    return config, given


class Interrupt:
    """Ctrl-C (SIGINT) only raises a flag, so the loop finishes its step and stops with a
    checkpoint. A second Ctrl-C gets Python's default behaviour: quit at once."""

    def __init__(self):
        self.requested = False
        signal.signal(signal.SIGINT, self)

    def __call__(self, signum, frame):
        self.requested = True
        signal.signal(signal.SIGINT, signal.default_int_handler)


def load_checkpoint(path):
    """(model, tokenizer, meta) from a checkpoint written by this script (a .safetensors
    file, or an .npz of tensorgrad 0.1)."""
    if not Path(path).exists():
        raise nn.CheckpointError(f"{path}: no such checkpoint; train one with demos/train_chargpt.py "
                                 f"(without --resume)")
    state, meta = nn.load(path)
    if "model_config" not in meta or "tokenizer" not in meta:
        raise nn.CheckpointError(f"{path}: has no model config or tokenizer: not a "
                                 f"train_chargpt.py checkpoint")
    model = nn.GPT(**{"tie_weights": False, **meta["model_config"]})   # 0.1 had no tying
    model.load_state_dict(state)
    return model, data.CharTokenizer.from_chars(meta["tokenizer"]), meta


def sample(model, tokenizer, seed, length=SAMPLE_CHARS):
    """`length` characters that follow the smallest character (a newline in most texts).
    Its own seeded generator: sampling never moves the training's random streams."""
    ids = model.generate(np.zeros((1, 1), dtype=np.int64), length, temperature=0.8, top_k=200, seed=seed)
    return tokenizer.decode(ids[0])


def estimate_loss(parallel, corpus, config):
    """Mean loss of eval_iters batches of each split, in eval mode without a graph, each
    batch split across the processes. The batches come from a generator reseeded each
    time: every evaluation sees the same batches (so two evaluations differ only by the
    model), and the training's stream of batches stays untouched (so a resumed run matches
    an unbroken one)."""
    rng = np.random.default_rng([config.seed, 1])
    parallel.model.eval()
    losses = {}
    for split in ("train", "val"):
        batches = (data.get_batch(getattr(corpus, split), config.block_size, config.batch_size, rng)
                   for _ in range(config.eval_iters))
        losses[split] = float(np.mean([parallel.loss(x, y) for x, y in batches]))
    parallel.model.train()
    return losses


def full_split_loss(parallel, split, block_size, batch_size, interrupt):
    """Mean cross-entropy of all len(split) - 1 next-token predictions of `split`, each
    predicted once from the tokens before it in its window (data.whole_split_batches), as
    in sampling from scratch. Returns None if Ctrl-C interrupts it."""
    total = 0.0   # summed over predictions in float64: no drift over 1e5 terms
    parallel.model.eval()
    for xb, yb in tqdm(data.whole_split_batches(split, block_size, batch_size),
                       desc="full val split", leave=False):
        if interrupt.requested:
            break
        total += parallel.loss(xb, yb) * xb.size   # the batch's mean loss times its predictions
    parallel.model.train()
    return None if interrupt.requested else total / (len(split) - 1)


def fail(message):
    sys.exit(f"train_chargpt.py: error: {message}")


def main(argv=None):
    config, given = parse_config(argv)
    out = Path(config.out)
    nn.memory.keep_freed_memory()   # each step's graph is freed whole: reuse it, don't re-fault it

    # a resumed run takes its model, tokenizer and settings from the checkpoint
    if config.resume:
        model, tokenizer, meta = load_checkpoint(out)
        shape = {name: model.config[name] for name in MODEL_FIELDS}
        changed = [f"--{name} {given[name]} (the checkpoint has {shape[name]})"
                   for name in MODEL_FIELDS if name in given and given[name] != shape[name]]
        if changed:
            fail(f"--resume cannot change the model's shape: {', '.join(changed)}; drop those flags")
        known = {f.name for f in fields(Config)}   # a setting an older version had is dropped
        saved = {name: value for name, value in meta["config"].items() if name in known}
        config = Config(**{**saved, **shape, **given, "out": str(out)})

    text, about = data.load_corpus(config.data)
    print(f"corpus: {about}")
    corpus = data.prepare(text, config.block_size, name=config.data)
    print(corpus.summary())

    batch_rng = np.random.default_rng([config.seed, 0])   # a stream of its own, apart from nn's
    if config.resume:
        if corpus.tokenizer != tokenizer:
            fail(f"--resume: the characters of {config.data} differ from the checkpoint's vocabulary, "
                 f"so the ids would mean other characters; train a new model on it instead")
    else:
        nn.manual_seed(config.seed)   # the initial weights, then dropout, draw from nn's generator
        model = nn.GPT(corpus.tokenizer.vocab_size, config.block_size, config.n_layer, config.n_head,
                       config.n_embd, config.dropout, tie_weights=config.tie_weights)
    optimizer = nn.optim.AdamW(model.parameters(), lr=config.lr, betas=(config.beta1, config.beta2),
                               weight_decay=config.weight_decay)
    if config.processes > 1:
        threadpool_limits(1)   # the processes are the parallelism: one BLAS core each, not two apiece
    # forks its workers now; it also splits each optimizer update across the processes
    parallel = nn.parallel.DataParallel(model, config.processes, optimizer)
    if config.resume:   # everything that decides the next step, as the checkpoint left it
        nn.load(out, optimizer)   # a second read: the moments need the optimizer to exist
        nn.rng.set_state(meta["rng"])
        batch_rng.bit_generator.state = meta["batch_rng"]
        step, history, best_val_loss = meta["step"], meta["history"], meta["best_val_loss"]
    else:
        step, history, best_val_loss = 0, [], None
    print(f"model: {model.num_parameters():,} parameters (n_layer {config.n_layer}, n_head {config.n_head}, "
          f"n_embd {config.n_embd}, block_size {config.block_size})"
          + (f"; resuming from {out} at step {step}" if config.resume else ""))
    health = nn.health.HealthLog(model, outputs(out).health_csv, resume_step=step if config.resume else None)

    decay_iters = config.lr_decay_iters or config.max_iters

    def evaluate(step):
        nonlocal best_val_loss
        if history and history[-1][0] == step:   # a resumed run: its checkpoint did this one
            return
        losses = estimate_loss(parallel, corpus, config)
        lr = nn.optim.cosine_lr(step, config.lr, config.min_lr, config.warmup_iters, decay_iters)
        history.append([step, losses["train"], losses["val"], lr])
        best_val_loss = min(losses["val"], best_val_loss or math.inf)
        tqdm.write(f"step {step}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")

    def save(step, **extra):
        nn.save(out, model, optimizer, model_config=model.config, config=asdict(config),
                tokenizer=corpus.tokenizer.chars, step=step, history=history,
                val_loss=history[-1][2] if history else None, best_val_loss=best_val_loss,
                rng=nn.rng.get_state(), batch_rng=batch_rng.bit_generator.state, **extra)
        write_csv(history, out)

    interrupt = Interrupt()
    started, train_seconds, first_step = time.perf_counter(), 0.0, step
    bar = tqdm(total=config.max_iters, initial=step, unit="iter", dynamic_ncols=True)
    while step < config.max_iters and not interrupt.requested:
        if step % config.eval_interval == 0:
            evaluate(step)
            save(step)
        if config.sample_every and step % config.sample_every == 0 and step > 0:
            tqdm.write(f"--- sample at step {step} ---\n{sample(model, corpus.tokenizer, config.seed)}\n---")

        # one optimizer step, as nanoGPT takes it; forward_backward is `_, loss = model(x, y);
        # loss.backward()` and step is `clip_grad_norm(...); optimizer.step()`, each split
        # across --processes (nn/parallel.py)
        t0 = time.perf_counter()
        optimizer.lr = nn.optim.cosine_lr(step, config.lr, config.min_lr, config.warmup_iters, decay_iters)
        x, y = data.get_batch(corpus.train, config.block_size, config.batch_size, batch_rng)
        optimizer.zero_grad()
        loss = parallel.forward_backward(x, y)
        watch = health.measure(step, x) if step % config.eval_interval == 0 else nullcontext()
        with watch:   # at each evaluation's step: gradients and activations, then the update's size
            parallel.step(max_norm=config.grad_clip or None)   # 0: no clipping
        step += 1
        dt = time.perf_counter() - t0
        train_seconds += dt
        bar.update()
        bar.set_postfix_str(f"loss {loss:.4f}, {dt * 1000:.0f} ms/iter, "
                            f"{config.batch_size * config.block_size / dt:,.0f} tokens/s")
    bar.close()

    full = None
    if not interrupt.requested:
        evaluate(step)
        full = full_split_loss(parallel, corpus.val, config.block_size, config.batch_size, interrupt)
    if full is None:   # Ctrl-C, in training or in the final evaluation
        save(step)
        plot_losses(history, out)
        plot_health(health, outputs(out).health_png)
        print(f"interrupted at step {step}: checkpoint written to {out}; continue with --resume")
        sys.exit(130)
    print(f"final val loss (full split): {full:.4f}")
    tokens = (step - first_step) * config.batch_size * config.block_size
    workers = [process.pid for _, process in parallel.workers]
    print(f"training: {train_seconds:.1f} s in {step - first_step} steps, {tokens / max(train_seconds, 1e-9):,.0f} "
          f"tokens/s; wall time with evaluations {time.perf_counter() - started:.1f} s; peak memory "
          f"{nn.memory.peak_resident_mib(workers):.0f} MiB ({1 + len(workers)} process(es) added up)")
    save(step, full_val_loss=full)
    plot_losses(history, out)
    plot_health(health, outputs(out).health_png)
    print(f"gradient health: {health.seconds:.2f} s measuring, writing and drawing, "
          f"{health.seconds / max(train_seconds, 1e-9):.1%} of the training time")
    print(f"checkpoint: {out}")
    print(f"--- sample ---\n{sample(model, corpus.tokenizer, config.seed)}\n---")


def write_csv(history, out):
    """The evaluations so far, beside the checkpoint: out/chargpt.csv."""
    with open(outputs(out).loss_csv, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["step", "train_loss", "val_loss", "lr"])
        writer.writerows(history)


def plot_losses(history, out):
    """The loss curve beside the checkpoint (out/chargpt.png), when matplotlib is installed;
    without it, one line says that neither PNG is drawn (plot_health skips its own quietly)."""
    try:
        import matplotlib
        matplotlib.use("Agg")   # files only: no window, no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"no {outputs(out).loss_png.name} or {outputs(out).health_png.name}: matplotlib is not installed "
              '(pip install ".[plots]" draws them; the .csv logs are written)')
        return
    steps, train, val, _ = zip(*history)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(steps, train, label="train")
    ax.plot(steps, val, label="val")
    ax.set(xlabel="step", ylabel="loss", title=f"{out.name}: mean loss of the eval batches")
    ax.legend()
    fig.savefig(outputs(out).loss_png, dpi=100, bbox_inches="tight")
    plt.close(fig)


def plot_health(health, path):
    """The gradient health beside the checkpoint (out/chargpt.health.png), when matplotlib is
    installed, in four panels: the update ratio of each weight matrix over time against the
    rule of thumb 1e-3; the gradient norm of each layer at each measured step; per block, the
    std of the residual stream and the share of GELU inputs in the flat tails, over time.
    Its time counts in health.seconds, the cost of watching."""
    started = time.perf_counter()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    series = {}   # name (a parameter's or a block's) -> its rows, in step order
    for row in health.rows:
        series.setdefault(row["name"], []).append(row)
    if not series:   # stopped before the first measurement
        return
    matrices = [name for name, shape in health.shapes.items() if len(shape) >= 2]
    blocks = [name for name in series if name not in health.shapes]
    layers = list(dict.fromkeys(layer_of(name) for name in health.shapes))
    steps = [row["step"] for row in series[matrices[0]]]

    with plt.rc_context({"font.size": 14, "legend.fontsize": 12}):   # readable on a slide
        fig, ((ratio_ax, norm_ax), (std_ax, tail_ax)) = plt.subplots(2, 2, figsize=(16, 9), layout="constrained")
        fig.suptitle(f"{path.name}: gradient health at each evaluation's step")

        # the matrices only: a bias or a LayerNorm starts at 0s or 1s, whose spread is 0
        colours = dict(zip(dict.fromkeys(map(kind_of, matrices)), plt.cm.tab10.colors))
        for name in matrices:
            ratios = np.array([row["update_ratio"] for row in series[name]])
            with np.errstate(divide="ignore"):   # a matrix left without a gradient: log10(0), not drawn
                ratio_ax.plot(steps, np.log10(ratios), marker="o", markersize=4, color=colours[kind_of(name)])
        for kind, colour in colours.items():
            ratio_ax.plot([], [], color=colour, label=kind)
        ratio_ax.axhline(-3, color="black", linestyle="--", label="rule of thumb: -3")
        ratio_ax.set(xlabel="step", ylabel="log10(update std / weight std)",
                     title="update ratio of each weight matrix (a line per block)")
        ratio_ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1))

        cmap = plt.cm.viridis
        for i, step in enumerate(steps):   # each layer's norm: sqrt of its parameters' squared norms
            squares = dict.fromkeys(layers, 0.0)
            for name in health.shapes:
                squares[layer_of(name)] += (series[name][i]["grad_norm"] or 0.0) ** 2
            norm_ax.plot(layers, np.sqrt(list(squares.values())), marker="o",
                         color=cmap(i / max(1, len(steps) - 1)))
        norm_ax.set(yscale="log", ylabel="gradient norm (before clipping)", title="gradient norm of each layer")
        norm_ax.tick_params(axis="x", labelrotation=30)
        colourbar = fig.colorbar(plt.cm.ScalarMappable(matplotlib.colors.Normalize(steps[0], steps[-1]), cmap),
                                 ax=norm_ax)
        colourbar.set_label("step")

        depth = plt.cm.plasma
        for j, block in enumerate(blocks):
            colour = depth(j / max(1, len(blocks)))
            std_ax.plot(steps, [row["residual_std"] for row in series[block]], marker="o", color=colour,
                        label=f"block {block}")
            tail_ax.plot(steps, [100 * row["gelu_tail_fraction"] for row in series[block]], marker="o",
                         color=colour, label=f"block {block}")
        std_ax.set(xlabel="step", ylabel="std", title="residual stream after each block")
        tail_ax.set(xlabel="step", ylabel="% of inputs", ylim=(0, None),
                    title=f"GELU inputs in the flat tails, |x| > {nn.health.GELU_TAIL:g}")
        std_ax.legend()
        tail_ax.legend()
        fig.savefig(path, dpi=120)   # 1920 x 1080 px
    plt.close(fig)
    health.seconds += time.perf_counter() - started


def layer_of(name):
    """The layer a parameter belongs to: "h.2" for "h.2.attn.qkv.weight", "tok_emb" for
    "tok_emb.weight"."""
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "h" else parts[0]


def kind_of(name):
    """A parameter's name without its block: "attn.qkv.weight" for "h.2.attn.qkv.weight"."""
    return name.split(".", 2)[2] if name.startswith("h.") else name


if __name__ == "__main__":
    try:
        main()
    except (data.DataError, nn.CheckpointError, OSError) as error:   # OSError: e.g. --out unwritable
        fail(error)
    except KeyboardInterrupt:   # before the loop started, or a second Ctrl-C
        print("train_chargpt.py: interrupted; no checkpoint written this time", file=sys.stderr)
        sys.exit(130)
