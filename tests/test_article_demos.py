"""Smoke tests of the attention-article demos (demos/attention_*.py): each runs with --quick
as a user would run it (a subprocess, from the repository root) and must print its table
and conclusion and write its text table, and its figure when matplotlib is installed."""
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMOS = ["attention_dot_product", "attention_scaling", "attention_expectation", "attention_order",
         "attention_heads", "attention_deep_gradients", "attention_cost", "attention_length", "attention_context"]
HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


def run(args, tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               MPLBACKEND="Agg")
    result = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.mark.parametrize("name", DEMOS)
def test_demo_runs_quick(name, tmp_path):
    out = run([f"demos/{name}.py", "--quick", "--out", str(tmp_path)], tmp_path)
    assert "Conclusion:" in out
    assert "done in" in out
    report = (tmp_path / f"{name}.txt").read_text(encoding="utf-8")
    assert "Conclusion:" in report and "---" in report      # a table and what it supports
    assert (tmp_path / f"{name}.png").exists() == HAVE_MATPLOTLIB


def test_demo_without_matplotlib_writes_the_table_only(tmp_path):
    # None in sys.modules makes `import matplotlib` raise ImportError, as if it were not installed
    script = ("import runpy, sys; sys.modules['matplotlib'] = None; "
              f"sys.argv = ['demos/attention_order.py', '--quick', '--out', {str(tmp_path)!r}]; "
              "sys.path.insert(0, 'demos'); runpy.run_path('demos/attention_order.py', run_name='__main__')")
    out = run(["-c", script], tmp_path)
    assert "matplotlib is not installed" in out
    assert (tmp_path / "attention_order.txt").exists()
    assert not (tmp_path / "attention_order.png").exists()


def test_attention_heads_reads_a_train_chargpt_checkpoint(tmp_path):
    import nn
    from nn import data
    text = "the cat sat on the mat. "
    tokenizer = data.CharTokenizer(text)
    nn.manual_seed(0)
    model = nn.GPT(tokenizer.vocab_size, block_size=16, n_layer=2, n_head=2, n_embd=16)
    checkpoint = tmp_path / "tiny.npz"
    # the metadata demos/train_chargpt.py writes and reads back
    nn.save(str(checkpoint), model, model_config=model.config, tokenizer=tokenizer.chars, step=0, val_loss=None)
    out = run(["demos/attention_heads.py", "--checkpoint", str(checkpoint), "--text", "the cat sat",
               "--out", str(tmp_path)], tmp_path)
    assert f"checkpoint {checkpoint}" in out
    report = (tmp_path / "attention_heads.txt").read_text(encoding="utf-8")
    assert report.count("\n    1     1 ") == 1      # a row for layer 1, head 1: every head of every layer
    assert np.isfinite(float(report.split("trained ")[1].split(",")[0]))


def test_attention_cost_gives_the_same_verdict_and_memory_exponents_every_run(tmp_path):
    """Its verdict rests on peak memory, which tracemalloc counts exactly; time only informs."""
    def verdict_and_memory(out):
        conclusion = out.split("Conclusion: ")[1]
        memory = re.findall(r"^ *(\w+ peak memory) +([\d.]+) +exact", out, flags=re.MULTILINE)
        return conclusion.split(":")[0], conclusion.split(" Time,")[0], memory
    first, second = (verdict_and_memory(run(["demos/attention_cost.py", "--quick", "--out", str(tmp_path / name)],
                                            tmp_path)) for name in ("a", "b"))
    assert first == second and len(first[2]) == 2
