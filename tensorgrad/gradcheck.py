"""gradcheck: compare the gradients backward computes with finite differences, in float64.

The numeric gradient of a scalar function f at x, element by element, is the central
difference (f(x + eps) - f(x - eps)) / (2 eps), whose error shrinks like eps^2. In float64
with eps = 1e-6 it agrees with a correct analytic gradient to about 1e-8.

When they disagree, gradcheck names the op to blame, and needs no forward function of any
op to do it (so a learner's own make_op ops are checked too): it runs fn again in a replay
mode (autograd.replaying) in which make_op hands it every tensor it makes, in order, and
may give the k-th one other data. Moving one tensor X by eps·v lets the re-run recompute
everything downstream, which measures dL/dX along v, to compare with the X.grad that
backward left. A wrong X.grad is the sum of what X's consumers sent it; a consumer whose
own gradient is right received the right upstream, so if what it sent is wrong, its vjp
is: each such vjp is checked along a random direction and, where that disagrees, element
by element, by moving X (one element at a time) with the consumer's other inputs held at
their data and watching the consumer's output alone.
"""
import numpy as np

from .autograd import backward_order, dense, describe, input_gradients, no_grad, replaying
from .tensor import Tensor


class GradcheckError(AssertionError):
    """gradcheck found an analytic gradient that disagrees with finite differences."""


def gradcheck(fn, *inputs, eps=1e-6, atol=1e-5, rtol=1e-4, seed=0):
    """True when backward's gradients of fn(*inputs) match central finite differences.

    Every floating-point input is checked. A float64 Tensor is perturbed in place (so a
    module's own float64 parameters can be checked through a closure); other float inputs
    are copied to new float64 Tensors. Non-float inputs pass through unchanged. A
    non-scalar output is reduced to the scalar L = sum(out * r), r drawn from
    np.random.default_rng(seed), which checks every output element at once; a scalar
    output is checked as it is. Raises GradcheckError with a report naming the input, the
    element and both values when they disagree, and the op(s) whose vjp is wrong.
    """
    args = [_checked(x) for x in inputs]
    checked = [a for a in args if isinstance(a, Tensor) and a.dtype.kind == "f"]
    saved = [(t.requires_grad, t.grad) for t in checked]
    rng = np.random.default_rng(seed)
    projection = []

    def scalar_output():
        out = fn(*args)
        if not isinstance(out, Tensor) or out.dtype != np.float64:
            raise TypeError(f"gradcheck: fn must return a float64 Tensor, got "
                            f"{getattr(out, 'dtype', type(out).__name__)}; finite differences need "
                            "float64 all the way through (make parameters with dtype=np.float64)")
        if not projection:
            projection.append(np.ones(()) if out.size == 1 else rng.standard_normal(out.shape))
        return (out * projection[0]).sum()

    record = Replay()
    try:
        for t in checked:
            t.requires_grad, t.grad = True, None
        with replaying(record):
            loss = scalar_output()
        loss.backward(retain_graph=True)   # kept: a culprit's vjp is asked again
        analytic = [np.zeros_like(t.data) if t.grad is None else t.grad.copy() for t in checked]
        numeric = [finite_differences(scalar_output, t, eps) for t in checked]
        failures = [_report(f"input {i}" + (f" ({t.label!r})" if t.label else ""), a, n, atol, rtol)
                    for i, (t, a, n) in enumerate(zip(checked, analytic, numeric))]
        if any(failures):
            r = projection[0]
            how = ("a scalar, checked as it is" if r.shape == () else f"shape {r.shape}, checked as L = sum(out * r), "
                   f"r = np.random.default_rng({seed}).standard_normal({r.shape})")
            blame = _blame(loss, record, scalar_output, checked, eps, atol, rtol, rng)
            raise GradcheckError(f"gradcheck failed (fn's output: {how}):\n"
                                 + "\n".join(filter(None, failures + blame)))
    finally:
        for t, (requires_grad, grad) in zip(checked, saved):
            t.requires_grad, t.grad = requires_grad, grad
    return True


class Replay:
    """A run of fn under replaying(): every op make_op made, in order, as (op, output,
    inputs); the k-th output gets the data overrides[k] where one is given."""

    def __init__(self, overrides=None):
        self.overrides, self.made = overrides or {}, []

    def __call__(self, op, out, inputs):
        if len(self.made) in self.overrides:
            out.data = self.overrides[len(self.made)]
        self.made.append((op, out, inputs))

    def ops(self):
        return [(op, out.shape) for op, out, _ in self.made]


class Unrepeatable(Exception):
    """fn does not make the same ops, or the same value, each time it runs."""


def _blame(loss, record, scalar_output, inputs, eps, atol, rtol, rng):
    """Report lines naming the op(s) whose vjp disagrees with finite differences (the
    module's docstring says how), or saying why none can be named."""
    order = backward_order(loss)
    made = {id(out): k for k, (_, out, _) in enumerate(record.made)}
    users = lambda x: [node for node in order if any(p is x for p in node.parents)]   # x's consumers

    def rerun(x, delta, hold=()):
        """The Replay of fn run again with x's data moved by delta and each tensor in `hold`
        keeping its data; its L is .value."""
        run, original = Replay({made[id(t)]: t.data for t in hold}), x.data
        if id(x) in made:
            run.overrides[made[id(x)]] = original + delta
        else:   # one of gradcheck's inputs: fn reads its data
            x.data = original + delta
        try:
            with no_grad(), replaying(run):
                run.value = scalar_output().item()
        finally:
            x.data = original
        if run.ops() != record.ops():
            raise Unrepeatable("fn made other ops when run again (does it branch on its data?)")
        return run

    def wrong(x):   # dL/dx along a random direction v: finite differences against x.grad
        v = rng.standard_normal(x.shape)
        numeric = (rerun(x, eps * v).value - rerun(x, -eps * v).value) / (2 * eps)
        return abs(np.sum(_grad(x) * v) - numeric) > atol + rtol * abs(numeric)

    try:
        with no_grad():
            if not np.isclose(scalar_output().item(), loss.item(), rtol=1e-12, atol=1e-12):
                raise Unrepeatable("fn gives another value when run again (does it draw random numbers?)")
        movable = [x for x in order[1:] if id(x) in made or any(x is t for t in inputs)]
        bad = {id(x) for x in movable if wrong(x)}
        lines = []
        for x in order:
            if id(x) in bad:
                right = [node for node in users(x) if id(node) not in bad]   # they got the right upstream
                found = [line for node in right if (line := _check_edge(node, x, rerun, made, eps, atol, rtol, rng))]
                if not found and len(right) == len(users(x)):   # every op that uses x sent it the right gradient
                    name = repr(x.label) if x.label else f"{x.op}'s output" if x.op else "an input"
                    found = [f"  the gradient of {name} (shape {x.shape}) is wrong, though the vjp of every op that "
                             "uses it agrees: fn uses its values outside the graph (.data, .item(), .detach(), ...)"]
                lines += found
    except Unrepeatable as reason:
        return [f"which op is wrong cannot be found: {reason}; the check above is of the whole function"]
    return ["the op(s) whose vjp disagrees with finite differences of that op alone:"] + lines if lines else [
        "every op's vjp agrees: fn uses an input's values outside the graph (.data, .item(), .detach(), ...)"]


def _check_edge(node, x, rerun, made, eps, atol, rtol, rng):
    """'' when the gradient that node's vjp sends to its input x matches finite differences
    of node alone (x moved, node's other inputs held at their data): along a random
    direction, then, where that disagrees, element by element for the report."""
    sent = input_gradients(node.vjps, node.parents, _grad(node))
    analytic = sum(dense(g, x.shape, x.dtype) for p, g in zip(node.parents, sent) if p is x)
    hold = [p for p in node.parents if p is not x and id(p) in made]
    operands = ', '.join(str(k) for k, p in enumerate(node.parents) if p is x)
    where = (f"op {describe(node)}: its vjp for operand {operands}"
             + (f" ({x.label!r})" if x.label else ""))

    def along(step):   # d Σ(node.grad · node's output) along step/eps; None if another operand moved too
        (_, above, inputs), (_, below, _) = (rerun(x, s, hold).made[made[id(node)]] for s in (step, -step))
        if any(p is not x and not np.array_equal(p.data, q.data) for p, q in zip(node.parents, inputs)):
            return None
        return np.sum(_grad(node) * (above.data - below.data)) / (2 * eps)

    v = rng.standard_normal(x.shape)
    numeric = along(eps * v)
    if numeric is None:
        return f"  {where} cannot be checked alone: another of its operands is made from this one outside the graph"
    if abs(np.sum(analytic * v) - numeric) <= atol + rtol * abs(numeric):
        return ""
    numeric = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        step = np.zeros(x.shape)
        step[i] = eps
        numeric[i] = along(step)
    return _report(where, analytic, numeric, atol, rtol)


def _grad(t):
    """t.grad, or zeros where no gradient reached t."""
    return np.zeros(t.shape) if t.grad is None else t.grad


def _checked(x):
    """A float64 Tensor for a float input (a float64 Tensor itself), anything else unchanged."""
    if isinstance(x, Tensor):
        return x if x.dtype == np.float64 or x.dtype.kind != "f" else Tensor(x.data, dtype=np.float64, label=x.label)
    if isinstance(x, (np.ndarray, list, float)) and np.asarray(x).dtype.kind == "f":
        return Tensor(x, dtype=np.float64)
    return x


def finite_differences(f, t, eps):
    """d f / d t, element by element: (f(t + eps) - f(t - eps)) / (2 eps)."""
    grad = np.zeros_like(t.data)
    with no_grad():
        for i in np.ndindex(t.shape):
            original = t.data[i]
            t.data[i] = original + eps
            above = f().item()
            t.data[i] = original - eps
            below = f().item()
            t.data[i] = original
            grad[i] = (above - below) / (2 * eps)
    return grad


def _report(what, analytic, numeric, atol, rtol):
    """'' when close, else a paragraph on `what`: how many elements differ, and the worst one."""
    bad = np.abs(analytic - numeric) > atol + rtol * np.abs(numeric)
    if not bad.any():
        return ""
    excess = np.where(bad, np.abs(analytic - numeric), -np.inf)
    worst = np.unravel_index(np.argmax(excess), analytic.shape)
    return (f"  {what} (shape {analytic.shape}): {int(bad.sum())} of {bad.size} elements differ; "
            f"worst at index {tuple(int(i) for i in worst)}: analytic {analytic[worst]:.6g}, "
            f"numeric {numeric[worst]:.6g} (tolerance atol {atol:g} + rtol {rtol:g} * |numeric|)")
