"""The lab (exercises/): every solution passes, every untouched exercise says "not started",
a learner's edited file is graded as such, each mistake students make gets its hint (in
English and in Korean), and an exercise that exits or never returns is graded too. The
mistaken vjps live here, not in the shipped files: most are a solution with one line edited."""
import inspect
import os
import re
import shutil
import signal
import string
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
EXERCISES = REPO / "exercises"
sys.path.insert(0, str(EXERCISES))
import check  # noqa: E402  (exercises/check.py: the command)
import grading  # noqa: E402  (exercises/grading.py)
import hints  # noqa: E402  (exercises/hints.py)
import lab  # noqa: E402
import messages  # noqa: E402

NAMES = sorted(path.stem for path in EXERCISES.glob("[0-9][0-9]_*.py"))
ENGLISH = {name: value for name, value in os.environ.items() if name != "TENSORGRAD_CACHE"}
ENGLISH.update(LANG="C.UTF-8", LC_ALL="", LC_MESSAGES="")
HANGUL = re.compile("[가-힣]")


def run_check(*args, folder=EXERCISES, env=ENGLISH):
    """check.py run as a learner runs it. A test not about the time limit gives each check a
    minute: several people's tests share this machine's two cores. Exercise 10 keeps its
    text in the test session's cache folder (lab_cache), unless env names another."""
    args = [str(a) for a in args]
    limit = [] if "--timeout" in args else ["--timeout", "60"]
    env = {"TENSORGRAD_CACHE": os.environ["TENSORGRAD_CACHE"], **env}
    return subprocess.run([sys.executable, str(folder / "check.py"), *args, *limit], capture_output=True,
                          text=True, timeout=300, cwd=REPO, env=env)


@pytest.fixture(autouse=True)
def lab_cache(tmp_path_factory, monkeypatch):
    """Exercise 10 keeps its text in $TENSORGRAD_CACHE: the test session's folder, not the
    user's cache (and built once for the session)."""
    monkeypatch.setenv("TENSORGRAD_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture
def solved(monkeypatch):
    """lab.load with the solutions put in: a learner who has done everything."""
    monkeypatch.setattr(lab, "use_solutions", True)
    return lab.load


@pytest.fixture
def korean(monkeypatch):
    monkeypatch.setattr(messages, "language", "ko")


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
    assert result.stdout.startswith("05_matmul: needs work")
    assert "transpose: not started (exercise 05: write transpose_vjp)" in result.stdout
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
    assert "yours is the right gradient transposed" in result.stdout


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
    verdict, lines = grading.grade(exercise)
    return verdict, "\n".join(lines)


def fired(exercise, **vjps):
    """The hint rules that speak about `exercise` with some vjps replaced."""
    for name, vjp in vjps.items():
        setattr(exercise, name, vjp)
    return [line.rule for line in grading.grade(exercise)[1] if isinstance(line, hints.Hint)]


def edited(number, function, old, new, count=1):
    """`function` of exercise `number`'s solution with `old` (found `count` times) replaced by
    `new`: the near miss a student writes."""
    solution = lab._run(lab.path(number, lab.SOLUTIONS))
    source = inspect.getsource(getattr(solution, function))
    assert source.count(old) == count, f"{old!r} is not {count} times in {function}"
    namespace = dict(vars(solution))
    exec(source.replace(old, new), namespace)
    return namespace[function]


def into_integers(g, table, ids):   # exercise 10's embedding, added into an array of integers
    grad = np.zeros(table.shape, dtype=int)
    grad[ids] += g
    return grad


SOFTMAX_ROW_SUM = "(g * s).sum(axis=-1, keepdims=True)"
ATTENTION_ROW_SUM = "(grad_weights * weights).sum(axis=-1, keepdims=True)"

# One row per hint rule of hints.py (HINTS and FALLBACKS), some with two: the rule, the
# exercise, the wrong vjps, and words its report must hold. tests/lab_mistakes.py holds more:
# realistic mistakes, each with the rules allowed to speak of it, in English and Korean.
HINT_CASES = [
    ("wrote_into", 4, {"exp_vjp": edited(4, "exp_vjp", "return g * out", "g *= out\n    return g")},
     ["exp: your vjp wrote into g, the upstream gradient it is handed", "a vjp must not write into g: it may be shared"]),
    ("wrote_into", 6, {"softmax_vjp": edited(6, "softmax_vjp", f"return s * (g - {SOFTMAX_ROW_SUM})",
                                             f"g -= {SOFTMAX_ROW_SUM}\n    return s * g")},
     ["softmax: your vjp wrote into g", "a vjp must not write into g: it may be shared"]),
    ("wrote_into", 6, {"softmax_vjp": edited(6, "softmax_vjp", f"return s * (g - {SOFTMAX_ROW_SUM})",
                                             f"s *= g - {SOFTMAX_ROW_SUM}\n    return s")},
     ["softmax: your vjp wrote into s, which the forward saved for backward",
      "a vjp must not write into what the forward saved (s)"]),
    ("wrote_into", 3, {"sum_vjp": edited(3, "sum_vjp", "return np.broadcast_to(g, x.shape)",
                                         "grad = np.broadcast_to(g, x.shape)\n    grad *= 1\n    return grad")},
     ["sum: your vjp wrote into a read-only array (numpy refused", "and so do views of it"]),
    ("returned_none", 4, {"exp_vjp": edited(4, "exp_vjp", "return g * out", "grad = g * out")},
     ["exp, input x: your vjp returned None for it", "a function without `return` gives None"]),
    ("returned_tuple", 4, {"exp_vjp": edited(4, "exp_vjp", "return g * out", "return g * out,")},
     ["exp, input x: expected shape (3, 4) (x's shape), got (1, 3, 4)", "in a tuple (or list) of one"]),
    ("returned_number", 3, {"sum_vjp": lambda g, x, axis, keepdims: g.sum()},
     ["yours is one number (a float64), where dL/dx has x's shape (4, 3)"]),
    ("integer_values", 10, {"embedding_vjp": edited(10, "embedding_vjp", "np.zeros_like(table)",
                                                    "np.zeros(table.shape, dtype=int)")},
     ["your gradient's dtype is int64: integers cannot hold the gradient's fractions"]),
    ("cast_into_integers", 10, {"embedding_vjp": into_integers},
     ["numpy would not put float64 values into an array of int64"]),
    ("axis_as_index", 3, {"mean_vjp": edited(3, "mean_vjp", "int(np.prod([x.shape[a] for a in axis]))",
                                             "x.shape[axis]")},
     ["mean: your vjp raised TypeError", "axis arrives as a tuple of ints, (1,)"]),
    ("targets_as_rows", 7, {"cross_entropy_vjp": edited(7, "cross_entropy_vjp", "grad[np.arange(len(targets)), targets]",
                                                        "grad[targets]")},
     ["cross_entropy: your vjp raised IndexError", "index 4 is past axis 0's 4 rows, and 4 is one of the targets"]),
    ("lost_keepdims", 6, {"softmax_vjp": edited(6, "softmax_vjp", SOFTMAX_ROW_SUM, "(g * s).sum(axis=-1)")},
     ["softmax: your vjp raised ValueError: operands could not be broadcast",
      "(4,) is (4, 5) without its axis 1", "keep it, with keepdims=True"]),
    ("lost_keepdims", 8, {"layer_norm_vjp": edited(8, "layer_norm_vjp", "g_hat.mean(axis=-1, keepdims=True)",
                                                   "g_hat.mean(axis=-1)")},
     ["(4,) is (4, 5) without its axis 1", "keepdims=True"]),
    ("sum_keepdims", 3, {"sum_vjp": lambda g, x, axis, keepdims: np.broadcast_to(g, x.shape)},
     ["sum: your vjp raised ValueError", "keepdims=False here: g (4,) is x (4, 3) with axis 1 summed away",
      "np.expand_dims(g, axis) (axis arrives as the tuple (1,))"]),
    ("sum_keepdims", 3, {"sum_vjp": lambda g, x, axis, keepdims: np.broadcast_to(np.expand_dims(g, axis), x.shape)},
     ["keepdims=True here: g (1, 3, 1) still has x's 3 axes, with size 1 where summed (axis 0, 2)",
      "without np.expand_dims"]),
    ("forgot_g", 4, {"exp_vjp": edited(4, "exp_vjp", "return g * out", "return out")},
     ["exp, input x:", "the upstream gradient g = dL/d(out) is missing"]),
    ("forgot_g", 1, {"mul_vjp": edited(1, "mul_vjp", "return g * b, g * a", "return b, a")},
     ["mul, input a:", "local derivative d(out)/da alone", "upstream gradient g = dL/d(out) is missing"]),
    ("zero", 6, {"softmax_vjp": lambda g, s: g * (s - s * s.sum(axis=-1, keepdims=True))},   # s_i (1 - Σ_j s_j)
     ["softmax, input x: 20 of 20 elements are wrong", "your gradient is zero everywhere but for rounding",
      "a sum over such a row taken before g multiplies it gives this"]),
    ("zero", 3, {"mean_vjp": lambda g, x, axis, keepdims: np.zeros_like(x)},
     ["mean, input x:", "your gradient is zero everywhere, and the right one is not"]),
    ("sign", 4, {"exp_vjp": edited(4, "exp_vjp", "return g * out", "return -g * out")},
     ["exp, input x:", "the sign is flipped"]),
    ("sign", 1, {"add_vjp": edited(1, "add_vjp", "return g, g", "return g, -g")},
     ["add, input b: dL/db is", "the sign is flipped"]),
    ("other_input", 1, {"mul_vjp": edited(1, "mul_vjp", "return g * b, g * a", "return g * a, g * b")},
     ["mul, input a:", "yours for a is dL/db, and yours for b is dL/da: the two are swapped",
      "neuron (the whole): waits until the checks above pass"]),
    ("other_input", 5, {"matmul_vjp": edited(5, "matmul_vjp", "return g @ b.T, a.T @ g", "return a.T @ g, g @ b.T")},
     ["matmul, input a: expected shape (4, 3) (a's shape), got (3, 2)", "the two are swapped"]),
    ("other_input", 8, {"layer_norm_vjp": edited(8, "layer_norm_vjp", "(g * x_hat).sum(axis=0), g.sum(axis=0)",
                                                 "g.sum(axis=0), g.sum(axis=0)")},
     ["yours for w is dL/db, the gradient of b"]),
    ("transposed", 5, {"matmul_vjp": edited(5, "matmul_vjp", "a.T @ g", "g.T @ a")},
     ["matmul, input b: expected shape (3, 2) (b's shape), got (2, 3)",
      "yours is the right gradient transposed: dL/db has b's shape (3, 2)"]),
    ("reshaped", 5, {"transpose_vjp": edited(5, "transpose_vjp", "return g.T", "return g.reshape(x.shape)")},
     ["transpose, input x:", "the right numbers in the wrong places"]),
    ("not_summed_back", 2, {"broadcast_vjp": lambda g, x: g},
     ["x (3,) was broadcast to (4, 3) in the forward", "the chain rule sums their gradients, over axes (0,)"]),
    ("not_summed_back", 8, {"layer_norm_vjp": edited(8, "layer_norm_vjp", "(g * x_hat).sum(axis=0)", "g * x_hat")},
     ["expected shape (5,)", "w (5,) was broadcast to (4, 5) in the forward",
      "the chain rule sums their gradients, over axes (0,)"]),
    ("averaged", 8, {"layer_norm_vjp": edited(8, "layer_norm_vjp", "(g * x_hat).sum(axis=0), g.sum(axis=0)",
                                              "(g * x_hat).mean(axis=0), g.mean(axis=0)")},
     ["layer_norm, input w:", "yours is 1/4 of the right one", "the chain rule adds their gradients"]),
    ("summed_wrong", 8, {"layer_norm_vjp": edited(8, "layer_norm_vjp", "(g * x_hat).sum(axis=0)",
                                                  "(g * x_hat).sum(axis=1)")},
     ["layer_norm, input w: expected shape (5,) (w's shape), got (4,)",
      "yours has the shape of a sum over axis 1 of (4, 5)", "w (5,) was stretched along axis 0 of (4, 5)"]),
    ("summed_wrong", 2, {"broadcast_vjp": edited(2, "broadcast_vjp", "g.sum(axis=stretched, keepdims=True)",
                                                 "g.sum(axis=stretched)")},
     ["broadcast_to, input x: expected shape (4, 1) (x's shape), got (4,)",
      "your numbers are right (summed over axis 1), but x is (4, 1)", "keepdims=True"]),
    ("summed_wrong", 8, {"layer_norm_vjp": edited(8, "layer_norm_vjp", "g.sum(axis=0)",
                                                  "g.sum(axis=0, keepdims=True)")},
     ["layer_norm, input b: expected shape (5,) (b's shape), got (1, 5)",
      "but you kept axis 0 with size 1: the broadcast put it in front of b (5,), so it goes"]),
    ("g_shape", 7, {"cross_entropy_vjp": lambda g, logits, targets, p: g},
     ["cross_entropy, input logits: expected shape (4, 5)", "that is g's shape: the forward summed axis 0, 1 away"]),
    ("mixed_up", 4, {"exp_vjp": edited(4, "exp_vjp", "return g * out", "return g * x")},
     ["exp, input x:", "you used x where the formula needs out: d(e^x)/dx = e^x = out"]),
    ("mixed_up", 4, {"tanh_vjp": edited(4, "tanh_vjp", "1 - out ** 2", "1 - x ** 2")},
     ["tanh, input x:", "you used x where the formula needs out: d(tanh x)/dx = 1 - tanh²(x) = 1 - out²"]),
    ("mixed_up", 4, {"log_vjp": edited(4, "log_vjp", "return g / x", "return g / out")},
     ["log, input x:", "you used out where the formula needs x: d(ln x)/dx = 1/x", "out = log(x) is the output"]),
    ("function_itself", 4, {"tanh_vjp": edited(4, "tanh_vjp", "return g * (1 - out ** 2)", "return g * out")},
     ["tanh, input x:", "yours is g times tanh(x) itself, the function"]),
    ("multiplied_for_divided", 4, {"log_vjp": edited(4, "log_vjp", "return g / x", "return g * x")},
     ["log, input x:", "yours is g·x: d(ln x)/dx = 1/x"]),
    ("wrong_axis", 6, {"softmax_vjp": edited(6, "softmax_vjp", "axis=-1", "axis=0")},
     ["softmax, input x:", "the sum in your vjp runs along axis 0", "axis=-1, keepdims=True"]),
    ("wrong_axis", 8, {"layer_norm_vjp": edited(8, "layer_norm_vjp", ".mean(axis=-1", ".mean(axis=0", count=2)},
     ["layer_norm, input x:", "the means in your dL/dx run along axis 0"]),
    ("mean_divisor", 3, {"mean_vjp": edited(3, "mean_vjp", "/ n", "/ x.shape[0]")},
     ["mean, input x:", "you divided by 4, x's size along axis 0; this mean averages along axis 1: n = 3"]),
    ("mean_divisor", 3, {"mean_vjp": edited(3, "mean_vjp", " / n", "")},
     ["mean, input x:", "yours is 3 times the right one", "mean divides each sum by n = 3", "the missing 1/n"]),
    ("product_fits", 5, {"matmul_vjp": edited(5, "matmul_vjp", "g @ b.T", "g @ b")},
     ["matmul: your vjp raised ValueError", "it was given g (4, 2), a (4, 3), b (3, 2)",
      "g @ b ((4, 2) @ (3, 2)) does not fit, g @ bᵀ does; made so, your vjp gives the right gradients"]),
    ("product_fits", 9, {"attention_vjp": edited(9, "attention_vjp", "g @ v.T", "g @ v")},
     ["attention: your vjp raised ValueError", "g @ v ((4, 3) @ (4, 3)) does not fit, g @ vᵀ does"]),
    ("matmul_shapes", 5, {"matmul_vjp": lambda g, a, b: (b.T, a.T)},
     ["matmul, input a: expected shape (4, 3) (a's shape), got (2, 3)", "line up the shapes: g is (n, m)"]),
    ("softmax_step", 6, {"softmax_vjp": lambda g, s: s * g},
     ["you have s·g: the δ_ij part of the Jacobian", "softmax's missing subtraction"]),
    ("softmax_step", 6, {"softmax_vjp": lambda g, s: g * s * (1 - s)},
     ["you have g·s·(1 - s): the Jacobian's diagonal alone (ds_j/dx_j = s_j(1 - s_j))"]),
    ("cross_entropy_step", 7, {"cross_entropy_vjp": lambda g, logits, targets, p: g * p / len(targets)},
     ["the missing subtraction: at each row's target"]),
    ("cross_entropy_step", 7, {"cross_entropy_vjp": edited(7, "cross_entropy_vjp", " / len(targets)", "")},
     ["the loss is the mean over the 4 rows: the missing 1/N"]),
    ("cross_entropy_step", 7, {"cross_entropy_vjp": edited(7, "cross_entropy_vjp", "grad = p.copy()",
                                                           "grad = logits.copy()")},
     ["yours is built from the logits", "use p where you used the logits"]),
    ("layer_norm_step", 8, {"layer_norm_vjp": lambda g, x_hat, sigma, w:
                            (g * w / sigma, (g * x_hat).sum(axis=0), g.sum(axis=0))},
     ["you treated μ and σ as constants"]),
    ("layer_norm_step", 8, {"layer_norm_vjp": edited(8, "layer_norm_vjp", "g_hat - g_hat.mean(axis=-1, keepdims=True)",
                                                     "g_hat")},
     ["the path through μ is missing"]),
    ("embedding_repeats", 10, {"embedding_vjp": edited(10, "embedding_vjp", "np.add.at(grad, ids, g)",
                                                       "grad[ids] += g")},
     ["ids repeat (id 1 3 times)", "np.add.at", "loss_falls: waits until the checks above pass"]),
    ("embedding_rows", 10, {"embedding_vjp": lambda g, table, ids: g},
     ["embedding, input table: expected shape (7, 3) (table's shape), got (5, 3)", "one row per id (5 of them)",
      "one row per row of the table (7)"]),
    ("attention_shapes", 9, {"attention_vjp": edited(9, "attention_vjp", "g @ v.T", "g.T @ v")},
     ["attention: your vjp raised ValueError", "line up the shapes (T = 4, d = 3)"]),
    ("attention_step", 9, {"attention_vjp": edited(9, "attention_vjp", "d = q.shape[-1]\n",
                                                   "d = q.shape[-1]\n    e = np.exp(q @ k.T / np.sqrt(d))\n"
                                                   "    weights = e / e.sum(axis=-1, keepdims=True)\n")},
     ["attention, input q:", "attention, input v:", "step 2 (mask): your weights have no mask"]),
    ("attention_step", 9, {"attention_vjp": edited(9, "attention_vjp", "weights.T @ g", "weights @ g")},
     ["attention, input v:", "step 4 (weighted sum, out = weights @ v): dL/dv = weightsᵀ @ g",
      "missing the transpose (weights @ g)"]),
    ("attention_step", 9, {"attention_vjp": edited(9, "attention_vjp",
                                                   f"weights * (grad_weights - {ATTENTION_ROW_SUM})",
                                                   "weights * grad_weights")},
     ["attention, input q:", "step 3 (softmax): you have weights·dL/dweights, the δ part of softmax's Jacobian"]),
    ("lost_keepdims", 9, {"attention_vjp": edited(9, "attention_vjp", ATTENTION_ROW_SUM,
                                                  "(grad_weights * weights).sum(axis=-1)")},
     ["a sum or mean in your vjp dropped its axis", "numpy lined what was left up with another axis, without an "
                                                    "error"]),
    ("attention_step", 9, {"attention_vjp": edited(9, "attention_vjp", ATTENTION_ROW_SUM,
                                                   "(grad_weights * weights).sum(axis=0, keepdims=True)")},
     ["step 3 (softmax): your sum runs along axis 0, down the columns"]),
    ("attention_step", 9, {"attention_vjp": edited(9, "attention_vjp", "grad_scores @ k / np.sqrt(d)",
                                                   "grad_scores @ k")},
     ["attention, input q:", "step 1 (scores = q @ kᵀ / √d): the 1/√d of the scores"]),
    ("attention_step", 9, {"attention_vjp": edited(9, "attention_vjp", "grad_scores.T @ q / np.sqrt(d)",
                                                   "grad_scores.T @ q / d")},
     ["attention, input k:", "the 1/√d of the scores: dL/dq and dL/dk carry it once"]),
    ("attention_step", 9, {"attention_vjp": edited(9, "attention_vjp", "grad_scores @ k", "grad_scores.T @ k")},
     ["attention, input q:", "dL/dq = dL/dscores @ k / √d, with no transpose: yours has one"]),
    ("attention_step", 9, {"attention_vjp": edited(9, "attention_vjp", "grad_scores.T @ q", "grad_scores @ q")},
     ["attention, input k:", "dL/dk = dL/dscoresᵀ @ q / √d: your product is missing the transpose"]),
    ("attention_mask_inf", 9, {"attention_vjp": edited(
        9, "attention_vjp", "    # 2. the mask: masked weights are 0, so grad_scores is already 0 there\n",
        "    grad_scores[np.triu(np.ones(grad_scores.shape, dtype=bool), k=1)] = -np.inf   # 2. the mask\n")},
     ["step 2 (mask): dL/dq has inf or nan", "its gradient is 0, not -inf"]),
    ("ratio", 4, {"exp_vjp": edited(4, "exp_vjp", "return g * out", "return 2 * g * out")},
     ["exp, input x:", "yours is 2 times the right one, everywhere"]),
]


HINT_IDS = [f"{rule}-{number:02d}-{i}" for i, (rule, number, _, _) in enumerate(HINT_CASES)]


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")   # the -inf written into the mask
@pytest.mark.parametrize("rule, number, vjps, words", HINT_CASES, ids=HINT_IDS)
def test_each_mistake_gets_its_hint(solved, rule, number, vjps, words):
    verdict, report = grade(solved(number), **vjps)
    assert verdict == "needs work"
    for word in words:
        assert word in report, f"{word!r} not in:\n{report}"
    assert rule in fired(solved(number), **vjps)


def test_every_hint_rule_has_a_wrong_vjp_that_it_recognises():
    assert {rule.__name__ for rule in hints.HINTS + hints.FALLBACKS} == {rule for rule, *_ in HINT_CASES}
    tables = hints.SOFTMAX_MISTAKES, hints.CROSS_ENTROPY_MISTAKES, hints.LAYER_NORM_MISTAKES, hints.ATTENTION_MISTAKES
    assert {key for table in tables for key in table.values()} <= set(messages.MESSAGES)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("rule, number, vjps, words", HINT_CASES, ids=HINT_IDS)
def test_each_hint_reads_in_korean(solved, korean, rule, number, vjps, words):
    verdict, report = grade(solved(number), **vjps)
    for line in report.splitlines():
        assert HANGUL.search(line), f"a line with no Korean in it: {line!r}"


def test_a_mistake_in_attention_is_named_on_the_inputs_it_touches_alone(solved):
    verdict, report = grade(solved(9), attention_vjp=edited(9, "attention_vjp", "weights.T @ g", "weights @ g"))
    assert "attention, input v:" in report and "input q" not in report and "input k" not in report


def test_a_nearly_zero_gradient_is_not_called_a_multiple_of_the_right_one(solved):
    verdict, report = grade(solved(7), cross_entropy_vjp=lambda g, logits, targets, p:
                            g * (p - p.sum(axis=-1, keepdims=True) * p) / len(targets))   # p - p: 1e-17
    assert "zero everywhere but for rounding" in report and "times the right one" not in report


def test_a_write_into_g_that_numpy_lets_through_is_caught_too(solved):
    def exp_vjp(g, x, out):   # g · out in g's own memory: np.add.at with one index per axis ignores read-only
        rows, columns = np.indices(g.shape).reshape(2, -1)
        np.add.at(g, (rows, columns), (g * (out - 1)).ravel())
        return g
    verdict, report = grade(solved(4), exp_vjp=exp_vjp)
    assert "exp: your vjp wrote into g" in report and "a vjp must not write into g: it may be shared" in report


def test_every_case_has_shapes_that_are_not_square(solved):
    """A gradient transposed, or g returned where the input has another shape, shows in the
    shapes: no matrix of a case is square, and exercise 10's table has more rows than ids."""
    for number in lab.numbers():
        for case in solved(number).CHECKS:
            if isinstance(case, lab.Case):
                for name, t in grading._inputs(case, np.random.default_rng(0))[0].items():
                    assert t.ndim != 2 or t.shape[0] != t.shape[1], (case.op.__name__, name, t.shape)
    embedding = solved(10).CHECKS[0]
    assert embedding.inputs["table"][0] != len(embedding.inputs["ids"])


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
    assert "mul (the whole): gradcheck failed" in report
    assert "op 'mul' (inputs of shapes (2, 4, 3), (2, 4, 3))" in report


def test_the_last_exercise_names_the_earlier_exercise_it_still_needs():
    exercise = lab.load(10)   # the learner's own files: only the embedding written
    exercise.embedding_vjp = lab._run(lab.path(10, lab.SOLUTIONS)).embedding_vjp
    verdict, report = grade(exercise)
    assert verdict == "needs work" and re.fullmatch(r"loss_falls: needs exercise 0\d: write \w+_vjp", report)


def test_the_training_check_tells_each_step_and_says_when_the_loss_did_not_fall(solved, monkeypatch):
    told = []
    monkeypatch.setattr(lab, "tell", told.append)
    exercise = solved(10)
    monkeypatch.setattr(exercise, "corpus", lambda: "the lab's own short text. " * 20)
    with pytest.raises(AssertionError, match=r"in 3 steps the loss went from \S+ only to \S+ \(the mean of"):
        exercise.loss_falls(steps=3)
    assert told == ["loss_falls: step 1 of 3", "loss_falls: step 2 of 3", "loss_falls: step 3 of 3"]


# ---- an exercise that exits, or never returns, is graded too
def test_an_exit_in_a_vjp_needs_work_and_the_other_checks_are_still_graded(solved):
    verdict, report = grade(solved(1), mul_vjp=lambda g, a, b: sys.exit(3))
    assert verdict == "needs work"
    assert "mul(a=(), b=()): it ended the program: SystemExit(3)" in report and "add" not in report
    assert "neuron (the whole): waits until the checks above pass" in report


@pytest.mark.parametrize("body, words", [
    ("exit()", "exp(x=(3, 4)): it ended the program: SystemExit(None), from exit()"),
    ("raise KeyboardInterrupt", "exp(x=(3, 4)): it raised KeyboardInterrupt"),
    ("import os\nos._exit(0)", "exp(x=(3, 4)): the process grading it ended without a word (exit status 0)"),
    ("while True:\n    pass", "exp(x=(3, 4)): did not return within 2 s, so it was stopped"),
])
def test_a_vjp_that_exits_or_never_returns_needs_work_and_the_next_exercise_is_graded(learner, body, words):
    write_vjp(learner, "04_exp_log_tanh", "exp_vjp", body)
    result = run_check(4, 5, "--timeout", 2, folder=learner)   # the other checks take well under 2 s
    assert result.returncode == 1, result.stderr
    assert result.stdout.startswith("04_exp_log_tanh: needs work") and words in result.stdout
    assert result.stdout.endswith("05_matmul: not started\n"), result.stdout


@pytest.mark.parametrize("line, words", [
    ("exit()", "loading 04_exp_log_tanh.py: it ended the program: SystemExit(None)"),
    ("while True: pass", "loading 04_exp_log_tanh.py: did not return within 2 s"),
])
def test_a_file_that_exits_or_never_returns_when_imported_needs_work(learner, line, words):
    with open(learner / "04_exp_log_tanh.py", "a") as file:
        file.write(f"\n{line}\n")
    result = run_check(4, 5, "--timeout", 2, folder=learner)   # the other checks take well under 2 s
    assert result.returncode == 1 and result.stdout.startswith("04_exp_log_tanh: needs work")
    assert words in result.stdout and result.stdout.endswith("05_matmul: not started\n"), result.stdout


def test_ctrl_c_stops_the_checker_and_its_worker_with_status_130(learner):
    write_vjp(learner, "04_exp_log_tanh", "exp_vjp", "while True:\n    pass")
    checker = subprocess.Popen([sys.executable, str(learner / "check.py"), "4", "--timeout", "60"], env=ENGLISH,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as in a terminal
    time.sleep(3)   # the worker is in the endless loop by now
    checker.send_signal(signal.SIGINT)
    out, err = checker.communicate(timeout=30)   # returns only once the worker, which holds stdout too, is gone
    assert checker.returncode == 130 and "stopped (Ctrl-C)" in err


@pytest.mark.parametrize("value", ["0", "-1", "abc", "inf", "nan", "1e9"])
def test_a_timeout_that_is_not_a_sane_number_of_seconds_is_a_usage_error(value, monkeypatch, capsys):
    monkeypatch.setattr(messages, "language", "en")   # main sets it: put it back after
    with pytest.raises(SystemExit) as stop:
        check.main(["1", "--timeout", value, "--lang", "en"])
    assert stop.value.code == 2
    assert f"--timeout wants a number of seconds above 0 and at most 86400, not '{value}'" in capsys.readouterr().err


# ---- in Korean
def test_every_message_has_english_and_korean_with_the_same_fields():
    fields = lambda text: {name for _, name, _, _ in string.Formatter().parse(text) if name}
    for key, texts in messages.MESSAGES.items():
        assert set(texts) == set(messages.LANGUAGES), key
        assert fields(texts["en"]) == fields(texts["ko"]), key
        assert HANGUL.search(texts["ko"]), key


def test_every_message_is_used():
    sources = "".join(path.read_text() for path in EXERCISES.glob("*.py"))
    unused = [key for key in messages.MESSAGES if f'"{key}"' not in sources.replace(f'"{key}": {{', "")]
    assert not unused


@pytest.mark.parametrize("environ, language", [
    ({"LANG": "ko_KR.UTF-8"}, "ko"), ({"LC_ALL": "ko_KR.UTF-8", "LANG": "C"}, "ko"),
    ({"LC_ALL": "en_US.UTF-8", "LANG": "ko_KR.UTF-8"}, "en"), ({"LC_MESSAGES": "ko_KR"}, "ko"),
    ({"LC_ALL": "", "LANG": "ko"}, "ko"), ({}, "en"), ({"LANG": "C.UTF-8"}, "en"),
])
def test_the_locale_picks_the_language(environ, language):
    assert messages.from_locale(environ) == language


def test_lang_ko_or_a_korean_locale_gives_the_report_in_korean(learner):
    write_vjp(learner, "05_matmul", "matmul_vjp", "return g @ b.T, g.T @ a")
    result = run_check(5, "--lang", "ko", folder=learner)
    assert result.returncode == 1 and result.stdout.startswith("05_matmul: 고칠 곳 있음")
    assert "matmul, 입력 b: 기대한 shape는 (3, 2)(b의 shape), 받은 shape는 (2, 3)" in result.stdout
    assert "transpose: 시작 전 (연습 05: transpose_vjp 함수를 작성하세요)" in result.stdout
    assert run_check(5, folder=learner, env={**ENGLISH, "LANG": "ko_KR.UTF-8"}).stdout == result.stdout
    assert run_check(5, "--lang", "en", folder=learner, env={**ENGLISH, "LANG": "ko_KR.UTF-8"}).stdout.startswith(
        "05_matmul: needs work")
    solved = run_check(1, "--solutions", "--lang", "ko")
    assert solved.returncode == 0 and solved.stdout == "01_neuron: 통과\n"
    usage = run_check("--help", env={**ENGLISH, "LANG": "ko_KR.UTF-8"})
    assert "채점할 연습 문제 번호" in usage.stdout and "검사 하나가 멈추기 전까지" in usage.stdout


def test_every_exercise_has_its_text_in_korean_beside_the_english():
    for name in NAMES:
        doc = lab._run(EXERCISES / f"{name}.py").__doc__
        english, korean = doc.split("\n한국어\n")   # the Korean part, after its heading
        assert HANGUL.search(korean) and not HANGUL.search(english), name
        assert f"python exercises/check.py {int(name[:2])}" in korean, name
