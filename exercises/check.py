"""Grade the lab's exercises: "not started", "passes", or what is wrong, where, and a hint.

    python exercises/check.py               every exercise
    python exercises/check.py 5 7           exercises 05 and 07
    python exercises/check.py --solutions   the solutions in exercises/solutions/ (they pass)
    python exercises/check.py --timeout 30  give each check 30 s instead of 10
    python exercises/check.py --lang ko     in Korean (the default where LC_ALL or LANG starts with ko)

This file is the command: its flags, and the worker process that grades while the checker
keeps time. How an exercise is graded is grading.py's (each vjp against finite differences
of the forward, and what it wrote into); what a mistake is called is hints.py's (each rule
names one mistake students make, and only once it has checked that claim); the words are
messages.py's, in English and Korean.

Each exercise is graded in a worker process, which tells the checker each check it starts
(and each step of a long one, through lab.tell: 10's training): a check or step that does
not return within the time limit is stopped with its worker (a new one goes on with the
next exercise), and an exercise that exits (exit(), SystemExit, KeyboardInterrupt), when
imported or in a vjp, or kills its worker, needs work. What an exercise prepares before its
first step (lab.preparing: 10's training text) is the lab's work, not the learner's: it
gets PREPARING seconds (or the time limit, if longer), and the limit counts again from the
first step.

Exit status: 0 when every exercise checked passes, else 1 (130 when stopped by Ctrl-C).
"""
import argparse
import math
import multiprocessing
import signal
import sys

import lab
import messages
from grading import NEEDS_WORK, PASSES, grade_file
from messages import say

TIMEOUT = 10.0       # seconds a check (or a step of a long one: lab.tell) may take
PREPARING = 300.0    # seconds what an exercise prepares before its first step may take (lab.preparing)
LONGEST = 86400.0    # the longest --timeout, a day: a pipe's poll refuses a much longer wait (10¹² s)


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
    try:
        for number, verdict, lines in grade_apart(args.numbers or lab.numbers(), args.timeout):
            print(f"{lab.path(number).stem}: {say(verdict)}", flush=True)
            for line in lines:
                print(f"    {line}", flush=True)
            verdicts.append(verdict)
    except KeyboardInterrupt:
        print(say("interrupted"), file=sys.stderr)
        return 130
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


# ---- grading apart: a worker process grades, the checker keeps time ------------------------------
def grade_apart(numbers, timeout):
    """Yield (number, verdict, lines) for each exercise, graded by a worker process that says
    what it is doing (each check it starts) and what it found (each exercise). Where a check
    does not return within `timeout` seconds, or the worker dies, that exercise needs work
    and the worker is ended; a new one goes on with the exercises after it. (A thread could
    not do this: a loop in pure Python cannot be stopped from outside it.)"""
    todo = list(numbers)
    while todo:
        worker, found = _start_worker(todo)
        try:
            doing, limit = None, None   # its start-up is not the exercise's: no limit
            while todo:
                if limit is not None and not found.poll(limit):
                    yield todo.pop(0), NEEDS_WORK, [say("timed_out", what=doing, seconds=limit)]
                    break
                try:
                    kind, *news = found.recv()
                except EOFError:   # it ended without a word: os._exit, a crash in C code, a kill
                    worker.join()
                    what = doing or say("starting_worker")
                    yield todo.pop(0), NEEDS_WORK, [say("worker_died", what=what, code=worker.exitcode)]
                    break
                if kind in ("doing", "preparing"):
                    doing, limit = news[0], timeout if kind == "doing" else max(timeout, PREPARING)
                else:
                    yield todo.pop(0), *news
                    doing, limit = say("starting_next"), timeout
        finally:
            if worker.is_alive():
                worker.kill()
            worker.join()
            found.close()


def _start_worker(numbers):
    """A process that grades `numbers` in turn, and the end of the pipe it reports on. It is
    a new Python ("spawn", which every platform has), not a fork of this one: Python's docs
    warn that forking a process that runs threads (numpy's BLAS starts some) can leave the
    child waiting forever on a lock one of them held."""
    spawn = multiprocessing.get_context("spawn")
    found, tell = spawn.Pipe(duplex=False)
    worker = spawn.Process(target=_work, args=(numbers, lab.use_solutions, messages.language, tell), daemon=True)
    worker.start()
    tell.close()   # the worker holds its own copy: when it ends, found.recv() sees the end
    return worker, found


def _work(numbers, solutions, language, tell):
    """The worker: grade each exercise, telling `tell` ("doing", what) before each check,
    ("preparing", what) before what an exercise prepares (lab.preparing), and ("done",
    verdict, lines) after each exercise."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the checker's: it ends the worker
    lab.use_solutions, messages.language = solutions, language
    lab.tell = lambda what: tell.send(("doing", what))   # a long check's steps, each timed on its own
    lab.preparing = lambda what: tell.send(("preparing", what))
    for number in numbers:
        try:
            verdict, lines = grade_file(number, progress=lab.tell)
        except Exception as error:   # check.py's own bug, outside any one check: said, not a crash
            verdict, lines = NEEDS_WORK, [say("checker_failed", what=lab.path(number).name,
                                              error=f"{type(error).__name__}: {error}")]
        tell.send(("done", verdict, lines))


if __name__ == "__main__":
    sys.exit(main())
