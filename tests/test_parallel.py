"""nn.parallel.DataParallel: the batch split across threads gives the serial step's result."""
import threading

import numpy as np
import pytest

import nn
import tensorgrad as tg


def gpt(dropout=0.0, seed=0):
    nn.manual_seed(seed)
    return nn.GPT(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16, dropout=dropout)


def batch(rows=6, seed=1):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 11, (rows, 8)), rng.integers(0, 11, (rows, 8))


def grads(model):
    return [p.grad.copy() for p in model.parameters()]


@pytest.mark.parametrize("rows, threads", [(6, 2), (5, 2), (7, 3), (2, 4)])
def test_the_parallel_loss_and_gradients_equal_one_backward_on_the_whole_batch(rows, threads):
    model, (x, y) = gpt(), batch(rows)
    _, loss = model(x, y)
    loss.backward()
    serial = grads(model)
    model.zero_grad()
    parallel_loss = nn.parallel.DataParallel(model, threads).forward_backward(x, y)
    assert parallel_loss == pytest.approx(loss.item(), rel=1e-6)
    for p, expected in zip(model.parameters(), serial):
        np.testing.assert_allclose(p.grad, expected, rtol=1e-4, atol=1e-6)


def test_gradients_accumulate_into_existing_ones_as_backward_does():
    model, (x, y) = gpt(), batch()
    parallel = nn.parallel.DataParallel(model, 2)
    parallel.forward_backward(x, y)
    once = grads(model)
    parallel.forward_backward(x, y)
    for p, g in zip(model.parameters(), once):
        np.testing.assert_allclose(p.grad, 2 * g, rtol=1e-5, atol=1e-7)


def test_a_parallel_run_gives_the_same_numbers_every_time_dropout_included():
    def run():
        model, (x, y) = gpt(dropout=0.2), batch()
        optimizer = nn.optim.AdamW(model.parameters(), lr=1e-2)
        parallel = nn.parallel.DataParallel(model, 2)
        for _ in range(3):
            optimizer.zero_grad()
            parallel.forward_backward(x, y)
            parallel.step(optimizer)
        return [p.data.copy() for p in model.parameters()]
    for a, b in zip(run(), run()):
        np.testing.assert_array_equal(a, b)


def test_the_threaded_optimizer_step_is_exactly_the_plain_step():
    def run(threaded):
        model, (x, y) = gpt(), batch()
        optimizer = nn.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
        parallel = nn.parallel.DataParallel(model, 2)
        for _ in range(3):
            optimizer.zero_grad()
            parallel.forward_backward(x, y)
            parallel.step(optimizer) if threaded else optimizer.step()
        return [p.data.copy() for p in model.parameters()]
    for a, b in zip(run(True), run(False)):
        np.testing.assert_array_equal(a, b)


def test_one_thread_runs_the_model_itself():
    model, (x, y) = gpt(), batch()
    parallel = nn.parallel.DataParallel(model, 1)
    assert parallel.replicas == [] and parallel.pool is None
    _, loss = model(x, y)
    assert parallel.forward_backward(x, y) == pytest.approx(loss.item())


def test_replicas_share_the_weights_and_follow_replaced_arrays():
    model, (x, y) = gpt(), batch()
    parallel = nn.parallel.DataParallel(model, 2)
    for replica in parallel.replicas:
        for p, twin in zip(model.parameters(), replica.parameters()):
            assert twin.data is p.data and twin is not p
    model.to(np.float64)   # new arrays: the replicas must be rebuilt, not left on the old ones
    loss = parallel.forward_backward(x, y)
    with tg.no_grad():
        assert loss == pytest.approx(model(x, y)[1].item(), rel=1e-9)
    assert all(p.grad.dtype == np.float64 for p in model.parameters())


def test_a_thread_starts_with_its_own_grad_mode_and_scope():
    seen = {}

    def worker():
        x = tg.tensor([1.0, 2.0], requires_grad=True)
        seen["requires_grad"] = (x * 2).requires_grad
        with tg.scope("worker"):
            seen["scope"] = (x * 2)._scope

    with tg.no_grad(), tg.scope("main"):
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    assert seen == {"requires_grad": True, "scope": ("worker",)}


def test_threads_must_be_positive():
    with pytest.raises(ValueError, match="threads must be at least 1"):
        nn.parallel.DataParallel(gpt(), 0)


def test_a_batch_smaller_than_the_threads_ignores_the_idle_replicas_old_gradients():
    model, (x, y) = gpt(), batch(6)
    parallel = nn.parallel.DataParallel(model, 4)
    parallel.forward_backward(x, y)   # every replica runs and keeps gradients
    model.zero_grad()
    parallel.forward_backward(x[:1], y[:1])   # one row: only the first replica runs
    got = grads(model)
    model.zero_grad()
    _, loss = model(x[:1], y[:1])
    loss.backward()
    for g, expected in zip(got, grads(model)):
        np.testing.assert_allclose(g, expected, rtol=1e-5, atol=1e-7)
