"""The main job's run around its loop: its outputs claimed before step 0, its state (the
step, the evaluations so far, the random streams) saved to the checkpoint and read back on
--resume (train/resume.py checks it first), its stops (Ctrl-C, SIGTERM, a nan, a worker
lost) and the loss log beside the checkpoint.

Nothing is lost:
- the outputs, all named after --out, and their locks may not be the corpus or each other; a
  new run does not replace existing files without --overwrite; a run that would write a file
  another running job writes is refused, naming the file and the pid of the run that holds its
  lock; the locks are taken first, so --resume reads a checkpoint no other run is writing
  (claim_outputs, then check_outputs);
- a run whose step cannot fit in the memory available is refused before it allocates
  (require_memory);
- a loss or gradient norm that is nan or inf stops the run before the update (NonFinite, exit
  status 3), and the checkpoint on disk stays the last finite one: no state with a nan or an
  inf is ever written (Run.require_finite, Run.save);
- Ctrl-C and SIGTERM finish the current step (or an evaluation's batch), then the job saves and
  exits; before training begins, in a sample, or a second time, they end the job at once
  (Interrupt); a worker that dies or stops answering has the last completed step saved
  (Run.stop); each way out says in one line what is on disk;
- every file is written to a temporary name and renamed (nn.atomic), and the temporary
  files a killed run left are removed at the next start (only provably abandoned ones, never a
  file the run reads or claims).
"""
import csv
import io
import math
import signal
import sys
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from pathlib import Path

import numpy as np
from tqdm import tqdm

import nn
from nn import data

from . import evaluate, memory
from .flags import MODEL_FIELDS
from .health import HealthLog, plot_health
from .outputs import (Busy, OutputError, RunLock, check_clashes, claimed, described, lock_of, outputs, printable,
                      written_elsewhere)


class JobError(Exception):
    """A run that cannot start or go on: one line for the user, and the exit status (2 for a
    usage error, as argparse's; 1 else)."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


class NonFinite(Exception):
    """A loss or gradient norm that is nan or inf: the run stops before it reaches the weights
    (exit status 3)."""


def how(signum):
    """How a stop is told: "interrupted" (Ctrl-C), "stopped by SIGTERM"."""
    return "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"


class Stopped(Exception):
    """A Ctrl-C or SIGTERM that ends the job at once (see Interrupt): its message is the job's
    last line, which says what is on disk, and its exit status 128 + the signal's number."""

    def __init__(self, signum, message=None):
        self.signal = signal.Signals(signum)
        super().__init__(message or f"{how(signum)}; no checkpoint written this time")


class Interrupt:
    """Ctrl-C (SIGINT) and SIGTERM, from the job's start to its end. While the run trains
    (inside deferred()), the first one only raises a flag (requested), so the loop finishes
    its step, or an evaluation its batch, and the run stops with a checkpoint. Elsewhere
    (before training begins; in a sample, which changes nothing: unless_stopped), and for a
    second one anywhere, it raises Stopped at once. Either way the job exits with 128 + the
    signal's number (130, 143), as a shell reports a process that signal ended."""

    def __init__(self):
        self.signal, self.deferring = None, False
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self)

    @property
    def requested(self):
        return self.signal is not None

    def __call__(self, signum, frame):
        first = not self.requested
        self.signal = self.signal or signal.Signals(signum)
        if not (first and self.deferring):
            raise Stopped(signum)

    @contextmanager
    def deferred(self):
        """Inside this block, the first stop raises the flag only: the work checks it."""
        self.deferring = True
        try:
            yield
        finally:
            self.deferring = False

    def unless_stopped(self, work):
        """work() (which changes nothing: a sample), ended at once by a stop: its result, or
        None when a stop came before or meanwhile (requested then says which)."""
        if self.requested:
            return None
        deferring, self.deferring = self.deferring, False
        try:
            return work()
        except Stopped:
            return None
        finally:
            self.deferring = deferring


@contextmanager
def claim_outputs(config):
    """Every path a run on --out writes, claimed for the block: its outputs and their locks
    (out/chargpt.safetensors.lock, out/chargpt.csv.lock, ...) apart from each other and from
    folders, and no other run writing any of them at once (a lock for each, naming this run's
    pid, released however the run ends: two runs whose --out differ may still share a log,
    run.safetensors and run.pt both write run.csv). Taken before anything is read: a resumed
    run reads only a checkpoint that no other run is writing. Then check_outputs. None of them
    may be the corpus named so far (on --resume, again once the checkpoint names its own)."""
    out = Path(config.out)
    refuse_clashes(config)   # before a lock is taken: a lock file left by a killed run is removed
    out.parent.mkdir(parents=True, exist_ok=True)
    with ExitStack() as locks:   # each lock taken is let go when the block ends, or when the next one is refused
        for what, path in described(outputs(out)).items():
            try:
                locks.enter_context(RunLock(lock_of(path)))
            except Busy as busy:
                which = f"--out {out} is busy" if path == out else f"--out {out}: its {what} {path} is busy"
                raise JobError(f"{which}: {busy}; wait for that run to end, or choose another --out") from None
            except OutputError as error:
                raise JobError(f"--out {out}: {error}") from None
        yield


def check_outputs(config):
    """What a run's outputs need before anything is read or written, once the corpus is known
    (on --resume, from the checkpoint's settings): none of them, nor their locks, is the corpus
    (the same file under another name included: a symlink, a hard link); a new run replaces no
    existing file unless --overwrite. Then it removes the temporary files a killed run left in
    the folder (nn.atomic), saying so: never one the run reads or claims, nor one of a file
    another running job holds the lock of (its writer may live in another pid namespace)."""
    out = Path(config.out)
    refuse_clashes(config)
    existing = [str(path) for path in outputs(out) if path.exists()]
    if existing and not (config.resume or config.overwrite):
        raise JobError(f"{out} already holds a checkpoint: pass --resume to continue it, or --overwrite to "
                       "start over and replace it and its logs" if out.exists() else
                       f"{', '.join(existing)} already exist(s) and a new run would replace them: pass "
                       "--overwrite, or choose another --out", status=2)
    keep = [data.corpus_file(config.data), *claimed(out).values()]
    for path in nn.atomic.remove_stale_temporaries(out.parent, keep, lambda target: written_elsewhere(target, out)):
        print(f"removed {path}, a temporary file left by a run that was killed while writing")


def refuse_clashes(config):
    """JobError (a usage error) if an output of --out or its lock is the corpus, under any name."""
    try:
        check_clashes(claimed(config.out), {"corpus": data.corpus_file(config.data)})
    except OutputError as error:
        raise JobError(f"--out {config.out} --data {config.data}: {error}; choose another --out", status=2) from None


def load_checkpoint(path):
    """(model, tokenizer, meta) from a checkpoint written by the main job (a .safetensors
    file, or an .npz of tensorgrad 0.1), its metadata and every tensor checked against the
    model before anything is built (nn.checkpoint.load_gpt)."""
    if not Path(path).exists():
        raise nn.CheckpointError(f"{path}: no such checkpoint; train one with demos/train_chargpt.py "
                                 f"(without --resume)")
    return nn.checkpoint.load_gpt(path)


class Run:
    """What the loop carries from step to step beside the model and the optimizer: the step,
    the evaluations so far (history), the batches' random stream, the step the checkpoint on
    disk holds (and whether this run wrote it), and the gradient health log. Made from
    `checkpoint` (model, tokenizer, meta) when it continues one: then every random stream is as
    the checkpoint left it."""

    def __init__(self, config, corpus, model, optimizer, checkpoint=None):
        self.config, self.out, self.corpus = config, Path(config.out), corpus
        self.model, self.optimizer = model, optimizer
        self.batch_rng = np.random.default_rng([config.seed, 0])   # a stream of its own, apart from nn's
        self.step, self.history, self.best_val_loss, self.saved_step, self.written = 0, [], None, None, False
        if checkpoint:   # everything that decides the next step, as the checkpoint left it (train.resume checked it)
            meta = checkpoint[2]
            nn.load(self.out, optimizer)   # a second read: the moments need the optimizer to exist (and finite)
            nn.rng.set_state(meta["rng"])
            self.batch_rng.bit_generator.state = meta["batch_rng"]
            self.step, self.history, self.best_val_loss = meta["step"], meta["history"], meta["best_val_loss"]
            self.saved_step = self.step
        try:
            self.health = HealthLog(model, outputs(self.out).health_csv, resume_step=self.step if checkpoint else None,
                                    max_bytes=memory.corpus_limit())   # read as a corpus is: a regular file, bounded
        except (ValueError, OSError) as error:   # a damaged log of an earlier run, a FIFO: the user's to keep or drop
            raise JobError(f"{error}; move it away to start a new gradient health log") from None
        self.streams = self.random_streams()   # as the last completed step left them

    def random_streams(self):
        return nn.rng.get_state(), self.batch_rng.bit_generator.state

    def lr(self, step):
        """The learning rate at `step`: warmup, then cosine decay to min_lr at decay_iters."""
        c = self.config
        return nn.optim.cosine_lr(step, c.lr, c.min_lr, c.warmup_iters, c.decay_iters)

    def next_batch(self):
        return data.get_batch(self.corpus.train, self.config.block_size, self.config.batch_size, self.batch_rng)

    def stepped(self):
        """The step is done: count it, and keep the random streams it left (a checkpoint
        written before the next one completes holds those)."""
        self.step += 1
        self.streams = self.random_streams()

    def require_finite(self, step, **values):
        """Stop (NonFinite) if any of the values is nan or inf, before it reaches the weights."""
        bad = [f"{name.replace('_', ' ')} is {value}" for name, value in values.items() if not math.isfinite(value)]
        if bad:
            raise NonFinite(f"step {step}: the {' and the '.join(bad)} (learning rate {self.optimizer.lr:.4g}): "
                            f"stopped before the update; {self.kept()}")

    def kept(self):
        """What is on disk to go back to, and how: the end of a NonFinite message."""
        kept = (f"{self.out} keeps step {self.saved_step}, the last finite checkpoint (its weights and optimizer "
                "state checked finite)" if self.saved_step is not None else "no checkpoint was written")
        clip = "" if self.config.grad_clip else " (or clip the gradients: --grad_clip 1)"
        return f"{kept}. Lower --lr{clip} and continue with --resume"

    def non_finite(self):
        """The name of the first array of the model or the optimizer's state that holds a nan
        or an inf ("h.0.attn.qkv.weight", "optimizer/m.3"), or None."""
        return nn.tensorfile.first_non_finite(
            {**{name: p.data for name, p in self.model.named_parameters()},   # the arrays themselves, no copy
             **{f"optimizer/{name}": array for name, array in self.optimizer.state_arrays().items()}})

    def evaluated(self, step):   # (by a resumed run's checkpoint, too)
        return bool(self.history) and self.history[-1][0] == step

    def evaluate(self, parallel, interrupt):
        """`step N: train loss X, val loss Y` for the current step, kept in history; True, or
        False when a stop (Ctrl-C, SIGTERM) cut the evaluation short, and nothing is kept."""
        losses = evaluate.estimate_loss(parallel, self.corpus, self.config, lambda: interrupt.requested)
        if losses is None:
            return False
        self.require_finite(self.step, train_loss=losses["train"], val_loss=losses["val"])
        self.history.append([self.step, losses["train"], losses["val"], self.lr(self.step)])
        self.best_val_loss = min(losses["val"], self.best_val_loss or math.inf)
        tqdm.write(f"step {self.step}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
        return True

    def save(self, **extra):
        """The checkpoint of the state after `step` steps and the loss log; its random streams
        are those the step found (streams), even where the step has begun to draw from them.
        A state with a nan or an inf (a weight no batch has touched yet can be one while the
        loss is finite) is not written: NonFinite, and the file on disk stays as it was."""
        bad = self.non_finite()
        if bad:
            raise NonFinite(f"step {self.step}: {bad} holds a nan or an inf (learning rate {self.optimizer.lr:.4g}): "
                            f"not written; {self.kept()}")
        nn.save(self.out, self.model, self.optimizer, model_config=self.model.config, config=asdict(self.config),
                tokenizer=self.corpus.tokenizer.chars, step=self.step, history=self.history,
                val_loss=self.history[-1][2] if self.history else None, best_val_loss=self.best_val_loss,
                rng=self.streams[0], batch_rng=self.streams[1], **extra)
        self.saved_step, self.written = self.step, True   # at once: a message may say so next
        write_csv(self.history, self.out)

    def plot(self):
        """The loss curve and the gradient health, drawn beside the checkpoint."""
        plot_losses(self.history, self.out)
        plot_health(self.health, outputs(self.out).health_png)

    def stop(self, interrupt, lost=None):
        """The end of a run cut short by Ctrl-C or SIGTERM (interrupt), or by a worker process
        that died or stopped answering (lost, a WorkerDied): the checkpoint and the plots of the
        last completed step (a step cut short was undone in every process; on --resume it runs
        again), then exit with 128 + the signal's number, or, a lost worker alone, JobError."""
        self.save()
        self.plot()
        worker = f"worker process {lost.pid} {lost.reason} during step {self.step}" if lost else None
        if lost and not interrupt.requested:
            raise JobError(f"{worker}; saved the state of step {self.step}, the last completed, to {self.out}; "
                           "continue with --resume")
        print(f"{how(interrupt.signal)} at step {self.step}: checkpoint written to {self.out}; continue with --resume"
              + (f" ({worker})" if worker else ""))
        sys.exit(128 + interrupt.signal)

    @contextmanager
    def quitting(self):
        """Inside this block, a Stopped (a second Ctrl-C or SIGTERM: Interrupt) quits at once,
        wherever the run was, saving nothing more (a step or a save may be half done), and its
        line says what is on disk."""
        try:
            yield
        except Stopped as stop:
            raise Stopped(stop.signal, f"{how(stop.signal)} again at step {self.step}: quit at once; "
                                       f"{self.on_disk()}") from None

    def on_disk(self):
        """What the checkpoint file holds, for a line that ends the job."""
        if self.written:
            return f"the checkpoint of step {self.saved_step} is written to {self.out}; continue with --resume"
        if self.saved_step is not None:
            return f"{self.out} keeps step {self.saved_step}, as it was; continue with --resume"
        return "no checkpoint written this time"


def require_memory(config, vocab_size):
    """Refuse (JobError, a usage error) a run whose training step needs more memory than
    the machine has available (train.memory.step_bytes against available_bytes), before the
    model or a batch takes any. Where the memory available is unknown, nothing is refused."""
    model_config = {**{name: getattr(config, name) for name in MODEL_FIELDS}, "vocab_size": vocab_size}
    need, available = memory.step_bytes(model_config, config.batch_size, config.processes), memory.available_bytes()
    if available is not None and memory.peak_bytes(need) > available:
        gib = lambda n: f"{n / 2**30:,.1f} GiB"
        rest = (f"{gib(need['activations'])} for the activations of --batch_size {config.batch_size} x --block_size "
                f"{config.block_size}" if need["activations"] >= need["checkpoint"] else
                f"{gib(need['checkpoint'])} to write a checkpoint, built in memory first")
        raise JobError(f"one training step needs about {gib(memory.peak_bytes(need))} ({gib(need['parameters'])} for "
                       f"the weights, AdamW's state and the gradients, {rest}), but this machine has {gib(available)} "
                       "of memory available: lower --batch_size or --block_size (or the model's size: --n_layer, "
                       "--n_embd)", status=2)


def write_csv(history, out):
    """The evaluations so far, beside the checkpoint: out/chargpt.csv (written whole to a
    temporary file and renamed: a kill never leaves it half written)."""
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(["step", "train_loss", "val_loss", "lr"])
    writer.writerows(history)
    nn.atomic.write_atomically(outputs(out).loss_csv, lambda file: file.write(text.getvalue().encode()))


def plot_losses(history, out):
    """The loss curve beside the checkpoint (out/chargpt.png), when matplotlib is installed
    and there are evaluations to draw (a run stopped before its first has none); without
    matplotlib, one line says that neither PNG is drawn (the health plot skips its own quietly)."""
    try:
        import matplotlib
        matplotlib.use("Agg")   # files only: no window, no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"no {outputs(out).loss_png.name} or {outputs(out).health_png.name}: matplotlib is not installed "
              '(pip install ".[plots]" draws them; the .csv logs are written)')
        return
    if not history:   # stopped before the first evaluation: no curve to draw
        return
    steps, train, val, _ = zip(*history)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(steps, train, label="train")
    ax.plot(steps, val, label="val")
    ax.set(xlabel="step", ylabel="loss", title=f"{printable(out.name)}: mean loss of the eval batches")
    ax.legend()
    nn.atomic.write_atomically(outputs(out).loss_png,
                               lambda file: fig.savefig(file, format="png", dpi=100, bbox_inches="tight"))
    plt.close(fig)
