"""Without matplotlib (it comes with `pip install ".[plots]"`), the main job still trains and
writes its .csv logs, and says in one line that it drew no PNG, and why."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def test_the_main_job_says_once_that_it_skipped_its_pngs_and_why(tmp_path):
    blocker = tmp_path / "no_matplotlib" / "matplotlib"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text('raise ImportError("matplotlib is blocked by this test")\n')
    words = "the king and queen said that we shall go".split()
    rng = np.random.default_rng(0)
    corpus = tmp_path / "play.txt"
    corpus.write_text("\n".join(" ".join(rng.choice(words, 6)) for _ in range(400)) + "\n", encoding="utf-8")
    out = tmp_path / "run" / "chargpt.npz"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker.parent), str(REPO)])}
    result = subprocess.run(
        [sys.executable, str(REPO / "demos" / "train_chargpt.py"), "--data", str(corpus), "--n_layer", "1",
         "--n_head", "2", "--n_embd", "16", "--block_size", "8", "--batch_size", "4", "--eval_iters", "2",
         "--warmup_iters", "2", "--max_iters", "4", "--eval_interval", "2", "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    said = [line for line in result.stdout.splitlines() if "matplotlib" in line]
    assert said == ['no chargpt.png or chargpt.health.png: matplotlib is not installed '
                    '(pip install ".[plots]" draws them; the .csv logs are written)']
    assert out.with_suffix(".csv").exists() and out.with_suffix(".health.csv").exists()
    assert not out.with_suffix(".png").exists() and not out.with_suffix(".health.png").exists()
