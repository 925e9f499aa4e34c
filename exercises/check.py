"""Grade the lab's exercises: "not started", "passes", or what is wrong, where, and a hint.

    python exercises/check.py               every exercise
    python exercises/check.py 5 7           exercises 05 and 07
    python exercises/check.py --solutions   the solutions in exercises/solutions/ (they pass)
    python exercises/check.py --timeout 30  give each check 30 s instead of 10
    python exercises/check.py --lang ko     in Korean (the default where LC_ALL or LANG starts with ko)

This file is the command: its flags, and the worker processes that grade while the checker
keeps time. How an exercise is graded is grading.py's (each vjp against finite differences
of the forward, and what it wrote into); what a mistake is called is hints.py's (each rule
names one mistake students make, and only once it has checked that claim); the words are
messages.py's, in English and Korean.

Each exercise is graded in a worker process of its own, which tells the checker each check
it starts (and each step of a long one, through lab.tell: 10's training): a check or step
that does not return within the time limit is stopped with its worker, and an exercise
that exits (exit(), SystemExit, KeyboardInterrupt), when imported or in a vjp, or kills its
worker, needs work. What an exercise prepares before its first step (lab.preparing: 10's
training text) is the lab's work, not the learner's: it gets PREPARING seconds (or the time
limit, if longer), and the limit counts again from the first step.

What an exercise does changes no other exercise's verdict, nor its own into a pass:
- each worker leads a session (a process group) of its own, killed whole when its exercise
  ends or runs out of time, or when the checker is stopped (Ctrl-C, SIGTERM, SIGHUP): what
  the exercise started ends with it. On Linux the worker also ends when the checker dies,
  even by SIGKILL (PR_SET_PDEATHSIG). These are the training job's workers
  (tgtrain/workers.py), not a copy of them;
- each worker reports on a pipe of its own; a message carries the worker's pid, and one from
  any other process is not heard; a process the exercise forked that comes back into the
  grader's code ends there; and the worker's end is asked of the system (waitid), not of the
  pipes such a process may still hold;
- the messages are JSON, never pickle: reading one runs nothing in the checker. The
  gradients that passed cross as numbers, and the checker, which never runs an exercise's
  code, compares them with finite differences' again itself (grading.recheck); and the
  worker compares what the grader computes with (numpy's, tensorgrad's, builtins' and
  check.py's own functions and methods) before and after the exercise: what the exercise
  replaced is named, and it needs work.
It is not a sandbox: an exercise is Python with its user's rights, and one written to forge
the worker's messages can. Forking, patching numpy or the grader, or stopping the checker
do not.

Exit status: 0 when every exercise checked passes, else 1 (130 when stopped by Ctrl-C, 143
by SIGTERM, 129 by SIGHUP).
"""
import argparse
import contextlib
import json
import math
import os
import signal
import sys
import time
import types
from multiprocessing.connection import wait

import numpy as np

import lab
import messages
from grading import NEEDS_WORK, NOT_STARTED, PASSES, grade_file, recheck
from messages import say
from tgtrain.workers import STOPS, Worker, held   # the training job's workers, and its stop signals

TIMEOUT = 10.0       # seconds a check (or a step of a long one: lab.tell) may take
PREPARING = 300.0    # seconds what an exercise prepares before its first step may take (lab.preparing)
LONGEST = 86400.0    # the longest --timeout, a day: a pipe's poll refuses a much longer wait (10¹² s)
AHEAD = 1            # workers started before their turn (each a new Python with numpy: a few tenths of a second)
TICK = 0.25          # seconds between two looks at whether the worker still runs
LARGEST = 1 << 26    # bytes a worker's message may hold: 64 MiB (its numbers are a few small gradients)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    # the language first, so that --help is in it too: --lang, else the locale
    wanted = argparse.ArgumentParser(add_help=False)
    wanted.add_argument("--lang")
    lang = wanted.parse_known_args(argv)[0].lang
    messages.language = lang if lang in messages.LANGUAGES else messages.from_locale()
    parser = argparse.ArgumentParser(description=say("description"))
    parser.add_argument("numbers", nargs="*", type=int, help=say("help_numbers"))
    parser.add_argument("--solutions", action="store_true", help=say("help_solutions"))
    parser.add_argument("--timeout", type=_seconds, default=TIMEOUT, metavar="SECONDS",
                        help=say("help_timeout", seconds=TIMEOUT))
    parser.add_argument("--lang", choices=messages.LANGUAGES, default=messages.language, help=say("help_lang"))
    args = parser.parse_args(argv)
    unknown = sorted(set(args.numbers) - set(lab.numbers()))
    if unknown:
        parser.error(say("no_such_exercise", number=unknown[0], first=lab.numbers()[0], last=lab.numbers()[-1]))
    lab.use_solutions = args.solutions
    verdicts = []
    before = {stop: signal.getsignal(stop) for stop in STOPS - {signal.SIGINT}}   # Ctrl-C: KeyboardInterrupt
    for stop, handler in before.items():
        if handler is not signal.SIG_IGN:   # nohup's SIGHUP stays ignored
            signal.signal(stop, _stop)
    try:
        with contextlib.closing(grade_apart(args.numbers or lab.numbers(), args.timeout)) as graded:
            for number, verdict, lines in graded:
                print(f"{lab.path(number).stem}: {say(verdict)}", flush=True)
                for line in lines:
                    print(f"    {line}", flush=True)
                verdicts.append(verdict)
    except KeyboardInterrupt:
        print(say("interrupted"), file=sys.stderr)
        return 130
    except Stopped as stop:
        print(say("terminated", signal=signal.Signals(stop.number).name), file=sys.stderr)
        return 128 + stop.number
    finally:
        for stop, handler in before.items():
            if handler is not None:   # None: set outside Python, and left so
                signal.signal(stop, handler)
    return 0 if all(verdict == PASSES for verdict in verdicts) else 1


def _seconds(text):
    """--timeout's value: a number of seconds, more than 0 and at most LONGEST."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= LONGEST:
        raise argparse.ArgumentTypeError(say("bad_timeout", text=text, longest=LONGEST))
    return seconds


class Stopped(Exception):
    """SIGTERM or SIGHUP reached the checker: it ends the worker, then exits 128 + number."""

    def __init__(self, number):
        super().__init__(number)
        self.number = number


def _stop(number, frame):
    raise Stopped(number)


# ---- grading apart: a worker process grades, the checker keeps time ------------------------------
def grade_apart(numbers, timeout):
    """Yield (number, verdict, lines) for each exercise, each graded by a worker process of
    its own that says what it is doing (each check it starts) and what it found. Where a
    check does not return within `timeout` seconds, or the worker dies, that exercise needs
    work. (A thread could not do this: a loop in pure Python cannot be stopped from outside
    it.) Each worker is ended, with all it started, before its verdict is given; the next
    one (AHEAD of them) is started as the one before it is let go, so that its start (a new
    Python, numpy, the grader) overlaps the grading before it."""
    numbers, started = list(numbers), []   # workers started, in the order of `numbers`
    try:
        for i, number in enumerate(numbers):
            with held(STOPS):   # a stop waits until there is a worker to end with it
                if not started:
                    started.append(_start(number))
                worker = started[0]
                worker.connection.send_bytes(b"go")
                for each in numbers[i + len(started):i + 1 + AHEAD]:
                    started.append(_start(each))
            verdict, lines = _listen(number, worker, timeout)
            worker.kill()   # its process group: the worker and what its exercise started
            started.pop(0)
            yield number, verdict, lines
    finally:   # Ctrl-C, SIGTERM, or the checker's own error: no worker is left
        for each in started:
            each.kill()


def _start(number):
    """A worker (tgtrain.workers: a session of its own) that grades exercise `number` once
    told to go. A new Python ("spawn"), not a fork of this one: Python's docs warn that forking
    a process that runs threads (numpy's BLAS starts some) can leave the child waiting forever
    on a lock one of them held. When the checker dies, SIGTERM, not SIGKILL: it kills the
    worker's whole group, so what its exercise started ends too."""
    return Worker.start(_work, number, lab.use_solutions, messages.language,
                        method="spawn", on_parent_death=signal.SIGTERM)


def _listen(number, worker, timeout):
    """The verdict, from what the worker says: ("doing", what) and ("preparing", what) set
    the time limit for what follows, ("done", ...) ends. A message from any process but the
    worker (one its exercise forked) is not heard; one that cannot be read is the exercise's."""
    doing, limit = say("starting_worker"), max(timeout, PREPARING)
    found, process = worker.connection, worker.process
    deadline, listening = time.monotonic() + limit, [found, process.sentinel]
    while True:
        ready = wait(listening, max(0.0, min(deadline - time.monotonic(), TICK)))
        if found in ready:
            try:
                message = _read(found, process.pid)
            except EOFError:   # no process holds the pipe any more: the worker is ending
                listening = [process.sentinel]
                continue
            except Exception as error:   # too long, or not check.py's JSON
                return NEEDS_WORK, [say("unreadable", what=doing, error=error)]
            if message is None:
                continue
            if message["kind"] == "done":
                return _verdict(number, message)
            doing = message["what"]
            limit = timeout if message["kind"] == "doing" else max(timeout, PREPARING)
            deadline = time.monotonic() + limit
            continue
        code = _exit_status(process)
        if code is not None:   # it ended without a word: os._exit, a crash in C code, a kill
            return NEEDS_WORK, [say("worker_died", what=doing, code=code)]
        if process.sentinel in ready:   # closed by hand while it runs: the system alone is asked
            listening = [each for each in listening if each is not process.sentinel]
        if time.monotonic() >= deadline:
            return NEEDS_WORK, [say("timed_out", what=doing, seconds=limit)]


def _exit_status(process):
    """The worker's exit status once it has ended (-N: killed by signal N), else None. Asked
    of the system (waitid), not of its sentinel pipe, which a process its exercise forked
    may hold open; and it is not reaped, so its pid, and its group's, stay its own for kill()."""
    if not hasattr(os, "waitid"):
        return process.exitcode
    try:
        ended = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:   # reaped already
        return process.exitcode
    if ended is None:
        return None
    return ended.si_status if ended.si_code == os.CLD_EXITED else -ended.si_status


def _read(found, pid):
    """The next message on the pipe as a dict, checked to be one the worker sends; None for
    one from another process (the pid it carries is not the worker's)."""
    message = json.loads(found.recv_bytes(LARGEST))
    if not isinstance(message, dict) or type(message.get("pid")) is not int:
        raise ValueError("not a message of check.py's worker")
    if message["pid"] != pid:
        return None
    strings = lambda value: isinstance(value, list) and all(isinstance(item, str) for item in value)
    if message.get("kind") in ("doing", "preparing") and isinstance(message.get("what"), str):
        return message
    if message.get("kind") == "done" and message.get("verdict") in (PASSES, NOT_STARTED, NEEDS_WORK) and \
            strings(message.get("lines")) and strings(message.get("replaced")) and \
            isinstance(message.get("compared"), list):
        message["compared"] = [_comparison(record) for record in message["compared"]]
        return message
    raise ValueError("not a message of check.py's worker")


def _verdict(number, message):
    """(verdict, lines) from the worker's last message, told by the checker itself: where the
    exercise replaced what the grader computes with, or the gradients that passed do not
    pass the checker's own comparison, it needs work."""
    verdict, lines, replaced = message["verdict"], message["lines"], message["replaced"]
    if verdict == PASSES:
        lines = recheck(message["compared"])
    if replaced:
        shown = replaced[:6] + ([say("and_more", count=len(replaced) - 6)] if len(replaced) > 6 else [])
        lines = [say("replaced", file=lab.path(number).name, names=", ".join(shown)), *lines]
    return (NEEDS_WORK if replaced or lines and verdict == PASSES else verdict), lines


# ---- the worker -------------------------------------------------------------------------------------
def _work(connection, number, solutions, language):
    """The worker, on its own (Worker.start): once the checker says go on `connection`, grade
    exercise `number`, telling the checker {"kind": "doing", "what": ...} before each check,
    "preparing" before what an exercise prepares (lab.preparing), and "done" (the verdict,
    its lines, the gradients compared where it passes, the names of what the exercise
    replaced) at the end; each message as JSON, never pickle, with the worker's pid."""
    try:
        connection.recv_bytes(16)
    except (EOFError, OSError):   # the checker ended before its turn
        return
    lab.use_solutions, messages.language = solutions, language
    me = os.getpid()

    def send(kind, **fields):
        if os.getpid() != me:   # a process the exercise forked, back in the grader's code: it ends here
            os._exit(0)
        for stream in (sys.stdout, sys.stderr):   # what the exercise printed, before the checker goes on
            with contextlib.suppress(OSError, ValueError, AttributeError):
                stream.flush()
        connection.send_bytes(json.dumps({"pid": me, "kind": kind, **fields}).encode())

    lab.tell = lambda what: send("doing", what=what)   # a long check's steps, each timed on its own
    lab.preparing = lambda what: send("preparing", what=what)
    watched = _watched()
    kept = _identities(watched)
    compared = []   # (op, input, the gradient as float64 numbers or None, finite differences')
    try:
        verdict, lines = grade_file(number, progress=lab.tell, compared=compared)
    except Exception as error:   # check.py's own bug, outside any one check: said, not a crash
        verdict, lines = NEEDS_WORK, [say("checker_failed", what=lab.path(number).name,
                                          error=f"{type(error).__name__}: {error}")]
    replaced = _replaced(watched, kept)
    send("done", verdict=verdict, lines=[str(line) for line in lines], replaced=replaced,
         compared=[[op, name, _numbers(got), _numbers(want)] for op, name, got, want in compared]
         if verdict == PASSES else [])


# ---- what the grader computes with, and the numbers that cross ----------------------------------
OWN = ("grading", "hints", "lab", "messages")


def _watched():
    """[(name, module)] whose names the grader computes with: numpy's and tensorgrad's
    loaded modules, builtins, and check.py's own (grading, hints, lab, messages, this one)."""
    own = {id(sys.modules[__name__]): "check", **{id(sys.modules[name]): name for name in OWN}}
    return [(own.get(id(module), name), module) for name, module in sorted(sys.modules.items())
            if isinstance(module, types.ModuleType) and (id(module) in own or name == "builtins" or
                                                            name.split(".")[0] in ("numpy", "tensorgrad"))]


def _identities(modules):
    """{name: (object, its code, its defaults)} for what the grader computes with: in each of
    `modules` (_watched), its functions, classes and modules (every name, in check.py's own),
    and the methods of the classes of numpy, tensorgrad and check.py (ndarray's among them),
    each named by its class (numpy.ndarray.any)."""
    own = {name for name, _ in modules if name in (*OWN, "check")}
    kept, classes = {}, set()
    for name, module in modules:
        for attribute, value in list(vars(module).items()):
            if name in own or _computes(value):
                kept[f"{name}.{attribute}"] = _identity(value)
            if isinstance(value, type) and id(value) not in classes and _ours(value):
                classes.add(id(value))
                where = "check" if value.__module__ == __name__ else value.__module__
                for method, function in list(vars(value).items()):
                    if _computes(function):
                        kept[f"{where}.{value.__qualname__}.{method}"] = _identity(function)
    return kept


def _computes(value):
    """A function, a class, a module or a descriptor (a method): not data that may change."""
    return callable(value) or isinstance(value, types.ModuleType) or hasattr(type(value), "__get__")


def _ours(cls):
    """A class of numpy's, tensorgrad's or check.py's own modules."""
    where = getattr(cls, "__module__", None)
    return isinstance(where, str) and (where == __name__ or where.split(".")[0] in ("numpy", "tensorgrad", *OWN))


def _identity(value):
    """The object, and the code and defaults it runs with (a function whose code was swapped
    is the same object)."""
    try:
        return value, getattr(value, "__code__", None), getattr(value, "__defaults__", None)
    except Exception:   # an object whose attributes raise: itself alone
        return value, None, None


def _replaced(modules, kept):
    """The names in `kept` (_identities of `modules`) that now name another object (or
    code), or nothing."""
    now = _identities(modules)
    changed = lambda name: name not in now or any(a is not b for a, b in zip(kept[name], now[name]))
    return sorted(name for name in kept if changed(name))


def _numbers(array):
    """An array of float64 numbers as JSON's: its shape and its values (None stays None)."""
    return None if array is None else {"shape": list(array.shape), "values": array.ravel().tolist()}


def _comparison(record):
    """(op, input, got, want) from a "done" message's record: the numbers as float64 arrays."""
    if not (isinstance(record, list) and len(record) == 4 and isinstance(record[0], str) and
            isinstance(record[1], str) and record[3] is not None):
        raise ValueError("not a message of check.py's worker")
    arrays = []
    for numbers in record[2:]:
        if numbers is None:
            arrays.append(None)
            continue
        if not (isinstance(numbers, dict) and isinstance(numbers.get("shape"), list) and
                isinstance(numbers.get("values"), list)):
            raise ValueError("not a message of check.py's worker")
        arrays.append(np.array(numbers["values"], dtype=np.float64).reshape(numbers["shape"]))
    return (record[0], record[1], *arrays)


if __name__ == "__main__":
    sys.exit(main())
