"""Shared pieces of the test suite: a hypothesis profile and small helpers as fixtures.

torch is never imported here: tests that compare against it import it with
pytest.importorskip, so the suite runs (and those tests skip) without torch.
"""
import json
import zipfile
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parent.parent

# few examples, no per-example deadline, the same examples on every run (no flaky CI) and no
# example database left in the checkout: the suite must stay fast and reproducible on 2 cores
settings.register_profile("tensorgrad", max_examples=25, deadline=None, derandomize=True, database=None)
settings.load_profile("tensorgrad")


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path, monkeypatch):
    """Every test runs in a folder of its own (its tmp_path): whatever it, or a script it runs,
    writes to a relative path (the main job's default out/ included) lands there, never in
    the checkout or in a user's out/."""
    monkeypatch.chdir(tmp_path)


def random_array(shape, seed=0, positive=False, away_from_zero=False, dtype=np.float64):
    """Reproducible test data. positive: in [0.5, 2) (for log, sqrt, div, pow bases);
    away_from_zero: |x| in [0.3, 2) with a random sign (for abs and relu, whose kink is at 0)."""
    rng = np.random.default_rng(seed)
    if positive:
        data = rng.uniform(0.5, 2.0, size=shape)
    elif away_from_zero:
        data = rng.uniform(0.3, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    else:
        data = rng.standard_normal(size=shape)
    return np.asarray(data, dtype=dtype)


@pytest.fixture(scope="session")
def rand():
    """rand(shape, seed=0, positive=False, away_from_zero=False, dtype=float64) -> ndarray."""
    return random_array


def gradients_by_step(root):
    """What backward has summed into each node's gradient after each of its steps (one step per
    op node, in backward order): a list over steps 0..n of {order: ndarray or None}, `order`
    1-based in backward_order(root). Made from the graph's own vjps applied to each node's
    .grad, so it needs a graph kept by backward(retain_graph=True); what the stepper page must
    show."""
    from tensorgrad import autograd, backward_order
    order = backward_order(root)
    number = {id(node): n for n, node in enumerate(order, 1)}
    sums = {n: None for n in number.values()}
    steps = [dict(sums)]
    for node in order:
        if not node._parents:
            continue
        if node is root:
            sums[1] = root.grad
        for parent, g in zip(node._parents, autograd.input_gradients(node._vjps, node._parents, node.grad)):
            if g is not None:
                g = autograd.dense(g, parent.shape, parent.dtype)
                before = sums[number[id(parent)]]
                sums[number[id(parent)]] = g if before is None else before + g
        steps.append(dict(sums))
    return steps


@pytest.fixture(scope="session")
def backward_steps():
    """backward_steps(root) -> the gradients after each backward step (gradients_by_step)."""
    return gradients_by_step


@pytest.fixture(scope="session")
def graph_demo(tmp_path_factory):
    """graph_demo(name) -> (stdout, out folder) of demos/<name>.py, run once a session as a
    user runs it, with `--out` a fresh folder and an empty PATH: its pictures come from
    graphviz-pure beside this Python, as after a plain `pip install` (no Graphviz `dot`).
    The smoke tests read its output; the browser tests open the pages it wrote."""
    runs = {}

    def run(name):
        if name not in runs:
            out = tmp_path_factory.mktemp(name)
            env = dict(os.environ, PATH=str(out / "empty"),
                       PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
            done = subprocess.run([sys.executable, str(REPO / "demos" / f"{name}.py"), "--out", str(out)],
                                  capture_output=True, text=True, env=env, cwd=out, timeout=120)
            assert done.returncode == 0, done.stderr
            runs[name] = done.stdout, out
        return runs[name]
    return run


@pytest.fixture(scope="session")
def write_v01():
    """write_v01(path, arrays, meta): a checkpoint in tensorgrad 0.1's layout, as its nn.save
    wrote it: a zip of one uncompressed .npy per array (the optimizer's named "optimizer/..."),
    and the metadata as UTF-8 JSON in the uint8 array "__meta__". Returns path."""
    def write(path, arrays, meta):
        arrays = {**arrays, "__meta__": np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)}
        with zipfile.ZipFile(path, "w") as archive:
            for name, array in arrays.items():
                with archive.open(name + ".npy", "w") as member:
                    np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)
        return path
    return write
