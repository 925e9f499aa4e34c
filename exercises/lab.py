"""The lab's plumbing: how an exercise is loaded, and how it says what check.py tries.

An exercise's file is named NN_name.py, which `import` cannot name (it starts with a digit),
so it is loaded from its path: `lab.load(5)` is exercises/05_matmul.py. With
`lab.use_solutions = True` (what `check.py --solutions` sets) every load puts in the
functions of exercises/solutions/NN_name.py in place of the file's own, so an exercise that
builds on earlier ones (10 trains a model with the ops of 02 to 09) gets their solutions too.
"""
import importlib.util
import re
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SOLUTIONS = HERE / "solutions"
use_solutions = False


class Case:
    """One way check.py tries an op: op(**inputs). An input given as a shape (a tuple) is
    random float64 numbers (seeded: check.py prints the seed), a float array is itself;
    both become Tensors that need gradients, named by their keyword. Anything else (int
    ids, a flag, a list) is passed to the op as it is. An op is graded vjp by vjp; a
    function of several ops (a neuron, exercise 02's add) by tg.gradcheck, whose report
    names the op that is wrong."""

    def __init__(self, op, **inputs):
        self.op, self.inputs = op, inputs


def tell(what):
    """Say what a long check is doing now (exercise 10's training: each step). check.py's
    worker puts in a function that sends it to the checker, whose time limit is then for
    each step rather than the whole; elsewhere nothing is told."""


def preparing(what):
    """Say that what follows is the lab's own preparation for a long check, not the
    learner's code (exercise 10's training text, before its first step): check.py's worker
    puts in a function that tells the checker, which gives it check.PREPARING seconds, or
    the time limit where that is longer; the limit counts again from the next tell."""


def positive(*shape, seed=0):
    """Numbers in [0.5, 2): inputs for an op like log that needs x > 0."""
    return np.random.default_rng(seed).uniform(0.5, 2.0, shape)


def numbers():
    """The exercises' numbers, in order."""
    return sorted(int(path.name[:2]) for path in HERE.glob("[0-9][0-9]_*.py"))


def is_exercise(file):
    """True for a file named as an exercise is: NN_name.py."""
    return re.fullmatch(r"\d\d_\w+\.py", Path(file).name) is not None


def path(number, folder=HERE):
    """exercises/NN_name.py (or the same name in `folder`)."""
    matches = sorted(folder.glob(f"{number:02d}_*.py"))
    if not matches:
        raise FileNotFoundError(f"no exercise {number:02d} in {folder} (there are {numbers()})")
    return matches[0]


def load(number):
    """Exercise `number` as a module: the learner's file, or with the solutions' functions
    put in when use_solutions is set."""
    exercise = _run(path(number))
    if use_solutions:
        solution = _run(path(number, SOLUTIONS))
        for name, value in vars(solution).items():
            if callable(value) and not name.startswith("_") and value.__module__ == solution.__name__:
                setattr(exercise, name, value)
    return exercise


def _run(file):
    spec = importlib.util.spec_from_file_location(f"{file.parent.name}_{file.stem}", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
