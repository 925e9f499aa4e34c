"""check.py's grading: one exercise, check by check, to a verdict and what to do.

How an op is graded: for each lab.Case in the exercise's CHECKS, the inputs are drawn from
np.random.default_rng(seed) (the seed is printed with any mistake), the op's forward runs,
and an upstream gradient g = dL/d(out) is drawn from the same generator: the loss being
differentiated is L = Σ g·out. Your vjp gets that g, read-only as backward hands it over
(tensorgrad.autograd.input_gradients); what it returns for each input is compared with
finite differences of the forward,

    dL/dx[i] ≈ (L(x[i] + ε) - L(x[i] - ε)) / 2ε,

the shape first, then the values. A vjp must leave alone what it is handed: g, and every
array the forward saved for it (its closure's: softmax's output s, cross-entropy's p, the
inputs' data); each is compared after the vjp, and a write into one is named. A function
of several ops (exercise 01's neuron) is graded by tg.gradcheck, whose report names the op
that is wrong; any other check (10: the model's loss falls) is a function that raises
AssertionError saying what went wrong. A mistake gets the hints of hints.py.
"""
import contextlib
import io
import traceback
from pathlib import Path
from types import SimpleNamespace

import numpy as np

import hints
import lab
import tensorgrad as tg
from hints import ATOL, RTOL
from messages import say
from tensorgrad.autograd import input_gradients
from tensorgrad.gradcheck import finite_differences

EPS = 1e-6
PASSES, NOT_STARTED, NEEDS_WORK, WAITING = "passes", "not started", "needs work", "waiting"


def grade_file(number, progress=lambda what: None, compared=None):
    """(verdict, lines) for exercise `number`: its file loaded, then graded (grade)."""
    name = lab.path(number).name
    progress(say("loading", file=name))
    try:
        exercise = lab.load(number)
    except Exception as error:   # the file itself does not run: a syntax error, a bad import
        return NEEDS_WORK, [say("does_not_load", error=f"{type(error).__name__}: {error}")]
    except (SystemExit, KeyboardInterrupt) as stop:   # exit() in the file, or in one it loads
        return NEEDS_WORK, [say("stopped", what=say("loading", file=name), how=_how_it_stopped(stop))]
    return grade(exercise, progress, compared)


def _how_it_stopped(stop):
    if isinstance(stop, SystemExit):
        return say("how_exit", code=stop.code)
    return say("how_interrupt")


def grade(exercise, progress=lambda what: None, compared=None):
    """(verdict, lines) for one exercise: PASSES when all its checks pass, NOT_STARTED when
    none of its vjps is written yet, else NEEDS_WORK with what to do (for each op, about
    the first Case it fails). A check of the whole (a function of several ops, a training
    run) waits until the checks before it pass. progress(what) is told each check; each
    gradient compared with finite differences is added to `compared` (a list, when given)
    as (op, input, the gradient as float64 numbers or None, finite differences'), for
    check.py to compare again (recheck) where the exercise cannot reach."""
    results = []   # (verdict, lines, what was checked)
    for seed, check in enumerate(exercise.CHECKS):
        progress(_describe(check))
        try:
            results.append(_grade_check(check, seed, results, compared))
        except (SystemExit, KeyboardInterrupt) as stop:   # an exercise must return, never end the checker
            results.append((NEEDS_WORK, [say("stopped", what=_describe(check), how=_how_it_stopped(stop))],
                            _name(check)))
        except Exception as error:   # the grader's own bug: say so, rather than end the worker
            results.append((NEEDS_WORK, [say("checker_failed", what=_describe(check), error=_where(error))],
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


def _where(error):
    """An error of check.py's own, with the line of check.py's code it came from."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if not lab.is_exercise(frame.filename)]
    where = f" ({Path(frames[-1].filename).name}, line {frames[-1].lineno})" if frames else ""
    return f"{type(error).__name__}: {error}{where}"


def _grade_check(check, seed, results, compared=None):
    """(verdict, lines, what was checked) for one of CHECKS, `results` those before it."""
    try:
        one_op = isinstance(check, lab.Case) and _is_one_op(check)
    except Exception as error:   # the forward is given, but an edit may have broken it
        name = check.op.__name__
        return NEEDS_WORK, [say("forward_raised", op=name, error=f"{type(error).__name__}: {error}")], name
    if one_op:
        return grade_op(check, seed, compared)
    if all(verdict == PASSES for verdict, _, _ in results):
        return (*grade_whole(check, seed), _name(check))
    return WAITING, [say("waits", what=_name(check))], _name(check)


class Trial:
    """One run of a Case's op: its inputs drawn from the seed, the forward, then g (the same
    numbers every time for one seed, so the vjp can be run again on them)."""

    def __init__(self, case, seed):
        rng = np.random.default_rng(seed)
        self.case, self.seed = case, seed
        self.tensors, self.others = _inputs(case, rng)
        self.out = self.run()
        self.g = rng.standard_normal(self.out.shape)

    def run(self):
        return self.case.op(**self.tensors, **self.others)

    def saved(self):
        """{name: array} the op's vjps can reach: what their closures hold (a Tensor's data
        under the tensor's name), the forward's output and inputs among them."""
        found, seen = {}, set()
        vjps = self.out._vjps
        for function in [vjps] if callable(vjps) else vjps:
            code, cells = getattr(function, "__code__", None), getattr(function, "__closure__", None) or ()
            if code is None:
                continue
            defaults = function.__defaults__ or ()
            values = [(name, cell.cell_contents) for name, cell in zip(code.co_freevars, cells) if _full(cell)]
            values += zip(code.co_varnames[code.co_argcount - len(defaults):code.co_argcount], defaults)
            for name, value in values:
                array = value.data if isinstance(value, tg.Tensor) else value
                if isinstance(array, np.ndarray) and id(array) not in seen:
                    found.setdefault(name, array)
                    seen.add(id(array))
        return found

    def gradients(self, g):
        """{input name: what the vjps return for it}, called as they are (not through backward)."""
        vjps, parents = self.out._vjps, self.out._parents
        returned = list(vjps(g)) if callable(vjps) else [vjp(g) for vjp in vjps]
        return {name: returned[next(i for i, p in enumerate(parents) if p is t)] for name, t in self.tensors.items()}

    def handing(self, kind):
        """What the vjps return when every array they are handed (g, and what their closures
        hold) is a `kind` view: an ndarray subclass that undoes one mistake (hints.KeepDims,
        hints.Fits). g stays read-only; hints.Fits.names learns each array's name."""
        names = {}
        vjps = self.out._vjps
        for function in [vjps] if callable(vjps) else vjps:
            code = getattr(function, "__code__", None)
            for name, cell in zip(code.co_freevars if code else (), getattr(function, "__closure__", None) or ()):
                value = cell.cell_contents if _full(cell) else None
                if isinstance(value, tg.Tensor) and isinstance(value.data, np.ndarray):
                    value.data = value.data.view(kind)
                    names[id(value.data)] = name
                elif isinstance(value, np.ndarray) and value.dtype.kind == "f":
                    cell.cell_contents = value.view(kind)
                    names[id(cell.cell_contents)] = name
        g = self.g.view(kind)
        g.flags.writeable = False
        names[id(g)] = "g"
        hints.Fits.names = names
        return _quietly(self.gradients, g)


def _quietly(function, *args):
    """function(*args) with what it prints kept from the learner: a vjp run again (to find
    a write, or with a mistake undone) has printed its debugging lines once already."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return function(*args)


def _full(cell):
    try:
        cell.cell_contents
    except ValueError:   # a name the function will bind later
        return False
    return True


def grade_op(case, seed, compared=None):
    """(verdict, lines, op) for one op on one Case: its vjp against finite differences
    (each gradient compared added to `compared`, when given: grade)."""
    trial = Trial(case, seed)
    out, g, tensors = trial.out, trial.g, trial.tensors
    handed = {"g": g, **trial.saved()}
    before = {name: array.copy() for name, array in handed.items()}
    returned, error = None, None
    try:
        returned = _vjp_results(out, g, list(tensors))
    except NotImplementedError as raised:
        return NOT_STARTED, [say("op_not_started", op=out.op, todo=_todo(raised))], out.op
    except Exception as raised:   # the vjp crashed, or returned no tuple of gradients (Malformed)
        error = raised
    written = [name for name, array in handed.items() if not _same(array, before[name])]
    if not written and _read_only(error):   # numpy refused a write: into what?
        written = _writes(case, seed)
    seen = lambda name=None, got=None, expected=None, **more: _seen(trial, name, got, returned, expected or {},
                                                                    error, **more)
    if written:
        shown = (error.__cause__ or error) if error is not None else None   # numpy's words, not the engine's
        said = [say("vjp_wrote_read_only", op=out.op, error=shown) if name == "?" else say(
            "vjp_wrote_into", op=out.op, name=name, what=say("what_g" if name == "g" else "what_saved"))
            for name in written]
        return NEEDS_WORK, [*said, *hints.hints(seen(written=written), rules=[hints.wrote_into]),
                            _seed_line(seed)], out.op
    if isinstance(error, Malformed):
        return NEEDS_WORK, [f"{out.op}: {error}", *hints.hints(seen(got=error.returned, malformed=True),
                                                                 rules=[hints.returned_none]), _seed_line(seed)], out.op
    expected = {name: finite_differences(lambda: (trial.run() * g).sum(), t, EPS) for name, t in tensors.items()}
    if error is not None:   # the vjp crashed: say what it was given
        given = ", ".join([f"g {g.shape}"] + [f"{name} {t.shape}" for name, t in tensors.items()])
        return NEEDS_WORK, [say("vjp_raised", op=out.op, error=f"{type(error).__name__}: {error}"),
                            say("it_was_given", given=given), *hints.hints(seen(expected=expected)),
                            _seed_line(seed)], out.op
    lines = []
    for name, tensor in tensors.items():
        got = returned[next(i for i, p in enumerate(out._parents) if p is tensor)]
        if compared is not None:
            compared.append((out.op, name, _as_floats(got), expected[name]))
        lines += _compare(seen(name, got, expected))
    lines = list(dict.fromkeys(lines))   # a hint that fits two inputs' gradients (attention's steps), once
    return (PASSES, [], out.op) if not lines else (NEEDS_WORK, lines + [_seed_line(seed)], out.op)


def _same(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")


def _read_only(error):
    """The error numpy raises for a write into a read-only array (or the engine's, from it)."""
    return isinstance(error, ValueError) and any(str(e).endswith("is read-only") for e in (error, error.__cause__))


def _writes(case, seed):
    """The names of the arrays (g, and what the forward saved) the vjp writes into, where
    numpy refused a write (the first run could not show which it was): the vjp is run again
    with all of them writable, to see which change, and with one of them writable at a time,
    to see which lets it past the write it was refused (a write of the same values changes
    nothing). ["?"] where none does: another read-only array, a view of g (broadcast_to's)."""
    def attempt(writable):
        trial = Trial(case, seed)
        handed = {"g": trial.g, **trial.saved()}
        for name, array in handed.items():
            try:
                array.flags.writeable = name in writable
            except ValueError:   # a view of memory it does not own: it stays as it is
                pass
        before = {name: array.copy() for name, array in handed.items()}
        place = None
        try:
            _quietly(trial.gradients, trial.g)
        except Exception as error:
            place = traceback.extract_tb(error.__traceback__)[-1][:2] if _read_only(error) else None
        return [name for name, array in handed.items() if not _same(array, before[name])], place

    trial = Trial(case, seed)
    names = ["g", *trial.saved()]
    changed, _ = attempt(names)
    _, refused = attempt(())
    passed = [name for name in names if name not in changed and refused is not None
              and (lambda changed, place: name in changed or place != refused)(*attempt({name}))]
    return changed + passed or ["?"]


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
    gradients, named by their keyword; the rest as they are (an array copied: a vjp that
    writes into ids or targets changes this run's, not the Case's)."""
    tensors, others = {}, {}
    for name, value in case.inputs.items():
        value = rng.standard_normal(value) if isinstance(value, tuple) else value
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            tensors[name] = tg.Tensor(value, dtype=np.float64, requires_grad=True, label=name)
        else:
            others[name] = value.copy() if isinstance(value, np.ndarray) else value
    return tensors, others


def _is_one_op(case):
    """True when case.op is one op of the Case's tensors (its output's inputs are they)."""
    tensors, others = _inputs(case, np.random.default_rng(0))
    out = case.op(**tensors, **others)
    return {id(p) for p in out._parents} == {id(t) for t in tensors.values()}


class Malformed(Exception):
    """The vjp returned something other than one gradient per input."""

    def __init__(self, message, returned):
        super().__init__(message)
        self.returned = returned


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
                            what=_what(returned)), returned)
    return returned


def _compare(c):
    """[] when c.got (the vjp's gradient for input c.name) matches finite differences
    (c.want), else lines saying how it differs, with hints."""
    op, name, want = c.op, c.name, c.want
    if c.returned is None:
        return [say("returned_none", op=op, name=name, shape=want.shape), *hints.hints(c)]
    if c.got is None:   # not numbers
        return [say("returned_what", op=op, name=name, what=_what(c.returned), shape=want.shape)]
    if c.got.shape != want.shape:
        return [say("wrong_shape", op=op, name=name, want=want.shape, got=c.got.shape), *hints.hints(c)]
    bad = ~np.isclose(c.got, want, rtol=RTOL, atol=ATOL)
    if not bad.any():
        return []
    if not c.got.ndim:
        return [say("wrong_number", op=op, name=name, want=float(want), got=float(c.got)), *hints.hints(c)]
    worst = np.unravel_index(np.argmax(np.where(bad, np.nan_to_num(np.abs(c.got - want), nan=np.inf), -1)), want.shape)
    return [say("wrong_elements", op=op, name=name, bad=int(bad.sum()), size=bad.size,
                where=tuple(int(i) for i in worst), want=want[worst], got=c.got[worst]), *hints.hints(c)]


def recheck(compared):
    """check.py's own comparison, in the checker, which never runs an exercise's code: lines
    for each (op, input, got, want) of `compared` (grade's, sent over as numbers) that is
    not right, where the worker that graded it said it was (the exercise changed how it
    compares: numpy's isclose, the grader's functions). [] when all are."""
    lines = []
    for op, name, got, want in compared:
        if got is None or got.shape != want.shape:
            lines.append(say("recheck_shape", op=op, name=name, want=want.shape,
                             got=say("what_none") if got is None else got.shape))
            continue
        bad = ~np.isclose(got, want, rtol=RTOL, atol=ATOL)
        if bad.any():
            worst = np.unravel_index(np.argmax(np.where(bad, np.nan_to_num(np.abs(got - want), nan=np.inf), -1)),
                                     want.shape)
            lines.append(say("recheck_values", op=op, name=name, bad=int(bad.sum()), size=bad.size,
                             where=tuple(int(i) for i in worst), want=want[worst], got=got[worst]))
    return lines


def _as_floats(value):
    """value as a float64 array, or None where it is not real numbers (None, a ragged tuple,
    complex numbers, a Tensor, a string)."""
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        return None
    return array.astype(np.float64) if value is not None and array.dtype.kind in "biuf" else None


def _seen(trial, name, got, returned, expected, error, written=(), malformed=False):
    """What a hint may look at (hints.py): the op, its output and g, the inputs' arrays (and
    the others) by name, the input being graded, the gradient the vjp returned for it, as
    returned and as float64 numbers (got), every input's gradient as numbers (gots), the
    right one (want) and every input's right one (expected), the error if the vjp raised
    one (malformed: it returned no tuple of one gradient per input), the names of what it
    wrote into, want_for(upstream): the right gradient for another
    g, by finite differences, and rerun(kind): what the vjp returns, run again on arrays of
    `kind` (a mistake undone)."""
    tensors, out = trial.tensors, trial.out
    arrays = {n: t.data for n, t in tensors.items()}
    want_for = None if name is None else \
        lambda upstream: finite_differences(lambda: (trial.run() * upstream).sum(), tensors[name], EPS)
    names = [n for n in tensors]
    raw = returned if isinstance(returned, (tuple, list)) and len(returned) == len(names) else [None] * len(names)
    gots = {n: _as_floats(r) for n, r in zip(names, raw)}
    return SimpleNamespace(op=out.op, out=out.data, g=trial.g, inputs={**arrays, **trial.others}, name=name,
                           returned=got, got=_as_floats(got), gots=gots, want=expected.get(name),
                           expected=expected, error=error, malformed=malformed, written=list(written), want_for=want_for,
                           rerun=lambda kind: Trial(trial.case, trial.seed).handing(kind))


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
    if value is None:
        return say("what_none")
    if isinstance(value, (tuple, list)):
        return say("what_sequence", kind=type(value).__name__, count=len(value))
    if isinstance(value, np.ndarray):
        return say("what_array", shape=value.shape)
    return say("what_other", kind=type(value).__name__)
