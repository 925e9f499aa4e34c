"""demos/train_chargpt.py against what a hostile or careless user does: every file and flag is
input, a checksum proves nothing, nothing hangs. One section per promise:

1. every output of a run is claimed with its checkpoint: two runs whose --out share a stem
   (run.safetensors, run.pt) never write one log;
2. a checkpoint's run state is input: each field, rewritten with the checksum computed anew,
   is checked as the flag it stands for before --resume uses it;
3. the exit-3 message names a file that is truly finite, and no state with a nan is written (a
   checkpoint with a nan weight is refused: tests/test_faults.py);
5. flags are bounded by the machine: the memory one step needs (estimated, and the estimate
   measured), the cores, --min_lr at most --lr;
6. the corpus is a regular file of a sane size: a device, a FIFO, a socket, a sparse file of
   many GiB are refused at once, and the next run on that --out works;
8. a worker that stops answering (SIGSTOP) is noticed, named and killed, and SIGTERM or
   Ctrl-C end the job and all its workers within seconds even then.
Each refusal is one line, exit status 1 (2 for a flag), the checkpoint untouched, no lock left.
"""
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import pytest
import safetensors
import safetensors.numpy

import nn
import tgtrain
from test_faults import children, files, good, job, leftovers, start, trained, wait_for  # noqa: F401 (fixtures)
from test_parallel import alive, batch, gpt
from test_train_chargpt import TINY, corpus, environment, run  # noqa: F401 (corpus: a fixture)

LINUX = sys.platform.startswith("linux")
needs_proc = pytest.mark.skipif(not LINUX, reason="reads /proc to find the worker processes")


def one_line_error(result):
    """The job's error: one line on stderr, no traceback."""
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("train_chargpt.py: error: "), result.stderr
    return result.stderr


def rewrite_metadata(path, edit):
    """What anyone can do to a checkpoint (nn/checkpoint.py's layout): read its metadata JSON,
    edit it (edit(meta) returns the new one), and write it back with its checksum computed
    anew over the new JSON and the arrays, so the file passes the crc32 check."""
    arrays = safetensors.numpy.load_file(path)
    with safetensors.safe_open(path, "np") as file:
        header = json.loads(file.metadata()[nn.checkpoint.HEADER])
    header["meta"] = edit(header["meta"])
    text = json.dumps(header)
    safetensors.numpy.save_file(arrays, path, metadata={nn.checkpoint.HEADER: text,
                                                        nn.checkpoint.CRC: nn.checkpoint._crc32(text, arrays)})
    return path


def edit(**changes):
    """An edit of the metadata: each change a function of the old value, or the new value."""
    def apply(meta):
        for key, change in changes.items():
            if key.startswith("config_"):
                meta["config"][key[len("config_"):]] = change
            else:
                meta[key] = change(meta[key]) if callable(change) else change
        return meta
    return apply


# ---- 1. every output claimed with its checkpoint -----------------------------------------------
@needs_proc
def test_two_runs_whose_out_share_a_stem_never_write_one_log(corpus, tmp_path):
    """run.safetensors and run.pt both name their loss log run.csv: the second run is refused,
    naming that file and the first run's pid, even with --overwrite; the first run's log holds
    its own rows only, and no lock is left."""
    first = start("--data", corpus, *TINY, "--max_iters", 10**6, "--eval_interval", 10**5,
                  "--out", tmp_path / "run.safetensors")
    try:
        assert wait_for(first, r"step 0:")
        second = job("--data", corpus, *TINY, "--max_iters", 5, "--eval_interval", 1, "--out", tmp_path / "run.pt",
                     "--overwrite")
        first.send_signal(signal.SIGINT)
        stdout, _ = first.communicate(timeout=60)
    finally:
        first.kill()
    assert second.returncode == 1
    log = tmp_path / "run.csv"
    assert (f"--out {tmp_path / 'run.pt'}: its loss log {log} is busy: {log}.lock is held by process {first.pid}, "
            "another run writing the same outputs; wait for that run to end, or choose another --out"
            in one_line_error(second))
    assert first.returncode == 130 and "interrupted at step" in stdout
    rows = log.read_text().splitlines()
    assert rows == ["step,train_loss,val_loss,lr", rows[1]] and rows[1].startswith("0,")   # its step 0 alone
    assert not (tmp_path / "run.pt").exists() and leftovers(tmp_path) == []


def test_each_output_has_a_lock_of_its_own_while_a_run_holds_them(corpus, tmp_path):
    out = tmp_path / "run.safetensors"
    config, _ = tgtrain.flags.parse_config(["--data", str(corpus), "--out", str(out)])
    with tgtrain.start.claim_outputs(config):
        assert sorted(name for name in os.listdir(tmp_path) if name.endswith(".lock")) == [
            "run.csv.lock", "run.health.csv.lock", "run.health.png.lock", "run.png.lock", "run.safetensors.lock"]
        other, _ = tgtrain.flags.parse_config(["--data", str(corpus), "--out", str(tmp_path / "run.health.safetensors")])
        with pytest.raises(tgtrain.stops.JobError, match=rf"its loss log {re.escape(str(tmp_path))}/run.health.csv is busy"):
            with tgtrain.start.claim_outputs(other):   # its loss log is the first run's health log
                pass
        assert not (tmp_path / "run.health.safetensors.lock").exists()   # the locks it took are let go
    assert leftovers(tmp_path) == []


# ---- 2. a checkpoint's run state is input -----------------------------------------------------
BAD_RUN_STATE = {   # name: (edit, the field and what the message says it must be)
    "eval_interval-0": (edit(config_eval_interval=0), "config.eval_interval must be a whole number >= 1, got 0"),
    "batch_size-0": (edit(config_batch_size=0), "config.batch_size must be a whole number >= 1, got 0"),
    "lr-negative": (edit(config_lr=-1), "config.lr must be a finite number > 0, got -1"),
    "lr-text": (edit(config_lr="abc"), "config.lr must be a finite number > 0, got 'abc'"),
    "lr-beyond-float": (edit(config_lr=10**400), "config.lr must be a finite number > 0, got 1000"),
    "seed-negative": (edit(config_seed=-1), "config.seed must be a whole number from 0 to 2**32 - 1"),
    "processes-true": (edit(config_processes=True), "config.processes must be a whole number >= 1, got True"),
    "tie_weights-text": (edit(config_tie_weights="yes"), "config.tie_weights must be true or false, got 'yes'"),
    "data-a-number": (edit(config_data=3), "config.data must be text, got 3"),
    "config-a-list": (edit(config=lambda config: list(config)), "config must be an object of the job's settings"),
    "step-text": (edit(step="5"), "step must be a whole number >= 0, got '5'"),
    "step-negative": (edit(step=-5), "step must be a whole number >= 0, got -5"),
    "step-a-fraction": (edit(step=2.5), "step must be a whole number >= 0, got 2.5"),
    "step-true": (edit(step=True), "step must be a whole number >= 0, got True"),
    "history-not-rows": (edit(history="abc"), "history must be rows [step, train loss, val loss, learning rate]"),
    "history-row-short": (edit(history=lambda rows: [row[:3] for row in rows]), "history must be rows"),
    "history-step-text": (edit(history=lambda rows: [[str(row[0]), *row[1:]] for row in rows]), "history must be"),
    "history-nan": (edit(history=lambda rows: [[row[0], math.nan, *row[2:]] for row in rows]), "history must be"),
    "history-after-step": (edit(history=lambda rows: rows + [[99, 1.0, 1.0, 1e-3]]),
                           "history must be rows [step, train loss, val loss, learning rate] of finite numbers, their "
                           "steps rising from 0 to at most the step, 20, got"),
    "history-unordered": (edit(history=lambda rows: rows[::-1]), "history must be"),
    "best_val_loss-text": (edit(best_val_loss="x"), "best_val_loss must be null or a finite number, got 'x'"),
    "best_val_loss-inf": (edit(best_val_loss=math.inf), "best_val_loss must be null or a finite number, got inf"),
    "rng-empty": (edit(rng={}), "rng must be the state of numpy's PCG64 generator"),
    "rng-state-negative": (edit(rng=lambda s: {**s, "state": {**s["state"], "state": -1}}), "rng must be the state"),
    "batch_rng-another-generator": (edit(batch_rng={"bit_generator": "MT19937", "state": {"key": [0] * 624,
                                                                                           "pos": 624}}),
                                    "batch_rng must be the state of numpy's PCG64 generator"),
    "batch_rng-uinteger-huge": (edit(batch_rng=lambda s: {**s, "uinteger": 2**40}), "batch_rng must be the state"),
}


@pytest.mark.parametrize("name", BAD_RUN_STATE)
def test_a_run_state_rewritten_with_its_checksum_is_refused_naming_the_field(good, name):
    """As the job reads it (load_checkpoint, then resumed_config), in this process: fast."""
    change, message = BAD_RUN_STATE[name]
    rewrite_metadata(good, change)
    before = files(good.parent)
    config, given = tgtrain.flags.parse_config(["--resume", "--out", str(good)])
    checkpoint = tgtrain.start.load_checkpoint(config.out)
    with pytest.raises(nn.CheckpointError) as refused:
        tgtrain.resume.resumed_config(config, given, checkpoint)
    assert f"{good}: cannot resume from it: its metadata's {message}" in str(refused.value)
    assert "\n" not in str(refused.value) and files(good.parent) == before


@pytest.mark.parametrize("name", ["step-text", "config-a-list", "rng-empty"])
def test_the_job_answers_a_rewritten_run_state_in_one_line_and_keeps_the_file(good, name):
    change, message = BAD_RUN_STATE[name]
    rewrite_metadata(good, change)
    before = files(good.parent)
    result = job("--resume", "--out", good, "--max_iters", 25)
    assert result.returncode == 1
    assert f"{good}: cannot resume from it: its metadata's {message}" in one_line_error(result)
    assert files(good.parent) == before and leftovers(good.parent) == []


def test_the_rewriting_helper_makes_a_checkpoint_that_resumes(good):
    rewrite_metadata(good, lambda meta: meta)   # nothing changed, the checksum computed anew: it still resumes
    run("train_chargpt.py", "--resume", "--out", good, "--max_iters", 22)
    assert nn.load(good)[1]["step"] == 22


def test_metadata_that_is_a_list_is_refused_naming_the_file(good):
    rewrite_metadata(good, lambda meta: list(meta.items()))
    before = good.read_bytes()
    result = job("--resume", "--out", good)
    assert result.returncode == 1 and f"{good}: its metadata is a JSON list" in one_line_error(result)
    assert good.read_bytes() == before and leftovers(good.parent) == []


def test_processes_10000_from_a_checkpoint_runs_on_the_cores_there_are(good):
    rewrite_metadata(good, edit(config_processes=10000))
    result = run("train_chargpt.py", "--resume", "--out", good, "--max_iters", 22)
    cores = tgtrain.flags.cores()
    assert f"--processes 10000 is more than the {cores} core(s) this job may use: running {cores} processes" \
           in result.stdout
    assert re.search(rf"peak memory \d+ MiB \({cores} process\(es\) added up\)", result.stdout)


def test_a_min_lr_above_lr_after_the_merge_is_a_usage_error_and_the_file_stays(good):
    before = files(good.parent)
    result = job("--resume", "--out", good, "--min_lr", 0.01)   # the checkpoint's lr is 1e-3
    assert result.returncode == 2
    assert "--resume: --min_lr 0.01 is above --lr 0.001" in one_line_error(result)
    rewrite_metadata(good, edit(config_min_lr=5.0))   # or the checkpoint's own settings
    before = files(good.parent)
    result = job("--resume", "--out", good)
    assert result.returncode == 2 and "--min_lr 5.0 is above --lr 0.001" in one_line_error(result)
    assert files(good.parent) == before


def test_a_setting_is_held_to_its_flags_check():
    assert tgtrain.flags.setting("lr", 1) == 1.0 and type(tgtrain.flags.setting("lr", 1)) is float
    assert tgtrain.flags.setting("tie_weights", True) is True and tgtrain.flags.setting("data", "x.txt") == "x.txt"
    for name, value in [("lr", math.nan), ("lr", "0.1"), ("lr", True), ("batch_size", 2.0), ("dropout", 1.0),
                        ("seed", 2**32), ("max_iters", -1), ("resume", 1), ("out", None)]:
        with pytest.raises(ValueError):
            tgtrain.flags.setting(name, value)


# ---- 3. the exit-3 message names a file that is truly finite ----------------------------------
def test_the_checkpoint_a_divergence_names_is_finite_and_holds_that_step(good):
    result = job("--resume", "--out", good, "--lr", 1e3, "--max_iters", 60, "--grad_clip", 0)
    assert result.returncode == 3 and "Traceback" not in result.stderr
    named = re.search(r"; (\S+) keeps step (\d+), the last finite checkpoint \(its weights and optimizer state "
                      r"checked finite\)\. Lower --lr \(or clip the gradients: --grad_clip 1\) and continue with "
                      r"--resume$", result.stderr, re.M)
    assert named, result.stderr
    arrays, meta = nn.load(named.group(1))   # (nn.load refuses a non-finite array, too)
    assert meta["step"] == int(named.group(2)) >= 20
    assert all(np.isfinite(array).all() for array in safetensors.numpy.load_file(named.group(1)).values()
               if array.dtype.kind == "f")


def test_a_state_with_a_nan_is_never_written(corpus, tmp_path):
    """A weight no batch reaches can be nan while the loss is finite: save() refuses to write
    it (NonFinite), and the file keeps the last finite step, as the message says."""
    config = tgtrain.flags.Config(data=str(corpus), out=str(tmp_path / "run.safetensors"), n_layer=1, n_head=2,
                                n_embd=16, block_size=8)
    text, _ = nn.data.load_corpus(config.data)
    corpus_data = nn.data.prepare(text, config.block_size)
    nn.manual_seed(0)
    model = nn.GPT(corpus_data.tokenizer.vocab_size, 8, 1, 2, 16)
    optimizer = nn.optim.AdamW(model.parameters())
    state = tgtrain.run.Run(config, corpus_data, model, optimizer)
    state.save()
    before = state.out.read_bytes()
    state.stepped()
    optimizer.m[3][...] = np.inf
    with pytest.raises(tgtrain.stops.NonFinite, match=rf"step 1: optimizer/\S+ holds a nan or an inf .*: not written; "
                                                  rf"{re.escape(str(state.out))} keeps step 0, the last finite"):
        state.save()
    assert state.out.read_bytes() == before


# ---- 5. flags bounded by the machine ----------------------------------------------------------
def test_a_batch_that_cannot_fit_is_refused_at_once_with_both_figures_in_gib(corpus, tmp_path):
    started = time.monotonic()
    result = job("--data", corpus, *TINY, "--batch_size", 99999999999, "--out", tmp_path / "out" / "run.safetensors")
    assert result.returncode == 2 and time.monotonic() - started < 60
    assert re.search(r"one training step needs about [\d,]+\.\d GiB \(.*for the activations of --batch_size "
                     r"99999999999 x --block_size 8\), but this machine has [\d,]+\.\d GiB of memory available",
                     one_line_error(result))
    assert [path for path in (tmp_path / "out").rglob("*")] == []   # nothing written, no lock left


def test_a_model_that_cannot_fit_is_refused_before_it_is_built(corpus, tmp_path):
    result = job("--data", corpus, *TINY, "--n_layer", 64, "--n_embd", 65536, "--n_head", 1,
                 "--out", tmp_path / "run.safetensors")
    assert result.returncode == 2
    assert re.search(r"\(([\d,]+)\.\d GiB for the weights, AdamW's state and the gradients", one_line_error(result))


@pytest.mark.parametrize("shape", [dict(n_layer=2, n_head=4, n_embd=64, block_size=64, batch_size=12),
                                   dict(n_layer=1, n_head=8, n_embd=32, block_size=256, batch_size=4),
                                   dict(n_layer=3, n_head=2, n_embd=96, block_size=32, batch_size=16)])
def test_the_memory_estimate_is_within_a_factor_of_a_measured_step(shape):
    """tracemalloc's peak (numpy reports its arrays to it) of making the model and AdamW and
    taking steps, against tgtrain.memory.step_bytes."""
    B = shape.pop("batch_size")
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 65, (B, shape["block_size"])), rng.integers(0, 65, (B, shape["block_size"]))
    tracemalloc.start()
    try:
        nn.manual_seed(0)
        model = nn.GPT(65, **shape)
        optimizer = nn.optim.AdamW(model.parameters())
        for _ in range(2):
            optimizer.zero_grad()
            model(x, y)[1].backward()
            nn.optim.clip_grad_norm(model.parameters(), 1.0)
            optimizer.step()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    need = tgtrain.memory.step_bytes(model.config, B)
    assert 1 / 1.5 < (need["parameters"] + need["activations"]) / peak < 1.5, (need, peak)


SAVE = """
import sys
import numpy as np
import nn, tgtrain
nn.manual_seed(0)
model = nn.GPT(65, 64, 4, 4, 256)
optimizer = nn.optim.AdamW(model.parameters())
for p in model.parameters():
    p.grad = np.zeros_like(p.data)
def resident(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith(field))
with open("/proc/self/clear_refs", "w") as clear:
    clear.write("5")   # the peak (VmHWM) starts again from what is resident now
before = resident("VmRSS")
weights = [p.data.copy() for p in model.parameters()]   # as the gradient health's snapshot
nn.save(sys.argv[1], model, optimizer, step=0)
print(tgtrain.memory.step_bytes(model.config, 1)["checkpoint"] / (resident("VmHWM") - before))
"""


@pytest.mark.skipif(not LINUX, reason="Linux's peak resident memory, reset through /proc/self/clear_refs")
def test_the_checkpoint_estimate_is_within_a_factor_of_what_a_save_takes(tmp_path):
    """Peak resident memory, in a fresh process: safetensors' buffers are not numpy's, so
    tracemalloc does not see them."""
    done = subprocess.run([sys.executable, "-c", SAVE, str(tmp_path / "x.safetensors")], capture_output=True,
                          text=True, check=True, env=environment())
    assert 1 / 1.5 < float(done.stdout) < 1.5, done.stdout


@pytest.mark.parametrize("config", [dict(vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128),
                                    dict(vocab_size=29, block_size=8, n_layer=1, n_head=2, n_embd=16, tie_weights=True),
                                    dict(vocab_size=7, block_size=5, n_layer=3, n_head=1, n_embd=8, pos="sinusoidal")])
def test_the_parameters_are_counted_from_the_shape_alone(config):
    assert tgtrain.memory.gpt_parameters(**config) == nn.GPT(**config).num_parameters()


@pytest.mark.skipif(not LINUX, reason="/proc/meminfo")
def test_the_memory_available_is_linuxs_own_figure():
    with open("/proc/meminfo") as meminfo:
        total = next(int(line.split()[1]) * 1024 for line in meminfo if line.startswith("MemTotal:"))
    assert 0 < tgtrain.memory.available_bytes() <= total


def test_processes_above_the_cores_are_capped_with_a_line(corpus, tmp_path):
    result = run("train_chargpt.py", "--data", corpus, *TINY, "--max_iters", 2, "--eval_interval", 1,
                 "--processes", 10000, "--out", tmp_path / "run.safetensors")
    cores = tgtrain.flags.cores()
    assert f"--processes 10000 is more than the {cores} core(s) this job may use: running {cores} processes\n" \
           in result.stdout
    assert f"({cores} process(es) added up)" in result.stdout


def test_a_min_lr_above_lr_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as stop:
        tgtrain.flags.parse_config(["--lr", "0.001", "--min_lr", "0.01"])
    assert stop.value.code == 2
    assert "--min_lr 0.01 is above --lr 0.001: the cosine decay would raise the learning rate" in capsys.readouterr().err
    tgtrain.flags.parse_config(["--lr", "0.001", "--min_lr", "0.001"])   # equal: a constant rate after warmup


# ---- 6. the corpus is a regular file of a sane size -------------------------------------------
def fifo(folder):
    path = folder / "pipe.txt"
    os.mkfifo(path)
    return path


def unix_socket(folder):
    path = folder / "s.txt"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))   # the socket file stays after the socket object goes
    listener.close()
    return path


NOT_FILES = {"/dev/zero": (lambda folder: "/dev/zero", "is a character device"),
             "/dev/urandom": (lambda folder: "/dev/urandom", "is a character device"),
             "fifo": (fifo, "is a FIFO (a named pipe)"),
             "socket": (unix_socket, "is a socket")}


@pytest.mark.skipif(not LINUX, reason="devices, FIFOs and sockets of a POSIX system")
@pytest.mark.parametrize("name", NOT_FILES)
def test_a_corpus_that_is_not_a_regular_file_is_refused_at_once_and_leaves_no_lock(tmp_path, name):
    make, message = NOT_FILES[name]
    path, out = make(tmp_path), tmp_path / "run.safetensors"
    started = time.monotonic()
    result = job("--data", path, *TINY, "--out", out)   # job's timeout: a FIFO that blocked would fail it
    assert result.returncode == 1 and time.monotonic() - started < 60
    assert f"{path}: {message}, not a regular file" in one_line_error(result)
    assert leftovers(tmp_path) == [] and not out.exists()


@pytest.mark.skipif(not LINUX, reason="a FIFO")
def test_after_a_refused_corpus_the_next_run_on_that_out_works(corpus, tmp_path):
    out = tmp_path / "run.safetensors"
    assert job("--data", fifo(tmp_path), *TINY, "--out", out).returncode == 1
    run("train_chargpt.py", "--data", corpus, *TINY, "--max_iters", 2, "--eval_interval", 1, "--out", out)
    assert nn.load(out)[1]["step"] == 2 and leftovers(tmp_path) == []


def test_a_sparse_corpus_of_many_gib_is_refused_before_it_is_read(tmp_path):
    limit = tgtrain.memory.corpus_limit()
    if limit is None:
        pytest.skip("the memory available is unknown here: no bound")
    path, out = tmp_path / "huge.txt", tmp_path / "run.safetensors"
    with open(path, "wb") as file:
        file.truncate(2 * limit + 8 * 2**30)   # holes: no disk taken, and reading it would take all the memory
    started = time.monotonic()
    result = job("--data", path, *TINY, "--out", out)
    assert result.returncode == 1 and time.monotonic() - started < 60
    assert re.search(rf"{re.escape(str(path))}: [\d,]+ bytes, more than the [\d,]+ a corpus may have here",
                     one_line_error(result))
    assert leftovers(tmp_path) == [] and not out.exists()


# ---- 8. workers never hang the job ------------------------------------------------------------
def kill_if_running(pids):
    """The stopped workers a failed test would leave: SIGKILL ends a stopped process too."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@needs_proc
def test_a_stopped_worker_is_noticed_named_and_killed_and_the_next_call_works():
    model, (x, y) = gpt(), batch()
    parallel = tgtrain.parallel.DataParallel(model, 2, reply_timeout=1.0)
    parallel.forward_backward(x, y)
    _, process = parallel.workers[0]
    os.kill(process.pid, signal.SIGSTOP)
    started = time.monotonic()
    try:
        with pytest.raises(tgtrain.WorkerDied, match=rf"worker process {process.pid} stopped answering \(no answer in "
                                                   r"\d+ s; it was stopped \(SIGSTOP"):
            parallel.forward_backward(x, y)
    finally:
        kill_if_running([process.pid])
    assert time.monotonic() - started < 10 and not alive(process.pid)
    model.zero_grad()
    assert parallel.forward_backward(x, y) > 0 and parallel.workers[0][1].pid != process.pid
    parallel.close()


@needs_proc
def test_a_stop_cuts_the_wait_for_a_stopped_worker_short():
    stopping = []
    model, (x, y) = gpt(), batch()
    parallel = tgtrain.parallel.DataParallel(model, 2, reply_timeout=600, stopping=lambda: bool(stopping))
    _, process = parallel.workers[0]
    os.kill(process.pid, signal.SIGSTOP)
    stopping.append(True)   # as Interrupt does on Ctrl-C
    started = time.monotonic()
    try:
        with pytest.raises(tgtrain.WorkerDied, match="stopped answering"):
            parallel.loss(x, y)
    finally:
        kill_if_running([process.pid])
    assert time.monotonic() - started < 10
    parallel.close()


def test_the_reply_timeout_must_be_a_positive_number_of_seconds():
    for timeout in (0, -1, math.nan, math.inf):
        with pytest.raises(ValueError, match="reply_timeout must be a finite number of seconds > 0"):
            tgtrain.parallel.DataParallel(gpt(), 2, reply_timeout=timeout)


STOPPED_TRAINER = """
import numpy as np
import nn
import tgtrain
nn.manual_seed(0)
parallel = tgtrain.parallel.DataParallel(nn.GPT(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=16), 2)
x = np.zeros((6, 8), dtype=np.int64)
parallel.forward_backward(x, x)   # the worker has answered: it is in its loop
print(*[process.pid for _, process in parallel.workers], flush=True)
while True:   # train until killed
    parallel.forward_backward(x, x)
"""


@needs_proc
def test_a_stopped_worker_never_outlives_its_trainer_killed_with_sigkill():
    trainer = subprocess.Popen([sys.executable, "-c", STOPPED_TRAINER], stdout=subprocess.PIPE, text=True)
    (worker,) = [int(pid) for pid in trainer.stdout.readline().split()]
    try:
        os.kill(worker, signal.SIGSTOP)   # it cannot read the end of its pipe: the kernel must end it
        trainer.kill()
        trainer.wait()
        deadline = time.monotonic() + 10
        while alive(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(worker), "a stopped worker outlived its trainer"
    finally:
        kill_if_running([worker])


@pytest.mark.slow
@needs_proc
def test_a_job_whose_worker_stops_answering_saves_its_last_step_and_exits_1(corpus, tmp_path):
    out = tmp_path / "run.safetensors"
    trainer = start("--data", corpus, *TINY, "--max_iters", 10**6, "--eval_interval", 50, "--processes", 2,
                    "--worker_timeout", 2, "--out", out)
    workers = []
    try:
        assert wait_for(trainer, r"iter 60:")
        workers = children(trainer.pid)
        os.kill(workers[0], signal.SIGSTOP)
        _, stderr = trainer.communicate(timeout=60)
    finally:
        trainer.kill()
        kill_if_running(workers)
    assert trainer.returncode == 1 and "Traceback" not in stderr
    stopped = re.search(rf"^train_chargpt\.py: error: worker process {workers[0]} stopped answering \(no answer in "
                        r"\d+ s; it was stopped \(SIGSTOP, Ctrl-Z or a debugger\)\) and was killed during step (\d+); "
                        rf"saved the state of step \1, the last completed, to {re.escape(str(out))}; continue with "
                        r"--resume$", stderr, re.M)
    assert stopped, stderr
    assert nn.load(out)[1]["step"] == int(stopped.group(1))
    assert not any(alive(pid) for pid in workers) and leftovers(tmp_path) == []
    run("train_chargpt.py", "--resume", "--out", out, "--max_iters", int(stopped.group(1)) + 2)


@needs_proc
@pytest.mark.parametrize("how", [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.slow)],
                         ids=["SIGTERM", "SIGINT"])
def test_a_signal_ends_the_job_and_its_stopped_worker_within_seconds(corpus, tmp_path, how):
    """With the default worker timeout (30 s): the stop does not wait for it."""
    out = tmp_path / "run.safetensors"
    trainer = start("--data", corpus, *TINY, "--max_iters", 10**6, "--eval_interval", 50, "--processes", 2,
                    "--out", out)
    workers = []
    try:
        assert wait_for(trainer, r"iter 60:")
        workers = children(trainer.pid)
        os.kill(workers[0], signal.SIGSTOP)
        time.sleep(0.5)   # the trainer is now waiting for it
        started = time.monotonic()
        trainer.send_signal(how)   # to the trainer alone
        stdout, _ = trainer.communicate(timeout=60)
        took = time.monotonic() - started
    finally:
        trainer.kill()
        kill_if_running(workers)
    assert trainer.returncode == 128 + how and took < 20, (trainer.returncode, took)
    stopped = re.search(rf"^(interrupted|stopped by SIGTERM) at step (\d+): checkpoint written to {re.escape(str(out))}; "
                        rf"continue with --resume \(worker process {workers[0]} stopped answering", stdout, re.M)
    assert stopped, stdout
    assert nn.load(out)[1]["step"] == int(stopped.group(2))
    assert not any(alive(pid) for pid in workers) and leftovers(tmp_path) == []
