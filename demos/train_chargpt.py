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
status 130 (SIGTERM: the same, 143); --resume continues from it exactly as if the run had
never stopped (from an .npz checkpoint of tensorgrad 0.1 too).

Nothing is lost (README's reliability paragraph says how each is tested):
- every flag is checked before anything runs (a usage error, exit status 2);
- the outputs, all named after --out, may not be the corpus or each other; a new run does not
  replace existing files without --overwrite; a second run on a busy --out is refused, naming
  the pid of the run that holds its lock (claim_outputs);
- a loss or gradient norm that is nan or inf stops the run before the update, exit status 3,
  and the checkpoint on disk stays the last finite one;
- a worker process that dies: the state of the last completed step is saved, and the message
  says which worker died and how; the workers never outlive this process (nn/parallel.py);
- every file is written to a temporary name and renamed (nn/atomic.py), and the temporary
  files a killed run left are removed at the next start;
- with its output going to a file, no progress bar: one line every --log_interval steps.
"""
import argparse
import csv
import io
import math
import os
import signal
import sys
import time
from collections import namedtuple
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits
from tqdm import tqdm

import nn
from nn import data
from _common import COUNT, FRACTION, NON_NEGATIVE, POSITIVE, POSITIVE_COUNT, SEED   # demos/ is on the path


def flag(default, help, kind=None):
    """A Config field: its default, its --help text and the kind of value it takes (an argparse
    type from demos/_common.py that refuses the rest; None: any value of the field's type)."""
    return field(default=default, metadata={"help": help, "kind": kind})


@dataclass
class Config:
    """The job's settings, one command-line flag each. The defaults are nanoGPT's CPU
    configuration for shakespeare_char (its README's "baby GPT" on a MacBook)."""
    # data
    data: str = flag("shakespeare", "'shakespeare' (downloaded once, then cached) or the path of a "
                                    "UTF-8 text file")
    # model
    n_layer: int = flag(4, "transformer blocks", POSITIVE_COUNT)
    n_head: int = flag(4, "attention heads per block (they split n_embd)", POSITIVE_COUNT)
    n_embd: int = flag(128, "embedding width (channels)", POSITIVE_COUNT)
    block_size: int = flag(64, "context length in characters", POSITIVE_COUNT)
    dropout: float = flag(0.0, "dropout probability in training", FRACTION)
    tie_weights: bool = flag(False, "the head reuses the token embedding's table, as GPT-2 and nanoGPT do "
                                    "(off by default: here the untied head reached the lower val loss)")
    # training
    batch_size: int = flag(12, "sequences per step", POSITIVE_COUNT)
    max_iters: int = flag(2000, "optimizer steps in all", COUNT)
    lr: float = flag(1e-3, "peak learning rate (AdamW)", POSITIVE)
    min_lr: float = flag(1e-4, "learning rate at the end of the cosine decay", NON_NEGATIVE)
    warmup_iters: int = flag(100, "steps of linear warmup to lr", COUNT)
    lr_decay_iters: int = flag(0, "step where the cosine decay reaches min_lr; 0 means max_iters (set "
                                  "it to the final length when a later --resume will extend this run)", COUNT)
    beta1: float = flag(0.9, "AdamW beta1", FRACTION)
    beta2: float = flag(0.99, "AdamW beta2", FRACTION)
    weight_decay: float = flag(0.1, "AdamW weight decay (matrices and embeddings only)", NON_NEGATIVE)
    grad_clip: float = flag(1.0, "clip the global gradient norm to this; 0 turns clipping off", NON_NEGATIVE)
    seed: int = flag(1337, "seed of the initial weights, the batches and the samples", SEED)
    processes: int = flag(min(4, os.cpu_count() or 1),
                          "processes that share each batch and each evaluation (data parallel, each "
                          "multiplying matrices on one core); 1 runs the model on the whole batch "
                          "with numpy's own BLAS threads", POSITIVE_COUNT)
    # evaluation and output
    eval_interval: int = flag(250, "steps between evaluations (each also writes the checkpoint)", POSITIVE_COUNT)
    eval_iters: int = flag(20, "batches per split averaged at each evaluation", POSITIVE_COUNT)
    log_interval: int = flag(10, "steps between the lines `iter N: loss X, ...` printed instead of the progress "
                                 "bar when the output goes to a file or a pipe", POSITIVE_COUNT)
    sample_every: int = flag(0, "steps between printed samples; 0 samples only at the end", COUNT)
    out: str = flag("out/chargpt.safetensors", "checkpoint path; the loss log (.csv, .png) and the gradient "
                                               "health (.health.csv, .health.png) go beside it")
    resume: bool = flag(False, "continue from the checkpoint at --out (flags given now override "
                               "its settings, except the model's shape)")
    overwrite: bool = flag(False, "start a new run even where --out already holds a checkpoint (or its logs), "
                                  "replacing them")


MODEL_FIELDS = ("n_layer", "n_head", "n_embd", "block_size", "dropout", "tie_weights")   # fixed once a model exists
RUN_STATE = ("config", "step", "history", "best_val_loss", "rng", "batch_rng")   # what --resume reads
SAMPLE_CHARS = 200   # length of the samples printed while training
Outputs = namedtuple("Outputs", "checkpoint loss_csv loss_png health_csv health_png")
DESCRIBED = Outputs("checkpoint", "loss log", "loss plot", "gradient health log", "gradient health plot")


def outputs(out):
    """Every file the job writes, named after --out: for out/chargpt.safetensors, the checkpoint
    itself, the loss log out/chargpt.csv and .png, the gradient health out/chargpt.health.csv
    and .health.png. (Its lock, out/chargpt.safetensors.lock, lives only while the run does.)"""
    out = Path(out)
    return Outputs(out, out.with_suffix(".csv"), out.with_suffix(".png"), out.with_suffix(".health.csv"),
                   out.with_suffix(".health.png"))


def described(files):
    """{"checkpoint": path, "loss log": path, ...}: the outputs by what they are, for messages."""
    return dict(zip(DESCRIBED, files))


def parse_config(argv=None):
    """The Config from the command line, plus the names of the flags actually given (a
    resumed run takes the rest from its checkpoint)."""
    parser = argparse.ArgumentParser(description=__doc__, argument_default=argparse.SUPPRESS,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in fields(Config):
        help = f"{f.metadata['help']} (default: {f.default})"
        if f.type is bool:
            parser.add_argument(f"--{f.name}", action="store_true", help=help)
        else:   # each value is checked as it is read: argparse refuses the rest (exit status 2)
            parser.add_argument(f"--{f.name}", type=f.metadata["kind"] or f.type, metavar=f.type.__name__.upper(),
                                help=help)
    given = vars(parser.parse_args(argv))   # only the flags on the command line (SUPPRESS)
    config = Config(**given)
    if config.n_embd % config.n_head:
        parser.error(f"--n_embd {config.n_embd} must be divisible by --n_head {config.n_head}")
    if config.resume and config.overwrite:
        parser.error("--resume continues the checkpoint at --out and --overwrite replaces it: pass one of them")
    if Path(config.out).is_dir():
        parser.error(f"--out {config.out} is a folder: give the checkpoint's file name, e.g. "
                     f"{Path(config.out) / 'chargpt.safetensors'}")
    try:   # --out names every output: they must be files of their own
        nn.outputs.check_clashes(described(outputs(config.out)), {})
    except nn.outputs.OutputError as error:
        parser.error(f"--out {config.out}: {error}; name the checkpoint with a suffix of its own, "
                     f"e.g. {Path(config.out).with_suffix('.safetensors')}")
    return config, given


@contextmanager
def claim_outputs(config):
    """Everything the outputs need before step 0, held while the run writes them: none of them
    is the corpus (the same file under another name included: a symlink, a hard link); a new
    run replaces no existing file unless --overwrite; no other run writes them at once (a lock
    naming this run's pid, out/chargpt.safetensors.lock, released however the run ends). Then
    it removes the temporary files a killed run left in the folder (nn/atomic.py)."""
    out, files = Path(config.out), outputs(config.out)
    try:
        nn.outputs.check_clashes(described(files), {"corpus": data.corpus_file(config.data)})
    except nn.outputs.OutputError as error:
        fail(f"--out {out} --data {config.data}: {error}; choose another --out", status=2)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        lock = nn.outputs.RunLock(f"{out}.lock")
    except nn.outputs.Busy as busy:
        fail(f"--out {out} is busy: {busy}; wait for that run to end, or choose another --out")
    with lock:
        existing = [str(path) for path in files if path.exists()]
        if existing and not (config.resume or config.overwrite):
            fail(f"{out} already holds a checkpoint: pass --resume to continue it, or --overwrite to start over "
                 "and replace it and its logs" if out.exists() else
                 f"{', '.join(existing)} already exist(s) and a new run would replace them: pass --overwrite, "
                 "or choose another --out", status=2)
        for path in nn.atomic.remove_stale_temporaries(out.parent):
            print(f"removed {path}, a temporary file left by a run that was killed while writing")
        yield


class Interrupt:
    """Ctrl-C (SIGINT) and SIGTERM only raise a flag, so the loop finishes its step and stops
    with a checkpoint, then exits with 128 + the signal's number (130, 143), as a shell
    reports a process that signal ended. A second one gets the default behaviour: quit at once."""

    def __init__(self):
        self.signal = None
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self)

    @property
    def requested(self):
        return self.signal is not None

    def __call__(self, signum, frame):
        self.signal = signal.Signals(signum)
        signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)


class NonFinite(Exception):
    """A loss or gradient norm that is nan or inf: the run stops before it reaches the weights
    (exit status 3)."""


def load_checkpoint(path):
    """(model, tokenizer, meta) from a checkpoint written by this script (a .safetensors
    file, or an .npz of tensorgrad 0.1), its metadata and every tensor checked against the
    model before anything is built (nn.checkpoint.load_gpt)."""
    if not Path(path).exists():
        raise nn.CheckpointError(f"{path}: no such checkpoint; train one with demos/train_chargpt.py "
                                 f"(without --resume)")
    return nn.checkpoint.load_gpt(path)


def resumed_config(config, given, checkpoint):
    """The Config of a resumed run: the checkpoint's settings, overridden by the flags given
    now (except the model's shape, which the checkpoint fixes)."""
    path, (model, _, meta) = config.out, checkpoint
    missing = [key for key in RUN_STATE if key not in meta]
    if missing:
        raise nn.CheckpointError(f"{path}: cannot resume from it: its metadata lacks {', '.join(missing)} (it was "
                                 "not written by train_chargpt.py; sample from it, or train a new model)")
    shape = {name: model.config[name] for name in MODEL_FIELDS}
    changed = [f"--{name} {given[name]} (the checkpoint has {shape[name]})"
               for name in MODEL_FIELDS if name in given and given[name] != shape[name]]
    if changed:
        fail(f"--resume cannot change the model's shape: {', '.join(changed)}; drop those flags")
    known = {f.name for f in fields(Config)}   # a setting an older version had is dropped
    saved = {name: value for name, value in meta["config"].items() if name in known}
    return Config(**{**saved, **shape, **given, "out": path, "overwrite": False})


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
                       desc="full val split", leave=False, disable=not on_a_terminal()):
        if interrupt.requested:
            break
        total += parallel.loss(xb, yb) * xb.size   # the batch's mean loss times its predictions
    parallel.model.train()
    return None if interrupt.requested else total / (len(split) - 1)


def on_a_terminal():
    """Whether the output is watched live: the progress bar redraws itself, which a log file
    would keep as thousands of lines."""
    return sys.stdout.isatty() and sys.stderr.isatty()


def fail(message, status=1):
    """Stop with one line on stderr and an exit status: 2 for bad flags (as argparse), 1 else."""
    print(f"train_chargpt.py: error: {message}", file=sys.stderr)
    sys.exit(status)


def main(argv=None):
    config, given = parse_config(argv)
    nn.memory.keep_freed_memory()   # each step's graph is freed whole: reuse it, don't re-fault it
    checkpoint = None
    if config.resume:   # a resumed run takes its model, tokenizer and settings from the checkpoint
        checkpoint = load_checkpoint(config.out)   # (model, tokenizer, meta)
        config = resumed_config(config, given, checkpoint)
    with claim_outputs(config):
        train(config, checkpoint)


def train(config, checkpoint=None):
    """The run, from the corpus to the final checkpoint and sample; `checkpoint` (model,
    tokenizer, meta), when given, is the run it continues."""
    out = Path(config.out)
    text, about = data.load_corpus(config.data)
    print(f"corpus: {about}")
    corpus = data.prepare(text, config.block_size, name=config.data)
    print(corpus.summary())

    batch_rng = np.random.default_rng([config.seed, 0])   # a stream of its own, apart from nn's
    if checkpoint:
        model, tokenizer, meta = checkpoint
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
    if checkpoint:   # everything that decides the next step, as the checkpoint left it
        nn.load(out, optimizer)   # a second read: the moments need the optimizer to exist
        try:
            nn.rng.set_state(meta["rng"])
            batch_rng.bit_generator.state = meta["batch_rng"]
        except (TypeError, ValueError, KeyError) as error:
            raise nn.CheckpointError(f"{out}: its random generators' states are damaged ({error})") from None
        step, history, best_val_loss = meta["step"], meta["history"], meta["best_val_loss"]
    else:
        step, history, best_val_loss = 0, [], None
    saved_step = step if checkpoint else None   # the step the checkpoint on disk holds
    print(f"model: {model.num_parameters():,} parameters (n_layer {config.n_layer}, n_head {config.n_head}, "
          f"n_embd {config.n_embd}, block_size {config.block_size})"
          + (f"; resuming from {out} at step {step}" if checkpoint else ""))
    try:
        health = nn.health.HealthLog(model, outputs(out).health_csv, resume_step=step if checkpoint else None)
    except ValueError as error:   # a damaged log of an earlier run: it is the user's to keep or drop
        fail(f"{error}; move it away to start a new gradient health log")

    decay_iters = config.lr_decay_iters or config.max_iters

    def require_finite(step, **values):
        """Stop (NonFinite) if any of the values is nan or inf, before it reaches the weights."""
        bad = [f"{name.replace('_', ' ')} is {value}" for name, value in values.items() if not math.isfinite(value)]
        if bad:
            kept = (f"{out} keeps step {saved_step}, the last finite checkpoint" if saved_step is not None
                    else "no checkpoint was written")
            clip = "" if config.grad_clip else " (or clip the gradients: --grad_clip 1)"
            raise NonFinite(f"step {step}: the {' and the '.join(bad)} (learning rate {optimizer.lr:.4g}): "
                            f"stopped before the update; {kept}. Lower --lr{clip} and continue with --resume")

    def evaluated(step):   # (by a resumed run's checkpoint, too)
        return bool(history) and history[-1][0] == step

    def evaluate(step):
        nonlocal best_val_loss
        losses = estimate_loss(parallel, corpus, config)
        require_finite(step, train_loss=losses["train"], val_loss=losses["val"])
        lr = nn.optim.cosine_lr(step, config.lr, config.min_lr, config.warmup_iters, decay_iters)
        history.append([step, losses["train"], losses["val"], lr])
        best_val_loss = min(losses["val"], best_val_loss or math.inf)
        tqdm.write(f"step {step}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")

    def random_streams():
        return nn.rng.get_state(), batch_rng.bit_generator.state

    def save(step, **extra):
        """The checkpoint of the state after `step` steps; its random streams are those the step
        found (streams), even where the step has begun to draw from them."""
        nonlocal saved_step
        nn.save(out, model, optimizer, model_config=model.config, config=asdict(config),
                tokenizer=corpus.tokenizer.chars, step=step, history=history,
                val_loss=history[-1][2] if history else None, best_val_loss=best_val_loss,
                rng=streams[0], batch_rng=streams[1], **extra)
        write_csv(history, out)
        saved_step = step

    interrupt = Interrupt()
    started, train_seconds, first_step = time.perf_counter(), 0.0, step
    terminal, params, full = on_a_terminal(), model.parameters(), None
    bar = tqdm(total=config.max_iters, initial=step, unit="iter", dynamic_ncols=True, disable=not terminal)
    streams = random_streams()   # as the last completed step left them
    try:
        while step < config.max_iters and not interrupt.requested:
            evaluating = step % config.eval_interval == 0 and not evaluated(step)
            if evaluating:
                evaluate(step)
            if config.sample_every and step % config.sample_every == 0 and step > 0:
                tqdm.write(f"--- sample at step {step} ---\n{sample(model, corpus.tokenizer, config.seed)}\n---")

            # one optimizer step, as nanoGPT takes it: forward_backward is `_, loss = model(x, y);
            # loss.backward()` and step is `optimizer.step()`, each split across --processes
            # (nn/parallel.py); between them the gradients are clipped, and checked
            t0 = time.perf_counter()
            optimizer.lr = nn.optim.cosine_lr(step, config.lr, config.min_lr, config.warmup_iters, decay_iters)
            x, y = data.get_batch(corpus.train, config.block_size, config.batch_size, batch_rng)
            optimizer.zero_grad()
            loss = parallel.forward_backward(x, y)
            watch = health.measure(step, x) if step % config.eval_interval == 0 else nullcontext()
            with watch:   # at each evaluation's step: gradients and activations, then the update's size
                # the gradient norm before clipping: clip_grad_norm returns it, or, clipping off, measured
                norm = (nn.optim.clip_grad_norm(params, config.grad_clip) if config.grad_clip
                        else nn.optim.grad_norm(params))
                require_finite(step, loss=loss, gradient_norm=norm)
                if evaluating:   # written only now: weights whose loss and gradient are finite, so a run goes on from them
                    save(step)
                parallel.step()
            dt = time.perf_counter() - t0
            train_seconds += dt
            progress = (f"loss {loss:.4f}, {dt * 1000:.0f} ms/iter, "
                        f"{config.batch_size * config.block_size / dt:,.0f} tokens/s")
            if terminal:
                bar.update()
                bar.set_postfix_str(progress)
            elif step % config.log_interval == 0:   # a log file gets lines, not a bar's redraws
                print(f"iter {step}: {progress}", flush=True)
            step += 1
            streams = random_streams()
        bar.close()
        if not interrupt.requested:
            if not evaluated(step):
                evaluate(step)
            full = full_split_loss(parallel, corpus.val, config.block_size, config.batch_size, interrupt)
    except nn.parallel.WorkerDied as died:   # the run cannot go on without it: keep what is done
        bar.close()
        save(step)   # as the last completed step left it (nn/parallel.py): on --resume the cut step runs again
        fail(f"worker process {died.pid} died ({died.how}) during step {step}; saved the state of step {step}, "
             f"the last completed, to {out}; continue with --resume")

    if full is None:   # Ctrl-C or SIGTERM, in training or in the final evaluation
        save(step)
        plot_losses(history, out)
        plot_health(health, outputs(out).health_png)
        how = "interrupted" if interrupt.signal == signal.SIGINT else f"stopped by {interrupt.signal.name}"
        print(f"{how} at step {step}: checkpoint written to {out}; continue with --resume")
        sys.exit(128 + interrupt.signal)
    require_finite(step, full_val_loss=full)
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
    """The evaluations so far, beside the checkpoint: out/chargpt.csv (written whole to a
    temporary file and renamed: a kill never leaves it half written)."""
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(["step", "train_loss", "val_loss", "lr"])
    writer.writerows(history)
    nn.atomic.write_atomically(outputs(out).loss_csv, lambda file: file.write(text.getvalue().encode()))


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
    nn.atomic.write_atomically(outputs(out).loss_png,
                               lambda file: fig.savefig(file, format="png", dpi=100, bbox_inches="tight"))
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
        nn.atomic.write_atomically(path, lambda file: fig.savefig(file, format="png", dpi=120))   # 1920 x 1080 px
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
    except NonFinite as error:
        print(f"train_chargpt.py: {error}", file=sys.stderr)
        sys.exit(3)
    except (data.DataError, nn.CheckpointError, OSError) as error:   # OSError: e.g. --out unwritable
        fail(error)
    except KeyboardInterrupt:   # before the loop started, or a second Ctrl-C
        print("train_chargpt.py: interrupted; no checkpoint written this time", file=sys.stderr)
        sys.exit(130)
