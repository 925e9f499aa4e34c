"""README.md stays true and stays a front page: its first code block is the two commands
(.ci/run runs the second), its first Python example runs as written, its chain-rule table
names the function that really holds each op, its links point at what exists, and it fits
250 lines. README.ko.md, its Korean companion, is linked from README's first lines, points at
what exists and fits the same 250 lines."""
import ast
import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
KOREAN = README.with_name("README.ko.md")
ENGINE_PAGE = ROOT / "docs" / "engine.md"
FRONT_PAGES = [README, KOREAN]
MAX_LINES = 250
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def test_the_readme_engine_example_runs(tmp_path, monkeypatch, capsys):
    example = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    monkeypatch.chdir(tmp_path)   # it writes graph.svg
    exec(compile(example, "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "backward from" in printed and "leaves: " in printed
    assert "<svg" in (tmp_path / "graph.svg").read_text()


def test_the_korean_readme_is_linked_first_and_names_what_exists(tmp_path, monkeypatch):
    assert "(README.ko.md)" in "\n".join(README.read_text(encoding="utf-8").splitlines()[:5])
    korean = KOREAN.read_text(encoding="utf-8")
    assert "(README.md)" in korean and "나는 배를 탔다" in korean
    example = re.search(r"```python\n(.*?)```", korean, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.ko.md", "exec"), {})   # its engine example runs as written
    assert "<svg" in (tmp_path / "graph.svg").read_text()
    for path in re.findall(r"\]\((docs/figures/[^)]+)\)", korean) + re.findall(r"python (demos/\w+\.py)", korean):
        assert (README.parent / path).exists(), path
    for demo in (README.parent / "demos").glob("attention_*.py"):   # all nine experiments, in Korean too
        assert f"python demos/{demo.name}" in korean, demo.name


def test_the_first_code_block_is_the_two_commands():
    first = re.search(r"```(\w*)\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert first.group(1) == "bash"
    assert first.group(2).splitlines() == ['pip install . && python demos/train_chargpt.py',
                                           'pip install ".[test]" && pytest']


@pytest.mark.parametrize("page", FRONT_PAGES, ids=lambda page: page.name)
def test_a_front_page_fits_250_lines(page):
    lines = len(page.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{page.name} has {lines} lines: the rest belongs in a page of docs/"


def github_anchor(heading):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return "".join(c for c in text if c in " -" or unicodedata.category(c)[0] in "LN").replace(" ", "-")


def anchors(path):
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {github_anchor(h) for h in re.findall(r"^#+ (.*)$", text, re.M)}


@pytest.mark.parametrize("page", FRONT_PAGES, ids=lambda page: page.name)
def test_a_front_page_links_to_what_exists(page):
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    links = LINK.findall(text)
    assert links
    for link in links:
        if re.match(r"[a-z]+:", link):   # https: and the like
            continue
        target, _, anchor = link.partition("#")
        path = (page.parent / target) if target else page
        assert path.exists(), f"{page.name} links to {link}, which is not in the repository"
        if anchor and path.suffix == ".md":
            assert anchor in anchors(path), f"{page.name} links to {link}: {path.name} has no such heading"


def chain_rule_rows(page):
    """(ops, file, functions, rules) for each row of the page's "Where each chain rule lives" table."""
    section = page.read_text(encoding="utf-8").split("## Where each chain rule lives", 1)[1]
    table = re.search(r"^\| op \|.*?\n(?=[^|])", section, re.M | re.S).group(0)
    rows = []
    for line in table.splitlines()[2:]:   # after the header and its --- line
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        assert len(cells) == 4, line
        ops = [re.sub(r" \(fused\)$", "", op) for op in cells[0].split(", ")]
        place, functions = cells[2].split(": ", 1)
        file = re.search(r"(?:tensorgrad|nn)/\w+\.py", place).group(0)
        rows.append((ops, file, re.findall(r"`([\w.]+)`", functions), re.findall(r"`([^`]+)`", cells[3])))
    return rows


def defined(file):
    """Every function and method defined in `file`, as 'name' or 'Class.name'."""
    names = set()
    for node in ast.parse((ROOT / file).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.update(f"{node.name}.{item.name}" for item in node.body if isinstance(item, ast.FunctionDef))
    return names


def ops_in_code():
    """The name of every node an op makes: make_op's first argument in the engine and in nn."""
    names = {"max", "min", "tril", "triu", "maximum", "minimum"}   # made by helpers that take the name
    for file in [*(ROOT / "tensorgrad").glob("*.py"), *(ROOT / "nn").glob("*.py")]:
        names.update(re.findall(r'make_op\(\s*"(\w+)"', file.read_text(encoding="utf-8")))
    return names


@pytest.mark.parametrize("page", [README, ENGINE_PAGE], ids=lambda page: page.name)
def test_where_each_chain_rule_lives_names_every_op_and_the_function_that_holds_it(page):
    rows = chain_rule_rows(page)
    listed = [op for ops, *_ in rows for op in ops]
    assert sorted(listed) == sorted(ops_in_code()), "the table must list each op that make_op makes, once"
    for ops, file, functions, rules in rows:
        assert functions, f"{ops}: no function named"
        for function in functions:
            assert function in defined(file), f"{ops}: {file} defines no {function}"
        source = (ROOT / file).read_text(encoding="utf-8")
        for rule in rules:   # a rule quoted as code is the code's own rules= text
            assert rule in source, f"{ops}: the rule {rule!r} is not in {file}"


def test_the_readme_links_to_no_design_file_outside_the_repository():
    assert "DESIGN.md" not in README.read_text(encoding="utf-8")
