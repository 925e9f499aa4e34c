"""Drawings and detect_anomaly against what a hostile or careless user gives them: a label,
an op's name or a scope's name is anyone's text (a NUL, a lone surrogate, a control
character), and a nan can come in from outside detect_anomaly() or be made by adding two
finite gradients. Each drawing renders with the character shown as its escape, and each
anomaly names where the nan or the inf was first held."""
import xml.etree.ElementTree as ElementTree

import numpy as np
import pytest

import tensorgrad as tg
from test_draw import no_dot  # noqa: F401 (a fixture: graphviz-pure, as after a plain pip install)
from test_explore import page_data

HOSTILE = {"nul": "a\x00b", "lone-surrogate": "a\ud800b", "escape-and-bell": "a\x1bb\x07", "newline": "a\nb",
           "noncharacter": "a\uffffb", "c1-control": "a\x85b"}


def drawn_graph(text):
    """A graph whose leaf label, op name, scope name and root label are all `text`."""
    x = tg.tensor([1.0, 2.0], requires_grad=True, label=text)
    with tg.scope(text):
        y = tg.make_op(text, x.data * 2, (x,), vjps=(lambda g: 2 * g,), rules=(text,))
    loss = y.sum()
    loss.label = text
    loss.backward(retain_graph=True)
    return loss


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_label_renders_as_its_escape_in_svg_dot_and_png(no_dot, tmp_path, name):
    text = HOSTILE[name]
    shown = text.encode("unicode_escape").decode("ascii")   # a\x00b, a\ud800b: what a reader sees
    loss = drawn_graph(text)
    for collapse in (None, "modules"):
        dot = tg.render_graph(loss, tmp_path / "graph.dot", collapse=collapse).read_bytes().decode("utf-8")
        svg = tg.render_graph(loss, tmp_path / "graph.svg", collapse=collapse).read_bytes().decode("utf-8")
        ElementTree.fromstring(svg)   # well-formed XML: no control character a viewer would refuse
        assert shown in svg and text not in svg and text not in dot, (name, collapse)
        assert tg.render_graph(loss, tmp_path / "graph.png", collapse=collapse).read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_label_shows_as_its_escape_on_the_stepper_page(no_dot, tmp_path, name):
    text = HOSTILE[name]
    shown = text.encode("unicode_escape").decode("ascii")
    page = tg.render_graph(drawn_graph(text), tmp_path / "page.html").read_bytes().decode("utf-8")
    data = page_data(page)
    assert data["title"] == f"backward from {shown}" and f"<title>backward from {shown}</title>" in page
    assert data["nodes"][0]["label"] == shown and data["nodes"][0]["op"] == "sum"
    assert [node["op"] for node in data["nodes"]][1] == shown and data["steps"][1]["inputs"][0]["rule"] == shown
    assert text not in page


# ---- detect_anomaly names the op whose output first holds the nan or inf --------------------------
def test_a_nan_that_came_in_with_a_leaf_is_blamed_on_the_leaf_not_on_the_op_that_received_it():
    w = tg.tensor([1.0, np.nan], requires_grad=True, label="w")
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with tg.detect_anomaly(), pytest.raises(FloatingPointError) as error:
        x * w
    assert "of op 'mul' contains nan" in str(error.value)
    assert str(error.value).endswith(": its input 1 already held nan or inf (made outside detect_anomaly(), or "
                                     "given): look there")


def test_a_nan_given_to_backward_is_blamed_on_the_gradient_given():
    x = tg.tensor([1.0], requires_grad=True)
    with tg.detect_anomaly():
        y = x.exp()
        with pytest.raises(FloatingPointError) as error:
            y.backward(np.array([np.nan]))
    assert str(error.value) == ("detect_anomaly: the gradient (summed, or given to backward) of the output of op "
                                "'exp' contains nan (inputs of shapes (1,); first bad element at (0,))")


def test_finite_gradients_whose_sum_overflows_are_blamed_on_the_sum_not_on_the_op_after_it():
    """b feeds two products whose gradients, 3e38 each, are finite float32s; their sum, b's
    gradient, is not. The op that made b (a * 1) only received that inf: b's gradient is named."""
    a = tg.tensor(np.ones(1, np.float32), requires_grad=True)
    with np.errstate(over="ignore"), tg.detect_anomaly():
        b = a * 1.0
        c = b * 1e20 + b * 1e20
        with pytest.raises(FloatingPointError) as error:
            c.backward(np.array([3e18], np.float32))
    assert str(error.value) == ("detect_anomaly: the gradient (summed, or given to backward) of the output of op "
                                "'mul' contains inf (inputs of shapes (1,), (); first bad element at (0,))")


def test_a_custom_op_whose_scattered_gradient_holds_nan_is_named():
    """A Scatter (what x[index]'s vjp returns) is checked as any gradient is, at its op."""
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with tg.detect_anomaly():
        out = tg.make_op("scatter_nan", x.data[:2], (x,),
                         (lambda g: tg.autograd.Scatter(slice(0, 2), g * np.nan, repeats=False),))
        with pytest.raises(FloatingPointError, match="the backward's gradient for input 0 of op 'scatter_nan'"):
            out.sum().backward()
