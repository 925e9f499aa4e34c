"""docs/coming-from-pytorch.md runs: every row of its tables, read from the page itself.

Each row of "Spelled as in PyTorch" and "Spelled differently" runs its tensorgrad snippet in
tensorgrad and, where torch is installed, its PyTorch snippet in torch, each after the page's
setup lines; the two results must agree in shape and dtype, and in value unless they are
random draws or depend on the machine (whether it has a GPU). In the first table the tensorgrad
snippet must also be the PyTorch one renamed by the page's find-and-replace. Each row of "The
PyTorch spelling in tensorgrad" runs in tensorgrad only (it is about tensorgrad's answer) and
must give what its second column says: that exception, or that value.
"""
import ast
import builtins
import re
from pathlib import Path

import numpy as np
import pytest

import tensorgrad as tg

try:
    import torch
except ImportError:   # the PyTorch halves are left out; the tensorgrad halves still run
    torch = None

PAGE = Path(__file__).resolve().parents[1] / "docs" / "coming-from-pytorch.md"
NOT_EQUAL_BY_VALUE = ("randn", "randint", "multinomial", "normal_", "cuda")   # draws; the machine


def sections():
    """{heading: [row, ...]} of the page, each row the inline code of each cell ('' if none)."""
    found, heading = {}, None
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            heading = line.lstrip("# ")
            found[heading] = []
        elif line.startswith("| `"):
            cells = line.strip("|").split(" | ")
            found[heading].append([" ".join(re.findall(r"`([^`]+)`", cell)) for cell in cells])
    return found


SECTIONS = sections()
SETUP = PAGE.read_text(encoding="utf-8").split("```python\n")[1].split("```")[0]
RENAMES = [tuple(row) for row in SECTIONS["The lecture's script: find and replace"]]
SAME = [row[:2] for row in SECTIONS["Spelled as in PyTorch"]]
DIFFERENT = [row[:2] for row in SECTIONS["Spelled differently"]]
TRAPS = [row[:2] for row in SECTIONS["The PyTorch spelling in tensorgrad"]]


def rename(code):
    for find, replace in RENAMES:
        code = code.replace(find, replace)
    return code


def run(setup, snippet):
    """The value of `snippet` (None for a statement) after `setup`, in a fresh namespace."""
    namespace = {}
    exec(setup, namespace)
    try:
        return eval(compile(snippet, "<row>", "eval"), namespace)
    except SyntaxError:   # a statement: `with tg.no_grad(): y = x * 2`
        exec(snippet, namespace)
        return None


def plain(value):
    """A result as arrays, numbers and lists, the same whichever library made it; None for what
    has nothing to compare (a module, an optimizer, a generator): it ran, and that is the test."""
    if torch is not None and isinstance(value, torch.Tensor):
        return value.detach().numpy()
    if torch is not None and isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    if isinstance(value, tg.Tensor):
        return value.data
    if isinstance(value, type) and issubclass(value, np.generic):   # tg.long is numpy's int64
        return np.dtype(value).name
    if isinstance(value, (list, tuple)):   # torch.Size is a tuple
        return [plain(v) for v in value]
    if isinstance(value, (bool, int, float, str)):
        return value
    return None


def assert_same(ours, theirs, by_value, where):
    if isinstance(ours, list):
        assert isinstance(theirs, list) and len(ours) == len(theirs), where
        for a, b in zip(ours, theirs):
            assert_same(a, b, by_value, where)
    elif isinstance(ours, np.ndarray):
        theirs = np.asarray(theirs)
        assert (ours.shape, ours.dtype) == (theirs.shape, theirs.dtype), where
        if by_value:
            np.testing.assert_allclose(ours, theirs, rtol=1e-6, err_msg=where)
    elif by_value:
        assert ours == theirs, where
    else:
        assert type(ours) is type(theirs), where


def check_row(pytorch, tensorgrad):
    """Run the row's tensorgrad snippet, and its PyTorch snippet where torch is installed;
    their results must agree."""
    ours = plain(run(rename(SETUP), tensorgrad))
    if torch is None:
        return
    theirs = plain(run(SETUP, pytorch))
    if ours is not None and theirs is not None:
        by_value = not any(word in pytorch for word in NOT_EQUAL_BY_VALUE)
        assert_same(ours, theirs, by_value, f"{tensorgrad} gives {ours!r}; {pytorch} gives {theirs!r}")


def test_the_page_has_its_tables():
    assert len(SAME) >= 25 and len(DIFFERENT) >= 10 and len(TRAPS) >= 6 and len(RENAMES) == 7


@pytest.mark.parametrize("pytorch, tensorgrad", SAME, ids=[row[1] for row in SAME])
def test_spelled_as_in_pytorch(pytorch, tensorgrad):
    assert tensorgrad == rename(pytorch), "this row's tensorgrad spelling is not its PyTorch one renamed"
    check_row(pytorch, tensorgrad)


@pytest.mark.parametrize("pytorch, tensorgrad", DIFFERENT, ids=[row[1] for row in DIFFERENT])
def test_spelled_differently(pytorch, tensorgrad):
    check_row(pytorch, tensorgrad)


@pytest.mark.parametrize("snippet, gives", TRAPS, ids=[row[0] for row in TRAPS])
def test_the_pytorch_spelling_in_tensorgrad(snippet, gives):
    if gives.endswith("Error"):
        with pytest.raises(getattr(builtins, gives)):
            run(rename(SETUP), snippet)
    else:
        assert plain(run(rename(SETUP), snippet)) == plain(ast.literal_eval(gives))
