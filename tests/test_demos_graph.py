"""Smoke tests: each graph demo runs as a user runs it (the graph_demo fixture: an empty
PATH, so the pictures come from graphviz-pure beside this Python, as after a plain
`pip install`) and writes readable pictures and its backprop stepper page (which
tests/test_explore_browser.py opens in a browser)."""
import re

import pytest


@pytest.mark.parametrize("demo, expected", [
    ("chain_rule", ["[1] o = tanh(n)", "do/dx1  backward -1.50000000   finite difference -1.50000000"]),
    ("tensor_chain_rule", ["dloss/dW = x.T @ z.grad", "largest difference between the three ways"]),
])
def test_demo_runs_and_writes_its_pictures(demo, expected, graph_demo):
    stdout, out = graph_demo(demo)
    for line in expected:
        assert line in stdout
    svg, png, page = out / "graph.svg", out / "graph.png", out / "backprop.html"
    assert f"wrote {svg}" in stdout and f"wrote {png}" in stdout and f"wrote {page}" in stdout
    assert "[1] " in svg.read_text() and png.read_bytes().startswith(b"\x89PNG")
    assert "window.explorer" in page.read_text(encoding="utf-8")


def test_backprop_graph_draws_the_block_composed_and_fused_and_a_whole_gpt_on_a_page(graph_demo):
    stdout, tmp_path = graph_demo("backprop_graph")
    counts = re.findall(r"(composed|fused) .*?:\s+(\d+) ops", stdout)
    assert [kind for kind, _ in counts] == ["composed", "fused"] and int(counts[0][1]) > 2 * int(counts[1][1])
    difference = float(re.search(r"largest difference over x and every parameter (\S+) ", stdout).group(1))
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
        assert not steps.exists() and "no attention_steps.png" in stdout
    folded = svg["gpt_collapsed"]
    assert "h.0" in folded and "h.1" in folded and re.search(r"\d+ ops", folded)
    assert "scaled_dot_product_attention" not in folded
    page = tmp_path / "block_composed.html"
    assert f"wrote {page}" in stdout and ">masked_fill</text>" in page.read_text(encoding="utf-8")
