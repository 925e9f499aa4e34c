"""The main job's run, carried from step to step beside the model and the optimizer: the
step, the evaluations so far, the random streams, and the checkpoint that holds them all
(saved at each evaluation, read back on --resume: tgtrain/resume.py checks it first).

Nothing is lost: a state with a nan or an inf is never written, so the checkpoint on disk is
always one a run can go on from (Run.save), and every file is written to a temporary name and
renamed (nn.atomic). How the run starts is tgtrain/start.py's; how it stops, tgtrain/stops.py's.
"""
import math
from dataclasses import asdict
from pathlib import Path

import numpy as np
from tqdm import tqdm

import nn
from nn import data

from . import evaluate, memory
from .health import HealthLog, plot_health
from .loss_log import plot_losses, write_csv
from .outputs import outputs
from .stops import JobError, NonFinite


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
        if checkpoint:   # everything that decides the next step, as the checkpoint left it (tgtrain.resume checked it)
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
        """The next training batch (x, y), on the run's device (evaluate.to_device)."""
        batch = data.get_batch(self.corpus.train, self.config.block_size, self.config.batch_size, self.batch_rng)
        return evaluate.to_device(batch, self.config.device)

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

    def on_disk(self):
        """What the checkpoint file holds, for a line that ends the job."""
        if self.written:
            return f"the checkpoint of step {self.saved_step} is written to {self.out}; continue with --resume"
        if self.saved_step is not None:
            return f"{self.out} keeps step {self.saved_step}, as it was; continue with --resume"
        return "no checkpoint written this time"
