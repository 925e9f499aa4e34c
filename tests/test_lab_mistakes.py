"""check.py on the mistakes learners make (issue 35): every hint it gives is true, it names
at least 90% of a broad set of realistic mistakes (tests/lab_mistakes.py), it never crashes
on a learner's code (a rule that fails is named as check.py's own bug, and the grade
stands; hundreds of generated wrong vjps grade cleanly, none "passes"), a vjp that writes
into what the forward saved is named, and exercise 10 passes on a busy machine."""
import ast
import inspect
import os
import random
import re
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
EXERCISES = REPO / "exercises"
sys.path.insert(0, str(EXERCISES))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import grading  # noqa: E402
import hints  # noqa: E402
import lab  # noqa: E402
import messages  # noqa: E402
from lab_mistakes import MISTAKES  # noqa: E402
from test_lab import ENGLISH, lab_cache, learner, run_check, solved, write_vjp  # noqa: E402,F401  (fixtures too)

ROW_IDS = [f"{i:03d}-{number:02d}-{function}" for i, (number, function, *_) in enumerate(MISTAKES)]


def learners(exercise, function, body):
    """`function` written with `body`, as a learner writes it in the exercise's file: its
    signature, its module's names (np, the other vjps)."""
    signature = inspect.signature(getattr(exercise, function))
    source = f"def {function}{signature}:\n" + textwrap.indent(body, "    ") + "\n"
    made = {}
    exec(compile(source, f"<{function}>", "exec"), vars(exercise), made)
    return types.FunctionType(made[function].__code__, vars(exercise), function, made[function].__defaults__)


def graded(exercise, function, vjp, language="en"):
    """(verdict, lines) of `exercise`'s ops (its training and gradchecks left out) with `function` as `vjp`."""
    messages.language = language
    original, checks = getattr(exercise, function), exercise.CHECKS
    setattr(exercise, function, vjp)
    exercise.CHECKS = [check for check in checks if isinstance(check, lab.Case) and grading._is_one_op(check)]
    try:
        return grading.grade(exercise)
    finally:
        setattr(exercise, function, original)
        exercise.CHECKS = checks
        messages.language = "en"


def spoken(lines):
    """The rules whose hints are in `lines` (None for a rule that failed)."""
    return [line.rule for line in lines if isinstance(line, hints.Hint)]


# ---- every realistic mistake: its hint, true, in both languages ------------------------------------
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("number, function, body, rules, english, korean", MISTAKES, ids=ROW_IDS)
def test_a_realistic_mistake_gets_its_hint_and_no_other(solved, number, function, body, rules, english, korean):
    exercise = solved(number)
    for language, words in (("en", english), ("ko", korean)):
        verdict, lines = graded(exercise, function, learners(exercise, function, body), language)
        report = "\n".join(lines)
        assert verdict == "needs work", report
        said = spoken(lines)
        assert None not in said, report   # a rule that failed
        assert set(said) <= set(rules) - {None}, f"a hint this mistake does not allow:\n{report}"
        if rules and rules[0]:
            assert rules[0] in said, report
        for word in words:
            assert word in report, f"{word!r} not in:\n{report}"


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_at_least_90_percent_of_realistic_mistakes_are_named_and_none_misleadingly(solved):
    named, misleading = 0, []
    for number, function, body, rules, _, _ in MISTAKES:
        exercise = solved(number)
        said = spoken(graded(exercise, function, learners(exercise, function, body))[1])
        misleading += [(number, body, rule) for rule in said if rule not in rules]
        named += bool(rules and rules[0] and rules[0] in said)
    kinds = {rules[0] for *_, rules, _, _ in MISTAKES if rules and rules[0]}
    assert len(MISTAKES) >= 100 and len(kinds) >= 25
    assert named / len(MISTAKES) >= 0.9, f"{named} of {len(MISTAKES)}"
    assert not misleading


def test_every_hint_rule_is_tried_on_a_realistic_mistake():
    rules = {rule for *_, allowed, _, _ in MISTAKES for rule in allowed} - {None}
    assert {rule.__name__ for rule in hints.HINTS} - rules == set()


# ---- item 1: check.py never crashes on a learner's code ------------------------------------------
def test_a_rule_that_fails_is_named_as_check_pys_bug_and_the_grade_stands(solved, monkeypatch):
    def sums_badly(c):
        raise ZeroDivisionError("a rule's own bug")
    monkeypatch.setattr(hints, "HINTS", [sums_badly, *hints.HINTS])
    exercise = solved(6)
    verdict, lines = graded(exercise, "softmax_vjp", lambda g, s: s * g)
    report = "\n".join(lines)
    assert verdict == "needs work" and "softmax, input x: 20 of 20 elements are wrong" in report
    assert "(check.py's hint rule sums_badly failed here with ZeroDivisionError: a rule's own bug: that is a bug " \
           "in check.py, not in your code, and the verdict above stands" in report
    assert "softmax_step" in spoken(lines)   # the other rules still speak
    assert graded(exercise, "softmax_vjp", exercise.softmax_vjp)[0] == "passes"   # a right vjp: no rule runs
    verdict, lines = graded(exercise, "softmax_vjp", lambda g, s: s * g, "ko")
    assert "check.py의 힌트 규칙(sums_badly)이 여기서 실패했습니다" in "\n".join(lines)


def test_the_sum_first_row_sum_without_keepdims_is_graded_cleanly(learner):
    """The crash of issue 35: `-s * ((g * s).sum(-1) - g)` crashed a hint rule, and the
    learner read "os._exit(), a kill, or a crash inside numpy's C code" and a traceback."""
    write_vjp(learner, "06_softmax", "softmax_vjp", "return -s * ((g * s).sum(-1) - g)")
    result = run_check(6, 7, folder=learner)
    assert result.returncode == 1 and result.stderr == ""
    assert result.stdout.startswith("06_softmax: needs work\n    softmax: your vjp raised ValueError")
    assert "(4,) is (4, 5) without its axis 1" in result.stdout and "keepdims=True" in result.stdout
    assert "check.py" not in result.stdout.replace("python exercises/check.py", "")
    assert result.stdout.endswith("07_cross_entropy: not started\n")


def test_a_vjp_that_prints_is_heard_once_though_the_hints_run_it_again(solved, capsys):
    def softmax_vjp(g, s):
        print("my row sums:", (g * s).sum(axis=-1).shape)
        return s * (g - (g * s).sum(axis=-1))
    verdict, lines = graded(solved(6), "softmax_vjp", softmax_vjp)
    assert "lost_keepdims" in spoken(lines)   # the rule ran the vjp again, with keepdims=True
    assert capsys.readouterr().out == "my row sums: (4,)\nmy row sums: (1,)\nmy row sums: (2, 3)\n"   # once a Case


def test_check_py_s_own_failure_outside_a_rule_is_said_not_a_crash(solved, monkeypatch):
    monkeypatch.setattr(grading, "_compare", lambda c: 1 / 0)
    verdict, lines = graded(solved(4), "exp_vjp", lambda g, x, out: g * x)
    assert verdict == "needs work"
    assert lines[0].startswith("exp(x=(3, 4)): check.py itself failed while grading it (ZeroDivisionError")
    assert re.search(r"\(\w+\.py, line \d+\)\): that is a bug in check.py, not in your code", lines[0]), lines[0]


class Mutant(ast.NodeTransformer):
    """One random mistake made in a vjp's source: the kinds students make, generated."""

    KINDS = ["sign", "drop_factor", "swap_returns", "keepdims", "transpose", "untranspose", "axis", "sum_mean",
             "swap_names", "constant", "no_return", "mul_for_matmul"]

    def __init__(self, rng, kind, names):
        self.rng, self.kind, self.names, self.spots, self.target = rng, kind, names, 0, None

    def mutate(self, tree):
        """tree with the mistake made at one spot where it can be (None where there is none)."""
        self.target = None
        self.visit(_copy(tree))   # count the spots
        if not self.spots:
            return None
        self.target, self.spots = self.rng.randrange(self.spots), 0
        return ast.fix_missing_locations(self.visit(_copy(tree)))

    def _here(self):
        here = self.spots == self.target
        self.spots += 1
        return here

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if self.kind == "sign" and self._here():
            return ast.UnaryOp(op=ast.USub(), operand=node)
        if self.kind == "drop_factor" and isinstance(node.op, (ast.Mult, ast.Div, ast.MatMult)) and self._here():
            return node.left if self.rng.random() < 0.5 or isinstance(node.op, ast.Div) else node.right
        if self.kind == "mul_for_matmul" and isinstance(node.op, ast.MatMult) and self._here():
            node.op = ast.Mult()
        return node

    def visit_Return(self, node):
        self.generic_visit(node)
        if self.kind == "swap_returns" and isinstance(node.value, ast.Tuple) and len(node.value.elts) > 1 \
                and self._here():
            elts = node.value.elts
            i, j = self.rng.sample(range(len(elts)), 2)
            elts[i], elts[j] = elts[j], elts[i]
        if self.kind == "no_return" and self._here():
            return ast.Expr(value=node.value) if node.value is not None else node
        return node

    def visit_keyword(self, node):
        self.generic_visit(node)
        if self.kind == "keepdims" and node.arg == "keepdims" and self._here():
            node.value = ast.Constant(value=False)
        if self.kind == "axis" and node.arg == "axis" and isinstance(node.value, (ast.Constant, ast.UnaryOp)) \
                and self._here():
            node.value = ast.Constant(value=self.rng.choice([0, 1, None]))
        return node

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if self.kind == "untranspose" and node.attr == "T" and self._here():
            return node.value
        if self.kind == "sum_mean" and node.attr in ("sum", "mean") and self._here():
            node.attr = "mean" if node.attr == "sum" else "sum"
        return node

    def visit_Name(self, node):
        if not isinstance(node.ctx, ast.Load) or node.id not in self.names:
            return node
        if self.kind == "transpose" and self._here():
            return ast.Attribute(value=node, attr="T", ctx=ast.Load())
        if self.kind == "swap_names" and len(self.names) > 1 and self._here():
            node.id = self.rng.choice([name for name in self.names if name != node.id])
        return node

    def visit_Constant(self, node):
        if self.kind == "constant" and isinstance(node.value, (int, float)) and not isinstance(node.value, bool) \
                and self._here():
            node.value = self.rng.choice([0, 1, 2, -1, 0.5])
        return node


def _copy(tree):
    return ast.parse(ast.unparse(tree))


def mutants(count, seed=0):
    """`count` wrong vjps, (number, function, source), made from the solutions by Mutant."""
    rng = random.Random(seed)
    functions = []
    for number in lab.numbers():
        solution = lab._run(lab.path(number, lab.SOLUTIONS))
        for name, value in vars(solution).items():
            if name.endswith("_vjp") and callable(value):
                functions.append((number, name, ast.parse(textwrap.dedent(inspect.getsource(value)))))
    made, tries = {}, 0
    while len(made) < count and tries < 50 * count:
        tries += 1
        number, name, tree = rng.choice(functions)
        names = [arg.arg for arg in tree.body[0].args.args]
        changed = Mutant(rng, rng.choice(Mutant.KINDS), names).mutate(tree)
        if changed is not None:
            source = ast.unparse(changed)
            if source != ast.unparse(tree):
                made.setdefault(source, (number, name, source))
    return list(made.values())


def right_on_every_case(exercise, function, vjp):
    """True when `vjp` returns the solution's gradients on every one-op Case, and writes
    into nothing it is handed: a mutation that changed nothing that matters."""
    solution = getattr(exercise, function)
    for seed, case in enumerate(exercise.CHECKS):
        if not (isinstance(case, lab.Case) and grading._is_one_op(case)):
            continue
        got = []
        for candidate in (vjp, solution):
            setattr(exercise, function, candidate)
            trial = grading.Trial(case, seed)
            handed = {"g": trial.g, **trial.saved()}
            before = {name: array.copy() for name, array in handed.items()}
            try:
                got.append(trial.gradients(trial.g))
            except Exception:
                return False
            finally:
                setattr(exercise, function, solution)
            if any(not np.array_equal(array, before[name]) for name, array in handed.items()):
                return False
        for name, right in got[1].items():
            try:
                mine = np.asarray(got[0][name], dtype=np.float64)
            except (TypeError, ValueError):
                return False
            if mine.shape != np.shape(right) or not np.allclose(mine, right, rtol=1e-5, atol=1e-6):
                return False
    return True


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_hundreds_of_generated_wrong_vjps_grade_cleanly_and_none_passes(solved):
    """Random sign flips, dropped factors, swapped returns, lost keepdims, transposes added
    and removed, wrong axes, sum for mean, names swapped, constants changed, returns lost,
    * for @, made in every solution's vjp: each is graded without a crash, without a rule
    failing, and none that is wrong passes."""
    made = mutants(300)
    assert len(made) >= 250
    kinds = {}
    for number, function, source in made:
        exercise = solved(number)
        namespace = {}
        try:
            exec(compile(source, f"<{function}>", "exec"), vars(exercise), namespace)
        except SyntaxError:
            continue
        vjp = types.FunctionType(namespace[function].__code__, vars(exercise), function)
        verdict, lines = graded(exercise, function, vjp)
        report = "\n".join(lines)
        assert None not in spoken(lines), f"{source}\n{report}"
        assert "check.py itself failed" not in report, f"{source}\n{report}"
        if verdict == "passes":
            assert right_on_every_case(exercise, function, vjp), f"passes, but wrong:\n{source}"
        else:
            assert not right_on_every_case(exercise, function, vjp), f"right, but {verdict}:\n{source}\n{report}"
        kinds[verdict] = kinds.get(verdict, 0) + 1
    assert kinds.get("needs work", 0) >= 200, kinds


# ---- item 2: a write into what the forward saved is named ------------------------------------------
@pytest.mark.parametrize("language, words", [
    ("en", ["tanh: your vjp wrote into out, which the forward saved for backward",
            "softmax: your vjp wrote into s, which the forward saved for backward",
            "cross_entropy: your vjp wrote into p, which the forward saved for backward",
            "a vjp must not write into what the forward saved (p)"]),
    ("ko", ["tanh: vjp가 out에 값을 써 넣었습니다. out: 순전파가 역전파를 위해 남겨 둔 배열",
            "softmax: vjp가 s에 값을 써 넣었습니다",
            "cross_entropy: vjp가 p에 값을 써 넣었습니다",
            "vjp는 순전파가 남겨 둔 배열(p)에 값을 써 넣으면 안 됩니다"]),
])
def test_a_vjp_that_writes_into_what_the_forward_saved_is_named(learner, language, words):
    """The three of issue 35, each right the first time (so they used to pass): the
    softmax's output no longer sums to 1, and a second backward gives other gradients."""
    write_vjp(learner, "04_exp_log_tanh", "tanh_vjp", "out **= 2\nreturn g * (1 - out)")
    write_vjp(learner, "06_softmax", "softmax_vjp", "s *= g - (g * s).sum(axis=-1, keepdims=True)\nreturn s")
    write_vjp(learner, "07_cross_entropy", "cross_entropy_vjp",
              "p[np.arange(len(targets)), targets] -= 1\nreturn g * p / len(targets)")
    result = run_check(4, 6, 7, "--lang", language, folder=learner)
    assert result.returncode == 1 and result.stderr == "", result.stderr
    for word in words:
        assert word in result.stdout, result.stdout


@pytest.mark.parametrize("function, body, words", [
    ("softmax_vjp", "s *= 1\nreturn s * (g - (g * s).sum(axis=-1, keepdims=True))",
     "softmax: your vjp wrote into s, which the forward saved"),   # the same values: named all the same
    ("softmax_vjp", "g.T[:] = g.T\nreturn s * (g - (g * s).sum(axis=-1, keepdims=True))",
     "softmax: your vjp wrote into g, the upstream gradient"),     # through a view of g
    ("softmax_vjp", "grad = np.broadcast_to(g, s.shape)\ngrad *= s\nreturn grad - s * (g * s).sum(axis=-1, "
                    "keepdims=True)", "softmax: your vjp wrote into a read-only array (numpy refused"),
])
def test_the_array_a_vjp_wrote_into_is_named_even_where_numpy_refused_the_write(solved, function, body, words):
    exercise = solved(6)
    verdict, lines = graded(exercise, function, learners(exercise, function, body))
    assert verdict == "needs work" and words in "\n".join(lines) and spoken(lines) == ["wrote_into"], lines


# ---- item 4: exercise 10 under load ----------------------------------------------------------------
def test_exercise_10_passes_on_a_busy_machine_with_a_tiny_time_limit(tmp_path):
    """A busy loop beside it, no text cached yet, and 1 s a step: building the text (a
    second or more) is the lab's preparation, not a step, and a step takes milliseconds.
    Before issue 35 this was "did not return within 1 s ... an endless loop?"."""
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        env = {**ENGLISH, "TENSORGRAD_CACHE": str(tmp_path / "cache")}
        result = run_check(10, "--solutions", "--timeout", 1, env=env)
    finally:
        busy.kill()
        busy.wait()
    assert result.returncode == 0 and result.stdout == "10_char_model: passes\n", result.stdout + result.stderr
    assert [path.name for path in (tmp_path / "cache").iterdir()] == [f"lab-corpus-python{sys.version.split()[0]}.txt"]


def test_exercise_10_builds_its_text_once_then_reads_it_from_the_cache(solved, tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORGRAD_CACHE", str(tmp_path))
    exercise = solved(10)
    built = []
    monkeypatch.setattr(exercise, "fallback_corpus", lambda: built.append(1) or "a text of the lab's own.\n")
    assert exercise.corpus.__wrapped__() == exercise.corpus.__wrapped__() == "a text of the lab's own.\n"
    assert built == [1]
    os.chmod(tmp_path, 0o500)   # a cache that cannot be written: built each time, and no error
    try:
        monkeypatch.setenv("TENSORGRAD_CACHE", str(tmp_path / "cannot"))
        assert exercise.corpus.__wrapped__() == "a text of the lab's own.\n" and built == [1, 1]
    finally:
        os.chmod(tmp_path, 0o700)


def test_the_time_limit_counts_from_the_first_step_not_the_preparation(learner):
    """A preparation of 3 s (lab.preparing) under a 1 s limit passes; a step of 3 s does not."""
    with open(learner / "10_char_model.py", "a") as file:
        file.write("\n\ndef _slow_text(original=corpus):\n    import time\n    time.sleep(3)\n    return original()\n"
                   "\n\ncorpus = _slow_text\n")
    result = run_check(10, "--solutions", "--timeout", 1, folder=learner)
    assert result.stdout == "10_char_model: passes\n", result.stdout + result.stderr
    with open(learner / "10_char_model.py", "a") as file:
        file.write("\n\ndef new_parameters(vocab_size, seed=0, original=new_parameters):\n"
                   "    lab.tell('a step that sleeps')\n    import time\n    time.sleep(3)\n"
                   "    return original(vocab_size, seed)\n")
    result = run_check(10, "--solutions", "--timeout", 1, folder=learner)
    assert "a step that sleeps: did not return within 1 s" in result.stdout, result.stdout + result.stderr
