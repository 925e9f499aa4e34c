"""bench/numpy_step.py, the training step written by hand in numpy, computes what tensorgrad
computes: the loss, every parameter's gradient and the AdamW update, on the same weights and
batch; on one process or split across several. Gradients are compared per parameter,
relative to that gradient's largest element (float64 1e-9, float32 1e-4)."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nn
from tensorgrad.autograd import backward_order

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))
from numpy_step import NumpyTrainer  # noqa: E402

DEFAULT = dict(vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128)   # the main job's model
ADAMW = dict(lr=1e-3, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1)


def gpt(dtype=np.float32, seed=0, **config):
    nn.manual_seed(seed)
    return nn.GPT(**{**DEFAULT, **config}).to(dtype)


def batch(rows, length, vocab=65, seed=1):
    rng = np.random.default_rng(seed)
    return rng.integers(0, vocab, (rows, length)), rng.integers(0, vocab, (rows, length))


def tensorgrad_loss_and_grads(model, x, y):
    model.zero_grad()
    _, loss = model(x, y)
    loss.backward()
    return loss.item(), {name: p.grad for name, p in model.named_parameters()}


def assert_close(found, expected, rel, what):
    """Every element within rel of the array's scale (its largest element)."""
    np.testing.assert_allclose(found, expected, rtol=rel, atol=rel * np.abs(expected).max(), err_msg=what)


@pytest.mark.parametrize("dtype, rel", [(np.float64, 1e-9), (np.float32, 1e-4)])
@pytest.mark.parametrize("rows, length", [(12, 64), (3, 37)])   # the main job's batch; a shorter one
def test_the_loss_and_every_gradient_equal_tensorgrads(dtype, rel, rows, length):
    model, (x, y) = gpt(dtype), batch(rows, length)
    trainer = NumpyTrainer(model)
    trainer.forward_backward(*batch(2, 64, seed=5))   # every gradient array written once before
    loss = trainer.forward_backward(x, y)
    expected_loss, expected = tensorgrad_loss_and_grads(model, x, y)
    assert loss == pytest.approx(expected_loss, rel=rel)
    assert list(trainer.grads) == list(expected)
    for name, grad in trainer.grads.items():
        assert grad.dtype == dtype and grad.shape == expected[name].shape, name
        assert_close(grad, expected[name], rel, name)
    total = np.sqrt(sum(np.vdot(g, g) for g in expected.values()))
    assert trainer.grad_norm == pytest.approx(total, rel=rel)


@pytest.mark.parametrize("rows, processes", [(12, 2), (7, 3), (2, 3)])   # the last: a process with no rows
def test_the_batch_split_across_processes_gives_one_processs_loss_and_gradients(rows, processes):
    model, (x, y) = gpt(np.float64, n_layer=2, n_embd=32, block_size=16), batch(rows, 16)
    one = NumpyTrainer(model)
    many = NumpyTrainer(model, processes)
    try:
        assert len(many.workers) == processes - 1
        assert many.forward_backward(x, y) == pytest.approx(one.forward_backward(x, y), rel=1e-12)
        for name, grad in one.grads.items():
            assert_close(many.grads[name], grad, 1e-12, name)
        for _ in range(2):   # and the update, split into each process's group of parameters
            one.step(x, y)
            many.step(x, y)
        for name, weight in one.params.items():
            assert_close(many.params[name], weight, 1e-12, name)
    finally:
        workers = many.workers
        many.close()
    assert all(not process.is_alive() for _, process in workers)


def tensorgrad_step(model, optimizer, x, y, max_norm):
    optimizer.zero_grad()
    _, loss = model(x, y)
    loss.backward()
    norm = nn.optim.clip_grad_norm(model.parameters(), max_norm)
    optimizer.step()
    return loss.item(), norm


@pytest.mark.parametrize("max_norm", [1.0, 0.1, 1e3])   # the main job's clip; one that always clips; none
def test_each_update_equals_clip_grad_norm_then_nn_optim_adamw(max_norm):
    model = gpt(np.float64, n_layer=2)
    trainer = NumpyTrainer(model, **ADAMW, max_norm=max_norm)
    optimizer = nn.optim.AdamW(model.parameters(), **ADAMW)
    before = {name: p.data.copy() for name, p in model.named_parameters()}
    for seed in (1, 2):   # the second step checks the moments and the bias correction carry over
        x, y = batch(4, 64, seed=seed)
        loss = trainer.step(x, y)
        expected_loss, norm = tensorgrad_step(model, optimizer, x, y, max_norm)
        assert loss == pytest.approx(expected_loss, rel=1e-9)
        assert trainer.grad_norm == pytest.approx(norm, rel=1e-9)
    for i, (name, p) in enumerate(model.named_parameters()):
        assert_close(trainer.params[name] - before[name], p.data - before[name], 1e-9, name)
        assert_close(trainer.grads[name], p.grad, 1e-9, name)   # the clipped gradient, as clip leaves it
        assert_close(trainer.m[i], optimizer.m[i], 1e-9, name)
        assert_close(trainer.v[i], optimizer.v[i], 1e-9, name)
    assert list(trainer.updates) == list(optimizer.updates) == [2] * len(trainer.names)


def test_it_trains_a_copy_of_the_models_weights():
    model = gpt()
    before = model.state_dict()
    trainer = NumpyTrainer(model)
    trainer.step(*batch(2, 64))
    assert all(np.array_equal(p.data, before[name]) for name, p in model.named_parameters())
    assert any(not np.array_equal(trainer.params[name], before[name]) for name in before)


@pytest.mark.parametrize("config", [dict(pos="sinusoidal"), dict(dropout=0.1)])
def test_a_model_it_was_not_written_for_is_a_clear_error(config):
    with pytest.raises(ValueError, match="NumpyTrainer: written for nn.GPT with pos='learned', no dropout"):
        NumpyTrainer(gpt(**config))


@pytest.mark.parametrize("engine", ["numpy", "numpy-1", "tensorgrad-1", "readme"])
def test_the_step_benchmark_times_each_new_engine_in_a_child_process(engine):
    config = dict(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=16, batch_size=4)
    done = subprocess.run([sys.executable, str(BENCH / "gpt_step.py"), "--child", engine, "--config",
                           json.dumps(config), "--steps", "2", "--threads", "2"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    ms, mib = map(float, done.stdout.split()[-2:])
    assert ms > 0 and mib > 0


@pytest.mark.parametrize("processes", [1, 2])
def test_the_time_split_benchmark_prints_every_row_and_they_add_up_to_the_step(processes):
    done = subprocess.run([sys.executable, str(BENCH / "step_split.py"), "--rows", "1", "--steps", "3",
                           "--processes", str(processes)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    from step_split import DATA_PARALLEL_ROWS, ROWS
    lines = {line[:50].strip(): line[50:].split() for line in done.stdout.splitlines() if len(line) > 50}
    expected = ROWS + (DATA_PARALLEL_ROWS if processes > 1 else [])
    assert [title for title in lines if title in {t for t, _, _ in ROWS + DATA_PARALLEL_ROWS}] == \
        [title for title, _, _ in expected]   # the split's rows only when the step is split
    rows = [lines[title] for title, _, _ in expected]   # each: tensorgrad ms, share, numpy ms, share
    total = lines["total, with the timers"]
    for engine in (0, 2):   # every moment of a step is in one row
        assert sum(float(row[engine]) for row in rows) == pytest.approx(float(total[engine // 2]), rel=0.1)
    assert float(lines["matrix products (GEMMs, replayed alone)"][0]) > 0
    # the products alone take less time than the step, so their MFU bound is above the step's
    mfu, bound = ([float(cell.rstrip("%")) for cell in lines[title]]
                  for title in ("MFU (without timers)", "MFU bound: the matrix products alone"))
    assert all(0 < m < b for m, b in zip(mfu, bound))
    assert "(steal) during the timings: " in done.stdout


def test_the_fusion_bound_fuses_each_block_into_one_node_that_computes_the_same(monkeypatch):
    import fused_bound
    x, y = batch(3, 16)
    expected_loss, expected = tensorgrad_loss_and_grads(gpt(np.float64, n_layer=2, block_size=16), x, y)
    monkeypatch.setattr(nn.transformer.TransformerBlock, "forward", fused_bound.fused_block_forward)
    model = gpt(np.float64, n_layer=2, block_size=16)
    loss, grads = tensorgrad_loss_and_grads(model, x, y)
    assert loss == pytest.approx(expected_loss, rel=1e-12)
    for name in expected:
        assert_close(grads[name], expected[name], 1e-9, name)
    _, loss = model(x, y)   # one node per block: of a block's inside, nothing is in the graph
    ops = [node.op for node in backward_order(loss)]
    assert ops.count("fused block") == 2 and ops.count("layer_norm") == 1   # the blocks; ln_f
    assert "scaled_dot_product_attention" not in ops and "gelu" not in ops


def test_the_fusion_bound_prints_each_variants_step_against_the_hand_written_one():
    done = subprocess.run([sys.executable, str(BENCH / "fused_bound.py"), "--rounds", "1", "--steps", "2"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = {line[:28].strip(): line[28:].split() for line in done.stdout.splitlines()[-3:]}
    import fused_bound
    assert list(rows) == list(fused_bound.VARIANTS)
    for tg_ms, np_ms, ratio, _ in rows.values():
        assert float(tg_ms) > 0 and float(np_ms) > 0
        assert float(ratio) == pytest.approx(float(tg_ms) / float(np_ms), abs=0.01)


def test_the_step_benchmark_names_the_cpu_and_sets_both_thread_counts():
    import gpt_step
    import tensorgrad as tg
    before = tg.get_num_threads()
    try:
        assert gpt_step.cpu_model().strip()
        blas = gpt_step.limit_threads(1)
        assert tg.get_num_threads() == 1 and "1 threads" in blas
    finally:
        tg.set_num_threads(before)
        gpt_step.limit_threads(before)


def test_the_threads_benchmark_times_every_op_it_names():
    import threads as threads_bench
    calls = threads_bench.cases(16, rows=8)
    assert [name.split(" (")[0] for name in calls] == ["gelu", "layer_norm", "AdamW step"]
    for call in calls.values():
        assert threads_bench.median_ms(call, lambda: None, calls=2) > 0


def test_the_step_benchmark_reports_the_time_the_host_took(tmp_path):
    import gpt_step
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 50 800 10 0 5 35 0 0\ncpu0 50 0 25 400 5 0 2 18 0 0\n")
    start = gpt_step.cpu_ticks(stat)
    assert start == (35, 1000)
    stat.write_text("cpu  400 0 100 1300 10 0 5 185 0 0\n")   # 1,000 ticks more, 150 of them stolen
    assert gpt_step.stolen_share(start, gpt_step.cpu_ticks(stat)).startswith("15.0%; above a few percent")
    assert gpt_step.stolen_share(start, (36, 1100)) == "1.0%"
    assert gpt_step.cpu_ticks(tmp_path / "missing") is None
    assert gpt_step.stolen_share(None, start).startswith("unknown")
