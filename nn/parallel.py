"""Data parallelism on threads: one training step's batch split across CPU cores.

numpy lets go of Python's lock (the GIL) while it computes on arrays, so threads that run
forward and backward on different parts of a batch overlap their array work; on a CPU
where each numpy op is a pass over memory, that is most of a step. Each thread runs a
replica of the model: a copy of its modules whose parameters are new Parameter objects
over the SAME arrays. So every replica computes the model's function with the model's
current weights, but fills gradients of its own, and no two threads ever write to one
.grad. The parts' gradients are then added into the model's parameters in a fixed order,
so a run gives the same numbers every time.

Matrix products: the parts are the parallelism, so each thread should multiply on one
core. How many threads numpy's BLAS uses is a process setting that only an application
chooses, e.g. threadpoolctl.threadpool_limits(1), as demos/train_chargpt.py does.
"""
import copy
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import rng
from .module import Parameter


class DataParallel:
    """Forward and backward of `model(x, y) -> (output, mean loss)` on `threads` parts of
    a batch at once. With threads=1 it simply runs the model."""

    def __init__(self, model, threads):
        if threads < 1:
            raise ValueError(f"DataParallel: threads must be at least 1, got {threads}")
        self.model, self.threads = model, threads
        self.pool = ThreadPoolExecutor(threads) if threads > 1 else None
        self._replicate()

    def _replicate(self):
        """One replica per thread, and the parameter lists, in order, of the model and of each."""
        self.replicas = [replica(self.model) for _ in range(self.threads)] if self.threads > 1 else []
        self.params = self.model.parameters()
        self.twins = [r.parameters() for r in self.replicas]

    def forward_backward(self, x, y):
        """The model's mean loss on the batch (x, y) as a float, with d loss / d parameter
        added into every parameter's .grad, as `loss = model(x, y)[1]; loss.backward()`
        would (up to float rounding). The loss must be a mean over the batch's rows, each
        counting equally (as cross-entropy over (B, T) targets is)."""
        if self.threads == 1:
            _, loss = self.model(x, y)
            loss.backward()
            return loss.item()
        if any(twin.data is not p.data for twins in self.twins for p, twin in zip(self.params, twins)):
            self._replicate()   # the model's arrays were replaced (Module.to): share the new ones
        parts = [rows for rows in np.array_split(np.arange(len(x)), self.threads) if len(rows)]
        seeds = rng.current().integers(2**63, size=len(parts))   # one dropout stream per part
        losses = list(self.pool.map(self._part, self.replicas, [(x[r], y[r]) for r in parts],
                                    [len(r) / len(x) for r in parts], seeds))
        for p, *twins in zip(self.params, *self.twins[:len(parts)]):   # the replicas that ran
            grads = [t.grad for t in twins if t.grad is not None]
            if grads:
                total = grads[0]   # the replica's own fresh array (zero_grad drops it next step)
                for grad in grads[1:]:
                    total += grad   # the parts in order: the same sum every run
                p.grad = total if p.grad is None else p.grad + total
        return sum(losses)

    def step(self, optimizer):
        """optimizer.step(), with its parameters split into `threads` groups of about equal
        size whose updates run at once (each parameter's update is independent of the rest)."""
        if self.threads == 1:
            return optimizer.step()
        sizes = [p.size for p in optimizer.params]
        groups, totals = [[] for _ in range(self.threads)], [0] * self.threads
        for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):   # largest first, to the lightest group
            lightest = totals.index(min(totals))
            groups[lightest].append(i)
            totals[lightest] += sizes[i]
        list(self.pool.map(optimizer.step, groups))

    def _part(self, replica, batch, share, seed):
        """One thread's part: the replica's loss on `batch`, backward weighted by its share."""
        rng.use_in_this_thread(np.random.default_rng(seed))
        try:
            replica.train(self.model.training)
            replica.zero_grad()
            _, loss = replica(*batch)
            loss.backward(np.asarray(share, loss.dtype))   # d (share * part mean) / d part mean
            return loss.item() * share
        finally:
            rng.use_in_this_thread(None)


def replica(model):
    """A copy of `model` whose parameters are new Parameter objects sharing the model's
    arrays: updates to the model's weights (in place, as optimizers make them) show in
    the replica at once, while its gradients are its own."""
    memo = {}
    for p in model.parameters():
        memo[id(p)] = Parameter(p.data)   # Parameter(array) wraps the array without copying it
        memo[id(p.data)] = p.data
    return copy.deepcopy(model, memo)
