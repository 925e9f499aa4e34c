"""Graph drawings: what draw_graph puts in the DOT source, and render_graph without `dot`."""
import contextlib
import io
import re
import sys
import sysconfig

import graphviz
import numpy as np
import pytest

import tensorgrad as tg


def neuron():
    """micrograd's neuron o = tanh(x1*w1 + x2*w2 + b), labelled; returns (o, leaves)."""
    leaves = {name: tg.tensor(v, requires_grad=True, dtype=np.float64, label=name)
              for name, v in dict(x1=2.0, x2=0.0, w1=-3.0, w2=1.0, b=6.8813735870195432).items()}
    n = leaves["x1"] * leaves["w1"] + leaves["x2"] * leaves["w2"] + leaves["b"]
    n.label = "n"
    o = n.tanh()
    o.label = "o"
    return o, leaves


def node_line(source, name):
    """The DOT line that declares node `name`."""
    return next(line for line in source.splitlines() if line.strip().startswith(f"{name} ["))


def clusters(source):
    """{cluster label: the text of its subgraph block} for every cluster in the source."""
    found = {}
    for match in re.finditer(r"subgraph cluster_\d+ \{", source):
        depth = 1
        for brace in re.compile(r"(?<!\\)[{}]").finditer(source, match.end()):   # not a label's \{
            depth += 1 if brace.group() == "{" else -1
            if depth == 0:
                break
        body = source[match.end():brace.start()]
        found[re.search(r'label="?([^"\n]+)"?', body).group(1)] = body
    return found


@pytest.fixture
def no_dot(monkeypatch, tmp_path):
    """A PATH without Graphviz's `dot` (nor anything else): render_graph must find
    graphviz-pure beside the running Python, as after a plain `pip install`."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))


def test_values_ops_and_edges_follow_micrograds_grammar():
    o, leaves = neuron()
    number = {id(t): n for n, t in enumerate(tg.backward_order(o), 1)}
    source = tg.draw_graph(o).source
    x1, w1 = leaves["x1"], leaves["w1"]
    x1w1 = next(t for t in tg.backward_order(o) if t._op == "mul" and t._parents[0] is x1)
    v = lambda t: f"v{number[id(t)]}"
    assert f"{v(x1)} -> op{number[id(x1w1)]}" in source     # input value -> op
    assert f"{v(w1)} -> op{number[id(x1w1)]}" in source
    assert f"op{number[id(x1w1)]} -> {v(x1w1)}" in source   # op -> output value
    assert "label=mul" in node_line(source, f"op{number[id(x1w1)]}")
    assert "shape=ellipse" in node_line(source, f"op{number[id(x1w1)]}")
    assert "x1 | () float64 | data 2 | " in node_line(source, v(x1))
    assert "label=tanh" in source and "shape=record" in node_line(source, v(o))
    ops = [t for t in tg.backward_order(o) if t._op]
    assert source.count(" -> ") == sum(len(t._parents) + 1 for t in ops) == 14   # inputs -> op -> output


def test_grad_says_it_is_not_computed_before_backward_and_shows_after():
    o, leaves = neuron()
    before = tg.draw_graph(o).source
    assert "grad: not computed yet" in before and "grad 0" not in before
    o.backward()   # without retain_graph: the vjps are freed, the structure remains
    after = tg.draw_graph(o).source
    assert "not computed" not in after
    assert "x1 | () float64 | data 2 | grad -1.5" in after
    assert "data" not in tg.draw_graph(o, show_data=False).source
    assert "grad" not in tg.draw_graph(o, show_grad=False).source


def test_numbers_follow_backward_order_and_match_the_trace():
    o, _ = neuron()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        o.backward(trace=True)
    traced = re.findall(r"^\[(\d+)\] (\S+) = ", printed.getvalue(), re.M)   # "[3] add3 = add(...)"
    source = tg.draw_graph(o, order=True).source
    assert traced and all(f'v{n} [label="[{n}] {name} |' in source for n, name in traced)
    for n, t in enumerate(tg.backward_order(o), 1):
        assert f"[{n}] " in node_line(source, f"v{n}")
    assert "[" not in node_line(tg.draw_graph(o).source, "v1").split("label=")[1].split("|")[0]


def test_names_read_as_the_math_with_the_brackets_it_needs():
    a, b, c = (tg.tensor([1.0, 2.0], requires_grad=True, label=name) for name in "abc")
    name = lambda t: tg.draw_graph(t, order=True).source.split('label="[1] ')[1].split(" |")[0]
    assert [name(t) for t in (a - (b - c), (a - b) - c, (a + b) * c, a * b + c, -(a + b), (a + b).T, (a @ b) * c,
                              (a * b) ** 2, a / (b * c), (a + b).tanh() * c, (a * 2.0).sum(), a[0] * b[1])] == [
        "a - (b - c)", "a - b - c", "(a + b) · c", "a · b + c", "-(a + b)", "(a + b)ᵀ", "(a @ b) · c",
        "(a · b)^2", "a / (b · c)", "tanh(a + b) · c", "sum(a · 2)", "a[…] · b[…]"]
    deep = a
    for _ in range(6):
        deep = deep * 2.0
    assert name(deep) == "… · 2 · 2 · 2"   # three ops deep, then "…"
    with tg.scope("outer"):
        with tg.scope("inner"):
            inner = (a * b).exp()
        out = inner + tg.tensor([1.0, 1.0], requires_grad=True)
    assert name(out) == "outer › inner(…) + leaf(2,)"   # another scope's output by its name; a leaf by its shape


def test_the_trace_the_drawing_and_the_stepper_share_the_names_of_a_composed_block(capsys):
    nn = pytest.importorskip("nn")
    nn.manual_seed(0)
    x = tg.randn(1, 4, 8, seed=0, requires_grad=True)
    x.label = "x"
    with tg.composed():
        loss = nn.TransformerBlock(dim=8, n_heads=2)(x).sum()
    loss.backward(trace=True, retain_graph=True)
    traced = dict(re.findall(r"^\[(\d+)\] \(?(.+?)\)? = \w+\(", capsys.readouterr().out, re.M))
    source = tg.draw_graph(loss, order=True, show_data=False).source
    assert len(traced) == 55 and traced["37"] == "attn.scores › q @ kᵀ"
    assert all(f'v{n} [label="[{n}] {name} |' in source for n, name in traced.items())


def test_constants_are_small_grey_nodes_without_numbers_or_grad():
    x = tg.tensor([1.0, 2.0], requires_grad=True, label="x")
    y = (x * 2.0).masked_fill(np.array([True, False]), 0.0).sum()
    source = tg.draw_graph(y, order=True).source
    constant = node_line(source, "c1")
    assert 'label=2 ' in constant and "fontsize=13" in constant and "#f1f1f1" in constant
    assert "c1 -> op" in source and "c2" not in source   # the mask is not a tensor input


def test_big_tensors_get_a_summary_and_zero_d_tensors_work():
    big = tg.randn(10, 10, seed=0, requires_grad=True)
    loss = (big * big).sum()
    loss.backward()
    source = tg.draw_graph(loss).source
    line = node_line(source, "v3")   # big: loss, the product, then big
    a = big.data.astype(np.float64)
    assert f"data mean {a.mean():.3g}, std {a.std():.3g}, norm {np.linalg.norm(a):.3g}" in line
    assert "grad mean" in line and "[[" not in line
    assert "() float32 | data " in node_line(source, "v1")
    column = tg.tensor(np.ones((8, 1)), requires_grad=True)   # 8 numbers, but 8 rows: a summary
    assert "data mean" in tg.draw_graph(column).source


def test_record_special_characters_are_escaped_and_render(no_dot, tmp_path):
    x = tg.tensor([[1.0, -2.0], [3.0, 4.0]], requires_grad=True, label='a{b}|<c> "d" \\e')
    y = (x * x).sum()
    source = tg.draw_graph(y).source
    assert r"a\{b\}\|\<c\> \"d\" \\e" in source
    assert r"data\l[[ 1., -2.],\l [ 3.,  4.]]\l" in source   # one matrix row a line, left-aligned
    svg = tg.render_graph(y, tmp_path / "escaped.svg").read_text()
    assert "a{b}|&lt;c&gt;" in svg


@pytest.mark.parametrize("name", ["<<b>X</b>>", "<b>bold</b>", "a\\lb", 'say "hi"', "{a|b}"])
def test_op_and_scope_names_are_shown_as_text_in_every_format(no_dot, tmp_path, name):
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with tg.scope(name):
        y = tg.make_op(name, x.data * 2, (x,), vjps=(lambda g: 2 * g,))
    loss = y.sum()
    for collapse in (None, "modules"):   # the op's ellipse and cluster, or the folded scope's box
        source = tg.draw_graph(loss, collapse=collapse).source
        graphviz.Source(source)   # parses
        svg = tg.render_graph(loss, tmp_path / "named.svg", collapse=collapse).read_text()
        shown = name.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
        assert shown in svg, (name, collapse)
        assert "<b>" not in svg   # no markup got through
        assert tg.render_graph(loss, tmp_path / "named.png", collapse=collapse).read_bytes()[:4] == b"\x89PNG"


def test_same_graph_same_source():
    assert tg.draw_graph(neuron()[0], order=True).source == tg.draw_graph(neuron()[0], order=True).source


def test_rankdir_top_to_bottom_keeps_fields_stacked():
    source = tg.draw_graph(neuron()[0], rankdir="TB").source
    assert "rankdir=TB" in source and 'label="{o | () float64' in source


def test_node_limit_refuses_with_the_size_and_the_way_out():
    x = tg.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(300):
        y = y * 1.0   # 300 ops: 300 values, 300 op nodes, 300 constants
    with pytest.raises(ValueError, match=r"901 nodes.*max_nodes=500.*nothing to fold"):
        tg.draw_graph(y)
    assert isinstance(tg.draw_graph(y, max_nodes=1000), graphviz.Digraph)


def two_blocks():
    """Two 'blocks', each with 'attn' and 'ffn' scopes and parameters used only inside; the
    input x is used only in h.0, the leaf `shared` in both blocks."""
    x = tg.tensor(np.ones((2, 3)), requires_grad=True, label="x")
    shared = tg.tensor(0.5, requires_grad=True, label="shared")
    for i in range(2):
        with tg.scope(f"h.{i}"):
            with tg.scope("attn"):
                w = tg.tensor(np.eye(3), requires_grad=True, label=f"w{i}")
                a = (x @ w).tanh() * shared
            x = x + a
            with tg.scope("ffn"):
                v = tg.tensor(np.eye(3), requires_grad=True, label=f"v{i}")
                f = (x @ v).relu()
            x = x + f
    loss = x.sum()
    loss.label = "loss"
    return loss


def test_scopes_become_nested_clusters_holding_the_leaves_used_only_inside():
    source = tg.draw_graph(two_blocks()).source
    found = clusters(source)
    assert list(found) == ["h.1", "h.1.ffn", "h.1.attn", "h.0", "h.0.ffn", "h.0.attn"]
    assert found["h.0.attn"] in found["h.0"] and found["h.0.attn"] not in found["h.1"]
    assert "label=tanh" in found["h.0.attn"] and "label=relu" not in found["h.0.attn"]
    assert "w0 |" in found["h.0.attn"] and "v1 |" in found["h.1.ffn"]   # parameters with their module
    assert "x |" in found["h.0"] and "x |" not in found["h.0.attn"]     # used in h.0 and h.0.attn
    assert "shared |" in source and not any("shared |" in body for body in found.values())


def test_collapse_modules_folds_each_block_into_one_box():
    loss = two_blocks()
    source = tg.draw_graph(loss, collapse="modules").source
    assert "subgraph" not in source and "tanh" not in source and "w0" not in source
    boxes = re.findall(r'(box\d) \[label="(.*?)"', source)
    assert [label for _, label in boxes] == ["h.1 | 7 ops | out (2, 3)", "h.0 | 7 ops | out (2, 3)"]
    assert source.count("shape=Mrecord") == 2
    # box h.0 -> its output value -> box h.1 -> its output value -> sum -> loss; shared feeds both
    h0_out = re.search(r"box2 -> (v\d+)", source).group(1)
    assert f"{h0_out} -> box1" in source and re.search(r"box1 -> v\d+", source)
    shared = re.search(r'(v\d+) \[label="shared', source).group(1)
    assert f"{shared} -> box1" in source and f"{shared} -> box2" in source


def test_collapse_by_depth_and_by_name():
    loss = two_blocks()
    by_depth = tg.draw_graph(loss, collapse=2).source
    assert set(clusters(by_depth)) == {"h.0", "h.1"} and by_depth.count("shape=Mrecord") == 4
    by_name = tg.draw_graph(loss, collapse=["h.1"]).source
    assert set(clusters(by_name)) == {"h.0", "h.0.attn", "h.0.ffn"}
    assert 'label="h.1 | 7 ops | out (2, 3)"' in by_name
    with pytest.raises(ValueError, match=r"'h\.9'.*h\.0\.attn"):
        tg.draw_graph(loss, collapse=["h.9"])
    with pytest.raises(ValueError, match="collapse='everything' is not understood"):
        tg.draw_graph(loss, collapse="everything")


def test_node_limit_suggests_collapse_and_collapse_fits():
    loss = two_blocks()
    with pytest.raises(ValueError, match=r"\d+ nodes .*collapse='modules'"):
        tg.draw_graph(loss, max_nodes=10)
    tg.draw_graph(loss, collapse="modules", max_nodes=10)


def test_render_svg_and_png_without_dot(no_dot, tmp_path):
    o, _ = neuron()
    o.backward()
    svg = tg.render_graph(o, tmp_path / "neuron.svg", order=True)
    assert svg == tmp_path / "neuron.svg" and "<svg" in svg.read_text() and "[1] o" in svg.read_text()
    png = tg.render_graph(o, tmp_path / "pictures" / "neuron.png")
    assert png.read_bytes().startswith(b"\x89PNG")
    assert tg.render_graph(o, tmp_path / "neuron.img", format="svg").read_text().count("<svg") == 1


def test_jupyter_display_needs_no_dot(no_dot):
    bundle = tg.draw_graph(neuron()[0])._repr_mimebundle_()
    assert "<svg" in bundle["image/svg+xml"]


def test_without_any_renderer_the_dot_file_is_written_and_the_error_says_how(no_dot, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "nowhere" / "python"))
    monkeypatch.setattr(sysconfig, "get_path", lambda *args, **kwargs: str(tmp_path / "nowhere"))
    with pytest.raises(RuntimeError, match=r"pip install graphviz-pure.*graph\.dot") as error:
        tg.render_graph(neuron()[0], tmp_path / "graph.svg")
    assert "graphviz-pure -Tsvg" in str(error.value)
    assert (tmp_path / "graph.dot").read_text().startswith("digraph")
    assert not (tmp_path / "graph.svg").exists()


def test_render_errors_name_the_problem(no_dot, tmp_path):
    with pytest.raises(ValueError, match="format='svg'"):
        tg.render_graph(neuron()[0], tmp_path / "graph")
    with pytest.raises(RuntimeError, match=r"-Tnope.*not recognized"):
        tg.render_graph(neuron()[0], tmp_path / "graph.nope")
