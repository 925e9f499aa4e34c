"""Data parallelism on processes: one training step's batch split across CPU cores.

Each of `processes` parts of a batch runs forward and backward in a process of its own:
this one, and processes forked from it when DataParallel is made. Processes, not threads:
numpy lets go of Python's lock (the GIL) while it computes, but a tensorgrad step also
runs Python between its numpy calls (building the graph, calling each vjp), and a thread
waiting for the lock stalls its own numpy work (measured: threads slowed each half-batch
several times more than processes do).

The parameters move into shared memory, so every process computes with the current
weights. The parameters are split into one group per process; each process adds up its
group's gradients, always in process order, so a run gives the same numbers every time:
its own part's gradients where they are, and the others' from shared buffers, where each
process copies the gradients of the groups that others add up (not its own). Given the
optimizer, DataParallel also moves its state into shared memory (share_optimizer_state)
and splits each update the same way: each process runs the optimizer's plain step() with
only its group's gradients in place (step_group).

The worker processes are tgtrain/workers.py's (a Team): how they start, answer, die with this
process and are stopped is written there; this file is the arithmetic they share. A worker
that dies (killed, out of memory), or stops answering (SIGSTOP, a debugger, a machine
swapping) and is then killed, is WorkerDied, raised here, with the model and the optimizer
as the last completed step left them, ready to be saved: each process keeps a copy of what
its group's update changes, in shared memory, just before it makes it, and step() puts every
group back if one has not taken the update (KeptState). A worker has reply_timeout seconds
to answer, or 10 times the longest it has taken so far if that is longer; once `stopping()`
says the job is stopping (Ctrl-C, SIGTERM), it has only a few seconds more.

A worker starts as a copy of the model (and optimizer) at the time DataParallel was made
(fork): change the model's code or structure afterwards and make a new DataParallel.
Matrix products: the processes are the parallelism, so each should multiply on one core.
How many threads numpy's BLAS uses is a process setting that only an application chooses,
e.g. threadpoolctl.threadpool_limits(1), as demos/train_chargpt.py does (before making
DataParallel: the workers inherit it). Where processes cannot be forked (Windows), the
whole batch runs in this process.
"""
import math
import mmap
import multiprocessing
import warnings

import numpy as np

import tensorgrad as tg

from nn import rng
from nn.optim import clip_grad_norm

from .workers import REPLY_TIMEOUT, Team, WorkerDied, receive, serve, stop_workers   # noqa: F401 (imported from here)


class DataParallel:
    """Forward and backward of `model(x, y) -> (output, mean loss)` on `processes` parts
    of a batch at once, and, given the optimizer, its update split the same way. With
    processes=1 it simply runs the model (and the optimizer)."""

    def __init__(self, model, processes, optimizer=None, reply_timeout=REPLY_TIMEOUT, stopping=None):
        if processes < 1:
            raise ValueError(f"DataParallel: processes must be at least 1, got {processes}")
        if not 0 < reply_timeout < math.inf:   # nan fails both
            raise ValueError(f"DataParallel: reply_timeout must be a finite number of seconds > 0, got {reply_timeout}")
        if processes > 1 and "fork" not in multiprocessing.get_all_start_methods():
            warnings.warn("DataParallel: this platform cannot fork processes; the whole batch "
                          "runs in this process")
            processes = 1
        own = {id(p) for p in model.parameters()}
        if optimizer is not None and any(id(p) not in own for p in optimizer.params):
            raise ValueError("DataParallel: the optimizer must update the model's own parameters")
        self.model, self.processes, self.optimizer = model, processes, optimizer
        self.team = Team(reply_timeout, stopping)   # the worker processes: processes - 1 of them
        self.params = model.parameters()
        if processes > 1:
            self._start_workers()

    @property
    def workers(self):
        """The worker processes, (connection, process) pairs (tgtrain.workers.Worker)."""
        return self.team.workers

    def _start_workers(self):
        """Put the parameters (and the optimizer's state) in shared memory, then fork
        processes - 1 workers."""
        self.close()
        self.params = self.model.parameters()
        for p, shared in zip(self.params, shared_arrays([p.data for p in self.params])):
            shared[...] = p.data
            p.data = shared
        self.shared = [p.data for p in self.params]
        self.grads = [shared_arrays(self.shared) for _ in range(self.processes)]   # each process's part
        self.totals = shared_arrays(self.shared)   # their sum: the gradients step() updates with
        self.groups = balanced_groups([p.size for p in self.params], self.processes)   # who sums what
        self.kept = None   # each update group as it was before the update in progress
        if self.optimizer is not None:
            share_optimizer_state(self.optimizer)
            self.kept = KeptState(self.optimizer, balanced_groups([p.size for p in self.optimizer.params],
                                                                  self.processes))
        self.team.start(_serve, [(self.model, self.optimizer, self.kept, k, self.grads, self.totals, self.groups)
                                 for k in range(1, self.processes)])

    def close(self):
        """Stop the worker processes (also done when DataParallel is garbage-collected);
        the next call starts them again."""
        self.team.stop()

    def forward_backward(self, x, y):
        """The model's mean loss on the batch (x, y) as a float, with d loss / d parameter
        added into every parameter's .grad, as `loss = model(x, y)[1]; loss.backward()`
        would (up to float rounding). The loss must be a mean over the batch's rows, each
        counting equally (as cross-entropy over (B, T) targets is). After an error the
        gradients hold part of the sum: zero them."""
        if self.processes == 1:
            return _part(self.model, x, y, 1.0, None, backward=True)
        return self._run_parts(x, y, backward=True)

    def loss(self, x, y):
        """The model's mean loss on the batch (x, y) as a float, without a graph (as under
        tg.no_grad()), its parts computed at once."""
        if self.processes == 1:
            return _part(self.model, x, y, 1.0, None, backward=False)
        return self._run_parts(x, y, backward=False)

    def step(self, max_norm=None):
        """clip_grad_norm(parameters, max_norm) when max_norm is given, then the optimizer's
        step, its parameters split into groups of about equal size that the processes
        update at once (each parameter's update is independent of the rest). Returns the
        gradient norm before clipping, or None."""
        if self.optimizer is None:
            raise RuntimeError("DataParallel.step: no optimizer; make it DataParallel(model, "
                               "processes, optimizer)")
        norm = clip_grad_norm(self.params, max_norm) if max_norm else None
        if self.processes == 1:
            self.optimizer.step()
            return norm
        self._check_workers()
        groups = self.kept.groups
        has_grad = [p.grad is not None for p in self.params]
        if any(has and p.grad is not total for p, total, has in zip(self.params, self.totals, has_grad)):
            raise RuntimeError("DataParallel.step: the gradients must come from forward_backward "
                               "(the workers read them from its shared buffers)")
        settings = self.optimizer.settings()   # this step's learning rate, the betas, ...: for the workers' copies
        messages = [("step", group, settings, has_grad) for group in groups[1:]]

        def here():
            self.kept.keep(0)
            step_group(self.optimizer, groups[0])
        self.kept.forget()
        try:
            self.team.exchange(messages, here)
        except BaseException:   # a process died or failed midway through its group: undo every group
            self.kept.restore()
            raise
        return norm

    def _check_workers(self):
        if not self.workers or any(p.data is not shared for p, shared in zip(self.params, self.shared)):
            self._start_workers()   # after close(), or the model's arrays were replaced (Module.to)

    def _run_parts(self, x, y, backward):
        """Run the first part here and the others in the workers, at once; then add up
        their gradients, each process a group of the parameters, and make the sums the
        parameters' .grad. Returns the batch's mean loss."""
        self._check_workers()
        parts = [rows for rows in np.array_split(np.arange(len(x)), self.processes) if len(rows)]
        # one dropout stream per part, drawn from nn's only when training (as the model draws)
        seeds = rng.current().integers(2**63, size=len(parts)) if self.model.training else [None] * len(parts)
        shares = [len(rows) / len(x) for rows in parts]
        messages = [("part", x[rows], y[rows], share, seed, self.model.training, backward)
                    for rows, share, seed in zip(parts[1:], shares[1:], seeds[1:])]

        def here():   # this process's part, the gradients the workers sum copied where they can read them
            part_loss = _part(self.model, x[parts[0]], y[parts[0]], shares[0], seeds[0], backward)
            return part_loss, _publish_grads(self.params, self.grads[0], self.groups[0]) if backward else None

        (total, has_grad), replies = self.team.exchange(messages, here)
        total += sum(part_loss for part_loss, _ in replies)
        if backward:
            nothing = [False] * len(self.params)   # a worker left idle by a small batch
            has_grad = [has_grad] + [has for _, has in replies] + [nothing] * (len(self.workers) - len(replies))
            self.team.exchange([("sum", has_grad)] * len(self.workers),
                               lambda: _sum(0, self.params, self.groups, has_grad, self.grads, self.totals))
            for i, p in enumerate(self.params):
                if any(has[i] for has in has_grad):
                    p.grad = self.totals[i]
        return total


def _part(model, x, y, share, seed, backward):
    """One part: the model's loss on (x, y) times its share of the batch; with `backward`,
    d (share * loss) / d parameter is added into the parameters' .grad."""
    with rng.drawing_from(None if seed is None else np.random.default_rng(seed)):
        if not backward:
            with tg.no_grad():
                return model(x, y)[1].item() * share
        _, loss = model(x, y)
        # d (share * part mean) / d part mean; the graph goes when this returns, so only the
        # parameters' gradients are kept, the intermediates' dropped as backward goes; a share of 1
        # (the whole batch) is backward's own 1, made where the loss is (no copy to a GPU)
        loss.backward(None if share == 1 else np.asarray(share, loss.dtype), intermediate_grads=False)
        return loss.item() * share


def _serve(connection, model, optimizer, kept, k, grads, totals, groups):
    """Worker process k: run what it is sent (tgtrain.workers.serve): a part (the gradients of
    the other processes' groups copied into grads[k]), its group's sum of every process's
    gradients (into totals), or its group's optimizer update (with the sums; its group
    kept first, see KeptState)."""
    params = model.parameters()

    def handle(message):
        kind, *arguments = message
        if kind == "part":
            for p in params:   # zero_grad, without walking the module tree each time
                p.grad = None
            x, y, share, seed, training, backward = arguments
            if model.training != training:   # train() walks the module tree: only on a change
                model.train(training)
            part_loss = _part(model, x, y, share, seed, backward)
            return part_loss, _publish_grads(params, grads[k], groups[k]) if backward else None
        if kind == "sum":   # the part's own gradients are still each parameter's .grad
            (has_grad,) = arguments
            return _sum(k, params, groups, has_grad, grads, totals)
        group, settings, has_grad = arguments   # "step": this process's group of the optimizer's update
        for name, value in settings.items():   # set as the main process set them (a schedule's optimizer.lr = ...)
            setattr(optimizer, name, value)
        for p, total, has in zip(params, totals, has_grad):
            p.grad = total if has else None
        kept.keep(k)
        step_group(optimizer, group)
        return None
    serve(connection, handle)


def _publish_grads(params, buffers, own_group):
    """Copy each parameter's gradient into its buffer, but those of `own_group` (this
    process adds those up itself, see _sum); returns which parameters had one."""
    own = set(own_group)
    for i, (p, buffer) in enumerate(zip(params, buffers)):
        if p.grad is not None and i not in own:
            np.copyto(buffer, p.grad)
    return [p.grad is not None for p in params]


def _sum(k, params, groups, has_grad, grads, totals):
    """In process k, for each parameter i of its group: totals[i] = the sum, in process
    order, of every process's gradient of i (has_grad[j][i]: whether process j has one):
    its own from params[i].grad, the others' from their buffers grads[j]."""
    for i in groups[k]:
        terms = [params[i].grad if j == k else process_grads[i]
                 for j, (process_grads, has) in enumerate(zip(grads, has_grad)) if has[i]]
        if len(terms) == 1:
            np.copyto(totals[i], terms[0])
        elif terms:
            np.add(terms[0], terms[1], out=totals[i])
            for grad in terms[2:]:
                totals[i] += grad


class KeptState:
    """What one optimizer update changes (each parameter's weights, its optimizer state and
    its update count), kept by each process for its own group of the parameters just
    before it updates them, in memory all processes share. If a process dies or fails
    partway through its group, restore() puts every group back as it was: the model and
    the optimizer are then those of the last completed step. Each process copies only its
    own group, at the same time as the others: the copy costs a part of one pass over the
    state, not a pass in the main process before the update."""

    def __init__(self, optimizer, groups):
        self.optimizer, self.groups = optimizer, groups
        self.arrays = [shared_arrays(self._live(group)) for group in groups]
        self.counts = shared_arrays([np.zeros(len(group), np.int64) for group in groups])
        self.complete = shared_arrays([np.zeros(len(groups), bool)])[0]   # which groups' copies are whole

    def _live(self, group):
        """The arrays an update of the parameters `group` writes into."""
        o = self.optimizer
        return [o.params[i].data for i in group] + [getattr(o, kind)[i] for kind in o.STATE for i in group]

    def forget(self):
        """Before an update is sent out: no group has a copy of its state for it yet."""
        self.complete[...] = False

    def keep(self, k):
        """In process k, just before it updates its group: copy the group."""
        group = self.groups[k]
        for kept, live in zip(self.arrays[k], self._live(group)):
            np.copyto(kept, live)
        self.counts[k][...] = self.optimizer.updates[group]
        self.complete[k] = True   # written last: the copy is whole

    def restore(self):
        """Undo the update in progress: every group copied for it is put back (a group not
        yet copied was not yet touched)."""
        for k, group in enumerate(self.groups):
            if self.complete[k]:
                for kept, live in zip(self.arrays[k], self._live(group)):
                    np.copyto(live, kept)
                self.optimizer.updates[group] = self.counts[k]


def balanced_groups(sizes, count):
    """Indices into `sizes` in `count` groups of about equal total size (one per process):
    the largest first, each to the group with the fewest elements so far."""
    groups, totals = [[] for _ in range(count)], [0] * count
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        lightest = totals.index(min(totals))
        groups[lightest].append(i)
        totals[lightest] += sizes[i]
    return groups


def shared_arrays(like):
    """Zeroed arrays shaped like `like`, in one block of memory that forked processes share."""
    offsets, size = [], 0
    for array in like:
        offsets.append(size)
        size += -(-array.nbytes // 64) * 64   # each array starts on a 64-byte boundary
    block = mmap.mmap(-1, max(size, 1))   # anonymous and shared: fork keeps it shared
    return [np.ndarray(a.shape, a.dtype, buffer=block, offset=o) for a, o in zip(like, offsets)]


def share_optimizer_state(optimizer):
    """Move every state array of an nn.optim optimizer (its per-parameter update counts and
    each kind of state it names in STATE, e.g. Adam's m and v), values and all, into memory
    that forked processes share, so each process's update of its group is seen by all."""
    kinds = {kind: getattr(optimizer, kind) for kind in optimizer.STATE}   # lists, one array per parameter
    old = [optimizer.updates] + [array for arrays in kinds.values() for array in arrays]
    new = shared_arrays(old)
    for shared, array in zip(new, old):
        shared[...] = array
    optimizer.updates, rest = new[0], iter(new[1:])
    for kind, arrays in kinds.items():
        setattr(optimizer, kind, [next(rest) for _ in arrays])


def step_group(optimizer, group):
    """optimizer.step() on the parameters optimizer.params[i] for i in `group` only: the
    others' gradients are hidden while it runs (step() leaves a parameter without one alone),
    then put back."""
    members = set(group)
    hidden = [(p, p.grad) for i, p in enumerate(optimizer.params) if i not in members]
    for p, _ in hidden:
        p.grad = None
    try:
        optimizer.step()
    finally:
        for p, grad in hidden:
            p.grad = grad
