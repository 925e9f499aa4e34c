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


def test_backprop_graph_draws_the_block_composed_and_fused_and_a_whole_gpt_on_a_page(tmp_path):
    env = dict(os.environ, PATH=str(tmp_path / "empty"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, str(REPO / "demos" / "backprop_graph.py"), "--out", str(tmp_path)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    counts = re.findall(r"(composed|fused) .*?:\s+(\d+) ops", done.stdout)
    assert [kind for kind, _ in counts] == ["composed", "fused"] and int(counts[0][1]) > 2 * int(counts[1][1])
    difference = float(re.search(r"largest difference over x and every parameter (\S+) ", done.stdout).group(1))
    assert difference < 1e-5
    names = ("attention_composed", "block_composed", "block_fused", "block_collapsed", "gpt_collapsed")
    for name in names:
        assert (tmp_path / f"{name}.png").read_bytes().startswith(b"\x89PNG")
    svg = {name: (tmp_path / f"{name}.svg").read_text() for name in names}
    for name in ("attention_composed", "block_composed"):   # every step of attention, labelled
        for cluster in ("scores", "mask", "softmax", "weighted_sum"):
            assert re.search(rf">(attn\.)?{cluster}</text>", svg[name]), (name, cluster)
        for label in ("q", "k", "v", "scores", "weights"):
            assert f">{label}</text>" in svg[name], (name, label)
        assert "scaled_dot_product_attention" not in svg[name] and ">masked_fill</text>" in svg[name]
    assert "scaled_dot_product_attention" in svg["block_fused"] and ">q</text>" in svg["block_fused"]
    assert "attn.qkv.weight" in svg["block_fused"] and "layer_norm" in svg["block_fused"]
    assert "layer_norm" not in svg["block_composed"] and ">xhat</text>" in svg["block_composed"]
    steps = tmp_path / "attention_steps.png"   # the README's figure, drawn when matplotlib is there
    try:
        import matplotlib  # noqa: F401
        assert steps.read_bytes().startswith(b"\x89PNG")
    except ImportError:
        assert not steps.exists() and "no attention_steps.png" in done.stdout
    folded = svg["gpt_collapsed"]
    assert "h.0" in folded and "h.1" in folded and re.search(r"\d+ ops", folded)
    assert "scaled_dot_product_attention" not in folded
