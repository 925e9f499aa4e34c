"""Data parallelism on processes: one training step's batch split across CPU cores.

Each of `processes` parts of a batch runs forward and backward in a process of its own:
this one, and processes forked from it when DataParallel is made. Processes, not threads:
numpy lets go of Python's lock (the GIL) while it computes, but a tensorgrad step also
runs Python between its numpy calls (building the graph, calling each vjp), and a thread
waiting for the lock stalls its own numpy work. Measured on the nanoGPT CPU model, two
threads made each half-batch ~45% slower than it runs alone; two processes, ~10%.

The parameters move into shared memory, so every process computes with the current
weights (an optimizer updates them in place, in this process, and the workers see it);
each worker copies its gradients into a shared buffer of its own, and they are added into
the model's parameters in a fixed order, so a run gives the same numbers every time.
A worker starts as a copy of the model at the time DataParallel was made (fork): change
the model's code or structure afterwards and make a new DataParallel.

Matrix products: the processes are the parallelism, so each should multiply on one core.
How many threads numpy's BLAS uses is a process setting that only an application chooses,
e.g. threadpoolctl.threadpool_limits(1), as demos/train_chargpt.py does (before making
DataParallel: the workers inherit it). Where processes cannot be forked (Windows), the
whole batch runs in this process.
"""
import mmap
import multiprocessing
import signal
import traceback
import warnings
import weakref

import numpy as np

import tensorgrad as tg

from . import rng


class DataParallel:
    """Forward and backward of `model(x, y) -> (output, mean loss)` on `processes` parts
    of a batch at once. With processes=1 it simply runs the model."""

    def __init__(self, model, processes):
        if processes < 1:
            raise ValueError(f"DataParallel: processes must be at least 1, got {processes}")
        if processes > 1 and "fork" not in multiprocessing.get_all_start_methods():
            warnings.warn("DataParallel: this platform cannot fork processes; the whole batch "
                          "runs in this process")
            processes = 1
        self.model, self.processes = model, processes
        self.workers = []   # (connection, process, gradient buffers), one per forked process
        if processes > 1:
            self._start_workers()

    def _start_workers(self):
        """Put the parameters in shared memory, then fork processes - 1 workers."""
        self.close()
        self.params = self.model.parameters()
        for p, shared in zip(self.params, shared_arrays([p.data for p in self.params])):
            shared[...] = p.data
            p.data = shared
        self.shared = [p.data for p in self.params]
        context = multiprocessing.get_context("fork")
        for _ in range(self.processes - 1):
            grads = shared_arrays([p.data for p in self.params])
            here, there = context.Pipe()
            process = context.Process(target=_serve, args=(self.model, grads, there), daemon=True)
            process.start()
            there.close()
            self.workers.append((here, process, grads))
        self._finalizer = weakref.finalize(self, _stop, list(self.workers))

    def close(self):
        """Stop the worker processes (also done when DataParallel is garbage-collected);
        the next call starts them again."""
        if self.workers:
            self._finalizer()
            self.workers = []

    def forward_backward(self, x, y):
        """The model's mean loss on the batch (x, y) as a float, with d loss / d parameter
        added into every parameter's .grad, as `loss = model(x, y)[1]; loss.backward()`
        would (up to float rounding). The loss must be a mean over the batch's rows, each
        counting equally (as cross-entropy over (B, T) targets is)."""
        if self.processes == 1:
            _, loss = self.model(x, y)
            loss.backward()
            return loss.item()
        return self._run_parts(x, y, backward=True)

    def loss(self, x, y):
        """The model's mean loss on the batch (x, y) as a float, without a graph (as under
        tg.no_grad()), its parts computed at once."""
        if self.processes == 1:
            with tg.no_grad():
                return self.model(x, y)[1].item()
        return self._run_parts(x, y, backward=False)

    def _run_parts(self, x, y, backward):
        """Send each worker its part, run the first part here, then collect the workers'
        losses (and add their gradients) in order. Returns the batch's mean loss."""
        if not self.workers or any(p.data is not shared for p, shared in zip(self.params, self.shared)):
            self._start_workers()   # after close(), or the model's arrays were replaced (Module.to)
        parts = [rows for rows in np.array_split(np.arange(len(x)), self.processes) if len(rows)]
        # one dropout stream per part, drawn from nn's only when training (as the model draws)
        seeds = rng.current().integers(2**63, size=len(parts)) if self.model.training else [None] * len(parts)
        shares = [len(rows) / len(x) for rows in parts]
        for (connection, process, _), rows, share, seed in zip(self.workers, parts[1:], shares[1:], seeds[1:]):
            try:
                connection.send((x[rows], y[rows], share, seed, self.model.training, backward))
            except OSError:
                self.close()
                raise WorkerDied.of(process) from None
        try:
            total = _part(self.model, x[parts[0]], y[parts[0]], shares[0], seeds[0], backward)
        finally:   # every reply is read, even after an error, so the next call starts clean
            replies = [_receive(connection, process) for connection, process, _ in self.workers[:len(parts) - 1]]
        for reply in replies:
            if isinstance(reply, WorkerDied):
                self.close()   # the next call starts new workers
            if isinstance(reply, Exception):
                raise reply
        for (_, _, grads), (part_loss, has_grad) in zip(self.workers, replies):
            total += part_loss
            for p, grad, has in zip(self.params, grads, has_grad):
                if has and p.grad is None:
                    p.grad = grad.copy()
                elif has:
                    p.grad += grad   # in place: a leaf's .grad is its own array (autograd.backward)
        return total


class WorkerDied(RuntimeError):
    """A worker process ended without answering (killed, or out of memory)."""

    @classmethod
    def of(cls, process):
        process.join(timeout=1)
        return cls(f"DataParallel: worker process {process.pid} died (exit code {process.exitcode}); "
                   "the next call starts new workers")


def _part(model, x, y, share, seed, backward):
    """One part: the model's loss on (x, y) times its share of the batch; with `backward`,
    d (share * loss) / d parameter is added into the parameters' .grad."""
    rng.use_in_this_thread(None if seed is None else np.random.default_rng(seed))
    try:
        if not backward:
            with tg.no_grad():
                return model(x, y)[1].item() * share
        _, loss = model(x, y)
        loss.backward(np.asarray(share, loss.dtype))   # d (share * part mean) / d part mean
        return loss.item() * share
    finally:
        rng.use_in_this_thread(None)


def _serve(model, grads, connection):
    """A worker process: run the parts it is sent, copying its gradients into `grads`,
    until the connection closes or brings None."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is for the main process to handle
    params = model.parameters()
    while True:
        try:
            message = connection.recv()
        except EOFError:
            return
        if message is None:
            return
        x, y, share, seed, training, backward = message
        try:
            model.train(training)
            model.zero_grad()
            part_loss = _part(model, x, y, share, seed, backward)
            has_grad = [p.grad is not None for p in params]
            for p, grad in zip(params, grads):
                if p.grad is not None:
                    np.copyto(grad, p.grad)
            model.zero_grad()
            connection.send(("done", (part_loss, has_grad)))
        except Exception:
            connection.send(("error", traceback.format_exc()))


def _receive(connection, process):
    """A worker's reply: (its part's loss, which parameters got a gradient), or the
    RuntimeError to raise for its failure or its death."""
    try:
        status, value = connection.recv()
    except EOFError:
        return WorkerDied.of(process)
    if status == "error":
        return RuntimeError(f"DataParallel: a worker process failed:\n{value}")
    return value


def _stop(workers):
    for connection, process, _ in workers:
        try:
            connection.send(None)
        except OSError:   # already gone
            pass
        connection.close()
    for _, process, _ in workers:
        process.join(timeout=5)
        if process.is_alive():
            process.terminate()


def shared_arrays(like):
    """Zeroed arrays shaped like `like`, in one block of memory that forked processes share."""
    offsets, size = [], 0
    for array in like:
        offsets.append(size)
        size += -(-array.nbytes // 64) * 64   # each array starts on a 64-byte boundary
    block = mmap.mmap(-1, max(size, 1))   # anonymous and shared: fork keeps it shared
    return [np.ndarray(a.shape, a.dtype, buffer=block, offset=o) for a, o in zip(like, offsets)]
