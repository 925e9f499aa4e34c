"""Grade the lab's exercises: "not started", "passes", or what is wrong, where, and a hint.

    python exercises/check.py               every exercise
    python exercises/check.py 5 7           exercises 05 and 07
    python exercises/check.py --solutions   the solutions in exercises/solutions/ (they pass)
    python exercises/check.py --timeout 30  give each check 30 s instead of 10
    python exercises/check.py --lang ko     in Korean (the default where LC_ALL or LANG starts with ko)

How an op is graded: for each lab.Case in the exercise's CHECKS, the inputs are drawn from
np.random.default_rng(seed) (the seed is printed with any mistake), the op's forward runs,
and an upstream gradient g = dL/d(out) is drawn from the same generator: the loss being
differentiated is L = Σ g·out. Your vjp gets that g, read-only as backward hands it over
(tensorgrad.autograd.input_gradients); what it returns for each input is compared with
finite differences of the forward,

    dL/dx[i] ≈ (L(x[i] + ε) - L(x[i] - ε)) / 2ε,

the shape first, then the values. A function of several ops (exercise 01's neuron) is
graded by tg.gradcheck, whose report names the op that is wrong; any other check (10: the
model's loss falls) is a function that raises AssertionError saying what went wrong.

A mistake gets hints: each rule in HINTS recognises one mistake students make (a write
into g, a lost keepdims, a forgotten g, x where the formula needs out, a wrong axis, ...)
from what the grader saw, and says what it is. The words are in messages.py, in English
and Korean.

Each exercise is graded in a worker process, which tells the checker each check it starts
(and each step of a long one, through lab.tell: 10's training): a check or step that does
not return within the time limit is stopped with its worker (a new one goes on with the
next exercise), and an exercise that exits (exit(), SystemExit, KeyboardInterrupt), when
imported or in a vjp, or kills its worker, needs work.

Exit status: 0 when every exercise checked passes, else 1 (130 when stopped by Ctrl-C).
"""
import argparse
import itertools
import math
import multiprocessing
import re
import signal
import sys
import traceback
from pathlib import Path
from types import SimpleNamespace

import numpy as np

import lab
import messages
import tensorgrad as tg
from messages import say
from tensorgrad.autograd import broadcasts_to, input_gradients
from tensorgrad.gradcheck import finite_differences

EPS, ATOL, RTOL = 1e-6, 1e-6, 1e-5
TIMEOUT = 10.0       # seconds a check (or a step of a long one: lab.tell) may take
LONGEST = 86400.0    # the longest --timeout, a day: a pipe's poll refuses a much longer wait (10¹² s)
PASSES, NOT_STARTED, NEEDS_WORK, WAITING = "passes", "not started", "needs work", "waiting"


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
            doing = None
            while todo:
                if doing is not None and not found.poll(timeout):   # its start-up is not the exercise's
                    yield todo.pop(0), NEEDS_WORK, [say("timed_out", what=doing, seconds=timeout)]
                    break
                try:
                    kind, *news = found.recv()
                except EOFError:   # it ended without a word: os._exit, a crash in C code, a kill
                    worker.join()
                    what = doing or say("starting_worker")
                    yield todo.pop(0), NEEDS_WORK, [say("worker_died", what=what, code=worker.exitcode)]
                    break
                if kind == "doing":
                    doing = news[0]
                else:
                    yield todo.pop(0), *news
                    doing = say("starting_next")
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
    """The worker: grade each exercise, telling `tell` ("doing", what) before each check and
    ("done", verdict, lines) after each exercise."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the checker's: it ends the worker
    lab.use_solutions, messages.language = solutions, language
    lab.tell = lambda what: tell.send(("doing", what))   # a long check's steps, each timed on its own
    for number in numbers:
        verdict, lines = grade_file(number, progress=lab.tell)
        tell.send(("done", verdict, lines))


def grade_file(number, progress=lambda what: None):
    """(verdict, lines) for exercise `number`: its file loaded, then graded."""
    name = lab.path(number).name
    progress(say("loading", file=name))
    try:
        exercise = lab.load(number)
    except Exception as error:   # the file itself does not run: a syntax error, a bad import
        return NEEDS_WORK, [say("does_not_load", error=f"{type(error).__name__}: {error}")]
    except (SystemExit, KeyboardInterrupt) as stop:   # exit() in the file, or in one it loads
        return NEEDS_WORK, [say("stopped", what=say("loading", file=name), how=_how_it_stopped(stop))]
    return grade(exercise, progress)


def _how_it_stopped(stop):
    if isinstance(stop, SystemExit):
        return say("how_exit", code=stop.code)
    return say("how_interrupt")


# ---- grading one exercise -------------------------------------------------------------------------
def grade(exercise, progress=lambda what: None):
    """(verdict, lines) for one exercise: PASSES when all its checks pass, NOT_STARTED when
    none of its vjps is written yet, else NEEDS_WORK with what to do (for each op, about
    the first Case it fails). A check of the whole (a function of several ops, a training
    run) waits until the checks before it pass. progress(what) is told each check."""
    results = []   # (verdict, lines, what was checked)
    for seed, check in enumerate(exercise.CHECKS):
        progress(_describe(check))
        try:
            results.append(_grade_check(check, seed, results))
        except (SystemExit, KeyboardInterrupt) as stop:   # an exercise must return, never end the checker
            results.append((NEEDS_WORK, [say("stopped", what=_describe(check), how=_how_it_stopped(stop))],
                            _name(check)))
    verdicts = {verdict for verdict, _, _ in results}
    if verdicts == {PASSES}:
        return PASSES, []
    if verdicts <= {NOT_STARTED, WAITING}:
        return NOT_STARTED, []
    first_failures = {}
    for verdict, lines, what in results:
        if verdict != PASSES:
            first_failures.setdefault(what, lines)
    return NEEDS_WORK, [line for lines in first_failures.values() for line in lines]


def _grade_check(check, seed, results):
    """(verdict, lines, what was checked) for one of CHECKS, `results` those before it."""
    try:
        one_op = isinstance(check, lab.Case) and _is_one_op(check)
    except Exception as error:   # the forward is given, but an edit may have broken it
        name = check.op.__name__
        return NEEDS_WORK, [say("forward_raised", op=name, error=f"{type(error).__name__}: {error}")], name
    if one_op:
        return grade_op(check, seed)
    if all(verdict == PASSES for verdict, _, _ in results):
        return (*grade_whole(check, seed), _name(check))
    return WAITING, [say("waits", what=_name(check))], _name(check)


def grade_op(case, seed):
    """(verdict, lines, op) for one op on one Case: its vjp against finite differences."""
    rng = np.random.default_rng(seed)
    tensors, others = _inputs(case, rng)
    run = lambda: case.op(**tensors, **others)
    out = run()
    g = rng.standard_normal(out.shape)
    g_before = g.copy()
    try:
        returned = _vjp_results(out, g, list(tensors))
    except NotImplementedError as error:
        return NOT_STARTED, [say("op_not_started", op=out.op, todo=_todo(error))], out.op
    except Malformed as error:
        return NEEDS_WORK, [f"{out.op}: {error}", _seed_line(seed)], out.op
    except Exception as error:   # the vjp crashed: say what it was given
        given = ", ".join([f"g {g.shape}"] + [f"{name} {t.shape}" for name, t in tensors.items()])
        seen = _seen(out, g, tensors, others, run, None, None, {}, error)
        shown = error.__cause__ if _wrote_into_g(error) else error   # numpy's own words, not the engine's
        return NEEDS_WORK, [say("vjp_raised", op=out.op, error=f"{type(shown).__name__}: {shown}"),
                            say("it_was_given", given=given), *_hints(seen), _seed_line(seed)], out.op
    if not np.array_equal(g, g_before, equal_nan=True):   # a write that numpy let through (np.add.at does)
        return NEEDS_WORK, [say("vjp_wrote_into_g", op=out.op), say("hint_wrote_into_g"), _seed_line(seed)], out.op
    expected = {name: finite_differences(lambda: (run() * g).sum(), t, EPS) for name, t in tensors.items()}
    lines = []
    for name, tensor in tensors.items():
        got = returned[next(i for i, p in enumerate(out._parents) if p is tensor)]
        lines += _compare(_seen(out, g, tensors, others, run, name, got, expected))
    lines = list(dict.fromkeys(lines))   # a hint that fits two inputs' gradients (attention's steps), once
    return (PASSES, [], out.op) if not lines else (NEEDS_WORK, lines + [_seed_line(seed)], out.op)


def grade_whole(check, seed):
    """(verdict, lines) for a function of several ops (through tg.gradcheck, which names
    the op that is wrong) or for a check function (it raises AssertionError when it fails)."""
    try:
        if isinstance(check, lab.Case):
            tensors, others = _inputs(check, np.random.default_rng(seed))
            tg.gradcheck(lambda *_: check.op(**tensors, **others), *tensors.values())
        else:
            check()
    except NotImplementedError as error:
        return NOT_STARTED, [say("needs", what=_name(check), todo=_todo(error))]
    except AssertionError as error:   # tg.GradcheckError is one
        return NEEDS_WORK, [f"{_name(check)}: {line}" if i == 0 else f"  {line}" for i, line in
                            enumerate(str(error).splitlines())]
    except Exception as error:
        return NEEDS_WORK, [say("whole_raised", what=_name(check), error=f"{type(error).__name__}: {error}")]
    return PASSES, []


def _todo(error):
    """What a NotImplementedError asks for: the function of an exercise that raised it (else
    what the error says)."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if lab.is_exercise(frame.filename)]
    if not frames:
        return str(error)
    return say("write_it", number=Path(frames[-1].filename).name[:2], function=frames[-1].name)


def _inputs(case, rng):
    """The Case's inputs: float ones (a shape: random numbers) as float64 Tensors that need
    gradients, named by their keyword; the rest as they are."""
    tensors, others = {}, {}
    for name, value in case.inputs.items():
        value = rng.standard_normal(value) if isinstance(value, tuple) else value
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            tensors[name] = tg.Tensor(value, dtype=np.float64, requires_grad=True, label=name)
        else:
            others[name] = value
    return tensors, others


def _is_one_op(case):
    """True when case.op is one op of the Case's tensors (its output's inputs are they)."""
    tensors, others = _inputs(case, np.random.default_rng(0))
    out = case.op(**tensors, **others)
    return {id(p) for p in out._parents} == {id(t) for t in tensors.values()}


class Malformed(Exception):
    """The vjp returned something other than one gradient per input."""


def _vjp_results(out, g, names):
    """What the op's vjps return for each of its inputs, as they return it (backward would
    sum a broadcast shape down: the grader wants to see it). They run as backward runs them,
    through the engine's input_gradients, which hands them g read-only: a vjp that writes
    into g raises. The grader looks inside the node as backward does: its inputs (_parents)
    and its vjps (_vjps)."""
    vjps = out._vjps
    if callable(vjps):   # one function for all the inputs: a tuple of their gradients
        vjps = lambda g: _one_per_input(out._vjps(g), len(out._parents), names)
    return input_gradients(vjps, out._parents, g, out)


def _one_per_input(returned, count, names):
    if not isinstance(returned, (tuple, list)) or len(returned) != count:
        raise Malformed(say("malformed", count=count, grads=", ".join("dL/d" + name for name in names),
                            what=_what(returned)))
    return returned


def _compare(c):
    """[] when c.got (the vjp's gradient for input c.name) matches finite differences
    (c.want), else lines saying how it differs, with hints."""
    op, name, want = c.op, c.name, c.want
    if c.got is None:
        return [say("returned_none", op=op, name=name, shape=want.shape)]
    try:
        c.got = np.asarray(c.got, dtype=np.float64)
    except (TypeError, ValueError):
        return [say("returned_what", op=op, name=name, what=_what(c.got), shape=want.shape)]
    if c.got.shape != want.shape:
        return [say("wrong_shape", op=op, name=name, want=want.shape, got=c.got.shape), *_hints(c)]
    bad = ~np.isclose(c.got, want, rtol=RTOL, atol=ATOL)
    if not bad.any():
        return []
    if not c.got.ndim:
        return [say("wrong_number", op=op, name=name, want=float(want), got=float(c.got)), *_hints(c)]
    worst = np.unravel_index(np.argmax(np.where(bad, np.nan_to_num(np.abs(c.got - want), nan=np.inf), -1)), want.shape)
    return [say("wrong_elements", op=op, name=name, bad=int(bad.sum()), size=bad.size,
                where=tuple(int(i) for i in worst), want=want[worst], got=c.got[worst]), *_hints(c)]


def _seen(out, g, tensors, others, run, name, got, expected, error=None):
    """What a hint may look at: the op, its output and g, the inputs' arrays (and the
    others) by name, the input being graded, the gradient the vjp returned for it and the
    right one (want), every input's right gradient (expected), the error if the vjp raised
    one, and want_for(upstream): the right gradient for another g, by finite differences."""
    arrays = {n: t.data for n, t in tensors.items()}
    want_for = None if name is None else \
        lambda upstream: finite_differences(lambda: (run() * upstream).sum(), tensors[name], EPS)
    return SimpleNamespace(op=out.op, out=out.data, g=g, inputs={**arrays, **others}, name=name, got=got,
                           want=expected.get(name), expected=expected, error=error, want_for=want_for)


def _hints(c):
    """The hints for the mistake in c: every rule of HINTS that recognises it, or where none
    does, what FALLBACKS can say of the numbers."""
    named = [hint for rule in HINTS if (hint := rule(c))]
    return named or [hint for rule in FALLBACKS if (hint := rule(c))]


# ---- the hints: each rule recognises one mistake from what the grader saw (c), and says it ------
# A rule returns None where its mistake is not the one. Each is tried by tests/test_lab.py
# on a wrong vjp written as a student would write it.
def wrote_into_g(c):
    """`g *= out`: numpy refuses the write, g being read-only."""
    return say("hint_wrote_into_g") if c.error is not None and _wrote_into_g(c.error) else None


def lost_keepdims(c):
    """numpy cannot broadcast a sum that lost its axis against what it came from (sum and
    mean, whose exercise is keepdims, have their own rule)."""
    if c.op in ("sum", "mean") or c.error is None:
        return None
    lost = _lost_axes(c.error)
    if lost is None:
        return None
    big, small, axes = lost
    return say("hint_lost_keepdims", small=small, big=big, axes=_axes_text(axes))


def sum_keepdims(c):
    """Exercise 03's vjp, g not put back to x's axes as keepdims says (a crash or a shape)."""
    if c.op not in ("sum", "mean") or (c.error is None and c.got.shape == c.want.shape):
        return None
    x = c.inputs["x"]
    axes = _axes_of(c.inputs.get("axis"), x.ndim)
    key = "hint_keepdims_true" if c.inputs.get("keepdims") else "hint_keepdims_false"
    return say(key, g=c.g.shape, x=x.shape, axes=_axes_text(axes), axis=axes, ndim=x.ndim)


def forgot_g(c):
    """The local derivative alone: the gradient for g = 1."""
    if not _same_shape(c):
        return None
    ones = c.want_for(np.ones_like(c.g))   # for softmax all 0 (but for the differences' noise): no sign of g
    return say("hint_forgot_g", name=c.name) if not _like(ones, 0 * ones) and _like(c.got, ones) else None


def zero(c):
    """Zero everywhere, or rounding noise of terms that cancel (1e-17), where the right one is not."""
    if not _same_shape(c) or not _nearly_zero(c.got, c.want):
        return None
    biggest = np.abs(c.got).max()
    return say("hint_zero") if biggest == 0 else say("hint_nearly_zero", biggest=biggest)


def swapped(c):
    """Another input's gradient."""
    if not _same_shape(c):
        return None
    others = [other for other, grad in c.expected.items() if other != c.name and _like(c.got, grad)]
    return say("hint_swapped", other=others[0]) if others else None


def transposed(c):
    """The input's shape reversed."""
    ok = c.got is not None and c.got.ndim >= 2 and c.got.shape != c.want.shape and c.got.shape == c.want.shape[::-1]
    return say("hint_transposed") if ok else None


def not_summed_back(c):
    """A broadcast input's gradient left in the broadcast shape."""
    if c.got is None or c.got.shape == c.want.shape or c.got.shape != c.out.shape:
        return None
    want, out = c.want.shape, c.out.shape
    return say("hint_not_summed_back", name=c.name, want=want, out=out, axes=_stretched(want, out)) \
        if broadcasts_to(want, out) else None


def summed_wrong(c):
    """A broadcast input's gradient summed from g over the wrong axes, or with the right axes
    but not keeping those it has with size 1."""
    if c.got is None or c.got.shape in (c.want.shape, c.g.shape) or not broadcasts_to(c.want.shape, c.g.shape):
        return None
    right = _stretched(c.want.shape, c.g.shape)
    for axes, keep in _sums(c.g.ndim):
        if _summed_shape(c.g.shape, axes, keep) == c.got.shape:
            if set(axes) == set(right):
                return say("hint_sum_keepdims_shape", name=c.name, want=c.want.shape, axes=_axes_text(right))
            return say("hint_sum_wrong_axes", name=c.name, want=c.want.shape, g=c.g.shape,
                       yours=_axes_text(axes), right=_axes_text(right))
    return None


def g_shape(c):
    """g itself, where the forward summed axes away: its shape, not the input's (sum and mean
    have their own rule)."""
    if c.op in ("sum", "mean") or c.got is None or c.got.shape != c.g.shape or c.g.shape == c.want.shape:
        return None
    for axes, keep in _sums(len(c.want.shape)):
        if _summed_shape(c.want.shape, axes, keep) == c.g.shape:
            return say("hint_g_shape", name=c.name, want=c.want.shape, axes=_axes_text(axes))
    return None


# the local derivative of each elementwise op of exercise 04, written with x, then with out
ELEMENTWISE = {
    "exp": (lambda x: np.exp(x), lambda out: out, "d(e^x)/dx = e^x = out"),
    "log": (lambda x: 1 / x, lambda out: np.exp(-out), "d(ln x)/dx = 1/x"),
    "tanh": (lambda x: 1 - np.tanh(x) ** 2, lambda out: 1 - out ** 2, "d(tanh x)/dx = 1 - tanh²(x) = 1 - out²"),
}


def mixed_up(c):
    """The output where the formula needs the input, or the reverse (exercise 04), and
    cross-entropy's logits where it needs p = softmax(logits)."""
    if not _same_shape(c):
        return None
    if c.op == "cross_entropy":
        logits, targets = c.inputs["logits"], c.inputs["targets"]
        one_hot = np.eye(logits.shape[1])[targets]
        return say("hint_logits_for_p") if _like(c.got, c.g * (logits - one_hot) / len(targets)) else None
    if c.op not in ELEMENTWISE:
        return None
    with_x, with_out, rule = ELEMENTWISE[c.op]
    x, out = c.inputs["x"], c.out
    with np.errstate(all="ignore"):
        if _like(c.got, c.g * with_x(out)):
            return say("hint_needs_x", op=c.op, rule=rule)
        if _like(c.got, c.g * with_out(x)):
            return say("hint_needs_out", op=c.op, rule=rule)
    return None


def wrong_axis(c):
    """softmax's sum, or layer norm's means, along another axis than each row's (the last)."""
    if c.op not in ALONG_ROWS or c.name != "x" or not _same_shape(c):
        return None
    formula, key = ALONG_ROWS[c.op]
    for axis in range(c.got.ndim - 1):
        if _like(c.got, formula(c, axis)):
            return say(key, axis=axis)
    return None


def mean_divisor(c):
    """mean's gradient not divided by n, or by the size of other axes than the averaged ones."""
    if c.op != "mean" or not _same_shape(c):
        return None
    x = c.inputs["x"]
    axes = _axes_of(c.inputs.get("axis"), x.ndim)
    n = int(np.prod([x.shape[a] for a in axes]))
    for others, _ in _sums(x.ndim):
        m = int(np.prod([x.shape[a] for a in others]))
        if set(others) != set(axes) and m != n and _like(c.got, c.want * n / m):
            return say("hint_mean_other_axes", m=m, others=_axes_text(others), axes=_axes_text(axes), n=n)
    return say("hint_mean_missing_n", n=n) if _like(c.got, n * c.want) else None


def matmul_shapes(c):
    """The transposed matmul gradient: a product whose shapes do not fit, or a wrong shape."""
    if c.op != "matmul" or not (_other_error(c) or c.error is None and c.got.shape != c.want.shape):
        return None
    return say("hint_matmul_shapes")


def softmax_diagonal(c):
    """s·g: the Jacobian's diagonal alone."""
    return say("hint_softmax_diagonal") if c.op == "softmax" and _like(c.got, c.out * c.g) else None


def cross_entropy_one_hot(c):
    """p without the one-hot subtracted (with or without the mean)."""
    if c.op != "cross_entropy":
        return None
    p, rows = _softmax(c.inputs["logits"]), len(c.inputs["targets"])
    return say("hint_one_hot") if _like(c.got, c.g * p / rows) or _like(c.got, c.g * p) else None


def cross_entropy_mean(c):
    """The mean's 1/N forgotten."""
    rows = len(c.inputs.get("targets", ()))
    return say("hint_mean_rows", rows=rows) if c.op == "cross_entropy" and _like(c.got, rows * c.want) else None


def layer_norm_constants(c):
    """μ and σ held constant: g·w/σ."""
    if c.op != "layer_norm" or c.name != "x":
        return None
    sigma = _layer_norm_parts(c.inputs["x"])[1]
    return say("hint_layer_norm_constants") if _like(c.got, c.g * c.inputs["w"] / sigma) else None


def embedding_repeats(c):
    """grad[ids] += g, which keeps one row of g for an id picked twice."""
    if c.op != "embedding" or not _like(c.got, _overwritten(c.g, c.inputs["table"], c.inputs["ids"])):
        return None
    return say("hint_embedding_repeats", repeats=_repeats(c.inputs["ids"]))


def embedding_rows(c):
    """g itself: one row per id, where the table has one row per character."""
    if c.op != "embedding" or c.got is None or c.got.shape != c.g.shape or c.g.shape == c.want.shape:
        return None
    return say("hint_embedding_rows", ids=len(c.inputs["ids"]), rows=c.want.shape[0])


def attention_shapes(c):
    """A product of attention's backward whose shapes do not fit, or a wrong shape."""
    if c.op != "attention" or not (_other_error(c) or c.error is None and c.got.shape != c.want.shape):
        return None
    T, d = c.inputs["q"].shape
    return say("hint_attention_shapes", T=T, d=d)


def attention_step(c):
    """One of ATTENTION_MISTAKES, in the step where it is made."""
    if c.op != "attention" or not _same_shape(c):
        return None
    q, k, v = (c.inputs[name] for name in "qkv")
    args = c.g, q, k, v, c.inputs.get("causal", True)
    for mistake, key in ATTENTION_MISTAKES.items():
        mistaken = _attention_backward(*args, mistake)[c.name]
        if not _like(mistaken, c.want) and _like(c.got, mistaken):
            return say(key, name=c.name, T=q.shape[0], root_d=np.sqrt(q.shape[1]))
    return None


def attention_mask_inf(c):
    """-inf (or nan) where the scores were masked: their gradient is 0."""
    if c.op != "attention" or not _same_shape(c) or np.isfinite(c.got).all():
        return None
    return say("hint_attention_mask_inf", name=c.name)


HINTS = [wrote_into_g, lost_keepdims, sum_keepdims, forgot_g, zero, swapped, transposed, not_summed_back,
         summed_wrong, g_shape, mixed_up, wrong_axis, mean_divisor, matmul_shapes, softmax_diagonal,
         cross_entropy_one_hot, cross_entropy_mean, layer_norm_constants, embedding_repeats, embedding_rows,
         attention_shapes, attention_step, attention_mask_inf]


def ratio(c):
    """The right one times a number, everywhere (the sign flipped: -1)."""
    if not _same_shape(c) or c.got.size < 2:
        return None
    meaningful = np.abs(c.want) > 1e-6
    ratios = c.got[meaningful] / c.want[meaningful]
    if not meaningful.any() or not np.allclose(ratios, ratios[0], rtol=1e-4) or np.isclose(ratios[0], 1):
        return None
    return say("hint_sign") if np.isclose(ratios[0], -1) else say("hint_ratio", ratio=ratios[0])


FALLBACKS = [ratio]


# ---- what the rules share -------------------------------------------------------------------------
def _like(a, b):
    return a is not None and np.shape(a) == np.shape(b) and np.allclose(a, b, RTOL, ATOL)


def _same_shape(c):
    return c.got is not None and c.got.shape == c.want.shape


def _nearly_zero(a, right):
    """a is 0, or rounding noise, beside the right gradient (which is not)."""
    return np.abs(a).max() <= 1e-9 * np.abs(right).max()


def _wrote_into_g(error):
    """The error a vjp that wrote into the read-only g raised (numpy's, or the engine's from it)."""
    return isinstance(error, ValueError) and any(str(e).endswith("is read-only") for e in (error, error.__cause__))


def _lost_axes(error):
    """(big, small, axes) where numpy's broadcast error is about `small`, `big` without its
    `axes`: a sum that lost them. None where it is another error."""
    if not isinstance(error, ValueError) or "could not be broadcast" not in str(error):
        return None
    shapes = [tuple(int(n) for n in found.split(",") if n.strip())
              for found in re.findall(r"\(([\d,\s]*)\)", str(error))]
    for big, small in itertools.permutations(shapes, 2):
        for axes in itertools.combinations(range(len(big)), len(big) - len(small)):
            if axes and tuple(n for i, n in enumerate(big) if i not in axes) == small:
                return big, small, axes
    return None


def _other_error(c):
    """The vjp raised, and no rule about g or keepdims explains it."""
    return c.error is not None and not _wrote_into_g(c.error) and _lost_axes(c.error) is None


def _sums(ndim):
    """Every (axes, keepdims) a sum over some of `ndim` axes can take."""
    for count in range(1, ndim + 1):
        for axes in itertools.combinations(range(ndim), count):
            yield from ((axes, False), (axes, True))


def _summed_shape(shape, axes, keepdims):
    """The shape of a sum over `axes` of an array of `shape`."""
    return tuple(1 if i in axes else n for i, n in enumerate(shape) if keepdims or i not in axes)


def _stretched(shape, target):
    """The axes of `target` along which broadcasting stretched an array of `shape`."""
    extra = len(target) - len(shape)
    return tuple(range(extra)) + tuple(extra + i for i, n in enumerate(shape) if n < target[extra + i])


def _axes_of(axis, ndim):
    """An op's axis argument as a tuple of non-negative ints (every axis for None)."""
    axes = range(ndim) if axis is None else (axis,) if isinstance(axis, int) else axis
    return tuple(sorted(a % ndim for a in axes))


def _axes_text(axes):
    return ", ".join(str(a) for a in axes)


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _softmax_along(c, axis):
    """softmax's vjp with its sum along `axis` (right: the last)."""
    s, g = c.out, c.g
    return s * (g - (g * s).sum(axis=axis, keepdims=True))


def _layer_norm_parts(x):
    sigma = np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5)
    return (x - x.mean(axis=-1, keepdims=True)) / sigma, sigma


def _layer_norm_along(c, axis):
    """layer norm's dL/dx with its two means along `axis` (right: the last)."""
    x_hat, sigma = _layer_norm_parts(c.inputs["x"])
    g_hat = c.g * c.inputs["w"]
    means = g_hat.mean(axis=axis, keepdims=True), (g_hat * x_hat).mean(axis=axis, keepdims=True)
    return (g_hat - means[0] - x_hat * means[1]) / sigma


# the ops that work along each row: their vjp with its sums along any axis, and the hint's key
ALONG_ROWS = {"softmax": (_softmax_along, "hint_softmax_axis"),
              "layer_norm": (_layer_norm_along, "hint_layer_norm_axis")}

# attention's mistakes, each in one of its steps: what _attention_backward does for each, the hint's key
ATTENTION_MISTAKES = {
    "mask_forgotten": "hint_attention_mask_forgotten",
    "dv_transpose": "hint_attention_dv",
    "softmax_diagonal": "hint_attention_softmax_diagonal",
    "softmax_keepdims": "hint_attention_softmax_keepdims",
    "softmax_axis": "hint_attention_softmax_axis",
    "scale_lost": "hint_attention_scale",
    "scale_twice": "hint_attention_scale",
    "dq_transpose": "hint_attention_dq",
    "dk_transpose": "hint_attention_dk",
}


def _attention_backward(g, q, k, v, causal, mistake=None):
    """{"q": dL/dq, "k": dL/dk, "v": dL/dv} of exercise 09's attention, right, or with one of
    ATTENTION_MISTAKES made: the grader's own, to recognise each mistake by."""
    T, d = q.shape
    scores = q @ k.T / np.sqrt(d)                                          # 1. scores
    if causal and mistake != "mask_forgotten":                             # 2. mask
        scores = np.where(np.triu(np.ones((T, T), dtype=bool), k=1), -np.inf, scores)
    weights = _softmax(scores)                                             # 3. softmax
    grad_v = (weights if mistake == "dv_transpose" else weights.T) @ g     # 4. out = weights @ v, backward
    grad_weights = g @ v.T
    rows = (grad_weights * weights).sum(axis=0 if mistake == "softmax_axis" else -1,
                                        keepdims=mistake != "softmax_keepdims")
    grad_scores = weights * (grad_weights - (0 if mistake == "softmax_diagonal" else rows))
    scale = {"scale_lost": 1.0, "scale_twice": 1 / d}.get(mistake, 1 / np.sqrt(d))
    grad_q = (grad_scores.T if mistake == "dq_transpose" else grad_scores) @ k * scale
    grad_k = (grad_scores if mistake == "dk_transpose" else grad_scores.T) @ q * scale
    return {"q": grad_q, "k": grad_k, "v": grad_v}


def _overwritten(g, table, ids):
    grad = np.zeros_like(table)
    grad[ids] += g
    return grad


def _repeats(ids):
    values, counts = np.unique(ids, return_counts=True)
    return ", ".join(say("id_times", id=v, times=n) for v, n in zip(values, counts) if n > 1)


def _name(check):
    """What a check is called in the report: the function it tries, or the check itself."""
    return say("the_whole", op=check.op.__name__) if isinstance(check, lab.Case) else check.__name__


def _describe(check):
    """A check as the exercise's CHECKS writes it: sum_over(x=(2, 3, 4), axis=[0, 2])."""
    if not isinstance(check, lab.Case):
        return check.__name__
    shown = lambda v: f"<{v.shape} array>" if isinstance(v, np.ndarray) and v.dtype.kind == "f" else \
        np.array2string(v, separator=", ") if isinstance(v, np.ndarray) else repr(v)
    return f"{check.op.__name__}({', '.join(f'{k}={shown(v)}' for k, v in check.inputs.items())})"


def _seed_line(seed):
    return say("seed", seed=seed, eps=EPS)


def _what(value):
    if isinstance(value, (tuple, list)):
        return say("what_sequence", kind=type(value).__name__, count=len(value))
    if isinstance(value, np.ndarray):
        return say("what_array", shape=value.shape)
    return say("what_other", kind=type(value).__name__)


if __name__ == "__main__":
    sys.exit(main())
