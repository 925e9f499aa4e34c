"""README.md stays true: its first Python example runs as written."""
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readme_engine_example_runs(tmp_path, monkeypatch, capsys):
    example = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    monkeypatch.chdir(tmp_path)   # it writes graph.svg
    exec(compile(example, "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "backward from" in printed and "leaves: " in printed
    assert "<svg" in (tmp_path / "graph.svg").read_text()
