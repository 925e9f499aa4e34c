"""Worker processes, supervised: each started in a process group of its own, sent messages,
known alive or dead, and stopped together with whatever it started. tgtrain/parallel.py's
data-parallel step runs on them, and so does exercises/check.py's grader, which must be able
to stop the code it runs (it sends JSON with connection.send_bytes: unpickling what an
exercise wrote would run it).

    worker = Worker.start(work, "data.txt")   # work(connection, "data.txt"), in a new process
    worker.send(("square", 3))                # a message (pickled), answered by serve() there,
    worker.receive()                          # ... and its reply (or the exception to raise)
    worker.died()                             # WorkerDied: how it ended (after receive got none)
    worker.stop()                             # ask it to end; five seconds later, kill its group

A worker is on its own (on_its_own, the first thing the new process does):
- it leads a process group (a session) of its own, so kill() ends the whole group, the worker
  and everything it started, and a Ctrl-C at the terminal reaches the parent alone; Ctrl-C
  (SIGINT) is the parent's to handle, so the worker ignores it, and SIGTERM ends its group;
- it dies with its parent, however the parent ends (SIGKILL included): on Linux the kernel sends
  it a signal when the parent ends (PR_SET_PDEATHSIG), SIGKILL by default, which ends even a
  stopped worker (SIGSTOP, a debugger) but not what it started, or SIGTERM, which ends its
  group unless the worker is stopped (a stopped process keeps every signal but SIGKILL for
  later); and serve() ends when its connection reads end-of-file;
- a fork copies every pipe the parent holds, so the worker closes its copies of the parent's
  ends: then, when the parent ends, its own connection reads end-of-file.

A Team is a few workers that answer one message each, in time: a worker that has not answered
within the time limit (a worker stopped, held by a debugger, or a machine swapping) is killed,
and its reply is WorkerDied, as is the reply of one that died.
"""
import ctypes
import os
import signal
import time
import traceback
import weakref
from contextlib import contextmanager
from multiprocessing import get_context
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import NamedTuple

REPLY_TIMEOUT = 30.0   # seconds a worker has to answer at least: its first steps also fault in their memory
SLOWEST_TIMES = 10     # ... or this many times the longest it has taken so far, if that is longer
STOP_GRACE = 2.0       # seconds it still has once the job is stopping (or twice its longest answer)
POLL = 0.2             # seconds between two looks at stopping() while waiting
ENDING = 5.0           # seconds a worker has to end once asked (stop), or to be reaped once killed
KILL = getattr(signal, "SIGKILL", signal.SIGTERM)   # SIGKILL, where there is one (not on Windows)
STOPS = {signal.SIGINT, signal.SIGTERM} | ({signal.SIGHUP} if hasattr(signal, "SIGHUP") else set())
PARENT_ENDS = weakref.WeakSet()   # this process's end of every worker's pipe: a forked worker closes its copies


class Worker(NamedTuple):
    """A worker process and this process's end of the two-way pipe to it: a pair, so
    `for connection, process in workers` reads them."""
    connection: Connection
    process: BaseProcess

    @classmethod
    def start(cls, target, *args, method="fork", on_parent_death=KILL):
        """A new process that runs target(connection, *args) once it is on its own (see the
        module's docstring); `connection` is its end of the pipe. method: "fork" (a copy of
        this process: memory it shares with forks stays shared) or "spawn" (a new Python:
        forking a process whose threads hold locks, as numpy's BLAS threads may, can leave the
        child waiting for them forever). on_parent_death: SIGKILL or SIGTERM (see above)."""
        context = get_context(method)
        here, there = context.Pipe()
        PARENT_ENDS.add(here)
        process = context.Process(target=_begin, daemon=True,
                                  args=(target, there, args, os.getpid(), on_parent_death))
        process.start()
        there.close()   # the worker holds its end: when it ends, ours reads end-of-file
        return cls(here, process)

    @property
    def pid(self):
        return self.process.pid

    def send(self, message):
        """Send it a message (pickled); WorkerDied if it has gone."""
        try:
            self.connection.send(message)
        except OSError:
            raise self.died() from None

    def receive(self):
        """Its reply to a message serve() answered, once connection.poll() says it is there:
        the value, or the exception to raise (a RuntimeError with its traceback; WorkerDied)."""
        return receive(self.connection, self.process)

    def died(self):
        """WorkerDied saying how it ended, for a worker whose connection has closed."""
        return WorkerDied.of(self.process)

    def stop(self):
        """Ask it to end, and kill its group if it has not within ENDING seconds."""
        stop_workers([self])

    def kill(self):
        """Kill it and its process group at once (SIGKILL), and reap it. Once: a second call,
        with its connection closed, does nothing (by then its pid may be another process's)."""
        if self.connection.closed:
            return
        with held(STOPS):   # a second Ctrl-C or SIGTERM does not stop the ending half way
            try:   # its group's number stays its own while any process of the group lives
                os.killpg(self.pid, signal.SIGKILL)
            except (OSError, AttributeError):   # the group is gone, or not made yet; no groups (Windows)
                pass
            self.process.kill()   # where it had not made its group yet
            self.process.join(timeout=ENDING)
            self.connection.close()


def _begin(target, connection, args, parent, on_parent_death):
    """A worker process's first steps: on its own, then its work."""
    on_its_own(parent, on_parent_death)
    target(connection, *args)


def on_its_own(parent=None, on_parent_death=KILL):
    """Make this new process a worker, as the module's docstring says: a process group of its
    own, Ctrl-C ignored and SIGTERM ending the group, the signals a parent held while it
    started this one let through, death with its parent (`parent`: the parent's pid, to catch
    a parent that ended before this was set up), its copies of the parent's pipe ends closed."""
    if hasattr(os, "setsid"):
        os.setsid()
        signal.signal(signal.SIGTERM, lambda number, frame: os.killpg(os.getpgrp(), signal.SIGKILL))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)
    die_with_parent(on_parent_death)
    if parent is not None and os.getppid() != parent:   # the parent ended before die_with_parent: end now
        os.kill(os.getpid(), KILL)
    for end in list(PARENT_ENDS):
        end.close()


def die_with_parent(signum=KILL):
    """On Linux, have the kernel send this process `signum` when the thread that started it
    ends: a worker that is stopped (SIGSTOP, a debugger) reads no end-of-file, so without this
    it would outlive a parent killed meanwhile. Elsewhere (no prctl) it does nothing."""
    PR_SET_PDEATHSIG = 1
    try:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, int(signum))
    except (OSError, AttributeError, TypeError):   # no C library to load, or one without prctl (macOS)
        pass


def serve(connection, handle):
    """A worker's loop: answer each message with ("done", handle(message)), or ("error", the
    traceback) when it raises, until the connection closes or brings None. receive() reads
    the answers. A process forked by hand rather than by Worker.start (bench/numpy_step.py
    forks its own) is not on its own yet: it becomes so here."""
    if hasattr(os, "setsid") and os.getpgrp() != os.getpid():
        on_its_own()
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):   # the parent has gone
            return
        if message is None:
            return
        try:
            answer = ("done", handle(message))
        except Exception:
            answer = ("error", traceback.format_exc())
        try:
            connection.send(answer)
        except OSError:   # the parent has gone
            return


def receive(connection, process):
    """A worker's reply (once connection.poll() says it is there, or a connection closed), or
    the exception to raise for its failure or its death."""
    try:
        status, value = connection.recv()
    except (EOFError, ConnectionResetError):   # a reset: it died with our message unread
        return WorkerDied.of(process)
    if status == "error":
        return RuntimeError(f"a worker process failed:\n{value}")
    return value


def stop_workers(workers):
    """Stop worker processes [(connection, process)] together: ask each to end (None), give
    them ENDING seconds, then kill each with its group (Worker.kill)."""
    workers = [Worker(*worker) for worker in workers]
    for worker in workers:
        try:
            worker.connection.send(None)
        except OSError:   # already gone, or closed
            pass
    ending, deadline = {worker.process.sentinel for worker in workers}, time.monotonic() + ENDING
    while ending and time.monotonic() < deadline:   # a sentinel is ready when its process has ended
        ending -= set(wait(list(ending), deadline - time.monotonic()))
    for worker in workers:
        worker.kill()


@contextmanager
def held(numbers):
    """These signals wait (they are blocked, then delivered) while the block runs."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, numbers)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


class WorkerDied(RuntimeError):
    """A worker process that ended without answering (killed, or out of memory), or that
    stopped answering and was killed: `pid` says which, `how` how ("killed by signal 9
    (SIGKILL)", "exit code 1", "no answer in 31 s; it was stopped"), `reason` all of it in
    words ("died (killed by signal 9 (SIGKILL))")."""

    def __init__(self, pid, how, answered=True):
        self.pid, self.how = pid, how
        self.reason = f"died ({how})" if answered else f"stopped answering ({how}) and was killed"
        super().__init__(f"worker process {pid} {self.reason}")

    @classmethod
    def of(cls, process):
        process.join(timeout=1)
        code = process.exitcode
        if code is None:
            how = "it closed its connection but is still running"
        elif code < 0:
            how = f"killed by signal {-code} ({signal.Signals(-code).name})"
        else:
            how = f"exit code {code}"
        return cls(process.pid, how)

    @classmethod
    def unanswered(cls, worker, waited):
        """Kill a worker that has not answered in `waited` seconds (SIGKILL: it ends a stopped
        process too, where SIGTERM would wait for it to be continued); what it was doing is
        read from Linux's /proc first, where there is one."""
        state = {"T": "; it was stopped (SIGSTOP, Ctrl-Z or a debugger)", "t": "; a debugger held it",
                 "D": "; it was waiting on the disk or on memory (swapping)"}.get(process_state(worker.pid), "")
        worker.kill()
        return cls(worker.pid, f"no answer in {waited:.0f} s{state}", answered=False)


def process_state(pid):
    """Linux's one-letter state of a process (R running, S sleeping, T stopped, ...), or None."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


class Team:
    """Workers that each answer one message at a time (serve), within a time limit:
    reply_timeout seconds, or SLOWEST_TIMES times the longest they have taken so far if that
    is longer (a larger model's steps take longer); once stopping() says the job is stopping
    (Ctrl-C, SIGTERM), STOP_GRACE seconds more at most. The workers never outlive the Team
    (stop, also when it is garbage-collected) nor this process."""

    def __init__(self, reply_timeout=REPLY_TIMEOUT, stopping=None):
        self.reply_timeout, self.stopping = reply_timeout, stopping or (lambda: False)
        self.workers = []
        self.slowest = 0.0   # the longest the workers have taken to answer a message so far, in seconds

    def start(self, target, args):
        """Stop the workers there are, then start one per item of `args`: worker k runs
        target(connection, *args[k]), which serves."""
        self.stop()
        self.workers = [Worker.start(target, *each) for each in args]
        self._finalizer = weakref.finalize(self, stop_workers, list(self.workers))

    def stop(self):
        """Stop the workers (stop_workers)."""
        if self.workers:
            self._finalizer()
            self.workers = []

    def exchange(self, messages, here):
        """Send messages[k] to worker k, run here() meanwhile, then read every reply (all
        of them, even after an error, so the next call starts clean). Returns (here()'s
        result, the replies). A worker that died or did not answer in time is an exception:
        WorkerDied, after which the Team is stopped (the next start makes new workers).
        (A message larger than the connection's buffer, a part of a very large batch, waits
        in send() for the worker to read it: a worker stopped just then holds this process
        there, and only a second Ctrl-C or SIGTERM ends it.)"""
        sent = time.monotonic()
        for worker, message in zip(self.workers, messages):
            try:
                worker.send(message)
            except WorkerDied:
                self.stop()
                raise
        try:
            result = here()
        finally:
            try:
                replies = self._replies(len(messages), sent)
            except BaseException:   # a second Ctrl-C while waiting: replies would be left unread
                self.stop()
                raise
        for reply in replies:
            if isinstance(reply, WorkerDied):
                self.stop()
            if isinstance(reply, Exception):
                raise reply
        self.slowest = max(self.slowest, time.monotonic() - sent)
        return result, replies

    def _replies(self, count, sent):
        """The replies of the first `count` workers to the messages sent at time `sent`
        (time.monotonic()); a worker that has not answered by the deadline is killed, and its
        reply is WorkerDied."""
        deadline = sent + max(self.reply_timeout, SLOWEST_TIMES * self.slowest)
        replies = []
        for worker in self.workers[:count]:
            # poll(t) waits up to t seconds for the reply (or the end-of-file of a worker that died)
            while time.monotonic() < deadline and not worker.connection.poll(min(POLL, deadline - time.monotonic())):
                if self.stopping():
                    deadline = min(deadline, time.monotonic() + max(STOP_GRACE, 2 * self.slowest))
            if worker.connection.poll(0):
                replies.append(worker.receive())
            else:
                replies.append(WorkerDied.unanswered(worker, time.monotonic() - sent))
        return replies
