"""check.py as a grader against hostile exercises (issue 36, item 9): what an exercise starts
ends with it, an exercise that forks shifts no verdict, a stop signal to the checker leaves no
worker behind, and an exercise that patches numpy or the grader to pass itself does not pass:
the verdict names what it replaced. Each exercise here is written into a copy of exercises/
under tmp_path, as a learner (or someone trying the checker) would write it."""
import ast
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_lab import ENGLISH, EXERCISES, check, lab_cache, learner, run_check, write_vjp  # noqa: E402,F401
from tgtrain import workers  # noqa: E402

SOLVED_04 = {"exp_vjp": "return g * out", "log_vjp": "return g / x", "tanh_vjp": "return g * (1 - out ** 2)"}
WRONG_04 = {"exp_vjp": "return g", "log_vjp": "return g", "tanh_vjp": "return g"}   # right shapes, wrong numbers
ZERO_04 = {"exp_vjp": "return g * 0", "log_vjp": "return g * 0", "tanh_vjp": "return g * 0"}


def code(text, *more):
    """Lines of Python written as an indented block here (a vjp's body, or a file's end)."""
    return "\n".join(textwrap.dedent(part).strip("\n") for part in (text, *more))


# a vjp's lines that start a process sleeping for two minutes, its pid in `child`, holding none of
# the checker's pipes (its output elsewhere: what is tested is its life, not what waits for it)
SLEEPER = {"subprocess": """
               import subprocess, sys
               child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "hostile-lab"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid
               """,
           "fork": """
               import os, time
               child = os.fork()
               if child == 0:
                   elsewhere = os.open(os.devnull, os.O_WRONLY)
                   os.dup2(elsewhere, 1)
                   os.dup2(elsewhere, 2)
                   os.closerange(3, 4096)
                   time.sleep(120)
                   os._exit(0)
               """}
SAY_CHILD = "open(PIDS, 'a').write(f'{child}\\n')"
LOOP = """
    import os, time
    open(PIDS, 'a').write(f'{os.getpid()}\\n')   # the worker's pid, then an endless loop
    while True:
        time.sleep(0.05)
    """


def exercise_04(folder, vjps, top="", pids=None):
    """folder's 04_exp_log_tanh.py with `vjps` ({function: body}) written in, `top` run when
    it is imported, and PIDS naming the file `pids` (where the exercise writes the pids of
    the processes it starts)."""
    for function, body in vjps.items():
        write_vjp(folder, "04_exp_log_tanh", function, body)
    path = folder / "04_exp_log_tanh.py"
    path.write_text(path.read_text() + f"\nPIDS = {str(pids)!r}\n{top}\n")


def started(pids, count, within=60.0):
    """The pids written into the file `pids`, once there are `count` of them."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = [int(line) for line in pids.read_text().split()] if pids.exists() else []
        if len(found) >= count:
            return found
        time.sleep(0.05)
    raise AssertionError(f"the exercise did not write {count} pids within {within} s")


def running(pid):
    """True while process `pid` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:   # another user's: the pid was reused
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:   # no /proc: what os.kill says
        return True


def gone(pid, within=15.0):
    """True once process `pid` has ended, waiting `within` seconds at most."""
    deadline = time.monotonic() + within
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not running(pid)


@pytest.fixture
def pids(tmp_path):
    """The file an exercise writes the pids of its processes into; after the test, those
    still running (where a test fails: the code before issue 36) are killed, the grader's
    own and the sleeper alone, known by their command lines."""
    path = tmp_path / "pids"
    yield path
    for pid in ([int(line) for line in path.read_text().split()] if path.exists() else []):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as file:
                line = file.read()
            ours = b"hostile-lab" in line or b"multiprocessing" in line
        except OSError:
            ours = False
        if ours and running(pid):
            os.kill(pid, signal.SIGKILL)


def checker(folder, *args):
    """check.py started as a learner starts it in a terminal: Ctrl-C raises KeyboardInterrupt
    and SIGHUP ends it, even where the tests themselves run with either ignored (under nohup,
    SIGHUP is, and check.py rightly keeps it so)."""
    env = {"TENSORGRAD_CACHE": os.environ["TENSORGRAD_CACHE"], **ENGLISH}

    def as_in_a_terminal():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    return subprocess.Popen([sys.executable, str(folder / "check.py"), *map(str, args)], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=as_in_a_terminal)


# ---- an exercise that forks, or starts processes
def test_an_exercise_that_forks_shifts_no_later_verdict(learner):
    exercise_04(learner, {**SOLVED_04, "exp_vjp": code("""
        import os
        os.fork()   # both go on: the copy back into the grader's code
        return g * out
        """)})
    result = run_check(4, 5, 6, folder=learner)
    assert result.stdout.splitlines() == ["04_exp_log_tanh: passes", "05_matmul: not started",
                                          "06_softmax: not started"], result.stdout + result.stderr


def test_a_worker_that_ends_is_noticed_though_a_process_it_forked_holds_its_pipes(learner, pids):
    exercise_04(learner, {**SOLVED_04, "exp_vjp": code("""
        import os, time
        child = os.fork()
        if child == 0:   # the copy sleeps, holding every pipe the worker has
            time.sleep(120)
        """, SAY_CHILD, "os._exit(3)")}, pids=pids)
    result = run_check(4, 5, "--timeout", 10, folder=learner)
    assert result.stdout.splitlines() == [
        "04_exp_log_tanh: needs work", "    exp(x=(3, 4)): the process grading it ended without a word (exit status 3): "
        "os._exit(), a kill, or a crash inside numpy's C code", "05_matmul: not started"], result.stdout
    assert gone(started(pids, 1, within=1)[0]), "the exercise's child outlived it"


@pytest.mark.parametrize("how", SLEEPER)
def test_a_process_an_exercise_starts_ends_with_the_exercise(learner, pids, how):
    exercise_04(learner, {**SOLVED_04, "exp_vjp": code(SLEEPER[how], SAY_CHILD, "return g * out")}, pids=pids)
    result = run_check(4, 5, folder=learner)
    assert result.stdout.splitlines() == ["04_exp_log_tanh: passes", "05_matmul: not started"], result.stderr
    child = started(pids, 1, within=1)[0]
    assert gone(child), "the exercise's child outlived it"


# ---- the worker: the training job's own (issue 37)
def test_check_py_starts_and_ends_its_workers_with_tgtrain_workers_and_keeps_no_copy(monkeypatch):
    """One implementation of a supervised worker: check.py's are tgtrain.workers.Worker's,
    spawned, and sent SIGTERM when the checker dies (it kills the worker's group, what the
    exercise started with it); no file of the lab makes processes, sessions or pipes itself."""
    for path in EXERCISES.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        own = {name for name in imported if name.split(".")[0] in ("multiprocessing", "ctypes")}
        assert own <= {"multiprocessing.connection"}, (path, own)   # its wait(), on the worker's connection
        called = {node.func.attr for node in ast.walk(tree)
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)}
        assert not called & {"Process", "get_context", "Pipe", "setsid", "killpg", "prctl"}, (path, called)
    assert check.Worker is workers.Worker
    starts = []
    real = workers.Worker.start.__func__
    monkeypatch.setattr(workers.Worker, "start", classmethod(
        lambda cls, *args, **options: starts.append(options) or real(cls, *args, **options)))
    assert list(check.grade_apart([4, 5], 60)) == [(4, "not started", []), (5, "not started", [])]
    assert starts == [{"method": "spawn", "on_parent_death": signal.SIGTERM}] * 2


# ---- a checker that is stopped
@pytest.mark.parametrize("stop, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)],
                         ids=["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_stopped_checker_leaves_no_worker_and_nothing_the_exercise_started(learner, pids, stop, status):
    exercise_04(learner, {**SOLVED_04, "exp_vjp": code(SLEEPER["subprocess"], SAY_CHILD, LOOP)}, pids=pids)
    with checker(learner, 4, "--timeout", 120) as process:
        child, worker = started(pids, 2)   # the worker is in the exercise's endless loop now
        process.send_signal(stop)
        _, err = process.communicate(timeout=30)   # ends once the worker, which holds stderr too, is gone
    assert process.returncode == status, err
    assert err.startswith("stopped (") and "Traceback" not in err, err
    assert gone(worker), "the worker outlived the checker"
    assert gone(child), "the exercise's child outlived the checker"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_checker_killed_with_sigkill_takes_its_worker_and_what_it_started_along(learner, pids):
    exercise_04(learner, {**SOLVED_04, "exp_vjp": code(SLEEPER["subprocess"], SAY_CHILD, LOOP)}, pids=pids)
    with checker(learner, 4, "--timeout", 120) as process:
        child, worker = started(pids, 2)
        process.kill()
        process.communicate(timeout=30)
    assert gone(worker), "the worker outlived the checker"
    assert gone(child), "the exercise's child outlived the checker"


# ---- an exercise cannot patch its way to "passes"
PATCHES = {   # what the exercise runs when imported, its (wrong) vjps, and the name its verdict must give
    "numpy.isclose": ("np.isclose = lambda *args, **kwargs: np.True_", WRONG_04),
    "numpy.ndarray.any": (code("""
        import ctypes, gc   # a method of a type numpy made immutable, replaced all the same
        gc.get_referents(np.ndarray.__dict__)[0]["any"] = lambda *args, **kwargs: False
        ctypes.pythonapi.PyType_Modified(ctypes.py_object(np.ndarray))
        """), WRONG_04),
    "grading.finite_differences": ("", {**ZERO_04, "exp_vjp": code("""
        import sys
        sys.modules["grading"].finite_differences = lambda f, t, eps: t.data * 0
        return g * 0
        """)}),
    "grading._compare": ("", {**WRONG_04, "exp_vjp": code("""
        import sys   # the same function, with other code: it finds nothing wrong
        sys.modules["grading"]._compare.__code__ = (lambda c: []).__code__
        return g
        """)}),
}


@pytest.mark.parametrize("name", PATCHES)
def test_an_exercise_that_patches_numpy_or_the_grader_does_not_pass_and_is_named(learner, name):
    top, vjps = PATCHES[name]
    exercise_04(learner, vjps, top=f"import numpy as np\n{top}")
    result = run_check(4, 5, folder=learner)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == "04_exp_log_tanh: needs work" and lines[-1] == "05_matmul: not started", result.stdout
    assert f"04_exp_log_tanh.py replaced what the grader computes with: {name}." in result.stdout, result.stdout


def test_a_patched_comparison_is_caught_by_the_checker_and_said_in_korean(learner):
    top, vjps = PATCHES["numpy.isclose"]
    exercise_04(learner, vjps, top=f"import numpy as np\n{top}")
    result = run_check(4, "--lang", "ko", folder=learner)
    assert result.returncode == 1 and result.stdout.startswith("04_exp_log_tanh: 고칠 곳 있음"), result.stdout
    assert "04_exp_log_tanh.py이(가) 채점기가 계산에 쓰는 것을 바꿔 놓았습니다: numpy.isclose." in result.stdout
    assert "exp, 입력 x: 채점하던 프로세스는 이 기울기를 통과시켰지만, 내 코드가 돌지 않는 프로세스에서 check.py가 " \
           "직접 비교해 보니 원소 12개 중 12개가 틀렸습니다" in result.stdout, result.stdout


def test_nothing_an_exercise_sends_down_the_pipe_runs_in_the_checker(learner, tmp_path):
    """The worker's messages are JSON: an exercise that writes a pickle into the pipe (one that
    would run code where it is read) has its exercise graded "needs work", and nothing runs."""
    ran = tmp_path / "ran-in-the-checker"
    payload = code(f"""
        class Payload:   # unpickled, it opens a file for writing
            def __reduce__(self):
                return open, ({str(ran)!r}, "w")
        """)
    send = code("""
        import gc, multiprocessing.connection
        for pipe in [o for o in gc.get_objects() if isinstance(o, multiprocessing.connection.Connection)]:
            if pipe.writable and not pipe.closed:
                pipe.send(("done", Payload(), []))
        return g * out
        """)
    exercise_04(learner, {**SOLVED_04, "exp_vjp": send}, top=payload)
    result = run_check(4, 5, folder=learner)
    assert not ran.exists(), "the exercise ran code in the checker"
    assert result.stdout.startswith("04_exp_log_tanh: needs work\n    exp(x=(3, 4)): check.py could not read what "
                                    "the process grading it sent"), result.stdout
    assert result.stdout.endswith("05_matmul: not started\n")
