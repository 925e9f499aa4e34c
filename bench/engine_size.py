"""The engine's size: code lines per file of tensorgrad/, checked against a budget.

    python bench/engine_size.py

A code line is one that holds code: blank lines, comments and docstrings are not counted,
so explaining the chain rule never costs budget. The core (tensor.py, autograd.py: every
op and the backward pass) must stay within CORE_BUDGET code lines, the whole engine within
ENGINE_BUDGET; the script exits 1 when either is passed. micrograd's engine is ~100 lines
of scalars; teenygrad's CI holds it to 1,000.
"""
import io
import sys
import tokenize
from pathlib import Path

ENGINE = Path(__file__).resolve().parent.parent / "tensorgrad"
CORE = ("tensor.py", "autograd.py")
CORE_BUDGET, ENGINE_BUDGET = 760, 1780   # argued in docs/engine.md, "The line budget"
NOT_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENCODING, tokenize.ENDMARKER}


def code_lines(source):
    """Lines holding a token that is code (a string that is a statement of its own, i.e. a
    docstring, is not)."""
    lines, previous = set(), tokenize.NEWLINE
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        docstring = token.type == tokenize.STRING and previous in (tokenize.NEWLINE, tokenize.INDENT,
                                                                     tokenize.DEDENT, tokenize.NL)
        if token.type not in NOT_CODE and not docstring:
            lines.update(range(token.start[0], token.end[0] + 1))
        if token.type not in (tokenize.COMMENT, tokenize.NL):
            previous = token.type
    return len(lines)


def main():
    counts = {path.name: code_lines(path.read_text()) for path in sorted(ENGINE.glob("*.py"))}
    for name, count in counts.items():
        print(f"  {name:14s} {count:5d}{'  (core)' if name in CORE else ''}")
    core, engine = sum(counts[name] for name in CORE), sum(counts.values())
    print(f"core {core} / {CORE_BUDGET} code lines, engine {engine} / {ENGINE_BUDGET}")
    if core > CORE_BUDGET or engine > ENGINE_BUDGET:
        print("over budget: make it smaller, or argue for a new budget in docs/engine.md", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
