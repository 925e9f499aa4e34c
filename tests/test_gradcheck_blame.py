"""tg.gradcheck names the op whose vjp is wrong: fn re-run with one tensor moved (the replay
mode of make_op), the first wrong gradient whose consumers are right, and that consumer's
vjp checked element by element. Its projections are seeded, and the seed is in the report."""
import re

import numpy as np
import pytest

import nn
import tensorgrad as tg
from tensorgrad.autograd import modes


def f64(shape, seed=0, label=None):
    return tg.Tensor(np.random.default_rng(seed).standard_normal(shape), dtype=np.float64, label=label)


def scaled_exp(x, factor=1.0):
    """e^x with a vjp `factor` times the right one (1: right)."""
    out = np.exp(x.data)
    return tg.make_op("my_exp", out, (x,), vjps=(lambda g: factor * g * out,))


def matmul_with_transposed_b_gradient(a, b):
    """a @ b (square) whose vjp for b is (aᵀ g)ᵀ: the classic transposed gradient."""
    A, B = a.data, b.data
    return tg.make_op("my_matmul", A @ B, (a, b), vjps=lambda g: (g @ B.T, (A.T @ g).T))


def failure(fn, *inputs, **options):
    with pytest.raises(tg.GradcheckError) as error:
        tg.gradcheck(fn, *inputs, **options)
    return str(error.value)


def blamed(report):
    """The lines of the report that name an op."""
    return [line for line in report.splitlines() if line.strip().startswith("op '")]


def test_a_wrong_op_deep_in_an_expression_is_named_with_its_input_shape_and_scope():
    x, w = f64((3, 4), 0, "x"), f64((4, 2), 1, "w")

    def fn(x, w):
        h = (x @ w).tanh()
        with tg.scope("head"):
            e = scaled_exp(h * 2, factor=1.5)
        return (e / e.sum(axis=-1, keepdims=True)).log()

    report = failure(fn, x, w)
    assert "input 0 ('x')" in report and "input 1 ('w')" in report   # the whole-function check stays
    (line,) = blamed(report)
    assert line.strip().startswith("op 'my_exp' in head (inputs of shapes (3, 2))")
    assert "its vjp for operand 0 (shape (3, 2))" in line and "6 of 6 elements differ" in line
    analytic, numeric = (float(v) for v in re.search(r"analytic (\S+), numeric (\S+) ", line).groups())
    assert analytic == pytest.approx(1.5 * numeric, rel=1e-5)   # the element, both ways: the factor 1.5


def test_the_element_reported_for_the_op_is_its_true_gradient():
    # L = sum(e^x): the right dL/dx is e^x itself, so the report's numeric value can be checked by hand
    x = f64((4,), 3, "x")
    line, = blamed(failure(lambda t: scaled_exp(t, factor=0.5).sum(), x))
    index = int(re.search(r"worst at index \((\d+),\)", line).group(1))
    analytic, numeric = (float(v) for v in re.search(r"analytic (\S+), numeric (\S+) ", line).groups())
    assert numeric == pytest.approx(np.exp(x.data[index]), rel=1e-5)
    assert analytic == pytest.approx(0.5 * np.exp(x.data[index]), rel=1e-5)


def test_only_the_wrong_one_of_two_consumers_of_a_tensor_is_named():
    a, b = f64((3, 3), 4, "a"), f64((3, 3), 5, "b")
    report = failure(lambda a, b: matmul_with_transposed_b_gradient(a.exp(), b).tanh() + (a @ b), a, b)
    (line,) = blamed(report)
    assert "op 'my_matmul'" in line and "its vjp for operand 1 ('b')" in line


def test_two_wrong_ops_on_separate_paths_are_both_named():
    x = f64((2, 3), 6, "x")
    report = failure(lambda x: scaled_exp(x, 2.0).sum() + scaled_exp(x * 3, 0.5).sum(), x)
    lines = blamed(report)
    assert len(lines) == 2 and all("'my_exp'" in line for line in lines)


def test_an_op_wrong_inside_composed_attention_is_named_and_the_rest_of_softmax_is_not_blamed():
    # composed softmax subtracts a row max computed outside the graph: moving the scores moves it
    # too, which must not make its 'sub' look wrong
    q, k, v = f64((2, 4, 3), 7, "q"), f64((2, 4, 3), 8, "k"), f64((2, 4, 3), 9, "v")

    def attention(q, k, v):
        with tg.composed():
            weights = (q @ k.swapaxes(-2, -1) / np.sqrt(3)).softmax(axis=-1)
        return scaled_exp(weights, 1.01) @ v

    (line,) = blamed(failure(attention, q, k, v))
    assert "op 'my_exp' (inputs of shapes (2, 4, 4))" in line


def test_a_wrong_op_inside_a_module_is_named_with_the_module_scope_and_the_parameter_label():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            return x @ scaled_exp(self.fc.weight, factor=0.9)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block()

        def forward(self, x):
            return self.block(x).tanh()

    model, x = Model().to(np.float64), f64((2, 4), 10, "x")
    (line,) = blamed(failure(lambda x, weight: model(x), x, model.block.fc.weight))   # checked through the closure
    assert line.strip().startswith("op 'my_exp' in block (inputs of shapes (4, 3)): its vjp for operand 0 "
                                   "('block.fc.weight')")


def test_the_projection_is_seeded_and_shown_so_its_numbers_can_be_redone():
    x = f64((3,), 11, "x")
    report = failure(lambda t: scaled_exp(t, 2.0), x, seed=5)
    assert "L = sum(out * r), r = np.random.default_rng(5).standard_normal((3,))" in report
    r = np.random.default_rng(5).standard_normal((3,))   # redo the whole-function numbers by hand
    first = report.splitlines()[1]
    index = int(re.search(r"worst at index \((\d+),\)", first).group(1))
    analytic, numeric = (float(v) for v in re.search(r"analytic (\S+), numeric (\S+) ", first).groups())
    assert numeric == pytest.approx(r[index] * np.exp(x.data[index]), rel=1e-5)
    assert analytic == pytest.approx(2 * numeric, rel=1e-5)
    assert report == failure(lambda t: scaled_exp(t, 2.0), x, seed=5)   # the same report every time


def test_a_scalar_output_is_checked_as_it_is():
    report = failure(lambda t: scaled_exp(t, 2.0).sum(), f64((2,), 12))
    assert "fn's output: a scalar, checked as it is" in report


def test_a_function_whose_graph_changes_between_runs_is_not_localized_and_says_so():
    x = f64((2,), 13, "x")
    calls = []

    def changing(t):   # a different op on every other run
        calls.append(1)
        return scaled_exp(t, 2.0) if len(calls) % 2 else t.exp()

    report = failure(changing, x)
    assert "input 0 ('x')" in report   # the whole-function result stands
    assert "which op is wrong cannot be found: fn made other ops when run again" in report and not blamed(report)


def test_a_function_that_draws_random_numbers_is_not_localized_and_says_so():
    rng = np.random.default_rng(0)
    report = failure(lambda t: t * rng.standard_normal(), f64((2,), 14))
    assert "fn gives another value when run again" in report and not blamed(report)


def test_a_gradient_lost_outside_the_graph_is_said_to_be_and_no_op_is_blamed():
    # .data makes a constant of x: the graph never sees that path
    report = failure(lambda t: (t.exp() * tg.Tensor(t.data)).sum(), f64((2,), 15, "x"))
    assert "every op that uses it agrees: fn uses its values outside the graph" in report and not blamed(report)


def test_an_op_fed_a_constant_made_from_its_input_cannot_be_checked_alone_and_says_so():
    report = failure(lambda t: t * tg.Tensor(t.data), f64((2,), 16))
    assert "op 'mul'" in report and "cannot be checked alone: another of its operands is made from this one" in report


def test_passing_checks_are_unchanged_and_leave_the_replay_mode_off():
    x, w = f64((3, 4), 17), f64((4, 2), 18)
    assert tg.gradcheck(lambda x, w: (x @ w).tanh().softmax(), x, w) is True
    assert tg.gradcheck(lambda x: scaled_exp(x).sum(), x) is True
    with pytest.raises(tg.GradcheckError):
        tg.gradcheck(lambda x: scaled_exp(x, 2.0), x)
    assert modes.replay is None
