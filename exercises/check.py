"""Grade the lab's exercises: "not started", "passes", or what is wrong, where, and a hint.

    python exercises/check.py               every exercise
    python exercises/check.py 5 7           exercises 05 and 07
    python exercises/check.py --solutions   the solutions in exercises/solutions/ (they pass)

How an op is graded: for each lab.Case in the exercise's CHECKS, the inputs are drawn from
np.random.default_rng(seed) (the seed is printed with any mistake), the op's forward runs,
and an upstream gradient g = dL/d(out) is drawn from the same generator: the loss being
differentiated is L = Σ g·out. Your vjp gets that g; what it returns for each input is
compared with finite differences of the forward,

    dL/dx[i] ≈ (L(x[i] + ε) - L(x[i] - ε)) / 2ε,

the shape first, then the values. A function of several ops (exercise 01's neuron) is
graded by tg.gradcheck, whose report names the op that is wrong; any other check (10: the
model's loss falls) is a function that raises AssertionError saying what went wrong.

Exit status: 0 when every exercise checked passes, else 1.
"""
import argparse
import sys
from types import SimpleNamespace

import numpy as np

import lab
import tensorgrad as tg
from tensorgrad.gradcheck import finite_differences

EPS, ATOL, RTOL = 1e-6, 1e-6, 1e-5
PASSES, NOT_STARTED, NEEDS_WORK, WAITING = "passes", "not started", "needs work", "waiting"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("numbers", nargs="*", type=int, help="the exercises to grade (default: all of them)")
    parser.add_argument("--solutions", action="store_true", help="grade exercises/solutions/ instead of your vjps")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.numbers) - set(lab.numbers()))
    if unknown:
        parser.error(f"no exercise {unknown[0]}: there are {lab.numbers()[0]} to {lab.numbers()[-1]}")
    lab.use_solutions = args.solutions
    verdicts = []
    for number in args.numbers or lab.numbers():
        try:
            exercise = lab.load(number)
        except Exception as error:   # the file itself does not run: a syntax error, a bad import
            verdict, lines = NEEDS_WORK, [f"the file does not load: {type(error).__name__}: {error}"]
        else:
            verdict, lines = grade(exercise)
        print(f"{lab.path(number).stem}: {verdict}")
        for line in lines:
            print(f"    {line}")
        verdicts.append(verdict)
    return 0 if all(verdict == PASSES for verdict in verdicts) else 1


def grade(exercise):
    """(verdict, lines) for one exercise: PASSES when all its checks pass, NOT_STARTED when
    none of its vjps is written yet, else NEEDS_WORK with what to do (for each op, about
    the first Case it fails). A check of the whole (a function of several ops, a training
    run) waits until the checks before it pass."""
    results = []   # (verdict, lines, what was checked)
    for seed, check in enumerate(exercise.CHECKS):
        try:
            one_op = isinstance(check, lab.Case) and _is_one_op(check)
        except Exception as error:   # the forward is given, but an edit may have broken it
            name = check.op.__name__
            results.append((NEEDS_WORK, [f"{name}: its forward raised {type(error).__name__}: {error}"], name))
            continue
        if one_op:
            results.append(grade_op(check, seed))
        elif all(verdict == PASSES for verdict, _, _ in results):
            results.append((*grade_whole(check, seed), _name(check)))
        else:
            results.append((WAITING, [f"{_name(check)}: waits until the checks above pass"], _name(check)))
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


def grade_op(case, seed):
    """(verdict, lines, op) for one op on one Case: its vjp against finite differences."""
    rng = np.random.default_rng(seed)
    tensors, others = _inputs(case, rng)
    run = lambda: case.op(**tensors, **others)
    out = run()
    g = rng.standard_normal(out.shape)
    try:
        returned = _vjp_results(out, g, list(tensors))
    except NotImplementedError as error:
        return NOT_STARTED, [f"{out.op}: not started ({error})"], out.op
    except Malformed as error:
        return NEEDS_WORK, [f"{out.op}: {error}", _seed_line(seed)], out.op
    except Exception as error:   # the vjp crashed: say what it was given
        given = ", ".join([f"g {g.shape}"] + [f"{name} {t.shape}" for name, t in tensors.items()])
        context = _context(out, g, tensors, others, None, None, {}, error)
        return NEEDS_WORK, [f"{out.op}: your vjp raised {type(error).__name__}: {error}", f"  it was given {given}",
                            *_hints(context), _seed_line(seed)], out.op
    expected = {name: finite_differences(lambda: (run() * g).sum(), t, EPS) for name, t in tensors.items()}
    lines = []
    for name, tensor in tensors.items():
        got = returned[next(i for i, p in enumerate(out._parents) if p is tensor)]
        lines += _compare(_context(out, g, tensors, others, name, got, expected))
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
        return NOT_STARTED, [f"{_name(check)}: needs {error}"]
    except AssertionError as error:   # tg.GradcheckError is one
        return NEEDS_WORK, [f"{_name(check)}: {line}" if i == 0 else f"  {line}" for i, line in
                            enumerate(str(error).splitlines())]
    except Exception as error:
        return NEEDS_WORK, [f"{_name(check)}: raised {type(error).__name__}: {error}"]
    return PASSES, []


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
    """What the op's vjp returns for each of its inputs, as it returns it (backward would
    sum a broadcast shape down: the grader wants to see it). The grader looks inside the
    node as backward does: its inputs (_parents) and its vjps (_vjps)."""
    if not callable(out._vjps):   # one function per input
        return [vjp(g) for vjp in out._vjps]
    returned = out._vjps(g)   # one function for all the inputs: a tuple of their gradients
    if not isinstance(returned, (tuple, list)) or len(returned) != len(out._parents):
        raise Malformed(f"the vjp must return a tuple of {len(out._parents)} gradients, one per input "
                        f"({', '.join('dL/d' + name for name in names)}); it returned {_what(returned)}")
    return list(returned)


def _compare(c):
    """[] when c.got (the vjp's gradient for input c.name) matches finite differences
    (c.want), else lines saying how it differs, with hints."""
    op, name, want = c.op, c.name, c.want
    if c.got is None:
        return [f"{op}, input {name}: your vjp returned None for it; return dL/d{name}, of shape {want.shape}"]
    try:
        c.got = np.asarray(c.got, dtype=np.float64)
    except (TypeError, ValueError):
        return [f"{op}, input {name}: your vjp returned {_what(c.got)}, not an array of {name}'s shape {want.shape}"]
    if c.got.shape != want.shape:
        return [f"{op}, input {name}: expected shape {want.shape} ({name}'s shape), got {c.got.shape}", *_hints(c)]
    bad = ~np.isclose(c.got, want, rtol=RTOL, atol=ATOL)
    if not bad.any():
        return []
    if not c.got.ndim:
        return [f"{op}, input {name}: dL/d{name} is {want:.6g} by finite differences, yours {c.got:.6g}", *_hints(c)]
    worst = np.unravel_index(np.argmax(np.where(bad, np.abs(c.got - want), -1)), want.shape)
    return [f"{op}, input {name}: {int(bad.sum())} of {bad.size} elements are wrong; element "
            f"{tuple(int(i) for i in worst)} of dL/d{name} is {want[worst]:.6g} by finite differences, "
            f"yours {c.got[worst]:.6g}", *_hints(c)]


def _context(out, g, tensors, others, name, got, expected, error=None):
    """What a hint may look at: the op, its output and g, the inputs' arrays (and the
    others) by name, the input being graded, the gradient the vjp returned for it and the
    right one (want), every input's right gradient (expected), and the error if the vjp
    raised one."""
    arrays = {n: t.data for n, t in tensors.items()}
    return SimpleNamespace(op=out.op, out=out.data, g=g, inputs={**arrays, **others}, name=name, got=got,
                           want=expected.get(name), expected=expected, error=error)


def _hints(c):
    """Hints for the mistake in c: the general ones about shapes and values, then those
    about this op's classic mistakes (CLASSIC)."""
    return [*_shape_hints(c), *_value_hints(c), *CLASSIC.get(c.op, lambda c: ())(c)]


def _shape_hints(c):
    if c.got is None or c.got.shape == c.want.shape:
        return
    want, out = c.want.shape, c.out.shape
    if len(want) >= 2 and c.got.shape == want[::-1]:
        yield "did you transpose? the gradient has its input's shape, not the transposed one"
    elif c.got.shape == out and tg.autograd.broadcasts_to(want, out):
        extra = len(out) - len(want)
        stretched = tuple(range(extra)) + tuple(extra + i for i, n in enumerate(want) if n < out[extra + i])
        yield (f"{c.name} {want} was broadcast to {out} in the forward, so each of its elements was used in "
               f"several places: the chain rule sums their gradients, over axes {stretched}")
    elif c.got.shape == c.g.shape:
        yield f"that is g's shape: spread g back over the axes the forward removed, to {c.name}'s shape"


def _value_hints(c):
    if c.got is None or c.got.shape != c.want.shape:
        return
    swapped = [other for other, grad in c.expected.items() if other != c.name and _like(c.got, grad)]
    meaningful = np.abs(c.want) > 1e-6
    ratio = c.got[meaningful] / c.want[meaningful] if meaningful.any() else np.ones(1)
    if swapped:
        yield f"yours is the gradient of {swapped[0]}: are two of them swapped?"
    elif not c.got.any():
        yield "your gradient is all zeros"
    elif c.got.size > 1 and np.allclose(ratio, ratio.flat[0], rtol=1e-4) and not np.isclose(ratio.flat[0], 1):
        yield "the sign is flipped" if np.isclose(ratio.flat[0], -1) else \
            f"yours is {ratio.flat[0]:.6g} times the right one, everywhere"
    elif c.got.ndim == 2 and c.got.shape[0] == c.got.shape[1] and _like(c.got, c.want.T):
        yield "yours is the transpose of the right one: did you transpose?"


def _like(a, b):
    return a is not None and np.shape(a) == np.shape(b) and np.allclose(a, b, RTOL, ATOL)


def _ratio_is(c, n):
    """True when c.got is n times the right gradient."""
    return c.got is not None and _like(c.got, n * c.want)


# ---- the classic mistakes, op by op: each recognises one and says what it is -----------------
def _matmul(c):   # the transposed gradient: a shape that does not fit, or the transpose's values
    if c.error is not None or c.got.shape != c.want.shape or _like(c.got, c.want.T):
        yield ("line up the shapes: g is (n, m), a (n, k), b (k, m), and dL/da must be (n, k), dL/db (k, m): each "
               "is g times the other input, or its transpose, in the one order whose shapes fit (the transposed "
               "matmul gradient)")


def _mean(c):   # the missing 1/n
    n = c.inputs["x"].size // c.out.size
    if _ratio_is(c, n):
        yield (f"mean divides each sum by n = {n}, the number of elements averaged, and so does its gradient: "
               "the missing 1/n")


def _softmax_vjp(c):   # the diagonal of the Jacobian alone
    if _like(c.got, c.out * c.g):
        yield ("you have s·g: the Jacobian's diagonal alone. Each s_i also moves when any other x_j of its row "
               "does (through the sum below the fraction): the off-diagonal terms -s_i·s_j are missing: softmax's "
               "missing subtraction")


def _cross_entropy(c):   # softmax without the one-hot subtracted, or without the mean's 1/N
    p, rows = _softmax(c.inputs["logits"]), len(c.inputs["targets"])
    if _like(c.got, c.g * p / rows) or _like(c.got, c.g * p):
        yield ("the missing subtraction: at each row's target the loss has the term -logits[i, t_i], whose "
               "derivative is -1 there (and 0 elsewhere)")
    if _ratio_is(c, rows):
        yield f"the loss is the mean over the {rows} rows: the missing 1/N"


def _layer_norm(c):   # μ and σ held constant
    x, w = c.inputs["x"], c.inputs["w"]
    if c.name == "x" and _like(c.got, c.g * w / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5)):
        yield "you treated μ and σ as constants: they depend on every x of the row, two more paths to the loss"


def _embedding(c):   # grad[ids] += g, which keeps one row of g for an id picked twice
    if c.got is not None and _like(c.got, _overwritten(c.g, c.inputs["table"], c.inputs["ids"])):
        yield (f"ids repeat ({_repeats(c.inputs['ids'])}): `grad[ids] += g` keeps one row of g for a repeated id "
               "(numpy writes each place once); np.add.at(grad, ids, g) adds them all")


def _attention(c):   # the 1/√d lost, or put in twice
    root_d = np.sqrt(c.inputs["q"].shape[-1])
    if _ratio_is(c, root_d) or _ratio_is(c, 1 / root_d):
        yield "the 1/√d of the scores: dL/dq and dL/dk carry it once"


CLASSIC = {"matmul": _matmul, "mean": _mean, "softmax": _softmax_vjp, "cross_entropy": _cross_entropy,
           "layer_norm": _layer_norm, "embedding": _embedding, "attention": _attention}


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _overwritten(g, table, ids):
    grad = np.zeros_like(table)
    grad[ids] += g
    return grad


def _repeats(ids):
    values, counts = np.unique(ids, return_counts=True)
    return ", ".join(f"id {v} {n} times" for v, n in zip(values, counts) if n > 1)


def _name(check):
    """What a check is called in the report: the function it tries, or the check itself."""
    return f"{check.op.__name__} (the whole)" if isinstance(check, lab.Case) else check.__name__


def _seed_line(seed):
    return (f"  (the inputs, then g, drawn from np.random.default_rng({seed}); L = Σ g·out; finite differences "
            f"with ε = {EPS:g})")


def _what(value):
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return f"an array of shape {value.shape}" if isinstance(value, np.ndarray) else f"a {type(value).__name__}"


if __name__ == "__main__":
    sys.exit(main())
