"""tgtrain.parallel: the batch split across processes gives the serial step's result, and the
optimizer's update split across them gives the plain step's."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import nn
import tensorgrad as tg
import tgtrain
from nn import optim
from test_optim import SHAPES, grad_stream, params64, run


def gpt(dropout=0.0, seed=0):
    nn.manual_seed(seed)
    return nn.GPT(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16, dropout=dropout)


def batch(rows=6, seed=1):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 11, (rows, 8)), rng.integers(0, 11, (rows, 8))


def grads(model):
    return [p.grad.copy() for p in model.parameters()]


def serial_loss_and_grads(model, x, y):
    model.zero_grad()
    _, loss = model(x, y)
    loss.backward()
    found = loss.item(), grads(model)
    model.zero_grad()
    return found


@pytest.mark.parametrize("rows, processes", [(6, 2), (5, 2), (7, 3), (2, 4)])
def test_the_parallel_loss_and_gradients_equal_one_backward_on_the_whole_batch(rows, processes):
    model, (x, y) = gpt(), batch(rows)
    loss, serial = serial_loss_and_grads(model, x, y)
    parallel = tgtrain.parallel.DataParallel(model, processes)
    assert len(parallel.workers) == processes - 1
    assert parallel.forward_backward(x, y) == pytest.approx(loss, rel=1e-6)
    for p, expected in zip(model.parameters(), serial):
        np.testing.assert_allclose(p.grad, expected, rtol=1e-4, atol=1e-6)
    parallel.close()


def test_gradients_accumulate_into_existing_ones_as_backward_does():
    model, (x, y) = gpt(), batch()
    parallel = tgtrain.parallel.DataParallel(model, 2)
    parallel.forward_backward(x, y)
    once = grads(model)
    parallel.forward_backward(x, y)
    for p, g in zip(model.parameters(), once):
        np.testing.assert_allclose(p.grad, 2 * g, rtol=1e-5, atol=1e-7)
    parallel.close()


def test_the_workers_see_every_in_place_update_of_the_weights():
    model, (x, y) = gpt(), batch()
    parallel = tgtrain.parallel.DataParallel(model, 2)
    optimizer = nn.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(3):   # the optimizer writes into the shared arrays, here in the main process
        optimizer.zero_grad()
        parallel.forward_backward(x, y)
        optimizer.step()
    loss, serial = serial_loss_and_grads(model, x, y)
    assert parallel.forward_backward(x, y) == pytest.approx(loss, rel=1e-6)
    for p, expected in zip(model.parameters(), serial):
        np.testing.assert_allclose(p.grad, expected, rtol=1e-4, atol=1e-6)
    parallel.close()


def test_a_parallel_run_gives_the_same_numbers_every_time_dropout_included():
    def run():
        model, (x, y) = gpt(dropout=0.2), batch()
        optimizer = nn.optim.AdamW(model.parameters(), lr=1e-2)
        parallel = tgtrain.parallel.DataParallel(model, 2)
        losses = []
        for _ in range(3):
            optimizer.zero_grad()
            losses.append(parallel.forward_backward(x, y))
            optimizer.step()
        parallel.close()
        return losses, [p.data.copy() for p in model.parameters()]
    (losses_a, weights_a), (losses_b, weights_b) = run(), run()
    assert losses_a == losses_b
    for a, b in zip(weights_a, weights_b):
        np.testing.assert_array_equal(a, b)


def test_loss_is_the_mean_loss_without_a_graph_in_the_models_mode():
    model, (x, y) = gpt(dropout=0.5), batch(7)
    parallel = tgtrain.parallel.DataParallel(model, 3)
    model.eval()   # no dropout: the parts must give exactly the model's own number
    with tg.no_grad():
        expected = model(x, y)[1].item()
    assert parallel.loss(x, y) == pytest.approx(expected, rel=1e-6)
    assert all(p.grad is None for p in model.parameters())
    model.train()   # dropout on in every part: the loss moves
    assert parallel.loss(x, y) != pytest.approx(expected, rel=1e-6)
    parallel.close()


def test_one_process_runs_the_model_itself():
    model, (x, y) = gpt(), batch()
    arrays = [p.data for p in model.parameters()]
    parallel = tgtrain.parallel.DataParallel(model, 1)
    assert parallel.workers == []
    assert all(p.data is a for p, a in zip(model.parameters(), arrays))   # nothing moved
    loss, _ = serial_loss_and_grads(model, x, y)
    assert parallel.forward_backward(x, y) == pytest.approx(loss)
    assert parallel.loss(x, y) == pytest.approx(loss)


def test_the_parameters_move_to_shared_memory_and_replaced_arrays_are_followed():
    model, (x, y) = gpt(), batch()
    before = [p.data.copy() for p in model.parameters()]
    parallel = tgtrain.parallel.DataParallel(model, 2)
    for p, values in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.data, values)   # same values, in a shared block now
    old_workers = list(parallel.workers)
    model.to(np.float64)   # new arrays: they must be shared and the workers started again
    loss = parallel.forward_backward(x, y)
    with tg.no_grad():
        assert loss == pytest.approx(model(x, y)[1].item(), rel=1e-9)
    assert all(p.grad.dtype == np.float64 for p in model.parameters())
    assert not any(process.is_alive() for _, process in old_workers)
    parallel.close()


def test_a_workers_error_is_raised_here_and_the_next_call_still_works():
    model, (x, y) = gpt(), batch()
    parallel = tgtrain.parallel.DataParallel(model, 2)
    bad = y.copy()
    bad[-1, 0] = 99   # out of range, in the rows the worker gets
    with pytest.raises(RuntimeError, match="worker process failed(.|\n)*target 99 is out of range"):
        parallel.forward_backward(x, bad)
    bad = y.copy()
    bad[0, 0] = 99    # in the rows this process runs itself
    with pytest.raises(ValueError, match="target 99 is out of range"):
        parallel.forward_backward(x, bad)
    model.zero_grad()
    loss, serial = serial_loss_and_grads(model, x, y)
    assert parallel.forward_backward(x, y) == pytest.approx(loss, rel=1e-6)
    parallel.close()


def test_close_stops_the_workers():
    model = gpt()
    parallel = tgtrain.parallel.DataParallel(model, 3)
    processes = [process for _, process in parallel.workers]
    assert all(process.is_alive() for process in processes)
    parallel.close()
    assert parallel.workers == [] and not any(process.is_alive() for process in processes)


def test_processes_must_be_positive():
    with pytest.raises(ValueError, match="processes must be at least 1"):
        tgtrain.parallel.DataParallel(gpt(), 0)


def test_a_batch_smaller_than_the_processes_leaves_the_idle_workers_out():
    model, (x, y) = gpt(), batch(6)
    parallel = tgtrain.parallel.DataParallel(model, 4)
    parallel.forward_backward(x, y)   # every worker runs
    model.zero_grad()
    got_loss = parallel.forward_backward(x[:1], y[:1])   # one row: only this process runs
    got = grads(model)
    loss, expected = serial_loss_and_grads(model, x[:1], y[:1])
    assert got_loss == pytest.approx(loss, rel=1e-6)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-7)
    parallel.close()


def test_a_killed_worker_is_reported_and_replaced_on_the_next_call():
    model, (x, y) = gpt(), batch()
    parallel = tgtrain.parallel.DataParallel(model, 2)
    _, process = parallel.workers[0]
    process.kill()
    process.join()
    with pytest.raises(tgtrain.parallel.WorkerDied, match=rf"worker process {process.pid} died \(killed by signal 9 \(SIGKILL\)\)"):
        parallel.forward_backward(x, y)
    model.zero_grad()
    loss, serial = serial_loss_and_grads(model, x, y)
    assert parallel.forward_backward(x, y) == pytest.approx(loss, rel=1e-6)
    assert parallel.workers[0][1].pid != process.pid
    parallel.close()


def test_a_worker_that_dies_in_the_middle_of_an_update_leaves_the_state_of_the_step_before():
    """Its group half updated, the others (this process's too) done: step() puts every array
    back, so the model and the optimizer are those of the last completed step."""
    parent = os.getpid()

    class DiesMidUpdate(nn.optim.AdamW):
        def update(self, i, w, g):
            super().update(i, w, g)
            if os.getpid() != parent:   # a worker, killed right after the first parameter of its group
                os.kill(os.getpid(), signal.SIGKILL)

    model, (x, y) = gpt(), batch()
    optimizer = DiesMidUpdate(model.parameters(), lr=1e-2)
    parallel = tgtrain.parallel.DataParallel(model, 3, optimizer)
    parallel.forward_backward(x, y)
    weights, state = [p.data.copy() for p in model.parameters()], optimizer.state_dict()
    with pytest.raises(tgtrain.parallel.WorkerDied, match=r"killed by signal 9 \(SIGKILL\)"):
        parallel.step(max_norm=1.0)
    assert all(np.array_equal(p.data, w) for p, w in zip(model.parameters(), weights))
    assert all(np.array_equal(optimizer.state_dict()[name], array) for name, array in state.items())
    parallel.close()


def test_in_eval_mode_nothing_is_drawn_from_nns_generator():
    model, (x, y) = gpt(dropout=0.2), batch()
    parallel = tgtrain.parallel.DataParallel(model, 2)
    model.eval()
    state = nn.rng.get_state()
    parallel.loss(x, y)
    parallel.forward_backward(x, y)
    assert nn.rng.get_state() == state   # as in the model itself: eval mode draws nothing
    parallel.close()


def trained(processes, split_step, steps=3, dropout=0.0):
    """Weights and optimizer state after `steps` AdamW steps with clipping, the update
    split across the processes (DataParallel.step) or made here."""
    model, (x, y) = gpt(dropout), batch()
    optimizer = nn.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    parallel = tgtrain.parallel.DataParallel(model, processes, optimizer if split_step else None)
    norms = []
    for step in range(steps):
        optimizer.lr = 1e-2 / (step + 1)   # a schedule: the workers must use each step's lr
        optimizer.zero_grad()
        parallel.forward_backward(x, y)
        if split_step:
            norms.append(parallel.step(max_norm=0.5))
        else:
            norms.append(nn.optim.clip_grad_norm(model.parameters(), 0.5))
            optimizer.step()
    parallel.close()
    return [p.data.copy() for p in model.parameters()], optimizer.state_dict(), norms


@pytest.mark.parametrize("processes", [2, 3])
def test_the_split_optimizer_step_is_exactly_the_plain_one(processes):
    split_weights, split_state, split_norms = trained(processes, split_step=True)
    weights, state, norms = trained(processes, split_step=False)
    assert split_norms == norms
    for a, b in zip(split_weights, weights):
        np.testing.assert_array_equal(a, b)
    assert split_state.keys() == state.keys()
    for name in state:   # moments and step counts, whichever process made them
        np.testing.assert_array_equal(split_state[name], state[name])
    assert list(split_state["updates"]) == [3] * len(split_weights)


def test_step_with_one_process_clips_and_steps_here():
    weights, state, norms = trained(1, split_step=True)
    expected_weights, expected_state, expected_norms = trained(1, split_step=False)
    assert norms == expected_norms
    for a, b in zip(weights, expected_weights):
        np.testing.assert_array_equal(a, b)


def test_step_needs_the_optimizer_and_gradients_from_forward_backward():
    model, (x, y) = gpt(), batch()
    with pytest.raises(RuntimeError, match="no optimizer"):
        tgtrain.parallel.DataParallel(model, 2).step()
    other = nn.optim.AdamW(gpt().parameters())
    with pytest.raises(ValueError, match="the model's own parameters"):
        tgtrain.parallel.DataParallel(model, 2, other)
    optimizer = nn.optim.AdamW(model.parameters())
    parallel = tgtrain.parallel.DataParallel(model, 2, optimizer)
    _, loss = model(x, y)
    loss.backward()   # gradients made here, not in the shared buffers the workers read
    with pytest.raises(RuntimeError, match="must come from forward_backward"):
        parallel.step()
    parallel.close()


def test_a_checkpoint_reads_the_shared_optimizer_state(tmp_path):
    model, (x, y) = gpt(), batch()
    optimizer = nn.optim.AdamW(model.parameters(), lr=1e-2)
    parallel = tgtrain.parallel.DataParallel(model, 2, optimizer)
    for _ in range(2):
        optimizer.zero_grad()
        parallel.forward_backward(x, y)
        parallel.step()
    nn.save(tmp_path / "ckpt.npz", model, optimizer)
    parallel.close()
    fresh_model = gpt(seed=5)
    fresh_optimizer = nn.optim.AdamW(fresh_model.parameters(), lr=1e-2)
    state, _ = nn.load(tmp_path / "ckpt.npz", fresh_optimizer)
    fresh_model.load_state_dict(state)
    for a, b in zip(fresh_model.parameters(), model.parameters()):
        np.testing.assert_array_equal(a.data, b.data)
    for name, array in optimizer.state_dict().items():
        np.testing.assert_array_equal(fresh_optimizer.state_dict()[name], array)


TRAINER = """
import sys
import numpy as np
import nn
import tgtrain
nn.manual_seed(0)
model = nn.GPT(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=16)
parallel = tgtrain.parallel.DataParallel(model, 3)
print(*[process.pid for _, process in parallel.workers], flush=True)
x = np.zeros((6, 8), dtype=np.int64)
while True:   # train until killed
    parallel.forward_backward(x, x)
"""


def alive(pid):
    """Whether the process pid still runs (a zombie, dead but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to see the workers")
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_no_worker_outlives_a_trainer_killed_at_any_moment(how):
    for delay in (0.0, 0.3):   # waiting for work, and in the middle of a step
        trainer = subprocess.Popen([sys.executable, "-c", TRAINER], stdout=subprocess.PIPE, text=True)
        workers = [int(pid) for pid in trainer.stdout.readline().split()]
        assert len(workers) == 2 and all(alive(pid) for pid in workers)
        time.sleep(delay)
        os.kill(trainer.pid, how)   # the trainer alone, not its process group
        trainer.wait()
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(pid) for pid in workers), f"workers {workers} outlived their trainer ({how.name})"


@pytest.mark.parametrize("make", [
    lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
    lambda ps: optim.AdamW(ps, lr=0.01, weight_decay=0.1),
], ids=["sgd", "adamw"])
def test_shared_state_updated_group_by_group_trains_as_the_plain_step(make):
    """share_optimizer_state moves every state array into shared memory, values kept; then
    step_group over groups that cover the parameters is one plain step(), each gradient
    put back afterwards."""
    grads = grad_stream(4)
    split_params, params = params64(), params64()
    split, plain = make(split_params), make(params)
    run(split, split_params, grads[:2])
    run(plain, params, grads[:2])
    before = {name: array.copy() for name, array in split.state_arrays().items()}
    tgtrain.parallel.share_optimizer_state(split)
    for name, array in split.state_arrays().items():
        np.testing.assert_array_equal(array, before[name])
        assert array.base is not None and not array.flags.owndata   # a view of the shared block
    groups = tgtrain.parallel.balanced_groups([p.size for p in split_params], 3)
    for grad in grads[2:]:
        for p, q, g in zip(split_params, params, grad):
            p.grad, q.grad = g.copy(), g.copy()
        given = [p.grad for p in split_params]
        for group in groups:
            tgtrain.parallel.step_group(split, group)
        assert all(p.grad is g for p, g in zip(split_params, given))
        plain.step()
    for a, b in zip(split_params, params):
        np.testing.assert_array_equal(a.data, b.data)
    assert list(split.updates) == [4] * len(SHAPES)


# ---- tgtrain.workers: the supervision DataParallel runs on, and a grader can ----------------------------
def _square_server(connection):
    tgtrain.workers.serve(connection, lambda message: message ** 2)


def _start_a_sleeper(connection):
    """Start a process (in this worker's group) that sleeps, say the pids, then wait to be ended."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    connection.send((os.getpid(), os.getpgrp(), child.pid))
    connection.recv()


def gone_within(pid, seconds=10):
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def test_a_worker_answers_from_a_process_group_of_its_own_and_stops_when_asked():
    worker = tgtrain.workers.Worker.start(_square_server)
    try:
        worker.send(7)
        assert worker.connection.poll(30) and worker.receive() == 49
        assert os.getpgid(worker.pid) == worker.pid != os.getpgrp()   # a group of its own: Ctrl-C reaches us alone
    finally:
        worker.stop()
    assert worker.process.exitcode == 0 and worker.connection.closed   # it read None and returned


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to see the processes")
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_killing_a_worker_ends_what_it_started_and_says_how_it_died(method):
    worker = tgtrain.workers.Worker.start(_start_a_sleeper, method=method)
    try:
        assert worker.connection.poll(60)
        pid, group, child = worker.connection.recv()
        assert pid == group == worker.pid
    finally:
        worker.kill()
    assert gone_within(child), "the worker's own child outlived it"
    assert str(worker.died()) == f"worker process {worker.pid} died (killed by signal 9 (SIGKILL))"
    worker.kill()   # a second kill does nothing (the pid may be another process's by now)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to see the processes")
def test_a_worker_leaves_ctrl_c_to_its_parent_and_sigterm_ends_its_group():
    worker = tgtrain.workers.Worker.start(_start_a_sleeper)
    try:
        assert worker.connection.poll(30)
        _, _, child = worker.connection.recv()
        os.kill(worker.pid, signal.SIGINT)
        time.sleep(0.3)
        assert alive(worker.pid)
        os.kill(worker.pid, signal.SIGTERM)
        assert gone_within(worker.pid) and gone_within(child)
    finally:
        worker.kill()
