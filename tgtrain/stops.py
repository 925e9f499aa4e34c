"""How the main job ends, and how it heeds a stop.

Each way out has its exit status and one line that says what is on disk: JobError (1, or 2
for a usage error, as argparse's), NonFinite (3: a nan or an inf stops the run before the
update, the checkpoint on disk stays the last finite one), Stopped (128 + the signal's
number: 130 for Ctrl-C, 143 for SIGTERM).

Ctrl-C and SIGTERM are heeded from the job's start (Interrupt): while the run trains, the
first one lets the step (or an evaluation's batch) end, then the run saves the last completed
step and exits (stop); before training begins, in a sample, or a second time, it ends the job
at once (quitting names what is on disk). A worker process that dies or stops answering has
the last completed step saved too (stop).
"""
import signal
import sys
from contextlib import contextmanager


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


def stop(run, interrupt, lost=None):
    """The end of a run cut short by Ctrl-C or SIGTERM (interrupt), or by a worker process
    that died or stopped answering (lost, a WorkerDied): the checkpoint and the plots of the
    last completed step (a step cut short was undone in every process; on --resume it runs
    again), then exit with 128 + the signal's number, or, a lost worker alone, JobError."""
    run.save()
    run.plot()
    worker = f"worker process {lost.pid} {lost.reason} during step {run.step}" if lost else None
    if lost and not interrupt.requested:
        raise JobError(f"{worker}; saved the state of step {run.step}, the last completed, to {run.out}; "
                       "continue with --resume")
    print(f"{how(interrupt.signal)} at step {run.step}: checkpoint written to {run.out}; continue with --resume"
          + (f" ({worker})" if worker else ""))
    sys.exit(128 + interrupt.signal)


@contextmanager
def quitting(run):
    """Inside this block, a Stopped (a second Ctrl-C or SIGTERM: Interrupt) quits at once,
    wherever the run was, saving nothing more (a step or a save may be half done), and its
    line says what is on disk (run.on_disk())."""
    try:
        yield
    except Stopped as stopped:
        raise Stopped(stopped.signal, f"{how(stopped.signal)} again at step {run.step}: quit at once; "
                                      f"{run.on_disk()}") from None
