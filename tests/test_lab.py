"""The lab (exercises/): every solution passes, every untouched exercise says "not started",
a learner's edited file is graded as such, and each classic mistake gets its hint. The
mistaken vjps live here, not in the shipped files."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
EXERCISES = REPO / "exercises"
sys.path.insert(0, str(EXERCISES))
import check  # noqa: E402  (exercises/check.py)
import lab  # noqa: E402

NAMES = sorted(path.stem for path in EXERCISES.glob("[0-9][0-9]_*.py"))


def run_check(*args, folder=EXERCISES):
    return subprocess.run([sys.executable, str(folder / "check.py"), *map(str, args)], capture_output=True,
                          text=True, timeout=300, cwd=REPO)


@pytest.fixture
def solved(monkeypatch):
    """lab.load with the solutions put in: a learner who has done everything."""
    monkeypatch.setattr(lab, "use_solutions", True)
    return lab.load


def test_there_are_ten_exercises_each_with_a_solution():
    assert len(NAMES) == 10
    assert sorted(path.stem for path in (EXERCISES / "solutions").glob("[0-9][0-9]_*.py")) == NAMES


def test_every_solution_passes_and_the_exit_status_is_0():
    result = run_check("--solutions")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [f"{name}: passes" for name in NAMES]


def test_every_untouched_exercise_says_not_started_and_the_exit_status_is_1():
    result = run_check()
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines() == [f"{name}: not started" for name in NAMES]


@pytest.fixture
def learner(tmp_path):
    """A copy of exercises/ that a test edits as a learner would."""
    folder = tmp_path / "exercises"
    shutil.copytree(EXERCISES, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def write_vjp(folder, name, function, body):
    """Replace `function`'s `raise NotImplementedError(...)` in folder/name.py by `body`."""
    path = folder / f"{name}.py"
    text, count = re.subn(rf'(def {function}\(.*?\n(?:    .*\n)*?)    raise NotImplementedError\(.*\)\n',
                          lambda m: m.group(1) + "".join(f"    {line}\n" for line in body.splitlines()),
                          path.read_text())
    assert count == 1, f"{function} not found in {path}"
    path.write_text(text)


def test_a_learners_finished_exercise_passes_and_an_unfinished_one_keeps_the_status_1(learner):
    write_vjp(learner, "05_matmul", "matmul_vjp", "return g @ b.T, a.T @ g")
    result = run_check(5, folder=learner)
    assert result.stdout.startswith("05_matmul: needs work") and "transpose: not started" in result.stdout
    write_vjp(learner, "05_matmul", "transpose_vjp", "return g.T")
    assert run_check(5, folder=learner).stdout == "05_matmul: passes\n"
    assert run_check(5, folder=learner).returncode == 0
    result = run_check(5, 6, folder=learner)
    assert result.returncode == 1 and result.stdout.splitlines()[1] == "06_softmax: not started"


def test_a_learners_mistake_in_a_file_is_diagnosed_with_shapes_and_exit_status_1(learner):
    write_vjp(learner, "05_matmul", "matmul_vjp", "return g @ b.T, g.T @ a")   # dL/db transposed
    write_vjp(learner, "05_matmul", "transpose_vjp", "return g.T")
    result = run_check(5, folder=learner)
    assert result.returncode == 1
    assert "matmul, input b: expected shape (3, 2) (b's shape), got (2, 3)" in result.stdout
    assert "did you transpose?" in result.stdout


def test_a_file_that_does_not_load_is_said_to_and_fails(learner):
    write_vjp(learner, "04_exp_log_tanh", "exp_vjp", "return g *")
    result = run_check(4, folder=learner)
    assert result.returncode == 1 and "04_exp_log_tanh: needs work" in result.stdout
    assert "the file does not load: SyntaxError" in result.stdout


def test_an_unknown_exercise_number_is_a_usage_error():
    result = run_check(11)
    assert result.returncode == 2 and "no exercise 11: there are 1 to 10" in result.stderr


def grade(exercise, **vjps):
    """(verdict, report) of `exercise` (a solved module) with some vjps replaced."""
    for name, vjp in vjps.items():
        setattr(exercise, name, vjp)
    verdict, lines = check.grade(exercise)
    return verdict, "\n".join(lines)


def test_the_transposed_matmul_gradient_gets_its_hint_in_shape_and_in_value(solved):
    verdict, report = grade(solved(5), matmul_vjp=lambda g, a, b: (g @ b.T, g.T @ a))
    assert verdict == "needs work"
    assert "matmul, input b: expected shape (3, 2) (b's shape), got (2, 3)" in report
    assert "did you transpose?" in report and "(the transposed matmul gradient)" in report
    # on square matrices the shapes fit, and the values say it
    verdict, report = grade(solved(5), matmul_vjp=lambda g, a, b: (b @ g.T if a.shape[0] == a.shape[1] else g @ b.T,
                                                                 a.T @ g))
    assert "yours is the transpose of the right one: did you transpose?" in report


def test_a_vjp_that_crashes_is_reported_with_the_shapes_it_was_given(solved):
    verdict, report = grade(solved(5), matmul_vjp=lambda g, a, b: (g @ b, a.T @ g))
    assert "matmul: your vjp raised ValueError" in report and "it was given g (4, 2), a (4, 3), b (3, 2)" in report
    assert "(the transposed matmul gradient)" in report


def test_the_missing_one_over_n_of_mean_gets_its_hint(solved):
    exercise = solved(3)
    verdict, report = grade(exercise, mean_vjp=lambda g, x, axis, keepdims: exercise.sum_vjp(g, x, axis, keepdims))
    assert "mean, input x:" in report and "yours is 3 times the right one" in report
    assert "mean divides each sum by n = 3" in report and "the missing 1/n" in report


@pytest.mark.parametrize("number, vjp, hint", [
    (2, {"broadcast_vjp": lambda g, x: g}, "x (3,) was broadcast to (4, 3) in the forward"),
    (8, {"layer_norm_vjp": lambda g, x_hat, sigma, w: (0 * g, g * x_hat, g.sum(axis=0))},
     "w (5,) was broadcast to (4, 5) in the forward"),
])
def test_gradients_of_broadcast_inputs_not_summed_back_get_their_hint(solved, number, vjp, hint):
    verdict, report = grade(solved(number), **vjp)
    assert hint in report and "the chain rule sums their gradients, over axes (0,)" in report
    assert "expected shape" in report


def test_softmax_without_its_subtraction_gets_its_hint(solved):
    verdict, report = grade(solved(6), softmax_vjp=lambda g, s: s * g)
    assert "you have s·g" in report and "softmax's missing subtraction" in report


def test_cross_entropy_without_the_one_hot_or_the_mean_gets_its_hint(solved):
    verdict, report = grade(solved(7), cross_entropy_vjp=lambda g, logits, targets, p: g * p / len(targets))
    assert "the missing subtraction: at each row's target" in report
    verdict, report = grade(solved(7), cross_entropy_vjp=lambda g, logits, targets, p:
                            g * (p - np.eye(p.shape[1])[targets]))
    assert "the loss is the mean over the 4 rows: the missing 1/N" in report


def test_layer_norm_with_constant_mean_and_sigma_gets_its_hint(solved):
    verdict, report = grade(solved(8), layer_norm_vjp=lambda g, x_hat, sigma, w:
                            (g * w / sigma, (g * x_hat).sum(axis=0), g.sum(axis=0)))
    assert "you treated μ and σ as constants" in report


def test_an_embedding_that_drops_repeated_ids_gets_its_hint(solved):
    def overwriting(g, table, ids):
        grad = np.zeros_like(table)
        grad[ids] += g
        return grad
    verdict, report = grade(solved(10), embedding_vjp=overwriting)
    assert "ids repeat (id 1 3 times)" in report and "np.add.at" in report
    assert "loss_falls: waits until the checks above pass" in report


def test_attention_without_its_scale_gets_its_hint(solved):
    solution = solved(9).attention_vjp
    verdict, report = grade(solved(9), attention_vjp=lambda g, q, k, v, w:
                            tuple(grad * f for grad, f in zip(solution(g, q, k, v, w), (np.sqrt(q.shape[1]),) * 2 + (1,))))
    assert "the 1/√d of the scores" in report and "attention, input k" in report


def test_swapped_gradients_are_said_to_be(solved):
    verdict, report = grade(solved(1), mul_vjp=lambda g, a, b: (g * a, g * b))
    assert "mul, input a:" in report and "yours is the gradient of b: are two of them swapped?" in report
    assert "neuron (the whole): waits until the checks above pass" in report


def test_a_value_mistake_shows_one_element_both_ways_reproducibly_from_the_printed_seed(solved):
    verdict, report = grade(solved(5), matmul_vjp=lambda g, a, b: (g @ b.T + 0.5, a.T @ g))
    found = re.search(r"matmul, input a: 12 of 12 elements are wrong; element \((\d), (\d)\) of dL/da is (\S+) "
                      r"by finite differences, yours (\S+)\n.*default_rng\((\d)\)", report)
    i, j, expected, yours, seed = found.groups()
    rng = np.random.default_rng(int(seed))   # the inputs in the Case's order, then g, as the report says
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))
    g = rng.standard_normal((4, 2))
    assert float(expected) == pytest.approx((g @ b.T)[int(i), int(j)], rel=1e-5)
    assert float(yours) == pytest.approx((g @ b.T)[int(i), int(j)] + 0.5, rel=1e-5)


def test_a_vjp_returning_the_wrong_number_of_gradients_is_told_what_to_return(solved):
    verdict, report = grade(solved(1), add_vjp=lambda g, a, b: g)
    assert "add: the vjp must return a tuple of 2 gradients, one per input (dL/da, dL/db)" in report


def test_a_wrong_op_of_an_earlier_exercise_is_named_by_gradcheck_in_the_whole(solved):
    exercise = solved(2)
    exercise.same_shape.mul_vjp = lambda g, a, b: (g * b, g * b)   # exercise 01's mul, wrong for b
    verdict, report = grade(exercise)
    assert "mul (the whole): gradcheck failed" in report and "op 'mul' (inputs of shapes (2, 4, 3), (2, 4, 3))" in report


def test_the_last_exercise_names_the_earlier_exercise_it_still_needs():
    exercise = lab.load(10)   # the learner's own files: only the embedding written
    exercise.embedding_vjp = lab._run(lab.path(10, lab.SOLUTIONS)).embedding_vjp
    verdict, report = grade(exercise)
    assert verdict == "needs work" and re.fullmatch(r"loss_falls: needs exercise 0\d: write \w+_vjp", report)
