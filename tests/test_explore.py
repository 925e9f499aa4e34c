"""The backprop stepper page (tensorgrad/explore.py), without a browser: what the page holds.

The numbers must be the ones backward computed, the page must be one file that fetches
nothing, and nothing a user labels may become markup or script. tests/test_explore_browser.py
drives the same pages in Chromium; the notebook test at the end runs one in Jupyter's kernel."""
import base64
import hashlib
import html
import json
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import numpy as np
import pytest

import tensorgrad as tg
from tensorgrad import autograd

REPO = Path(__file__).resolve().parent.parent


def page_data(text):
    """The JSON the page's script reads."""
    return json.loads(re.search(r'<script type="application/json" id="explorer-data">(.*?)</script>', text, re.S).group(1))


def neuron(retain_graph=True, backward=True):
    """micrograd's neuron o = tanh(x1*w1 + x2*w2 + b), float64, after backward; its leaves."""
    leaves = {name: tg.tensor(v, requires_grad=True, dtype=np.float64, label=name)
              for name, v in {"x1": 2.0, "x2": 0.0, "w1": -3.0, "w2": 1.0, "b": 6.8813735870195432}.items()}
    o = (leaves["x1"] * leaves["w1"] + leaves["x2"] * leaves["w2"] + leaves["b"]).tanh()
    o.label = "o"
    if backward:
        o.backward(retain_graph=retain_graph)
    return o, leaves


def small_tensor_graph():
    """A graph with broadcasting, a reused input, a matmul and a slice: gradients that add up."""
    x = tg.tensor(np.arange(6.0).reshape(2, 3) / 10, requires_grad=True, label="x")
    W = tg.tensor(np.linspace(-1, 1, 12).reshape(3, 4), requires_grad=True, label="W")
    b = tg.tensor([0.1, -0.2, 0.3, 0.0], requires_grad=True, label="b")
    h = (x @ W + b).tanh()
    loss = (h * h).sum() + (x[:, 1:] * 2.0).sum() + x.exp().mean()
    loss.label = "loss"
    loss.backward(retain_graph=True)
    return loss


def composed_block():
    """nn's TransformerBlock (8 channels, 2 heads) on 4 tokens inside tg.composed(): every op
    primitive, each made in its module's scope (ln1, attn.scores, ffn.fc, ...)."""
    import nn
    nn.manual_seed(0)
    x = tg.randn(1, 4, 8, seed=0, requires_grad=True)
    x.label = "x"
    with tg.composed():
        loss = nn.TransformerBlock(dim=8, n_heads=2)(x).sum()
    loss.label = "loss"
    loss.backward(retain_graph=True)
    return loss


def close(shown, expected):
    """Equal to display precision: 4 significant digits."""
    return np.allclose(np.asarray(shown, float), np.ravel(expected), rtol=1e-3, atol=1e-12)


@pytest.mark.parametrize("graph", [lambda: neuron()[0], small_tensor_graph], ids=["neuron", "tensors"])
def test_the_page_holds_backwards_numbers_step_by_step_in_backward_order(graph, backward_steps):
    root = graph()
    order = tg.backward_order(root)
    data = page_data(tg.explore(root).html)
    ops = [node for node in order if node.op]
    number = {id(node): n for n, node in enumerate(order, 1)}
    assert [step["order"] for step in data["steps"]] == [number[id(node)] for node in ops]
    assert [node["op"] for node in data["nodes"]] == [node.op for node in order]
    assert [node["label"] for node in data["nodes"]] == [node.label for node in order]
    edges = [(node, parent, edge) for node, step in zip(ops, data["steps"])
             for parent, edge in zip(node._parents, step["inputs"])]
    assert [edge["rule"] for _, _, edge in edges] == [rule for node in ops for rule in node.rules]
    shown = [edge for _, parent, edge in edges if parent.requires_grad]
    for k, (step, expected) in enumerate(zip(data["steps"], backward_steps(root)[1:]), 1):
        latest = {edge["order"]: edge["after"] for edge in step["inputs"] if edge["order"]}   # x * x: the second
        assert all(close(after["values"], expected[n]) for n, after in latest.items()), k
    for node, view in zip(order, data["nodes"]):
        assert close(view["value"]["values"], node.data)
    last = {edge["order"]: edge["after"] for edge in shown}   # each node's gradient once complete
    for n, node in enumerate(order[1:], 2):
        assert close(last[n]["values"], node.grad), node
    assert close(data["seed"]["values"], root.grad) and data["problem"] is None and data["notes"] == []


def test_the_local_derivative_and_the_rule_are_the_ops_own():
    o, leaves = neuron()
    data = page_data(tg.explore(o).html)
    tanh, _, _, mul = (step["inputs"] for step in data["steps"][:4])   # [1] tanh, [4] x1 * w1
    assert tanh[0]["rule"] == "d(tanh x)/dx = 1 - tanh²(x)"
    assert tanh[0]["local"] == {"kind": "scalar", "view": {"shape": [], "values": [0.5]}}   # 1 - tanh² = 1/2
    assert mul[0]["name"] == "x1" and mul[0]["rule"] == "d(a·b)/da = b"
    assert mul[0]["local"]["view"]["values"] == [-3.0]                                      # w1
    assert mul[0]["contribution"] == "same" and mul[0]["after"]["values"] == [-1.5]         # 0.5 × -3
    loss = small_tensor_graph()
    kinds = {(node.op, kind) for node, step in zip([t for t in tg.backward_order(loss) if t.op],
                                                    page_data(tg.explore(loss).html)["steps"])
             for kind in [edge["local"] and edge["local"]["kind"] for edge in step["inputs"]]}
    assert {("tanh", "elementwise"), ("matmul", "jacobian"), ("sum", "jacobian")} <= kinds


def test_every_node_is_named_from_the_math_and_the_drawing_says_the_same():
    """A node's name is its label, or its scope and its op on its inputs: never a counter
    ("add10"), never "label none"; the drawing's boxes carry the page's names."""
    pages = {"neuron": neuron()[0], "tensors": small_tensor_graph(), "block": composed_block()}
    names = {}
    for graph, root in pages.items():
        text = tg.explore(root, show_data=False).html
        nodes = page_data(text)["nodes"]
        names[graph] = [node["name"] for node in nodes]
        svg = text[text.index("<svg"):text.index("</svg>")]
        titles = {int(n): html.unescape(name) for n, name in re.findall(r">\[(\d+)\] ([^<]*)</text>", svg)}
        assert titles == dict(enumerate(names[graph], 1)), graph
        made = [node["name"] for node in nodes if node["label"] is None or graph == "block"]   # not the neuron's x1
        assert not [name for name in made if re.match(r"^[a-z_]+\d+$", name) or "label none" in name], graph
    assert names["neuron"][:4] == ["o", "x1 · w1 + x2 · w2 + b", "x1 · w1 + x2 · w2", "x1 · w1"]
    assert names["tensors"][4:7] == ["tanh(x @ W + b)", "x @ W + b", "x @ W"]
    assert {"x + attn(…) + ffn(…)", "ffn.proj › … @ weight + bias", "ffn › 0.5 · fc(…) · (1 + tanh(…))",
            "ln2 › var + 1e-05", "ln1 › (x - mean)^2", "attn.scores › q @ kᵀ",
            "attn.weighted_sum › weights @ v", "attn.softmax › exp(mask(…) - const(1, 2, 4, 1))", "xhat",
            "ffn.proj.weight"} <= set(names["block"])


def test_making_the_page_changes_no_grad_and_keeps_the_graph():
    loss = small_tensor_graph()
    order = tg.backward_order(loss)
    before = [(node.grad, node.grad.copy()) for node in order]
    tg.explore(loss)
    assert all(node.grad is same and np.array_equal(node.grad, copy) for node, (same, copy) in zip(order, before))
    loss.backward()   # the graph is still there to go back through
    assert all(node._vjps is None for node in order if node.op)


def test_render_graph_writes_the_page_by_suffix_or_format(tmp_path):
    o, _ = neuron()
    page = tg.render_graph(o, tmp_path / "sub" / "backprop.html")
    assert page == tmp_path / "sub" / "backprop.html"
    assert page.read_text(encoding="utf-8") == tg.explore(o).html
    other = tg.render_graph(o, tmp_path / "stepper.page", format="html")
    assert other.read_text(encoding="utf-8") == page.read_text(encoding="utf-8")
    assert tg.explore(o).save(tmp_path / "saved.htm").read_text(encoding="utf-8") == page.read_text(encoding="utf-8")


def test_one_file_that_fetches_nothing_and_admits_only_its_own_script_and_style():
    o, _ = neuron()
    text = tg.explore(o).html
    assert "<svg" in text and ">[1] o</text>" in text   # the drawing, laid out, numbered as the trace
    assert not re.search(r"<(link|img|iframe|object|embed)\b|\s(src|href)=|url\(|@import", text, re.I)
    assert not re.search(r"https?://(?!www\.w3\.org/(2000/svg|1999/xlink))", text)   # only SVG's namespaces
    policy = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', text).group(1)
    scripts = re.findall(r"<script>(.*?)</script>", text, re.S)
    styles = re.findall(r"<style>(.*?)</style>", text, re.S)
    assert len(scripts) == 1 and len(styles) == 1
    digest = lambda code: base64.b64encode(hashlib.sha256(code.encode()).digest()).decode()
    assert policy == (f"default-src 'none'; script-src 'sha256-{digest(scripts[0])}'; "
                      f"style-src 'sha256-{digest(styles[0])}'; base-uri 'none'; form-action 'none'")


@pytest.mark.parametrize("label", ["<script>alert(1)</script>", '"}{<b>', "</script><script>alert(2)</script>"])
def test_labels_stay_text(label):
    x = tg.tensor([1.0, 2.0], requires_grad=True, label=label)
    y = (x * x).sum()
    y.label = label
    y.backward(retain_graph=True)
    text = tg.explore(y).html
    assert text.count("<script") == 2 and label not in text and "<b>" not in text
    data_block = re.search(r'id="explorer-data">(.*?)</script>', text, re.S).group(1)
    assert "<" not in data_block and ">" not in data_block and "&" not in data_block
    assert page_data(text)["nodes"][0]["label"] == label and page_data(text)["title"] == f"backward from {label}"
    assert f"<title>backward from {html.escape(label)}</title>" in text
    svg = text[text.index("<svg"):text.index("</svg>")]
    assert "&lt;" in svg and "<script" not in svg and "<b>" not in svg


@pytest.mark.parametrize("name", ["<<b>X</b>>", "</script><script>alert(3)</script>", '"}{<b>'])
def test_op_and_scope_names_stay_text(name):
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with tg.scope(name):
        y = tg.make_op(name, x.data * 2, (x,), vjps=(lambda g: 2 * g,))
    loss = y.sum()
    loss.backward(retain_graph=True)
    for collapse in (None, "modules"):   # the op in its scope's cluster, or the folded scope's box
        text = tg.explore(loss, collapse=collapse).html
        assert text.count("<script") == 2 and name not in text and "<b>" not in text
        data_block = re.search(r'id="explorer-data">(.*?)</script>', text, re.S).group(1)
        assert "<" not in data_block and ">" not in data_block
        assert name in [node["op"] for node in page_data(text)["nodes"]]
        svg = text[text.index("<svg"):text.index("</svg>")]
        assert "&lt;" in svg and "<script" not in svg


def test_before_backward_and_after_a_freeing_backward_it_says_what_it_cannot_show(tmp_path):
    o, _ = neuron(backward=False)
    explorer = tg.explore(o)
    assert "before backward" in explorer.problem and "o.backward(retain_graph=True)" in explorer.problem
    data = page_data(explorer.html)
    assert data["problem"] == explorer.problem and data["seed"] is None
    assert all(edge["after"] is None and edge["contribution"] is None for s in data["steps"] for edge in s["inputs"])
    assert len(data["steps"]) == 5 and explorer.problem in repr(explorer)

    o, _ = neuron(retain_graph=False)
    explorer = tg.explore(o)
    assert "freed" in explorer.problem and "retain_graph=True" in explorer.problem
    data = page_data(explorer.html)
    edges = [edge for s in data["steps"] for edge in s["inputs"]]
    assert all(edge["local"] is None and edge["contribution"] is None for edge in edges)
    order = tg.backward_order(o)
    for edge in edges:   # each gradient once complete, as backward left it
        assert close(edge["after"]["values"], order[edge["order"] - 1].grad)


def test_a_gradient_that_is_not_this_graphs_sum_is_pointed_out():
    o, leaves = neuron()
    o.backward(retain_graph=True)   # the leaves' grads now hold two backward passes
    data = page_data(tg.explore(o).html)
    changed = [name for name in leaves if name != "w2"]   # twice 0 is 0
    assert len(data["notes"]) == 1 and all(f"{name}.grad" in data["notes"][0] for name in changed)
    assert "w2.grad" not in data["notes"][0]
    assert data["steps"][3]["inputs"][0]["after"]["values"] == [-1.5]   # one backward's numbers, not two


def test_over_max_nodes_it_refuses_with_the_drawings_message():
    o, _ = neuron()
    with pytest.raises(ValueError) as drawing:
        tg.draw_graph(o, max_nodes=5)
    with pytest.raises(ValueError) as page:
        tg.explore(o, max_nodes=5)
    assert str(page.value) == str(drawing.value) and "max_nodes=5" in str(page.value)
    with pytest.raises(ValueError, match="order=True"):
        tg.explore(o, order=False)


def test_big_tensors_get_a_summary_and_a_heatmap_and_non_finite_numbers_survive():
    x = tg.tensor(np.linspace(-1, 1, 200).reshape(10, 20), requires_grad=True, label="x")
    masked = x.masked_fill(np.eye(10, 20, dtype=bool), -np.inf)
    loss = masked.exp().sum()
    loss.backward(retain_graph=True)
    with np.errstate(invalid="ignore"):   # the drawing's own summary of -inf values warns
        data = page_data(tg.explore(loss).html)
    value = data["nodes"][2]["value"]   # the masked tensor: -inf on the diagonal
    assert "values" not in value and value["summary"][0] == "-Infinity" and value["heat"]["rows"] == 10
    assert value["heat"]["cols"] == 20 and len(value["heat"]["values"]) == 200
    grad = data["steps"][-1]["inputs"][0]["after"]   # x's gradient: whole, for grad(order)
    assert close(grad["values"], x.grad) and close(grad["summary"], [x.grad.mean(), x.grad.std(), np.linalg.norm(x.grad)])
    big = tg.tensor(np.ones((100, 100)), requires_grad=True)
    loss = (big * 3.0).sum()
    loss.backward(retain_graph=True)
    view = page_data(tg.explore(loss).html)["steps"][-1]["inputs"][0]["after"]
    assert "values" not in view and view["summary"] == [3.0, 0.0, 300.0]                 # over KEPT numbers
    assert view["heat"]["rows"] == 24 and view["heat"]["cols"] == 48 and set(view["heat"]["values"]) == {3.0}


def test_a_folded_scope_is_highlighted_as_its_box():
    x = tg.tensor([1.0, 2.0], requires_grad=True, label="x")
    with tg.scope("inner"):
        h = (x * 2.0).tanh()
    loss = h.sum()
    loss.backward(retain_graph=True)
    data = page_data(tg.explore(loss, collapse="modules").html)
    drawn = {node["op"]: node["drawn"] for node in data["nodes"]}
    assert drawn["sum"] == ["op1", "v1"] and drawn["tanh"] == ["v2", "box1"] and drawn["mul"] == ["box1"]


def test_jupyter_shows_the_page_in_a_sandboxed_frame():
    o, _ = neuron()
    explorer = tg.explore(o)
    frame = explorer._repr_html_()
    assert frame.startswith("<iframe srcdoc=") and 'sandbox="allow-scripts"' in frame
    assert html.unescape(re.search(r'srcdoc="([^"]*)"', frame).group(1)) == explorer.html


def test_the_page_files_are_package_data_of_a_plain_install(tmp_path):
    """`pip install .` (not editable) ships explore.html, .js and .css: a wheel built from a
    copy of the project holds them."""
    files = {p.name for p in (REPO / "tensorgrad").glob("explore.*")} - {"explore.py"}
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert files == {"explore.html", "explore.js", "explore.css"}
    assert files <= set(config["tool"]["setuptools"]["package-data"]["tensorgrad"])
    pytest.importorskip("setuptools")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, tmp_path / name)
    for package in ("tensorgrad", "nn", "tgtrain"):
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "-q", "-w", str(tmp_path / "dist"), str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    assert {f"tensorgrad/{name}" for name in files} <= set(zipfile.ZipFile(wheel).namelist())


def test_a_notebook_shows_the_stepper_in_a_text_html_output():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import tensorgrad as tg\n"
        "x = tg.tensor([[1., 2.], [3., 4.]], requires_grad=True, label='x')\n"
        "loss = (x @ x).tanh().sum()\n"
        "loss.label = 'loss'\n"
        "loss.backward(retain_graph=True)\n"
        "tg.explore(loss)")])
    nbclient.NotebookClient(notebook, timeout=60, kernel_name="python3").execute()
    (output,) = notebook.cells[0].outputs
    page = html.unescape(re.search(r'srcdoc="([^"]*)"', output["data"]["text/html"]).group(1))
    assert "window.explorer" in page and page_data(page)["title"] == "backward from loss"
    assert len(page_data(page)["steps"]) == 3
