"""README.md stays true: its first Python example runs as written. README.ko.md, its Korean
companion, is linked from README's first lines and points at what exists."""
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
KOREAN = README.with_name("README.ko.md")


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
