"""Smoke tests: each graph demo runs as a user runs it and writes readable pictures.

The PATH is emptied, so the pictures come from graphviz-pure beside this Python, as after
a plain `pip install` (no Graphviz `dot`)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("demo, expected", [
    ("chain_rule", ["[1] o = tanh(n)", "do/dx1  backward -1.50000000   finite difference -1.50000000"]),
    ("tensor_chain_rule", ["dloss/dW = x.T @ z.grad", "largest difference between the three ways"]),
])
def test_demo_runs_and_writes_its_pictures(demo, expected, tmp_path):
    env = dict(os.environ, PATH=str(tmp_path / "empty"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, str(REPO / "demos" / f"{demo}.py"), "--out", str(tmp_path)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    for line in expected:
        assert line in done.stdout
    svg, png = tmp_path / "graph.svg", tmp_path / "graph.png"
    assert f"wrote {svg}" in done.stdout and f"wrote {png}" in done.stdout
    assert "[1] " in svg.read_text() and png.read_bytes().startswith(b"\x89PNG")


def test_backprop_graph_draws_a_block_expanded_and_folded_and_a_whole_gpt(tmp_path):
    env = dict(os.environ, PATH=str(tmp_path / "empty"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, str(REPO / "demos" / "backprop_graph.py"), "--out", str(tmp_path)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "one TransformerBlock, forward and backward" in done.stdout
    for name in ("block_expanded", "block_collapsed", "gpt_collapsed"):
        assert (tmp_path / f"{name}.png").read_bytes().startswith(b"\x89PNG")
    expanded = (tmp_path / "block_expanded.svg").read_text()
    assert "attn.qkv.weight" in expanded and "scaled_dot_product_attention" in expanded
    folded = (tmp_path / "gpt_collapsed.svg").read_text()
    assert "h.0" in folded and "h.1" in folded and re.search(r"\d+ ops", folded)
    assert "scaled_dot_product_attention" not in folded
