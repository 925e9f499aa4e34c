"""Pictures of the computation graph, to see backprop.

    tg.draw_graph(loss, order=True)       # a graphviz.Digraph (a Jupyter cell shows it)
    tg.render_graph(loss, "graph.svg")    # writes the picture and returns its path

The grammar is micrograd's: every value is a record box { label | shape dtype | data | grad },
and every op is a small ellipse of its own between its inputs and its output, left to right.
Inputs that need no gradient (the 2.0 in x * 2.0, masks) are small grey boxes. The ops made
inside `tg.scope(name)` (every nn.Module call opens one) are drawn in a labelled cluster per
scope, or folded into a single box per scope with `collapse`.

Node names are v<n> for the value and op<n> for the op of the n-th node in backward order
(c<k> for constants, box<k> for folded scopes), so the same graph gives the same source.
"""
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import graphviz
import numpy as np

from . import devices
from .autograd import backward_order
from . import names as naming   # what the trace and the stepper page call each node too

SMALL, ROWS = 16, 4   # a tensor of up to 16 numbers in up to 4 rows shows them; others a summary
NOT_YET = "grad: not computed yet"   # before backward: say so rather than show zeros
NO_RENDERER = ("no Graphviz renderer found: neither `dot` (Graphviz) nor `graphviz-pure` is on the "
               "PATH; install one with `pip install graphviz-pure` (or Graphviz: apt/brew/graphviz.org)")
# Arial: SVG viewers without it substitute a font of the same widths, so no label overflows.
# Arial has no Hangul, so a graph with Hangul in a label or a scope's name names a list: Arial,
# then fonts that have Hangul; a browser showing the SVG (and Graphviz's dot, through Pango)
# takes each glyph from the first font in the list that has it. Only such a graph: graphviz-pure
# knows the widths of Arial alone and measures a list with Times's, narrower: labels in Latin
# letters would overflow their boxes. (graphviz-pure's PNGs have no Hangul glyphs at all.)
FONT = "Arial"
HANGUL_FONTS = "Arial, NanumGothic, Noto Sans CJK KR, Malgun Gothic, Apple SD Gothic Neo, sans-serif"
HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")   # jamo, compatibility jamo, syllables
# sizes in points: a drawing of a few ops, put on a 16:9 slide, still reads at 1920 px wide
FONTSIZE = {"graph": "18", "node": "16", "constant": "13"}
COLOURS = {"leaf": "#dbeafe", "root": "#dcfce7", "value": "white", "op": "#fef3c7",
           "constant": "#f1f1f1", "box": "#ede9fe", "cluster": ("#f7f8fa", "#eceff4")}


class GraphDrawing(graphviz.Digraph):
    """A graphviz.Digraph that a Jupyter cell shows with `dot` or graphviz-pure, whichever is
    installed (the plain Digraph needs `dot`)."""

    def _repr_image_svg_xml(self):
        return render(self.source, "svg").decode("utf-8")


def draw_graph(root, show_data=True, show_grad=True, order=False, collapse=None, max_nodes=500,
               rankdir="LR"):
    """The graph that made `root`, as a graphviz.Digraph.

    show_data, show_grad: put each value's numbers in its box (a tensor of up to 16 numbers in
        up to 4 rows; a bigger one gets its mean, std and norm); grads appear after backward.
    order: number the nodes [1], [2], ... in the order backward visits them, with the names
        the chain-rule trace (loss.backward(trace=True)) prints.
    collapse: None draws every op, each scope a labelled cluster (nested: h.0 holds h.0.attn);
        "modules" folds each outermost scope into one box; an int folds the scopes at that
        depth (1 = outermost); a list of dotted names (["h.1", "h.2"]) folds just those.
    max_nodes: refuse (ValueError) to draw more nodes than this, counted after folding.
    rankdir: "LR" (left to right, as micrograd) or "TB" (top to bottom, the scopes stacked in a
        column: a notebook's width holds it).
    """
    nodes = backward_order(root)   # root first, as backward visits them
    number = {id(t): n for n, t in enumerate(nodes, 1)}
    drawn, edges = _place(root, nodes, number, collapse)
    if len(drawn) > max_nodes:
        raise ValueError(_too_big(len(drawn), max_nodes, collapse, nodes))

    def attributes(kind, what):
        if kind == "op":
            return {"label": graphviz.escape(_shown(what.op)), "shape": "ellipse", "fillcolor": COLOURS["op"],
                    "height": "0.3"}
        if kind == "box":
            path, inner, outputs = what
            ops = sum(1 for t in inner if t.op)
            fields = [_escape(naming.dotted(path)), f"{ops} op{'s' * (ops != 1)}",
                      _escape("out " + ", ".join(str(t.shape) for t in outputs))]
            return {"label": _record(fields, rankdir), "shape": "Mrecord", "fillcolor": COLOURS["box"],
                    "penwidth": "1.5"}
        if kind == "constant":
            return {"label": _record(_constant_fields(what, show_data), rankdir), "shape": "record",
                    "fillcolor": COLOURS["constant"], "fontsize": FONTSIZE["constant"], "color": "#999999",
                    "width": "0", "height": "0", "margin": "0.05,0.02"}
        title = f"[{number[id(what)]}] {naming.name(what)}" if order else what.label
        role = "root" if what is root else "value" if what.op else "leaf"
        return {"label": _record(_value_fields(what, title, show_data, show_grad), rankdir),
                "shape": "record", "fillcolor": COLOURS[role]}

    text = " ".join(f"{t.label or ''} {' '.join(t.scope)}" for node in nodes for t in (node, *node.parents))
    font = HANGUL_FONTS if HANGUL.search(text) else FONT
    graph = GraphDrawing(graph_attr={"rankdir": rankdir, "nodesep": "0.2", "ranksep": "0.3",
                                     "fontname": font, "fontsize": FONTSIZE["graph"]},
                         node_attr={"fontname": font, "fontsize": FONTSIZE["node"], "style": "filled"},
                         edge_attr={"arrowsize": "0.6", "color": "#555555"})
    members = {}   # cluster path -> [(node name, attributes)]
    for node_name, (path, kind, what) in drawn.items():
        members.setdefault(path, []).append((node_name, attributes(kind, what)))
    clusters = list({path[:depth]: None for path in members for depth in range(1, len(path) + 1)})
    _fill(graph, (), members, clusters)
    stack = rankdir in ("TB", "BT")
    for tail, head in edges:
        # an op's edge to its output weighs most: Graphviz keeps the two side by side, even where the
        # output is used far down the graph (else the box drifts there, away from the op that made it)
        weight = "10" if tail.startswith("op") else "1"
        # top to bottom, an edge into another scope leaves a rank free: the leaves and constants
        # the scope's first op takes sit there, below the scope before, so the scopes stack in a
        # column (a notebook's width) instead of stepping right beside each other
        if stack and drawn[tail][0] != drawn[head][0]:
            graph.edge(tail, head, weight=weight, minlen="2")
        else:
            graph.edge(tail, head, weight=weight)
    return graph


# ---- where each node goes -------------------------------------------------------------
def _place(root, nodes, number, collapse):
    """The nodes to draw, {name: (cluster path, kind, what)}, and the edges between them.

    Each op output t is a value node v<n> fed by an op node op<n>, n its backward-order
    number; each input that needs no gradient is a constant node c<k>. A folded scope is one
    box node: it hides the ops and values made inside it, takes the edges of the values it
    uses from outside, and feeds the values it makes that are used outside it (its outputs).
    """
    constants = list({id(p): p for t in nodes for p in t.parents if not p.requires_grad}.values())
    tensors = nodes + constants
    consumers = {id(t): [] for t in tensors}
    for t in nodes:
        for p in t.parents:
            consumers[id(p)].append(t)
    home = {id(t): _home(t, consumers[id(t)]) for t in tensors}
    folds = _fold_rule(collapse, [t.scope for t in nodes])
    box = {id(t): _folded(home[id(t)], folds) for t in tensors}
    hidden = {id(t): box[id(t)] is not None and t is not root
              and all(box[id(c)] == box[id(t)] for c in consumers[id(t)]) for t in tensors}
    name = {id(t): f"v{number[id(t)]}" for t in nodes} | {id(c): f"c{k}" for k, c in enumerate(constants, 1)}
    boxes = {}   # folded scope path -> [the tensors inside it]
    for t in tensors:
        if box[id(t)] is not None:
            boxes.setdefault(box[id(t)], []).append(t)
    box_name = {path: f"box{k}" for k, path in enumerate(boxes, 1)}

    drawn, edges = {}, {}   # edges: a dict as an ordered set of (tail, head)
    for t in tensors:
        folded_in = box[id(t)]
        if not hidden[id(t)]:   # an output of a box is drawn beside it, in the box's own cluster
            drawn[name[id(t)]] = (folded_in[:-1] if folded_in else home[id(t)],
                                  "value" if t.requires_grad else "constant", t)
        if t.op and folded_in is None:
            op = f"op{number[id(t)]}"
            drawn[op] = (home[id(t)], "op", t)
            edges.update({(name[id(p)], op): None for p in t.parents} | {(op, name[id(t)]): None})
        elif t.op:
            edges.update({(name[id(p)], box_name[folded_in]): None for p in t.parents if box[id(p)] != folded_in})
            if not hidden[id(t)]:
                edges[(box_name[folded_in], name[id(t)])] = None
    for path, inner in boxes.items():
        outputs = [t for t in inner if not hidden[id(t)]]
        drawn[box_name[path]] = (path[:-1], "box", (path, inner, outputs))
    return drawn, list(edges)


def _home(t, consumers):
    """The scope a value is drawn in: its op's scope; for an input (leaf or constant) the
    deepest scope holding every op that uses it, so a parameter sits inside its module
    while an input shared by two modules stays outside both."""
    if t.op or not consumers:
        return t.scope
    return tuple(os.path.commonprefix([c.scope for c in consumers]))


def _fold_rule(collapse, paths):
    """`collapse` as a test on a scope path: True where that scope is folded into one box."""
    if collapse is None:
        return lambda path: False
    if collapse == "modules":
        return lambda path: len(path) == 1
    if isinstance(collapse, int) and not isinstance(collapse, bool) and collapse >= 1:
        return lambda path: len(path) == collapse
    if isinstance(collapse, (str, int)):
        raise ValueError(f"draw_graph: collapse={collapse!r} is not understood: use None, 'modules', "
                         "a depth of 1 or more, or a list of scope names such as ['h.0']")
    names = set(collapse)
    scopes = {naming.dotted(path[:depth]) for path in paths for depth in range(1, len(path) + 1)}
    if names - scopes:
        raise ValueError(f"draw_graph: collapse names scopes this graph does not have: "
                         f"{sorted(names - scopes)}; its scopes are {sorted(scopes) or 'none'}")
    return lambda path: naming.dotted(path) in names


def _folded(path, folds):
    """The outermost prefix of a scope path that is folded, or None."""
    return next((path[:depth] for depth in range(1, len(path) + 1) if folds(path[:depth])), None)


def _too_big(count, max_nodes, collapse, nodes):
    outermost = list({naming.dotted(t.scope[:1]): None for t in nodes if t.scope})
    if not outermost:
        hint = ("Its ops were made outside any tg.scope() (nn modules open one), so there is nothing "
                "to fold: draw a smaller expression, or raise max_nodes.")
    elif collapse != "modules":
        hint = (f"Fold each module call into one box with collapse='modules', or fold chosen scopes "
                f"(collapse={outermost[1:3] or outermost[:1]}), or raise max_nodes.")
    else:
        hint = "Draw a smaller model or a shorter input, or raise max_nodes."
    return (f"draw_graph: this graph has {count} nodes to draw (collapse={collapse!r}), more than "
            f"max_nodes={max_nodes}: too many to read. {hint}")


def _fill(graph, path, members, clusters):
    """Put the nodes of scope `path` in `graph`, and each child scope in a nested cluster."""
    for node_name, attributes in members.get(path, ()):
        graph.node(node_name, **attributes)
    for index, child in enumerate(clusters):
        if len(child) == len(path) + 1 and child[:-1] == path:
            with graph.subgraph(name=f"cluster_{index}") as cluster:
                cluster.attr(label=graphviz.escape(_shown(naming.dotted(child))), labeljust="l",
                             style="rounded,filled", color="#9aa5b1",
                             fillcolor=COLOURS["cluster"][len(path) % 2])
                _fill(cluster, child, members, clusters)


# ---- what each box says ---------------------------------------------------------------
def _value_fields(t, title, show_data, show_grad):
    fields = [_escape(title)] if title else []
    fields.append(_escape(f"{t.shape} {t.dtype}"))
    if show_data:
        fields.append(_numbers("data", t.data))
    if show_grad:
        fields.append(NOT_YET if t.grad is None else _numbers("grad", t.grad))
    return fields


def _constant_fields(t, show_data):
    """A scalar constant is just its value; a bigger one its shape and (maybe) its numbers."""
    if t.size == 1 and not t.label:
        return [_numbers("", t.data)]
    fields = [_escape(t.label)] if t.label else []
    return fields + [_escape(f"{t.shape} {t.dtype}")] + ([_numbers("data", t.data)] if show_data else [])


def _numbers(kind, array):
    """'data 2.5'; a small array's values, one row a line; or a big array's mean, std, norm."""
    array = devices.to(array, "cpu")   # drawn from the host
    if array.ndim and array.size > min(SMALL, ROWS * array.shape[-1]):
        a = array.astype(np.float64)
        return f"{kind} mean {a.mean():.3g}, std {a.std():.3g}, norm {np.linalg.norm(a):.3g}"
    if array.dtype.kind == "f":
        array = array + 0.0   # -0.0 becomes 0.0, which reads better than "-0."
    if array.ndim == 0:
        return f"{kind} {array.item():.4g}".strip()
    rows = np.array2string(array, precision=4, separator=", ", suppress_small=True).split("\n")
    if len(rows) == 1:
        return f"{kind} {_escape(rows[0])}"
    return f"{kind}\\l" + "".join(_escape(row) + "\\l" for row in rows)   # \l: end a left-aligned line


def _record(fields, rankdir):
    """A record label whose fields stack top to bottom: across the flow when it runs left to
    right, and turned by braces when it runs top to bottom."""
    return ("{%s}" if rankdir in ("TB", "BT") else "%s") % " | ".join(fields)


def _escape(text):
    """Text made safe for a record label, where \\ { } | < > have meanings (_shown first)."""
    return "".join("\\" + ch if ch in "\\{}|<>" else ch for ch in _shown(text))


def _shown(text):
    """Text with every character that no drawing can hold written as its escape, as repr
    writes it: a NUL (DOT's strings end there) as \\x00, a control character (XML, so SVG,
    refuses it) as \\x1b or \\n, a lone surrogate (UTF-8 cannot encode it) as \\ud800, a
    noncharacter as \\uffff. A label, an op's or a scope's name is anyone's text."""
    return re.sub("[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]", lambda match: ascii(match.group())[1:-1], str(text))


# ---- rendering ------------------------------------------------------------------------
def find_renderer():
    """`dot` when Graphviz is installed, else graphviz-pure: on the PATH, or beside this Python
    (a virtual environment's bin/ is on the PATH only while it is activated)."""
    beside_python = os.pathsep.join([sysconfig.get_path("scripts"), os.path.dirname(sys.executable)])
    return (shutil.which("dot") or shutil.which("graphviz-pure")
            or shutil.which("graphviz-pure", path=beside_python))


def render(source, format):
    """The picture as bytes, made by `dot` or graphviz-pure (same flags) from the DOT source."""
    renderer = find_renderer()
    if renderer is None:
        raise RuntimeError(NO_RENDERER)
    done = subprocess.run([renderer, f"-T{format}"], input=source.encode("utf-8"), capture_output=True)
    if done.returncode != 0:
        raise RuntimeError(f"render_graph: `{Path(renderer).name} -T{format}` failed: "
                           f"{done.stderr.decode('utf-8', 'replace').strip()}")
    return done.stdout
