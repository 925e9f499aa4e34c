"""The engine's size, counted so that clarity costs nothing: statements per file of
tensorgrad/, checked against a budget, and two limits on the whole library.

    python bench/engine_size.py

A statement is what Python runs: `a, b = x, y` is one, and so is a 3-line call; docstrings,
comments and blank lines are not statements, so explaining the chain rule, or spreading a
long expression over lines, never costs budget. The core (tensor.py, autograd.py: the
primitive ops and the backward pass) must stay within CORE_BUDGET statements, the whole
engine within ENGINE_BUDGET. Packing is not rewarded either way: no line of the engine is
longer than LINE_LIMIT characters, and no function of the library (tensorgrad, nn and the
training package) holds more than FUNCTION_LIMIT code lines. The script exits 1 when any of
them is passed. micrograd's engine is ~100 lines of scalars; teenygrad's CI holds it to 1,000.
"""
import ast
import io
import sys
import textwrap
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENGINE = ROOT / "tensorgrad"
LIBRARY = ("tensorgrad", "nn", "tgtrain")
CORE = ("tensor.py", "autograd.py")
CORE_BUDGET, ENGINE_BUDGET = 690, 1650   # statements; argued in docs/engine.md, "The size budget"
LINE_LIMIT, FUNCTION_LIMIT = 120, 60
NOT_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENCODING, tokenize.ENDMARKER}


def statements(source):
    """How many statements the source holds (a docstring, a string standing alone, is not one)."""
    def is_docstring(node):
        return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    return sum(1 for node in ast.walk(ast.parse(source)) if isinstance(node, ast.stmt) and not is_docstring(node))


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


def long_functions(path):
    """(name, code lines) of each function in `path` longer than FUNCTION_LIMIT code lines."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            count = code_lines(textwrap.dedent("\n".join(lines[node.lineno - 1:node.end_lineno])))
            if count > FUNCTION_LIMIT:
                found.append((node.name, count))
    return found


def main():
    counts = {path.name: statements(path.read_text(encoding="utf-8")) for path in sorted(ENGINE.glob("*.py"))}
    for name, count in counts.items():
        print(f"  {name:14s} {count:5d}{'  (core)' if name in CORE else ''}")
    core, engine = sum(counts[name] for name in CORE), sum(counts.values())
    print(f"core {core} / {CORE_BUDGET} statements, engine {engine} / {ENGINE_BUDGET}")
    problems = []
    if core > CORE_BUDGET or engine > ENGINE_BUDGET:
        problems.append("over budget: make it smaller, or argue for a new budget in docs/engine.md")
    for path in sorted(ENGINE.glob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if len(line) > LINE_LIMIT:
                problems.append(f"{path.relative_to(ROOT)}:{number}: {len(line)} characters, over {LINE_LIMIT}")
    for package in LIBRARY:
        for path in sorted((ROOT / package).glob("*.py")):
            for name, count in long_functions(path):
                problems.append(f"{path.relative_to(ROOT)}: {name}() has {count} code lines, over {FUNCTION_LIMIT}: "
                                "split it into named steps")
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
