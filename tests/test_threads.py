"""tensorgrad.threads: the split of elementwise work across threads, and its promise: the same
numbers for any number of threads."""
import multiprocessing
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import nn
import tensorgrad as tg
from nn import functional as F
from tensorgrad import threads

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def restore_threads():
    before = tg.get_num_threads()
    yield
    tg.set_num_threads(before)


def pool_threads_seen(monkeypatch):
    """A set that fills with the names of the threads that run blocks of split's work."""
    seen, split = set(), threads.split

    def watched(work, sizes):
        def block(start, stop):
            seen.add(threading.current_thread().name)
            return work(start, stop)
        return split(block, sizes)
    monkeypatch.setattr(threads, "split", watched)
    return seen


def test_set_and_get_num_threads():
    tg.set_num_threads(3)
    assert tg.get_num_threads() == 3
    for bad in (0, -1, 1.5, True, "2", None):
        with pytest.raises(ValueError, match="set_num_threads: expected a whole number >= 1"):
            tg.set_num_threads(bad)
    assert tg.get_num_threads() == 3


@pytest.mark.parametrize("env, expected", [({"OMP_NUM_THREADS": "3"}, 3), ({"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "3"}, 1),
                                           ({"OMP_NUM_THREADS": "2,1"}, 2), ({}, None)])
def test_the_default_follows_the_blas_convention(env, expected):
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", "import os, tensorgrad as tg; before = dict(os.environ); "
                          "tg.set_num_threads(2); assert dict(os.environ) == before, 'an environment variable was set'; "
                          "import importlib, tensorgrad.threads as t; print(t.default_threads())"],
                         env={**clean, **env, "PYTHONPATH": ROOT}, capture_output=True, text=True, check=True)
    cores = len(os.sched_getaffinity(0))
    assert int(out.stdout) == (cores if expected is None else expected)


def test_split_covers_every_item_once_in_blocks_of_equal_work(monkeypatch):
    tg.set_num_threads(3)
    monkeypatch.setattr(threads, "MIN_ELEMENTS_PER_THREAD", 1)
    sizes = [100, 1, 1, 48, 50, 50, 50]
    blocks, lock = [], threading.Lock()

    def work(start, stop):
        with lock:
            blocks.append((start, stop, threading.current_thread().name))
    threads.split(work, sizes)
    covered = sorted(i for start, stop, _ in blocks for i in range(start, stop))
    assert covered == list(range(len(sizes)))
    assert len(blocks) == 3 and len({name for *_, name in blocks}) == 3   # three threads, one block each
    shares = sorted(sum(sizes[start:stop]) for start, stop, _ in blocks)
    assert shares == [100, 100, 100]


def test_small_work_stays_on_the_calling_thread():
    tg.set_num_threads(4)
    names = []
    threads.split(lambda start, stop: names.append((start, stop, threading.current_thread().name)),
                  [10] * 100)   # 1,000 elements: not worth a thread
    assert names == [(0, 100, threading.current_thread().name)]
    threads.split(lambda start, stop: names.append((start, stop)), [])   # nothing to do
    assert names[-1] == (0, 0)


def test_a_blocks_error_reaches_the_caller_after_every_block_is_done(monkeypatch):
    tg.set_num_threads(2)
    monkeypatch.setattr(threads, "MIN_ELEMENTS_PER_THREAD", 1)
    finished = []

    def work(start, stop):
        if start > 0:
            raise ArithmeticError(f"block {start}:{stop} failed")
        finished.append(start)
    with pytest.raises(ArithmeticError, match="block 2:4 failed"):
        threads.split(work, [1, 1, 1, 1])
    assert finished == [0]


def test_a_split_inside_a_block_runs_in_place(monkeypatch):
    tg.set_num_threads(2)
    monkeypatch.setattr(threads, "MIN_ELEMENTS_PER_THREAD", 1)
    inner = []

    def outer(start, stop):
        threads.split(lambda a, b: inner.append((a, b, threading.current_thread().name)), [1, 1])
    threads.split(outer, [1, 1])
    names = [name for *_, name in inner]
    assert len(inner) == 3 and (0, 2) in [(a, b) for a, b, _ in inner]   # the pool's block: whole, in place
    assert any(name.startswith("tensorgrad-split") for name in names)


def forked_child(queue):
    x = np.arange(1 << 18, dtype=np.float64).reshape(512, 512)
    out = np.empty_like(x)
    threads.by_rows(lambda x, out: np.multiply(x, 2, out=out), x, out)
    queue.put(bool((out == 2 * x).all()))


def test_a_forked_process_starts_its_own_threads():
    tg.set_num_threads(2)
    x = np.ones((512, 512))
    threads.by_rows(lambda x: x.sum(), x)   # the parent's pool exists before the fork
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=forked_child, args=(queue,))
    child.start()
    child.join(timeout=30)
    assert child.exitcode == 0 and queue.get(timeout=5)


def fused_results(threads_count):
    """Every threaded op's forward and gradients, with threads_count threads."""
    tg.set_num_threads(threads_count)
    rng = np.random.default_rng(0)
    x = tg.tensor(rng.standard_normal((12, 64, 512), dtype=np.float32), requires_grad=True)
    h = tg.tensor(rng.standard_normal((12, 64, 128), dtype=np.float32), requires_grad=True)
    weight = tg.tensor(rng.standard_normal(128, dtype=np.float32), requires_grad=True)
    bias = tg.tensor(rng.standard_normal(128, dtype=np.float32), requires_grad=True)
    gelu, norm = x.gelu(), F.layer_norm(h, weight, bias)
    ((gelu * gelu).sum() + (norm * norm * norm).sum()).backward()
    return [a.copy() for a in (gelu.data, norm.data, x.grad, h.grad, weight.grad, bias.grad)]


def test_the_fused_ops_give_the_same_bits_for_any_number_of_threads(monkeypatch):
    monkeypatch.setattr(threads, "MIN_ELEMENTS_PER_THREAD", 1024)   # layer norm's small rows split too
    seen = pool_threads_seen(monkeypatch)
    one = fused_results(1)
    assert seen == {threading.current_thread().name}
    for count in (2, 3):
        for a, b in zip(one, fused_results(count)):
            assert a.tobytes() == b.tobytes()
    assert any(name.startswith("tensorgrad-split") for name in seen)   # the work really was split


@pytest.mark.parametrize("data", [np.float32(0.5), np.arange(-6, 6, dtype=np.float32).reshape(3, 4).T,
                                  np.zeros((0, 4), np.float32)], ids=["0-d", "transposed", "empty"])
def test_gelu_keeps_any_inputs_shape_and_matches_its_composition(data):
    x = tg.tensor(data, requires_grad=True)
    out = x.gelu()
    (out * out).sum().backward()
    with tg.composed():
        y = tg.tensor(data, requires_grad=True)
        composed = y.gelu()
        (composed * composed).sum().backward()
    assert out.shape == composed.shape == np.shape(data) and x.grad.shape == np.shape(data)
    np.testing.assert_allclose(out.data, composed.data, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(x.grad, y.grad, rtol=1e-5, atol=1e-6)


def loss_curve(threads_count, steps=4):
    """A loop of your own on the nanoGPT CPU config, with threads_count threads."""
    tg.set_num_threads(threads_count)
    nn.manual_seed(0)
    model = nn.GPT(65, 64, 2, 4, 128)
    optimizer = nn.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
    rng, losses = np.random.default_rng(0), []
    for _ in range(steps):
        x, y = rng.integers(0, 65, (12, 64)), rng.integers(0, 65, (12, 64))
        _, loss = model(x, y)
        optimizer.zero_grad()
        loss.backward()
        losses.append((loss.item(), nn.optim.clip_grad_norm(model.parameters(), 0.5)))
        optimizer.step()
    return losses, [p.data.copy() for p in model.parameters()]


def test_the_same_seed_gives_the_same_loss_curve_with_1_and_2_threads(monkeypatch):
    monkeypatch.setattr(threads, "MIN_ELEMENTS_PER_THREAD", 1024)   # every threaded op splits, small ones too
    seen = pool_threads_seen(monkeypatch)
    losses_1, weights_1 = loss_curve(1)
    losses_2, weights_2 = loss_curve(2)
    assert losses_1 == losses_2
    assert all(a.tobytes() == b.tobytes() for a, b in zip(weights_1, weights_2))
    assert any(name.startswith("tensorgrad-split") for name in seen)


@pytest.mark.parametrize("processes, inside", [(1, 3), (2, 1)])
def test_a_short_fit_runs_one_thread_per_process_and_gives_the_count_back(monkeypatch, processes, inside):
    import importlib
    import tgtrain
    fit_module = importlib.import_module("tgtrain.fit")   # the module: tgtrain.fit is also its function
    seen, parallel = [], fit_module.DataParallel

    def recording(*args, **kwargs):
        seen.append(tg.get_num_threads())   # the workers fork now, with this count
        return parallel(*args, **kwargs)
    monkeypatch.setattr(fit_module, "DataParallel", recording)
    tg.set_num_threads(3)
    nn.manual_seed(0)
    tgtrain.fit(nn.GPT(11, 8, 1, 2, 16), np.arange(200) % 11, steps=2, block_size=8, batch_size=4, processes=processes)
    assert seen == [inside] and tg.get_num_threads() == 3


def test_by_rows_cuts_the_same_tiles_for_any_number_of_threads(monkeypatch):
    """Each call gets the same rows whatever the thread count: a BLAS matrix-vector product
    inside work rounds the last rows of a call its own way, so the cuts must not move."""
    monkeypatch.setattr(threads, "MIN_ELEMENTS_PER_THREAD", 1)
    monkeypatch.setattr(threads, "TILE_ELEMENTS", 100)   # 100 // (7 + 7) = 7 rows a tile
    data, out = np.arange(50 * 7.0).reshape(50, 7), np.zeros((50, 7))

    def calls(count):
        tg.set_num_threads(count)
        seen = []
        threads.by_rows(lambda block, out_block: seen.append((int(block[0, 0]) // 7, len(block))), data, out)
        return sorted(seen)
    try:
        assert calls(1) == calls(2) == calls(3) == [(start, min(7, 50 - start)) for start in range(0, 50, 7)]
    finally:
        tg.set_num_threads(threads.default_threads())


def test_adam_in_tiles_gives_the_same_bits_as_whole_arrays(monkeypatch):
    """Adam's passes go over each parameter in tiles of rows; any tile size, the same numbers."""
    def trained(tile_elements):
        monkeypatch.setattr(threads, "TILE_ELEMENTS", tile_elements)
        rng = np.random.default_rng(0)
        shapes = [(40, 30), (30,), (), (0, 3), (5, 4, 3)]
        params = [tg.tensor(rng.standard_normal(shape, dtype=np.float32), requires_grad=True) for shape in shapes]
        optimizer = nn.optim.AdamW(params, lr=1e-2, weight_decay=0.1)
        for _ in range(3):
            for p in params:
                p.grad = rng.standard_normal(p.shape, dtype=np.float32)
            optimizer.step()
        return [p.data.copy() for p in params] + [m.copy() for m in optimizer.m + optimizer.v]
    whole = trained(1 << 40)
    for tile_elements in (64, 7):   # tiles of a few rows, and of one row
        assert all(a.tobytes() == b.tobytes() for a, b in zip(whole, trained(tile_elements)))
