"""Every numpy routine the engine, nn and the training loop call exists in the real CuPy and
takes the keywords they give it: numpy hands a CuPy array to CuPy's routine of the same name
(NEP 18), and a routine CuPy lacks, or a keyword it does not take, fails only on a GPU. The
fake CuPy (fake_cupy.py) runs numpy inside, so it cannot see this; the real CuPy's signatures
can be read without a GPU. Skipped where CuPy is not installed (CI); run it with CuPy on the
path (`pip install cupy-cuda12x` needs no GPU to import). The array methods called with keywords
(x.max(axis=..., keepdims=True)) are checked against CuPy's arrays the same way.

The routines called only on host arrays are listed with the reason they never see a GPU's."""
import ast
import inspect
from pathlib import Path

import numpy as np
import pytest

cupy = pytest.importorskip("cupy")

REPO = Path(__file__).resolve().parents[1]
SOURCES = [*(REPO / "tensorgrad").glob("*.py"),
           *(REPO / "nn" / name for name in ("functional.py", "transformer.py", "layers.py", "optim.py", "module.py")),
           *(REPO / "tgtrain" / name for name in ("evaluate.py", "health_measures.py", "run.py"))]
HOST_ONLY_FILES = {  # whole files whose arrays are the host's
    "draw.py", "explore.py", "gradcheck.py", "render.py", "names.py", "dtypes.py", "threads.py"}
HOST_ONLY = {
    "errstate": "numpy's own context manager: it is called, not dispatched",
    "random.PCG64": "the host's generator (creation.manual_seed)",
    "vecdot": "devices.row_dot calls it on numpy's arrays only",
    "add.reduceat": "autograd.add_rows runs for a numpy index only (a CuPy one takes np.add.at)",
}
NUMPY_ONLY_KEYWORDS = {"like"}   # NEP 35: numpy reads it to pick the library, and passes the rest


def numpy_calls():
    """{(dotted name after np., keywords given): [where]} for every np.<name>(...) call."""
    calls = {}
    for path in SOURCES:
        if path.name in HOST_ONLY_FILES:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                parts, value = [], node.func
                while isinstance(value, ast.Attribute):
                    parts.append(value.attr)
                    value = value.value
                if isinstance(value, ast.Name) and value.id == "np":
                    keywords = frozenset(k.arg for k in node.keywords if k.arg) - NUMPY_ONLY_KEYWORDS
                    calls.setdefault((".".join(reversed(parts)), keywords), []).append(
                        f"{path.relative_to(REPO)}:{node.lineno}")
    return calls


def method_calls():
    """{(method name, keywords given): [where]} for every call of a numpy array method with
    keywords (x.sum(axis=0, keepdims=True)) in the same files, whatever it is called on: a
    Tensor's method of the same name (t.sum(axis=...)) is checked too, which costs nothing."""
    names = {name for name in dir(np.ndarray) if not name.startswith("_")}
    calls = {}
    for path in SOURCES:
        if path.name in HOST_ONLY_FILES:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names
                    and node.keywords and not (isinstance(node.func.value, ast.Name) and node.func.value.id == "np")):
                keywords = frozenset(k.arg for k in node.keywords if k.arg)
                calls.setdefault((node.func.attr, keywords), []).append(f"{path.relative_to(REPO)}:{node.lineno}")
    return calls


def cupy_routine(name):
    routine = cupy
    for part in name.split("."):
        routine = getattr(routine, part, None)
    return routine


def takes(routine, keywords):
    """Whether `routine` takes these keywords (a ufunc's signature is its first doc line)."""
    try:
        parameters = inspect.signature(routine).parameters
    except (TypeError, ValueError):   # CuPy's ufuncs are compiled: read "exp(x, /, out=None, *, ...)"
        head = (routine.__doc__ or "").split("\n")[0]
        return all(f"{keyword}=" in head for keyword in keywords)
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        return True
    return keywords <= parameters.keys()


def test_the_calls_are_found():
    names = {name for name, _ in numpy_calls()}
    assert {"matmul", "exp", "where", "zeros", "add.at", "swapaxes"} <= names


@pytest.mark.parametrize("call", sorted(numpy_calls(), key=lambda call: (call[0], sorted(call[1]))),
                         ids=lambda call: f"{call[0]}({', '.join(sorted(call[1]))})")
def test_cupy_has_the_routine_with_its_keywords(call):
    name, keywords = call
    if name in HOST_ONLY:
        return
    where = numpy_calls()[call][:3]
    routine = cupy_routine(name)
    assert routine is not None, f"CuPy {cupy.__version__} has no {name} (called at {where})"
    assert takes(routine, keywords), f"CuPy's {name} does not take {sorted(keywords)} (called at {where})"


@pytest.mark.parametrize("call", sorted(method_calls(), key=lambda call: (call[0], sorted(call[1]))),
                         ids=lambda call: f".{call[0]}({', '.join(sorted(call[1]))})")
def test_cupy_arrays_have_the_method_with_its_keywords(call):
    name, keywords = call
    where = method_calls()[call][:3]
    method = getattr(cupy.ndarray, name, None)
    assert method is not None, f"CuPy's arrays have no .{name} (called at {where})"
    assert takes(method, keywords), f"CuPy's .{name} does not take {sorted(keywords)} (called at {where})"
