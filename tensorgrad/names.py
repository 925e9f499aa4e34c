"""What the trace, the drawing and the stepper page call each tensor and each scope: one
public module, so that all three say the same name for the same node. A label wins;
without one an op's output is named by the math that made it ("ln1 › var + 1e-05")."""
import os

DEPTH = 3              # a node's name spells out the ops of its scope this many deep, then "…"
# ops that names write as math on their inputs' names, each with its precedence (brackets go
# around a weaker operand); any other op reads op(inputs)
SYMBOLS = {"add": ("{} + {}", 1), "sub": ("{} - {}", 1), "mul": ("{} · {}", 2), "div": ("{} / {}", 2),
           "matmul": ("{} @ {}", 2), "neg": ("-{}", 3), "pow": ("{}^{}", 4), "transpose": ("{}ᵀ", 5),
           "getitem": ("{}[…]", 5)}


def name(t):
    """What the trace, the drawing and the stepper page call a tensor: its label; without one,
    an op's output is the scope it was made in, then the op written on its inputs as the math
    reads ("ln1 › var + 1e-05", "attn.scores › q @ kᵀ", "ffn › 0.5 · fc(…) · (1 + tanh(…))"),
    where an input made in a scope inside that one is named by it ("fc(…)"); a leaf is named by
    its shape, a constant by its value."""
    path = "" if t.label or not t.op else dotted(t.scope)
    return (f"{path} › " if path else "") + _math(t, t.scope if path else ())


def _math(t, scope, depth=0, outer=None):
    """t as it reads in the name of a node made inside `scope`. `outer`: (op, precedence, left?)
    of the symbol t is an operand of, where t is bracketed unless it binds tighter or is the
    left operand of the same op ("a - b - c", "a - (b - c)")."""
    if t.label:
        text, op, level = _inside(t.label, scope), None, 0 if " " in t.label else 9
    elif not t.op:
        return f"leaf{t.shape}" if t.requires_grad else f"{t.data.item():.4g}" if t.size == 1 else f"const{t.shape}"
    # DEPTH ops deep, or made outside the node's scope: "…"; the output of a scope inside it: that scope's name
    elif t.scope != scope or depth == DEPTH:
        common = len(os.path.commonprefix([t.scope, scope]))
        return "…" if common == len(t.scope) else _inside(dotted(t.scope[:common + 1]), scope[:common]) + "(…)"
    elif SYMBOLS.get(t.op, ("",))[0].count("{}") != len(t.parents):
        return f"{t.op}({', '.join(_math(p, scope, depth + 1) for p in t.parents)})"
    else:
        (template, level), op = SYMBOLS[t.op], t.op
        text = template.format(*(_math(p, scope, depth + 1, (op, level, i == 0)) for i, p in enumerate(t.parents)))
    bracket = outer and (level < outer[1] or level == outer[1] and not (op == outer[0] and outer[2]))
    return f"({text})" if bracket else text


def _inside(name, scope):
    """A dotted name as it reads inside `scope`: "weight" for "attn.qkv.weight" in attn.qkv."""
    prefix = dotted(scope) + "."
    return name[len(prefix):] if scope and name.startswith(prefix) else name


def dotted(path):
    """'h.0.attn' for the scope path ('h.0', 'attn'), and for ('h.0', 'h.0.attn') too, where
    the scopes were opened with full dotted names."""
    name = ""
    for part in path:
        name = part if not name or part.startswith(name + ".") else f"{name}.{part}"
    return name
