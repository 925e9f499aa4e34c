"""The backprop stepper: one self-contained HTML page per graph, to watch the chain rule run.

    loss.backward(retain_graph=True)           # keep the graph: the page applies its vjps
    tg.render_graph(loss, "backprop.html")     # or tg.explore(loss).save("backprop.html")
    tg.explore(loss)                           # in Jupyter: the same page, inline

The page steps through backward one op node at a time, in backward_order(root)'s order (the
numbers of order=True drawings and of the trace). At each step it highlights the node in the
drawing, shows its value and upstream gradient and, for each input, the op's rule for it
(written once, where the op is defined), the local derivative measured from the op's own vjp
(trace.local_derivative, as the trace prints it) and `input.grad += upstream × local =
contribution`; gradients fill in as it steps and empty again as it steps back. The drawing
is laid out once; the page moves a camera over it that follows each step's node at a size a
projector keeps readable, with a map of the whole graph, and folds the scopes backward is
through (explore.js).

Every number is computed here, before the page is written, as backward computes it: each
node's vjps applied to its gradient, the contributions summed in backward's order, starting
from the root's gradient. No .grad is written to. This module gathers those numbers as JSON,
lays the drawing out as SVG (draw.py: dot or graphviz-pure) and fills them into the page
skeleton explore.html with its script explore.js and its style explore.css (package data
beside this file). Nothing in the page is fetched: the SVG, the script and the style are
inline, and a Content-Security-Policy lets the browser run that script and that style only
(by their hashes) and load nothing. The data goes in as JSON with <, > and & escaped, and
the script puts every label in with textContent, so no label can become markup; a character
no page can hold (a NUL, a lone surrogate, a control character) is written as its escape,
\\x00, as the drawing writes it (draw._shown).

Scripting contract (the tests drive the page through it): window.explorer has `steps` (the
number of op nodes), `step` (0 = before backward, `steps` = done), `go(k)`, `current()` ->
{order, op, label} of the node applied at this step (order: 1-based in backward_order), and
`grad(order)` -> the shown gradient of that node as a flat array (every number to 4
significant digits; for a tensor of more than KEPT numbers its mean, std and norm), or null
while it is empty.
"""
import base64
import hashlib
import html
import json
import math
import re
from importlib import resources
from pathlib import Path

import numpy as np

from . import autograd, devices, draw
from . import names as naming   # what the trace and the drawing call each node too
from .trace import local_derivative

SHOWN = 64        # a tensor of up to 64 numbers is shown whole; a bigger one as a summary and a heatmap
KEPT = 4096       # a gradient of up to 4096 numbers is kept whole in the page, for grad(order)
HEAT = (24, 48)   # a heatmap has at most 24 rows and 48 columns of block means
NOT_JSON = {math.inf: "Infinity", -math.inf: "-Infinity"}   # JSON has no such numbers; JS's Number() reads these


def explore(root, **draw_options):
    """The backprop stepper of the graph that made `root`, as an Explorer: a Jupyter cell
    shows it inline, .save(path) writes it as one HTML file. Takes draw_graph's options
    (show_data, show_grad, collapse, max_nodes, rankdir); the nodes are always numbered in
    backward order. Make it after root.backward(retain_graph=True): the page applies the
    kept graph's vjps. Before backward, or after a backward that freed the graph, the page
    says what it cannot show and how to get it (so does Explorer.problem)."""
    return Explorer(root, draw_options)


class Explorer:
    """One graph's stepper page, made when the Explorer is (later changes to the tensors do
    not reach it). `html` is the page; `problem` says what it cannot show, or is None."""

    def __init__(self, root, draw_options):
        if draw_options.pop("order", True) is not True:
            raise ValueError("explore: the page always numbers the nodes in backward order (order=True), "
                             "the numbers its steps follow; leave out order=")
        order = autograd.backward_order(root)
        self.problem = _problem(root, order)
        self.html = _page(root, order, self.problem, draw_options)

    def save(self, path):
        """Write the page to `path` (made with its folders) and return it as a Path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.html, encoding="utf-8")
        return path

    def _repr_html_(self):
        """The page in a sandboxed frame: its keys and its window.explorer stay its own."""
        return (f'<iframe srcdoc="{html.escape(self.html)}" sandbox="allow-scripts" title="backprop stepper" '
                'style="width: 100%; height: 640px; border: 1px solid #d0d7de; border-radius: 4px"></iframe>')

    def __repr__(self):
        return f"<tensorgrad backprop stepper{': ' + self.problem if self.problem else ''}>"


def _problem(root, order):
    """What the page cannot show about this graph, and how to get it; None when it shows all."""
    name = draw._shown(root.label or "loss")
    if root.grad is None:
        return (f"this page was made before backward, so there are no gradients to show yet: it steps "
                f"through the order backward will take. Run {name}.backward(retain_graph=True), then make "
                "the page again.")
    if any(node.parents and node.vjps is None for node in order):
        return ("this page was made after a backward() that freed the graph (its saved values are gone), so "
                "it cannot show each edge's local derivative and contribution, only each gradient once it "
                f"is complete. Run the forward again, call {name}.backward(retain_graph=True), then make "
                "the page again.")
    return None


def _page(root, order, problem, draw_options):
    """The HTML page: the skeleton with the drawing, the data, the script and the style."""
    source = draw.draw_graph(root, order=True, **draw_options).source   # first: a graph too big is refused here
    number = {id(node): n for n, node in enumerate(order, 1)}
    # each text a user gave (a label, a scope), as the drawing shows it
    names = {id(node): draw._shown(naming.name(node)) for node in order}
    steps, sums = _steps(order, number, problem)
    data = {"title": f"backward from {names[id(root)]}", "problem": problem,
            "notes": _differences(order, names, sums) if problem is None else [],
            "seed": None if root.grad is None else _view(root.grad, whole=True),
            "nodes": [{"order": number[id(node)], "name": names[id(node)], "op": node.op and draw._shown(node.op),
                       "label": node.label and draw._shown(node.label),
                       "shape": list(node.shape), "dtype": str(node.dtype), "value": _view(node.data),
                       "drawn": drawn} for node, drawn in zip(order, _drawn(root, order, number, draw_options))],
            "steps": steps}
    svg = draw.render(source, "svg").decode("utf-8")
    script, style = (resources.files(__package__).joinpath(name).read_text("utf-8")
                     for name in ("explore.js", "explore.css"))
    fill = {"title": html.escape(data["title"]), "svg": svg[svg.index("<svg"):], "script": script,
            "style": style, "data": _json(data),
            "policy": (f"default-src 'none'; script-src '{_sha256(script)}'; style-src '{_sha256(style)}'; "
                       "base-uri 'none'; form-action 'none'")}
    skeleton = resources.files(__package__).joinpath("explore.html").read_text("utf-8")
    return re.sub(r"\{\{(\w+)\}\}", lambda match: fill[match.group(1)], skeleton)   # one pass: no text is read twice


def _steps(order, number, problem):
    """One step per op node, in backward order: its inputs with the rule, the local derivative,
    the contribution and the input's gradient after it. Returns (steps, the gradients summed)."""
    edges = [(node, index) for node in order for index, parent in enumerate(node.parents) if parent.requires_grad]
    last = {id(node.parents[index]): (node, index) for node, index in edges}   # the edge that completes a gradient
    sums = {id(order[0]): order[0].grad}   # the root's gradient starts backward
    steps = []
    for node in order:
        if not node.parents:
            continue
        upstream = sums.get(id(node))   # complete: every op that uses this node came before it
        if problem is None:
            contributions = autograd.input_gradients(node.vjps, node.parents, upstream)
        inputs = []
        for index, parent in enumerate(node.parents):
            edge = {"order": number.get(id(parent)), "name": draw._shown(naming.name(parent)),
                    "shape": list(parent.shape),
                    "rule": draw._shown(node.rules[index]) if node.rules and node.rules[index] else None,
                    "local": None, "contribution": None, "after": None}
            inputs.append(edge)
            if not parent.requires_grad:
                continue
            if problem is not None:   # no contributions to show: a gradient only once it is complete
                if last[id(parent)] == (node, index) and parent.grad is not None:
                    edge["after"] = _view(parent.grad, whole=True)
                continue
            kind, derivative = _local_derivative(node, index)
            contribution = autograd.dense(contributions[index], parent.shape, parent.dtype).astype(parent.dtype)
            first = id(parent) not in sums
            # input.grad += ..., as an array (numpy adds two 0-d arrays into a scalar)
            sums[id(parent)] = contribution if first else np.asarray(sums[id(parent)] + contribution)
            edge.update(local=None if kind is None else {"kind": kind, "view": _view(derivative)},
                        contribution="same" if first else _view(contribution),
                        after=_view(sums[id(parent)], whole=True))
        steps.append({"order": number[id(node)], "inputs": inputs})
    return steps, sums


def _local_derivative(node, index):
    """d node / d input `index`, as the trace measures it (trace.local_derivative). Beyond the
    trace's Jacobian limit, an input of the output's shape is probed: when the vjp of a
    random g is g times the vjp of ones, the op acts elementwise and that is its derivative."""
    vjp = lambda g: autograd.input_gradients(node.vjps, node.parents, g)[index]
    x = node.parents[index]
    kind, derivative = local_derivative(vjp, node.data, x.data)
    if kind is None and node.shape == x.shape:
        g = np.random.default_rng(0).uniform(0.5, 1.5, node.shape).astype(node.dtype)
        diagonal = autograd.dense(vjp(np.ones_like(g)), x.shape, x.dtype)
        if np.allclose(autograd.dense(vjp(g), x.shape, x.dtype), g * diagonal, rtol=1e-4, atol=0):
            return "elementwise", diagonal
    return kind, derivative


def _differences(order, names, sums):
    """Notes on the gradients whose .grad is not this graph's sum: a leaf's .grad adds up over
    backward calls, and a node may also feed ops outside the graph of this root."""
    different = [names[id(node)] for node in order if node.grad is not None and id(node) in sums
                 and not np.allclose(sums[id(node)], node.grad, rtol=1e-4, atol=1e-6)]
    return [f"{', '.join(name + '.grad' for name in different)}: not the sum this page shows, which is what one "
            "backward from here computes; the .grad also holds gradients of an earlier backward (a leaf's add up "
            "over calls) or of ops outside this graph."] if different else []


def _drawn(root, order, number, draw_options):
    """For each node, the names of what the drawing shows of it: its value box v<n> and op
    ellipse op<n>, and the box of the folded scope that holds it."""
    shown, _ = draw._place(root, order, number, draw_options.get("collapse"))
    box = {id(t): name for name, (_, kind, what) in shown.items() if kind == "box" for t in what[1]}
    return [[name for name in (f"op{n}", f"v{n}") if name in shown] + ([box[id(node)]] if id(node) in box else [])
            for n, node in enumerate(order, 1)]


def _view(array, whole=False):
    """An array as the page shows it: its shape and every number, up to SHOWN of them; beyond
    that its mean, std and norm and a heatmap, and every number too when `whole` (a gradient
    of up to KEPT numbers, which grad(order) returns)."""
    a = devices.to(devices.array(array), "cpu").astype(np.float64)   # shown from the host
    view = {"shape": list(a.shape)}
    if a.size <= SHOWN or whole and a.size <= KEPT:
        view["values"] = _rounded(a.reshape(-1))
    if a.size > SHOWN:
        with np.errstate(all="ignore"):   # a masked -inf makes the mean -inf, and the std nan
            view["summary"] = _rounded(np.array([a.mean(), a.std(), np.linalg.norm(a)]))
        view["heat"] = _heatmap(a)
    return view


def _heatmap(a):
    """a as a grid of block means, at most HEAT in size: a row per index of the leading axes
    (flattened), a column per index of the last axis."""
    grid = a.reshape(-1, a.shape[-1])
    rows, cols = (np.linspace(0, length, min(length, most) + 1).astype(int)
                  for length, most in zip(grid.shape, HEAT))
    with np.errstate(invalid="ignore"):   # inf + -inf in one block is nan
        sums = np.add.reduceat(np.add.reduceat(grid, rows[:-1], axis=0), cols[:-1], axis=1)
    means = sums / np.outer(np.diff(rows), np.diff(cols))
    return {"rows": means.shape[0], "cols": means.shape[1], "values": _rounded(means.reshape(-1), 3)}


def _rounded(values, digits=4):
    """Numbers at display precision, for JSON; inf and nan as the strings JS's Number() reads."""
    return [float(f"{v:.{digits}g}") if math.isfinite(v) else NOT_JSON.get(v, "NaN") for v in values.tolist()]


def _json(data):
    """data as JSON that cannot end its <script> element or open another: < > & escaped."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _sha256(text):
    """The Content-Security-Policy source that admits exactly this inline script or style."""
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")
