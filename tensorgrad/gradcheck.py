"""gradcheck: compare the gradients backward computes with finite differences, in float64.

The numeric gradient of a scalar function f at x, element by element, is the central
difference (f(x + eps) - f(x - eps)) / (2 eps), whose error shrinks like eps^2. In float64
with eps = 1e-6 it agrees with a correct analytic gradient to about 1e-8.
"""
import numpy as np

from .autograd import no_grad
from .tensor import Tensor


class GradcheckError(AssertionError):
    """gradcheck found an analytic gradient that disagrees with finite differences."""


def gradcheck(fn, *inputs, eps=1e-6, atol=1e-5, rtol=1e-4, seed=0):
    """True when backward's gradients of fn(*inputs) match central finite differences.

    Every floating-point input is checked. A float64 Tensor is perturbed in place (so a
    module's own float64 parameters can be checked through a closure); other float inputs
    are copied to new float64 Tensors. Non-float inputs pass through unchanged. A
    non-scalar output is reduced to the scalar sum(out * r) for a fixed random r, which
    checks every output element at once. Raises GradcheckError with a report naming the
    input, the element, and both values when they disagree.
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
            projection.append(rng.standard_normal(out.shape))
        return (out * projection[0]).sum()

    try:
        for t in checked:
            t.requires_grad, t.grad = True, None
        scalar_output().backward()
        analytic = [np.zeros_like(t.data) if t.grad is None else t.grad.copy() for t in checked]
        numeric = [_finite_differences(scalar_output, t, eps) for t in checked]
    finally:
        for t, (requires_grad, grad) in zip(checked, saved):
            t.requires_grad, t.grad = requires_grad, grad

    failures = [_report(i, a, n, atol, rtol) for i, (a, n) in enumerate(zip(analytic, numeric))]
    failures = [f for f in failures if f]
    if failures:
        raise GradcheckError("gradcheck failed:\n" + "\n".join(failures))
    return True


def _checked(x):
    """A float64 Tensor for a float input (a float64 Tensor itself), anything else unchanged."""
    if isinstance(x, Tensor):
        return x if x.dtype == np.float64 or x.dtype.kind != "f" else Tensor(x.data, dtype=np.float64)
    if isinstance(x, (np.ndarray, list, float)) and np.asarray(x).dtype.kind == "f":
        return Tensor(x, dtype=np.float64)
    return x


def _finite_differences(f, t, eps):
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


def _report(index, analytic, numeric, atol, rtol):
    """'' when close, else a paragraph on input `index`: how many elements and the worst one."""
    bad = np.abs(analytic - numeric) > atol + rtol * np.abs(numeric)
    if not bad.any():
        return ""
    excess = np.where(bad, np.abs(analytic - numeric), -np.inf)
    worst = np.unravel_index(np.argmax(excess), analytic.shape)
    return (f"  input {index} (shape {analytic.shape}): {int(bad.sum())} of {bad.size} elements differ; "
            f"worst at index {tuple(int(i) for i in worst)}: analytic {analytic[worst]:.6g}, "
            f"numeric {numeric[worst]:.6g} (tolerance atol {atol:g} + rtol {rtol:g} * |numeric|)")
