"""make_op cannot be misused into wrong gradients silently.

A learner's vjp may hand g back (or a view of it, or an array the forward saved), or may
write into g; either used to corrupt another tensor's gradient without a word. Now backward
hands g and what the forward saved to the vjps read-only: what comes back read-only is never
taken for a new array (backward adds into new arrays only), and a write raises, naming the
op, the input and the rule.
"""
import contextlib

import numpy as np
import pytest

import tensorgrad as tg

HINT = "a vjp must not write into g: it may be shared"


def passing_through(x, vjp):
    """An op whose forward is x itself (as a new array) and whose backward is `vjp`."""
    return tg.make_op("passing_through", x.data.copy(), (x,), vjps=(vjp,))


@pytest.mark.parametrize("anomaly", [False, True])
def test_a_vjp_returning_g_leaves_each_branch_its_own_gradient(anomaly):
    x = tg.tensor([1., 2.], requires_grad=True)
    with tg.detect_anomaly() if anomaly else contextlib.nullcontext():
        first, second = passing_through(x, lambda g: g), passing_through(x, lambda g: g)
        (first * 2 + second).sum().backward()
    np.testing.assert_array_equal(first.grad, [2., 2.])   # was [3, 3] when g was taken for new
    np.testing.assert_array_equal(second.grad, [1., 1.])
    np.testing.assert_array_equal(x.grad, [3., 3.])


@pytest.mark.parametrize("view", [lambda g: g[...], lambda g: g.reshape(2, 3), lambda g: g.T.T,
                                  lambda g: g.reshape(3, 2).reshape(2, 3)], ids=["g[...]", "reshape", "T.T", "reshape-twice"])
def test_a_vjp_returning_a_view_of_g_leaves_each_branch_its_own_gradient(view):
    x = tg.tensor(np.arange(6.).reshape(2, 3), requires_grad=True)
    first, second = passing_through(x, view), passing_through(x, view)
    (first * 2 + second * 5).sum().backward()
    np.testing.assert_array_equal(first.grad, np.full((2, 3), 2.))
    np.testing.assert_array_equal(second.grad, np.full((2, 3), 5.))
    np.testing.assert_array_equal(x.grad, np.full((2, 3), 7.))


def test_an_intermediate_fed_g_twice_keeps_the_branches_apart():
    x = tg.tensor([1., 2.], requires_grad=True)
    h = x * 1   # an intermediate: its gradient is summed here, then sent on to x
    first, second = passing_through(h, lambda g: g), passing_through(h, lambda g: g)
    (first * 2 + second * 3).sum().backward()
    np.testing.assert_array_equal(first.grad, [2., 2.])
    np.testing.assert_array_equal(second.grad, [3., 3.])
    np.testing.assert_array_equal(h.grad, [5., 5.])
    np.testing.assert_array_equal(x.grad, [5., 5.])


def test_a_leaf_gets_a_gradient_of_its_own_from_a_vjp_that_returns_g():
    x = tg.tensor([1., 2.], requires_grad=True)
    out = passing_through(x, lambda g: g)
    out.sum().backward()
    x.grad *= 10   # an optimizer, or clipping, updates it in place
    np.testing.assert_array_equal(out.grad, [1., 1.])


def sloppy_mul(a, b, write):
    """a·b whose vjp for a writes into g (the student's `g *= b`) in the way `write` says."""
    def grad_a(g):
        write(g, b.data)
        return g
    return tg.make_op("sloppy_mul", a.data * b.data, (a, b), vjps=(grad_a, lambda g: g * a.data))


def weighted_sum(out):
    """L = Σ out·w: g = w, an array of its own (a plain .sum() would hand g over as a
    read-only broadcast, which numpy refused to write into before backward did)."""
    return (out * np.array([5., 7.])).sum()


WRITES = {"g *= b": lambda g, b: g.__imul__(b),
          "g[...] = g * b": lambda g, b: g.__setitem__(Ellipsis, g * b),
          "np.multiply(g, b, out=g)": lambda g, b: np.multiply(g, b, out=g)}


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
def test_a_vjp_writing_into_g_is_an_error_naming_the_op_the_input_and_the_rule(write):
    a = tg.tensor([1., 2.], requires_grad=True, label="a")
    b = tg.tensor([3., 4.], requires_grad=True)
    with pytest.raises(ValueError) as caught:
        weighted_sum(sloppy_mul(a, b, write)).backward()
    message = str(caught.value)
    assert "op 'sloppy_mul'" in message and "inputs of shapes (2,), (2,)" in message
    assert "vjp for input 0 ('a')" in message and HINT in message


def test_a_write_into_g_by_one_backward_for_all_inputs_names_the_op():
    a, b = tg.tensor([1., 2.], requires_grad=True), tg.tensor([3., 4.], requires_grad=True)

    def backward(g):
        grad_b = g * a.data
        g *= b.data
        return g, grad_b
    out = tg.make_op("sloppy_mul", a.data * b.data, (a, b), vjps=backward)
    with pytest.raises(ValueError, match=r"op 'sloppy_mul' \(inputs of shapes \(2,\), \(2,\)\): its backward wrote"):
        weighted_sum(out).backward()


def test_a_write_into_g_is_named_in_a_traced_backward_too(capsys):
    # the trace wraps an op's vjps into one backward that prints: the op is named, not the input
    a, b = tg.tensor([1., 2.], requires_grad=True), tg.tensor([3., 4.], requires_grad=True)
    with pytest.raises(ValueError, match="op 'sloppy_mul'.*" + HINT):
        weighted_sum(sloppy_mul(a, b, WRITES["g *= b"])).backward(trace=True)


def test_gradcheck_names_the_op_that_writes_into_g():
    # it used to blame "values outside the graph": the sibling vjp had read the g changed
    a = tg.tensor([1., 2.], dtype=np.float64, label="a")
    b = tg.tensor([3., 4.], dtype=np.float64)
    with pytest.raises(ValueError, match="op 'sloppy_mul'.*vjp for input 0 \\('a'\\).*" + HINT):
        tg.gradcheck(lambda a, b: sloppy_mul(a, b, WRITES["g *= b"]), a, b)
    assert a.grad is None and not a.requires_grad   # gradcheck put its inputs back


def test_a_vjps_own_value_error_passes_through_unchanged():
    x = tg.tensor([1., 2.], requires_grad=True)

    def vjp(g):
        raise ValueError("my own mistake")
    with pytest.raises(ValueError, match="^my own mistake$"):
        passing_through(x, vjp).sum().backward()


def test_a_new_array_from_a_vjp_is_kept_and_added_into_not_copied():
    # the engine's speed: what a vjp made (writable while the saved arrays were locked) is
    # backward's own: it keeps it and adds into it
    x = tg.tensor([1., 2.], requires_grad=True)
    made = []

    def vjp(g):
        made.append(g * 2)
        return made[-1]
    first, second = (tg.make_op("double", x.data * 2, (x,), vjps=(vjp,)) for _ in range(2))
    (first + second).sum().backward()
    assert x.grad is made[0]   # the first kept, the second added into it in place
    np.testing.assert_array_equal(x.grad, [4., 4.])


def test_a_vjp_that_sends_no_gradient_leaves_the_inputs_behind_it_without_one():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2.0
    blocked = tg.make_op("block", y.data.copy(), (y,), (lambda g: None,))   # a vjp that sends nothing back
    blocked.sum().backward()
    assert y.grad is None and x.grad is None


def squaring_that_overwrites(x, overwrite):
    """x² whose vjp writes into what the forward saved (`overwrite(out, x)`, the student's
    `out *= g` or `x *= 2`) before it returns the right gradient 2x·g."""
    out = x.data * x.data
    saved_x = x.data

    def vjp(g):
        grad = 2 * saved_x * g
        overwrite(out, saved_x)
        return grad
    return tg.make_op("squaring", out, (x,), vjps=(vjp,))


OVERWRITES = {"out *= 2": lambda out, x: out.__imul__(2), "x *= 2": lambda out, x: x.__imul__(2),
              "np.exp(out, out=out)": lambda out, x: np.exp(out, out=out)}


@pytest.mark.parametrize("overwrite", OVERWRITES.values(), ids=OVERWRITES.keys())
def test_a_vjp_writing_into_what_the_forward_saved_is_an_error_naming_the_op(overwrite):
    """Right once, wrong at the next backward (issue 35): the forward's output and inputs are
    read-only while the vjps run, as g is, and writable again afterwards."""
    x = tg.tensor([1., 2.], requires_grad=True, label="x")
    y = squaring_that_overwrites(x, overwrite)
    with pytest.raises(ValueError) as caught:
        y.sum().backward(retain_graph=True)
    message = str(caught.value)
    assert "op 'squaring'" in message and "vjp for input 0 ('x')" in message
    assert "nor into what the forward saved" in message
    np.testing.assert_array_equal(y.data, [1., 4.])   # nothing was changed
    np.testing.assert_array_equal(x.data, [1., 2.])
    assert x.data.flags.writeable and y.data.flags.writeable   # unlocked again
    x.data[0] = 3.   # a parameter's data stays the optimizer's to update


def test_a_vjp_returning_an_array_the_forward_saved_never_has_it_added_into():
    """`lambda g: slope` hands back the op's own saved array: it was read-only while the vjp
    ran, so backward takes it as shared and makes a new array for the sum."""
    x = tg.tensor([1., 2.], requires_grad=True)
    slope = np.array([3., 4.])
    first = tg.make_op("linear_in_x", x.data * slope, (x,), vjps=(lambda g: slope,))
    second = tg.make_op("linear_in_x", x.data * slope, (x,), vjps=(lambda g: slope,))
    (first + second).sum().backward(retain_graph=True)
    np.testing.assert_array_equal(x.grad, [6., 8.])
    np.testing.assert_array_equal(slope, [3., 4.])   # unchanged: the sum went into a new array
    assert slope.flags.writeable   # and unlocked again
