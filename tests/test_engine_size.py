"""The engine stays small enough to read in one sitting (budget in bench/engine_size.py):
statements counted, lines and functions limited, so that packing code earns nothing."""
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "engine_size.py"


def test_the_engine_is_within_its_budget_and_limits():
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "core" in done.stdout and "tensor.py" in done.stdout


def test_docstrings_and_comments_do_not_count_as_code():
    sys.path.insert(0, str(SCRIPT.parent))
    from engine_size import code_lines
    source = 'def f(x):\n    """Why f.\n\n    More why."""\n    # a comment\n\n    return x  # d/dx = 1\n'
    assert code_lines(source) == 2


def test_a_statement_counts_once_however_it_is_laid_out():
    sys.path.insert(0, str(SCRIPT.parent))
    from engine_size import statements
    packed = 'def f(x):\n    """Why f."""\n    a, b = x, x\n    return a + b\n'
    spread = 'def f(x):\n    # why\n    a, b = (x,\n            x)\n    return (a\n            + b)\n'
    assert statements(packed) == statements(spread) == 3
