"""tgtrain.health: gradient norms, update ratios and block statistics against hand computations,
its CSV, the same measurements through tgtrain.parallel.DataParallel, and bench/health_cost.py."""
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nn
import tgtrain
import tensorgrad as tg
from tgtrain import health

REPO = Path(__file__).resolve().parents[1]

def gpt(dropout=0.0, seed=0):
    nn.manual_seed(seed)
    return nn.GPT(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16, dropout=dropout)


def batch(rows=6, seed=1):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 11, (rows, 8)), rng.integers(0, 11, (rows, 8))


def backward(model, x, y):
    model.zero_grad()
    model(x, y)[1].backward()


def test_grad_norms_are_the_l2_norms_of_the_gradients():
    model, (x, y) = gpt(), batch()
    backward(model, x, y)
    model.ln_f.bias.grad = None   # a parameter without a gradient
    norms = health.grad_norms(model)
    assert list(norms) == [name for name, _ in model.named_parameters()]
    assert norms["ln_f.bias"] is None
    g = model.h[1].attn.qkv.weight.grad
    assert norms["h.1.attn.qkv.weight"] == pytest.approx(math.sqrt(sum(v * v for v in g.ravel().tolist())), rel=1e-5)


def test_the_update_ratio_of_sgd_is_lr_times_the_gradients_spread_over_the_weights():
    model, (x, y) = gpt(), batch()
    backward(model, x, y)
    before = health.snapshot(model)
    nn.optim.SGD(model.parameters(), lr=0.1).step()
    ratios = health.update_ratios(before, model)
    for name, p in model.named_parameters():
        w = before[name]
        if w.std() > 0:   # std(-lr g) / std(w) = lr std(g) / std(w)
            assert ratios[name] == pytest.approx(0.1 * p.grad.std() / w.std(), rel=1e-3), name
    assert math.isnan(ratios["h.0.attn.qkv.bias"]) and math.isnan(ratios["h.0.ln1.weight"])   # zeros, ones
    assert ratios["h.0.attn.qkv.weight"] > 0


def test_the_gelu_tails_are_where_its_slope_is_within_0_012_of_0_or_1():
    assert health.gelu_tail_fraction(np.array([-5.0, -3.1, -1.0, 0.0, 2.9, 3.5])) == 0.5
    x = tg.tensor(np.linspace(-8, 8, 1601), requires_grad=True, dtype=np.float64)
    x.gelu().sum().backward()
    slope, tails = x.grad, np.abs(x.data) >= health.GELU_TAIL
    off_by = np.where(x.data < 0, np.abs(slope), np.abs(slope - 1))
    assert off_by[tails].max() < 0.012 and off_by[~tails].max() > 0.12   # flat outside, bent inside


def test_block_stats_follow_the_models_own_forward():
    """The residual stds are those of the blocks' outputs in GPT.forward, block after block."""
    model, (x, _) = gpt(), batch()
    stats = health.block_stats(model, x)
    assert list(stats) == ["h.0", "h.1"]
    with tg.no_grad():
        stream = model.tok_emb(x) + model.pos_emb(np.arange(x.shape[1]))
        for i, block in enumerate(model.h):
            stream = block(stream)
            assert stats[f"h.{i}"][0] == pytest.approx(stream.data.std(), rel=1e-5)
            assert stats[f"h.{i}"][1] == 0   # N(0, 0.02) weights: every GELU input is near 0
        np.testing.assert_allclose(model.head(model.ln_f(stream)).data, model(x)[0].data, rtol=1e-5, atol=1e-6)


def test_the_gelu_tail_fraction_counts_the_first_layers_outputs():
    """With fc's weights zeroed, the GELU inputs are fc's bias on every row: put 3 of the 64
    hidden units at -5, 4 at +4 and the rest at 2.5 (inside the bend)."""
    model, (x, _) = gpt(), batch()
    fc = model.h[1].ffn.fc
    fc.weight.data[...] = 0
    fc.bias.data[...] = 2.5
    fc.bias.data[:3], fc.bias.data[10:14] = -5, 4
    stats = health.block_stats(model, x)
    assert stats["h.1"][1] == pytest.approx(7 / 64) and stats["h.0"][1] == 0


def test_measuring_draws_no_random_numbers_and_keeps_the_mode():
    """Dropout is off while measuring, so a run that measures stays the run that does not."""
    model, (x, _) = gpt(dropout=0.5), batch()
    state = nn.rng.get_state()
    health.block_stats(model, x)
    assert model.training and model.h[0].attn.training and nn.rng.get_state() == state
    model.eval()
    health.block_stats(model, x)
    assert not model.training


def test_a_health_log_has_one_row_per_step_and_parameter_or_block(tmp_path):
    model, (x, y) = gpt(), batch()
    optimizer = nn.optim.AdamW(model.parameters(), lr=1e-2)
    path = tmp_path / "run.health.csv"
    log = health.HealthLog(model, path)
    for step in range(3):
        backward(model, x, y)
        if step != 1:
            with log.measure(step, x):
                optimizer.step()
        else:
            optimizer.step()
    names = [name for name, _ in model.named_parameters()]
    lines = path.read_text().splitlines()
    assert lines[0] == "step,name,grad_norm,update_ratio,residual_std,gelu_tail_fraction"
    assert len(lines) == 1 + 2 * (len(names) + 2)
    assert lines[1].startswith("0,tok_emb.weight,") and lines[-1].startswith("2,h.1,,,")
    assert [row["name"] for row in log.rows] == 2 * (names + ["h.0", "h.1"])
    written = [{c: round_trip(row[c]) for c in health.COLUMNS} for row in log.rows]
    assert repr(health.read_csv(path)) == repr(written)   # repr: nan == nan
    parameter, block = log.rows[0], log.rows[len(names)]
    assert parameter["grad_norm"] > 0 and parameter["update_ratio"] > 0 and parameter["residual_std"] is None
    assert block["grad_norm"] is None and block["residual_std"] > 0 and block["gelu_tail_fraction"] == 0
    assert log.seconds > 0

    resumed = health.HealthLog(model, path, resume_step=2)   # continues at step 2: keeps step 0
    assert [row["step"] for row in resumed.rows] == [0] * (len(names) + 2)
    assert health.HealthLog(model, path).rows == []   # a fresh run starts empty


def round_trip(value):
    return float(f"{value:.6g}") if isinstance(value, float) else value


def test_a_csv_of_other_columns_is_refused(tmp_path):
    path = tmp_path / "other.csv"
    path.write_text("step,train_loss\n0,1.5\n")
    with pytest.raises(ValueError, match=r"other.csv: not a gradient health log: its columns are \['step', "):
        health.HealthLog(gpt(), path, resume_step=5)


def test_nothing_is_recorded_when_the_update_fails():
    model, (x, y) = gpt(), batch()
    log = health.HealthLog(model)
    backward(model, x, y)
    with pytest.raises(RuntimeError, match="boom"), log.measure(0, x):
        raise RuntimeError("boom")
    assert log.rows == []


def test_data_parallel_gives_the_measurements_of_one_process():
    """The summed gradients are in this process after forward_backward, and step() updates
    the shared weights across processes: the rows match a run in one process."""
    x, y = batch()
    rows = []
    for processes in (1, 2):
        model = gpt()
        optimizer = nn.optim.AdamW(model.parameters(), lr=1e-2)
        parallel = tgtrain.parallel.DataParallel(model, processes, optimizer)
        log = health.HealthLog(model)
        for step in range(2):
            optimizer.zero_grad()
            parallel.forward_backward(x, y)
            with log.measure(step, x):
                parallel.step(max_norm=1.0)
        parallel.close()
        rows.append(log.rows)
    one, two = rows
    assert [row["name"] for row in one] == [row["name"] for row in two]
    for a, b in zip(one, two):
        for column in ("grad_norm", "update_ratio", "residual_std"):
            if a[column] is not None and not math.isnan(a[column]):
                assert b[column] == pytest.approx(a[column], rel=1e-3, abs=1e-9), (a["name"], column)
    assert all(row["update_ratio"] > 0 for row in two[len(one) // 2:] if row["update_ratio"] is not None)


def test_the_cost_benchmark_runs_and_prints_its_ratios():
    result = subprocess.run([sys.executable, str(REPO / "bench" / "health_cost.py"), "--rounds", "2"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert re.search(r"one measurement costs \d+\.\d\d of a step", result.stdout)
    assert re.search(r"at the default settings \(8 measurements and one picture in 2000 steps\): \d+\.\d\d% of the "
                     r"training time", result.stdout)
