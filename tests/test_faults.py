"""Fault injection: demos/train_chargpt.py (and its readers) under the mistakes and accidents
that once lost data, one section per promise:

1. a loss or gradient norm that is nan or inf stops the run (exit 3) and the checkpoint on disk
   stays the last finite one: a learning rate that diverges; a nan put into a weight is refused;
2. the outputs never overwrite the corpus (by name, symlink or hard link) or each other, a new
   run replaces no checkpoint unasked, and two runs never write one --out (a lock naming the pid);
3. no process outlives its trainer: kill -9 at random moments (in training and in saving, again
   and again, each time resumed: the end is bit for bit the unbroken run's); SIGTERM saves and
   exits 143; a worker killed mid-run has the last completed step saved, and a resume matches too;
4. every bad flag of the job, of the sampler and of the demos that take numbers is a usage
   error (exit 2) before anything runs;
5. every file the job writes goes through the atomic writer, and the temporaries a killed run
   left are removed by the next run (only ours, only when their writer is gone);
6. loading checks every size a file declares before taking memory (a compressed-member bomb, a
   lying header, a lying model_config) and the model and the tokenizer against the tensors;
8. off a terminal the log gets one line per --log_interval steps, not a progress bar's redraws.
(7, drawings that escape what they show: tests/test_draw.py and tests/test_explore.py;
9, attention_cost's steady verdict: tests/test_article_demos.py; a hostile user's files and
flags, a checkpoint rewritten with its checksum, stopped workers: tests/test_hostile_runs.py.)

Everything runs on a generated text and a tiny model; the longer kill -9 variants are marked slow.
"""
import importlib
import io
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy

import nn
import tgtrain
from test_parallel import alive
from test_train_chargpt import REPO, TINY, command, corpus, environment, run  # noqa: F401 (corpus: a fixture)

LINUX = sys.platform.startswith("linux")
needs_proc = pytest.mark.skipif(not LINUX, reason="reads /proc to find the worker processes")
def killable(max_iters):
    """A run that evaluates and saves at every step, split across two processes: a kill often
    lands in a save."""
    return [*TINY, "--max_iters", max_iters, "--eval_interval", 1, "--processes", 2]


KILLABLE = killable(60)


def job(*args, env=None, **popen):
    """demos/train_chargpt.py run to its end: the CompletedProcess, whatever its exit status."""
    return subprocess.run(command("train_chargpt.py", *args), capture_output=True, text=True, timeout=300,
                          env={**environment(), **(env or {})}, **popen)


def start(*args):
    """demos/train_chargpt.py started, its stdout a pipe, its stderr collected in a file."""
    return subprocess.Popen(command("train_chargpt.py", *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=environment())


def wait_for(process, pattern):
    """Read the process's stdout until a line matches `pattern` (a regex): the line, or None if
    the process ended first."""
    for line in process.stdout:
        if re.match(pattern, line):
            return line
    return None


def children(pid):
    """The pids of the processes whose parent is `pid` (from /proc)."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):   # it ended meanwhile
            continue
        if fields[1] == str(pid):
            found.append(int(entry))
    return found


def assert_all_gone(pids, within=10):
    deadline = time.monotonic() + within
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in pids), f"processes {[p for p in pids if alive(p)]} outlived their trainer"


def files(folder):
    """{name: bytes} of every file in the folder: what a refused run must leave as it was."""
    return {path.name: path.read_bytes() for path in sorted(Path(folder).iterdir()) if path.is_file()}


def final_state(out):
    """What decides a run's future: every array, and the step, the history and the random states."""
    meta = nn.load(out)[1]
    return (safetensors.numpy.load_file(out),
            {key: meta[key] for key in ("step", "history", "rng", "batch_rng", "best_val_loss", "full_val_loss")})


def assert_same_run(out, expected):
    arrays, meta = final_state(out)
    expected_arrays, expected_meta = expected
    assert sorted(arrays) == sorted(expected_arrays)
    for name, array in expected_arrays.items():
        assert np.array_equal(arrays[name], array), name
    assert meta == expected_meta


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory):
    """A run of 20 steps that evaluated (and saved) at steps 0, 10 and 20: its checkpoint path."""
    out = tmp_path_factory.mktemp("trained") / "good.safetensors"
    run("train_chargpt.py", "--data", corpus, *TINY, "--max_iters", 20, "--eval_interval", 10, "--out", out)
    return out


@pytest.fixture
def good(trained, tmp_path):
    """A copy of the trained checkpoint, and of its logs, of this test's own."""
    for path in trained.parent.iterdir():
        shutil.copy(path, tmp_path / path.name)
    return tmp_path / trained.name


@pytest.fixture(scope="module")
def unbroken(corpus, tmp_path_factory):
    """The final state of a KILLABLE run that nothing interrupted."""
    out = tmp_path_factory.mktemp("unbroken") / "run.safetensors"
    run("train_chargpt.py", "--data", corpus, *KILLABLE, "--out", out)
    return final_state(out)


def leftovers(folder):
    return sorted(name for name in os.listdir(folder) if name.startswith(".tmp-") or name.endswith(".lock"))


# ---- 1. a non-finite loss or gradient stops the run; the checkpoint stays the last finite one ----
@pytest.mark.parametrize("grad_clip", [1.0, 0], ids=["clipping", "clipping-off"])
def test_a_learning_rate_that_diverges_stops_the_run_with_exit_3_and_the_checkpoint_untouched(good, grad_clip):
    """The scenario of the issue: a good step-20 checkpoint, --resume --lr 1e3."""
    before = good.read_bytes()
    result = job("--resume", "--out", good, "--lr", 1e3, "--max_iters", 60, "--grad_clip", grad_clip)
    assert result.returncode == 3, result.stderr
    clip = r" \(or clip the gradients: --grad_clip 1\)" if grad_clip == 0 else ""
    stopped = re.search(r"^train_chargpt\.py: step (\d+): the (loss|gradient norm) is (nan|inf).* \(learning rate "
                        r"(\S+)\): stopped before the update; \S+ keeps step 20, the last finite checkpoint \(its "
                        rf"weights and optimizer state checked finite\)\. Lower --lr{clip} and continue with --resume$",
                        result.stderr, re.M)
    assert stopped, result.stderr
    assert 20 < int(stopped.group(1)) < 60 and float(stopped.group(4)) > 1
    assert good.read_bytes() == before and leftovers(good.parent) == []
    # and the run goes on from it with the learning rate it had
    run("train_chargpt.py", "--resume", "--out", good, "--max_iters", 30)
    assert nn.load(good)[1]["step"] == 30


def test_a_nan_put_into_a_weight_is_refused_before_any_step(good):
    """With its checksum computed anew over the nan (nn.save): refused when read, by name."""
    model, _, meta = nn.checkpoint.load_gpt(good)
    optimizer = nn.optim.AdamW(model.parameters())
    nn.load(good, optimizer)
    model.h[0].attn.qkv.weight.data[0, 0] = np.nan
    nn.save(good, model, optimizer, **meta)
    before = good.read_bytes()
    result = job("--resume", "--out", good, "--max_iters", 30)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{good}: tensor 'h.0.attn.qkv.weight'" in result.stderr and "nan" in result.stderr
    assert good.read_bytes() == before


def test_generate_refuses_a_temperature_that_is_not_finite():
    nn.manual_seed(0)
    model = nn.GPT(5, 4, 1, 1, 4)
    for temperature in (float("nan"), float("inf"), -1.0):
        with pytest.raises(ValueError, match="temperature must be a finite number >= 0"):
            model.generate(np.zeros((1, 1), np.int64), 3, temperature=temperature)


# ---- 2. outputs never overwrite inputs or each other; one run per --out ------------------------
def corpus_copy(corpus, folder, name):
    path = folder / name
    shutil.copy(corpus, path)
    return path


CLASHES = {   # name: (setup(folder, corpus) -> the job's arguments, what the refusal says)
    "loss-log-is-the-corpus": (lambda f, c: ["--data", corpus_copy(c, f, "c.csv"), "--out", f / "c.npz"],
                               "the loss log {f}/c.csv would overwrite the corpus {f}/c.csv"),
    "checkpoint-is-the-corpus": (lambda f, c: ["--data", corpus_copy(c, f, "c.txt"), "--out", f / "c.txt"],
                                 "the checkpoint {f}/c.txt would overwrite the corpus"),
    "health-log-is-the-corpus": (lambda f, c: ["--data", corpus_copy(c, f, "x.health.csv"), "--out",
                                               f / "x.safetensors"], "the gradient health log {f}/x.health.csv"),
    "plot-is-the-corpus": (lambda f, c: ["--data", corpus_copy(c, f, "x.png"), "--out", f / "x.npz"],
                           "the loss plot {f}/x.png would overwrite the corpus"),
    "symlink-to-the-corpus": (lambda f, c: ["--data", corpus_copy(c, f, "c.txt"), "--out",
                                            symlink(f / "link.safetensors", f / "c.txt")],
                              "the checkpoint {f}/link.safetensors would overwrite the corpus {f}/c.txt"),
    "hard-link-to-the-corpus": (lambda f, c: ["--data", corpus_copy(c, f, "c.txt"), "--out",
                                              hard_link(f / "hard.safetensors", f / "c.txt")],
                                "the checkpoint {f}/hard.safetensors would overwrite the corpus"),
    "log-symlinked-to-the-corpus": (lambda f, c: ["--data", corpus_copy(c, f, "c.txt"), "--out",
                                                  symlink(f / "lk.csv", f / "c.txt").with_suffix(".safetensors")],
                                    "the loss log {f}/lk.csv would overwrite the corpus"),
    "through-a-symlinked-folder": (lambda f, c: ["--data", corpus_copy(c, f, "c.txt"), "--out",
                                                 symlink(f / "alias", f) / "c.txt"],
                                   "the checkpoint {f}/alias/c.txt would overwrite the corpus"),
}


def symlink(link, target):
    link.symlink_to(target)
    return link


def hard_link(link, target):
    os.link(target, link)
    return link


@pytest.mark.parametrize("name", CLASHES)
def test_an_output_that_is_the_corpus_under_any_name_is_refused_before_anything_is_written(corpus, tmp_path, name):
    setup, message = CLASHES[name]
    args = setup(tmp_path, corpus)
    before = files(tmp_path)
    result = job(*args, *TINY)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert message.format(f=tmp_path) in result.stderr and "choose another --out" in result.stderr
    assert files(tmp_path) == before


def test_a_resumed_run_reading_one_of_its_own_outputs_as_the_corpus_is_refused(good):
    log = good.with_suffix(".csv")
    before = files(good.parent)
    result = job("--resume", "--out", good, "--data", log)
    assert result.returncode == 2 and f"the loss log {log} would overwrite the corpus {log}" in result.stderr
    assert files(good.parent) == before


def test_the_cached_shakespeare_is_an_input_too(tmp_path):
    """--data shakespeare reads the cached copy: --out may not be it (checked before any download)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    cached = cache / nn.data.SHAKESPEARE.filename
    cached.write_text("stands for the cached corpus")
    result = job("--out", cached, env={"TENSORGRAD_CACHE": str(cache)})
    assert result.returncode == 2 and f"would overwrite the corpus {cached}" in result.stderr
    assert cached.read_text() == "stands for the cached corpus"


def test_a_new_run_never_replaces_a_checkpoint_or_a_log_unasked(corpus, good):
    folder = good.parent
    before = files(folder)
    result = job("--data", corpus, *TINY, "--out", good)
    assert result.returncode == 2
    assert (f"{good} already holds a checkpoint: pass --resume to continue it, or --overwrite to start over and "
            "replace it and its logs") in result.stderr
    mine = folder / "report.csv"   # a file of the user's that a run named report.* would write over
    mine.write_text("my numbers")
    result = job("--data", corpus, *TINY, "--out", folder / "report.safetensors")
    assert result.returncode == 2 and f"{mine} already exist(s) and a new run would replace them" in result.stderr
    assert files(folder) == {**before, "report.csv": b"my numbers"}
    run("train_chargpt.py", "--data", corpus, *TINY, "--max_iters", 3, "--eval_interval", 3, "--out", good,
        "--overwrite")
    meta = nn.load(good)[1]
    assert meta["step"] == 3 and [row[0] for row in meta["history"]] == [0, 3]   # a new run, from step 0


def test_a_busy_out_is_refused_naming_the_pid_that_holds_it(corpus, tmp_path):
    out = tmp_path / "busy.safetensors"
    with tgtrain.outputs.RunLock(f"{out}.lock"):
        result = job("--data", corpus, *TINY, "--out", out)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert (f"--out {out} is busy: {out}.lock is held by process {os.getpid()}, another run writing the same "
            "outputs; wait for that run to end, or choose another --out") in result.stderr
    assert sorted(os.listdir(tmp_path)) == []   # nothing written, and the lock gone with its holder


def test_a_lock_left_by_a_killed_run_is_taken_over(corpus, tmp_path):
    out = tmp_path / "stale.safetensors"
    holder = subprocess.Popen([sys.executable, "-c", f"import tgtrain, time; lock = tgtrain.outputs.RunLock({str(out)!r} + "
                                                     "'.lock'); print('locked', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True, env=environment())
    assert holder.stdout.readline() == "locked\n"
    holder.kill()
    holder.wait()
    assert Path(f"{out}.lock").read_text() == f"{holder.pid}\n"   # the file stays; the lock went with its process
    run("train_chargpt.py", "--data", corpus, *TINY, "--max_iters", 2, "--eval_interval", 1, "--out", out)
    assert nn.load(out)[1]["step"] == 2 and not Path(f"{out}.lock").exists()


def test_run_lock_is_exclusive_and_released_whole(tmp_path):
    path = tmp_path / "x.lock"
    with tgtrain.outputs.RunLock(path):
        assert path.read_text() == f"{os.getpid()}\n"
        with pytest.raises(tgtrain.outputs.Busy) as busy:   # a second open file, even in this process
            tgtrain.outputs.RunLock(path)
        assert busy.value.pid == os.getpid()
    assert not path.exists()
    with tgtrain.outputs.RunLock(path):   # free again
        pass


def test_check_clashes_compares_files_not_spellings(tmp_path):
    target = tmp_path / "corpus.txt"
    target.write_text("text")
    symlink(tmp_path / "link.txt", target)
    hard_link(tmp_path / "hard.txt", target)
    for alias in ("link.txt", "hard.txt", "./corpus.txt", "sub/../corpus.txt"):
        (tmp_path / "sub").mkdir(exist_ok=True)
        with pytest.raises(tgtrain.outputs.OutputError, match="would overwrite the corpus"):
            tgtrain.outputs.check_clashes({"checkpoint": tmp_path / alias}, {"corpus": target})
    with pytest.raises(tgtrain.outputs.OutputError, match="the checkpoint and the loss log would be one file"):
        tgtrain.outputs.check_clashes({"checkpoint": tmp_path / "a.csv", "loss log": tmp_path / "a.csv"}, {})
    with pytest.raises(tgtrain.outputs.OutputError, match="would replace a folder"):
        tgtrain.outputs.check_clashes({"checkpoint": tmp_path / "sub"}, {})
    tgtrain.outputs.check_clashes({"checkpoint": tmp_path / "new.safetensors", "loss log": tmp_path / "new.csv"},
                             {"corpus": target})


# ---- 3. no process outlives its trainer; SIGTERM saves; a dead worker's step is saved ----------
def kill_and_resume(corpus, out, delays, settings=KILLABLE):
    """Start the run of `settings` (resumed when a checkpoint exists), kill -9 it `delay` seconds
    after its first evaluation, once per delay; after each kill no worker is left and whatever
    is on disk loads, and the next start removes the temporaries it left. Returns those of the
    last kill."""
    left = set()
    for delay in delays:
        args = ["--resume"] if out.exists() else ["--data", corpus, *settings]
        trainer = start(*args, "--out", out)
        try:
            if wait_for(trainer, r"step \d+:") is None:   # the run had already reached its end
                break
            assert not left & set(os.listdir(out.parent)), "a killed run's temporaries outlived the next start"
            workers = children(trainer.pid)
            assert len(workers) == 1   # --processes 2: this one and a worker
            time.sleep(delay)
        finally:
            trainer.kill()
            trainer.wait()
        assert_all_gone(workers)
        if out.exists():
            nn.load(out)   # never half a checkpoint
        loss_log = out.with_suffix(".csv")
        if loss_log.exists():
            assert loss_log.read_text().startswith("step,train_loss,val_loss,lr\n")   # never half a log
        left = {name for name in leftovers(out.parent) if name.startswith(".tmp-")}
    return left


@needs_proc
def test_kill_9_at_random_moments_and_resuming_ends_as_the_unbroken_run(corpus, tmp_path, unbroken):
    out = tmp_path / "run.safetensors"
    delays = np.random.default_rng(13).uniform(0.0, 0.4, 3)   # each a dozen steps or so: the run goes on
    left = kill_and_resume(corpus, out, delays)
    if not out.exists():   # every kill came before the first checkpoint: start it whole
        run("train_chargpt.py", "--data", corpus, *KILLABLE, "--out", out)
    resumed = run("train_chargpt.py", "--resume", "--out", out).stdout
    assert all(f"removed {tmp_path / name}" in resumed for name in left)
    assert leftovers(tmp_path) == []
    assert_same_run(out, unbroken)


@pytest.mark.slow
@needs_proc
def test_kill_9_again_and_again_and_resuming_ends_as_the_unbroken_run(corpus, tmp_path):
    settings, whole, out = killable(300), tmp_path / "whole" / "run.safetensors", tmp_path / "run.safetensors"
    run("train_chargpt.py", "--data", corpus, *settings, "--out", whole)
    kill_and_resume(corpus, out, np.random.default_rng(1313).uniform(0.0, 0.6, 15), settings)
    run("train_chargpt.py", *(["--resume"] if out.exists() else ["--data", corpus, *settings]), "--out", out)
    assert leftovers(tmp_path) == []
    assert_same_run(out, final_state(whole))


@needs_proc
def test_sigterm_to_the_trainer_alone_stops_like_ctrl_c_and_a_second_run_meanwhile_is_refused(corpus, tmp_path):
    out = tmp_path / "run.safetensors"
    trainer = start("--data", corpus, *TINY, "--max_iters", 10**6, "--eval_interval", 10**5, "--processes", 2,
                    "--out", out)
    try:
        assert wait_for(trainer, r"iter \d+:")
        workers = children(trainer.pid)
        second = job("--resume", "--out", out)
        assert second.returncode == 1 and f"is held by process {trainer.pid}" in second.stderr
        trainer.send_signal(signal.SIGTERM)   # to its pid alone, not its process group
        stdout, stderr = trainer.communicate(timeout=60)
    finally:
        trainer.kill()
    assert trainer.returncode == 143, stderr
    stopped = re.search(r"^stopped by SIGTERM at step (\d+): checkpoint written to (.*); continue with --resume$",
                        stdout, re.M)
    assert stopped and stopped.group(2) == str(out) and nn.load(out)[1]["step"] == int(stopped.group(1))
    assert_all_gone(workers)
    assert leftovers(tmp_path) == []


@needs_proc
def test_a_worker_killed_mid_run_has_the_last_completed_step_saved_and_a_resume_matches(corpus, tmp_path, unbroken):
    out = tmp_path / "run.safetensors"
    trainer = start("--data", corpus, *KILLABLE, "--out", out)
    try:
        assert wait_for(trainer, r"iter 10:")
        (worker,) = children(trainer.pid)
        os.kill(worker, signal.SIGKILL)
        _, stderr = trainer.communicate(timeout=60)
    finally:
        trainer.kill()
    assert trainer.returncode == 1 and "Traceback" not in stderr
    died = re.search(rf"^train_chargpt\.py: error: worker process {worker} died \(killed by signal 9 \(SIGKILL\)\) "
                     rf"during step (\d+); saved the state of step \1, the last completed, to {re.escape(str(out))}; "
                     r"continue with --resume$", stderr, re.M)
    assert died, stderr
    assert nn.load(out)[1]["step"] == int(died.group(1)) < 60
    run("train_chargpt.py", "--resume", "--out", out)
    assert_same_run(out, unbroken)


# ---- 4. every flag checked before anything runs ------------------------------------------------
@pytest.fixture(scope="module")
def demo():
    """demo(name): the module demos/<name>.py, imported here (demos/ put on the path)."""
    sys.path.insert(0, str(REPO / "demos"))
    yield importlib.import_module
    sys.path.remove(str(REPO / "demos"))


def refused(call, capsys, status=2):
    """The error that call() exits with, one line on stderr: by default a usage error (exit
    status 2, argparse's message); status 1 for a file it cannot take."""
    with pytest.raises(SystemExit) as stop:
        call()
    assert stop.value.code == status
    return capsys.readouterr().err


BAD_TRAIN_FLAGS = [
    (["--lr", "nan"], "argument --lr: must be a finite number > 0, got nan"),
    (["--lr", "-1"], "argument --lr: must be a finite number > 0, got -1"),
    (["--lr", "0"], "argument --lr: must be a finite number > 0, got 0"),
    (["--lr", "inf"], "argument --lr: must be a finite number > 0, got inf"),
    (["--lr", "fast"], "argument --lr: must be a finite number > 0, got 'fast'"),
    (["--min_lr", "-0.0001"], "argument --min_lr: must be a finite number >= 0"),
    (["--min_lr", "nan"], "argument --min_lr: must be a finite number >= 0"),
    (["--beta1", "1.5"], "argument --beta1: must be a number in [0, 1), got 1.5"),
    (["--beta1", "1"], "argument --beta1: must be a number in [0, 1)"),
    (["--beta2", "-0.1"], "argument --beta2: must be a number in [0, 1)"),
    (["--beta2", "nan"], "argument --beta2: must be a number in [0, 1)"),
    (["--weight_decay", "nan"], "argument --weight_decay: must be a finite number >= 0, got nan"),
    (["--weight_decay", "-0.1"], "argument --weight_decay: must be a finite number >= 0"),
    (["--grad_clip", "-1"], "argument --grad_clip: must be a finite number >= 0, got -1"),
    (["--grad_clip", "nan"], "argument --grad_clip: must be a finite number >= 0"),
    (["--grad_clip", "inf"], "argument --grad_clip: must be a finite number >= 0"),
    (["--dropout", "1"], "argument --dropout: must be a number in [0, 1)"),
    (["--dropout", "nan"], "argument --dropout: must be a number in [0, 1)"),
    (["--max_iters", "-5"], "argument --max_iters: must be a whole number >= 0, got -5"),
    (["--max_iters", "1.5"], "argument --max_iters: must be a whole number >= 0, got '1.5'"),
    (["--warmup_iters", "-1"], "argument --warmup_iters: must be a whole number >= 0"),
    (["--lr_decay_iters", "-1"], "argument --lr_decay_iters: must be a whole number >= 0"),
    (["--sample_every", "-1"], "argument --sample_every: must be a whole number >= 0"),
    (["--n_layer", "0"], "argument --n_layer: must be a whole number >= 1, got 0"),
    (["--n_head", "0"], "argument --n_head: must be a whole number >= 1, got 0"),
    (["--n_embd", "-8"], "argument --n_embd: must be a whole number >= 1"),
    (["--block_size", "0"], "argument --block_size: must be a whole number >= 1"),
    (["--batch_size", "0"], "argument --batch_size: must be a whole number >= 1"),
    (["--eval_interval", "0"], "argument --eval_interval: must be a whole number >= 1"),
    (["--eval_iters", "0"], "argument --eval_iters: must be a whole number >= 1"),
    (["--log_interval", "0"], "argument --log_interval: must be a whole number >= 1"),
    (["--processes", "0"], "argument --processes: must be a whole number >= 1"),
    (["--worker_timeout", "0"], "argument --worker_timeout: must be a finite number > 0, got 0"),
    (["--worker_timeout", "inf"], "argument --worker_timeout: must be a finite number > 0"),
    (["--min_lr", "0.01"], "--min_lr 0.01 is above --lr 0.001: the cosine decay would raise the learning rate"),
    (["--seed", "-1"], "argument --seed: must be a whole number from 0 to 2**32 - 1 (numpy's seed range), got -1"),
    (["--seed", str(2**32)], "argument --seed: must be a whole number from 0 to 2**32 - 1"),
    (["--n_embd", "30", "--n_head", "4"], "--n_embd 30 must be divisible by --n_head 4"),
    (["--resume", "--overwrite"], "--resume continues the checkpoint at --out and --overwrite replaces it: pass one"),
    (["--out", "run.csv"], "--out run.csv: the checkpoint and the loss log would be one file, run.csv; name the "
                           "checkpoint with a suffix of its own, e.g. run.safetensors"),
    (["--out", "x.png"], "--out x.png: the checkpoint and the loss plot would be one file"),
    (["--out", "x.health.csv"], "--out x.health.csv: the checkpoint and the loss log would be one file"),
    (["--out", "x.health.png"], "--out x.health.png: the checkpoint and the loss plot would be one file"),
    (["--out", "."], "--out . is a folder: give the checkpoint's file name, e.g. chargpt.safetensors"),
]


@pytest.mark.parametrize("args, message", BAD_TRAIN_FLAGS, ids=[" ".join(args) for args, _ in BAD_TRAIN_FLAGS])
def test_every_bad_flag_of_the_job_is_a_usage_error(capsys, args, message):
    assert message in refused(lambda: tgtrain.flags.parse_config(args), capsys)   # the job's flags


def test_a_bad_flag_exits_2_before_anything_is_read_or_written(tmp_path):
    result = job("--data", tmp_path / "missing.txt", "--lr", "nan", "--out", tmp_path / "x.safetensors")
    assert result.returncode == 2 and "argument --lr: must be a finite number > 0, got nan" in result.stderr
    assert os.listdir(tmp_path) == []


BAD_SAMPLE_FLAGS = [
    (["--temperature", "-1"], "argument --temperature: must be a finite number >= 0, got -1"),
    (["--temperature", "nan"], "argument --temperature: must be a finite number >= 0, got nan"),
    (["--temperature", "inf"], "argument --temperature: must be a finite number >= 0"),
    (["--top_k", "0"], "argument --top_k: must be a whole number >= 1, got 0"),
    (["--max_new_tokens", "-1"], "argument --max_new_tokens: must be a whole number >= 0"),
    (["--seed", "-1"], "argument --seed: must be a whole number from 0 to 2**32 - 1"),
    (["--prompt", ""], "--prompt is empty"),
]


@pytest.mark.parametrize("args, message", BAD_SAMPLE_FLAGS, ids=[" ".join(args) for args, _ in BAD_SAMPLE_FLAGS])
def test_every_bad_flag_of_the_sampler_is_a_usage_error(demo, capsys, trained, args, message):
    assert message in refused(lambda: demo("sample_chargpt").main([str(trained), *args]), capsys)


def test_the_sampler_refuses_a_folder_or_a_missing_file_as_its_checkpoint(demo, capsys, tmp_path):
    assert f"{tmp_path} has no config.json" in refused(lambda: demo("sample_chargpt").main([str(tmp_path)]), capsys, 1)
    missing = tmp_path / "none.safetensors"
    assert "no such checkpoint" in refused(lambda: demo("sample_chargpt").main([str(missing)]), capsys, 1)


@pytest.mark.parametrize("name, args, message", [
    ("attention_heads", ["--steps", "0"], "argument --steps: must be a whole number >= 1, got 0"),
    ("attention_heads", ["--lr", "nan"], "argument --lr: must be a finite number > 0, got nan"),
    ("attention_length", ["--train_len", "0"], "argument --train_len: must be a whole number >= 1"),
    ("attention_length", ["--steps", "-3"], "argument --steps: must be a whole number >= 1"),
])
def test_the_demos_that_take_numbers_refuse_bad_ones(demo, capsys, monkeypatch, tmp_path, name, args, message):
    monkeypatch.setattr(sys, "argv", [f"{name}.py", "--out", str(tmp_path / "out"), *args])
    assert message in refused(demo(name).main, capsys)
    assert not (tmp_path / "out").exists()


# ---- 5. files written whole; a killed run's temporaries removed ---------------------------------
RECORDER = """
import builtins, json, os, runpy, sys
record, script, *argv = sys.argv[1:]
replaced, opened = [], []
real_replace, real_open = os.replace, builtins.open
def replace(source, target, *args, **kwargs):
    replaced.append([os.path.basename(source), os.path.abspath(target)])
    return real_replace(source, target, *args, **kwargs)
def open_(file, mode="r", *args, **kwargs):
    if isinstance(file, (str, os.PathLike)) and set(mode) & set("wax+"):
        opened.append(os.path.abspath(file))
    return real_open(file, mode, *args, **kwargs)
os.replace, builtins.open = replace, open_
sys.argv = [script, *argv]
sys.path.insert(0, os.path.dirname(script))
try:
    runpy.run_path(script, run_name="__main__")
finally:
    with real_open(record, "w") as file:
        json.dump({"replaced": replaced, "opened": opened}, file)
"""


def test_every_file_the_job_writes_goes_through_the_atomic_writer(corpus, tmp_path):
    pytest.importorskip("matplotlib")   # the PNGs too
    out, record = tmp_path / "out" / "run.safetensors", tmp_path / "record.json"
    subprocess.run([sys.executable, "-c", RECORDER, record, REPO / "demos" / "train_chargpt.py", "--data", corpus,
                    *map(str, TINY), "--max_iters", "4", "--eval_interval", "2", "--out", out],
                   check=True, capture_output=True, env=environment())
    written = json.loads(record.read_text())
    renamed = {target for source, target in written["replaced"] if source.startswith(".tmp-")}
    assert sorted(os.listdir(out.parent)) == ["run.csv", "run.health.csv", "run.health.png", "run.png",
                                              "run.safetensors"]
    assert {str(path) for path in out.parent.iterdir()} <= renamed   # each one renamed from its temporary
    assert [path for path in written["opened"] if path.startswith(str(out.parent))] == []   # none written in place


def test_the_temporaries_a_killed_run_left_are_removed_by_the_next_run_and_only_those(corpus, good):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead, living = int(gone.stdout), os.getpid()
    token = "5ca1ab1e" * 4   # 32 hex digits, as nn.atomic names its temporaries
    stale = good.parent / f".tmp-{dead}-{token}-{good.name}"         # its writer is gone
    busy = good.parent / f".tmp-{living}-{token}-{good.name}"        # its writer (this test) still runs
    foreign = good.parent / ".tmp-notes"                            # not of our naming scheme
    for path in (stale, busy, foreign):
        path.write_bytes(b"half a checkpoint")
    resumed = run("train_chargpt.py", "--resume", "--out", good, "--max_iters", 22, "--eval_interval", 10).stdout
    assert f"removed {stale}, a temporary file left by a run that was killed while writing" in resumed
    assert not stale.exists() and busy.exists() and foreign.exists()


# ---- 6. loading checks every size before taking memory, and the model and tokenizer ------------
def assert_refused_taking_no_memory(load, path, message):
    """load(path) raises CheckpointError naming path and matching message, allocating under 1 MB."""
    tracemalloc.start()
    try:
        with pytest.raises(nn.CheckpointError) as error:
            load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(path) in str(error.value) and re.search(message, str(error.value)), str(error.value)
    assert peak < 1_000_000, f"{peak:,} bytes allocated"


def test_a_compressed_member_bomb_is_refused_before_it_inflates(tmp_path):
    """A 64 KB .npz whose member inflates to 64 MiB (the issue's 4.5 MB inflated to 4 GiB)."""
    path = tmp_path / "bomb.npz"
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (2**24,)})
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("__meta__.npy", b"")
        with archive.open("w.npy", "w") as member:
            member.write(header.getvalue())
            for _ in range(16):
                member.write(bytes(2**22))
    assert path.stat().st_size < 100_000
    assert_refused_taking_no_memory(nn.load, path, "compressed, or larger than the file")


def test_a_zip_whose_index_lies_about_a_members_size_is_refused_before_reading(tmp_path, write_v01):
    path = write_v01(tmp_path / "liar.npz", {"w": np.zeros(4, np.float32)}, {"step": 1})
    raw = bytearray(path.read_bytes())
    for entry in re.finditer(b"PK\x01\x02", raw):   # each central directory entry: say 4 GiB - 1, stored
        raw[entry.start() + 24:entry.start() + 28] = (2**32 - 2).to_bytes(4, "little")
    path.write_bytes(bytes(raw))
    assert_refused_taking_no_memory(nn.load, path, "larger than the file|corrupted")


def test_a_member_cut_short_is_reported_as_such(tmp_path, write_v01):
    good_path = write_v01(tmp_path / "good.npz", {"w": np.arange(8, dtype=np.float32)}, {"step": 1})
    cut = tmp_path / "cut.npz"
    with zipfile.ZipFile(good_path) as source, zipfile.ZipFile(cut, "w") as target:
        for info in source.infolist():
            content = source.read(info)
            target.writestr(info.filename, content[:-8] if info.filename == "w.npy" else content)
    with pytest.raises(nn.CheckpointError, match=r"entry 'w.npy': its header claims float32 of shape \(8,\) "
                                                 r"\(32 bytes\) but the entry holds 24"):
        nn.load(cut)


class Arrays:
    """Stands for a model in nn.save: these arrays as its state_dict."""

    def __init__(self, arrays):
        self.arrays = arrays

    def state_dict(self):
        return self.arrays


def gpt_checkpoint(path, edit_meta=lambda meta: None, edit_state=lambda state: None):
    """A checkpoint of a tiny GPT, its metadata and arrays edited first (nn.save: a valid checksum)."""
    nn.manual_seed(0)
    model = nn.GPT(vocab_size=6, block_size=4, n_layer=1, n_head=2, n_embd=8)
    meta = {"model_config": dict(model.config), "tokenizer": "\n abcd"}
    state = dict(model.state_dict())
    edit_meta(meta)
    edit_state(state)
    return nn.save(path, Arrays(state), **meta)


def config_edit(**changes):
    return lambda meta: meta["model_config"].update(changes)


def without(key, where="model_config"):
    return lambda meta: (meta[where].pop(key) if where else meta.pop(key))


GPT_DAMAGE = {
    "n_embd-differs": (config_edit(n_embd=16), r"its model_config implies tensor 'tok_emb.weight' of shape \(6, 16\), "
                                               r"but it has shape \(6, 8\)"),
    "vocab_size-differs": (config_edit(vocab_size=7), r"implies tensor 'tok_emb.weight' of shape \(7, 8\)"),
    "block_size-differs": (config_edit(block_size=5), r"implies tensor 'pos_emb.weight' of shape \(5, 8\)"),
    "tokenizer-differs": (lambda meta: meta.update(tokenizer="\n abc"), "its tokenizer has 5 characters but the "
                                                                        "model's vocabulary .* is 6"),
    "tokenizer-unsorted": (lambda meta: meta.update(tokenizer="dcba \n"), "its tokenizer is damaged"),
    "no-tokenizer": (without("tokenizer", where=None), "has no model_config .* and tokenizer"),
    "no-n_head": (without("n_head"), r"model_config is incomplete or foreign: missing \['n_head'\]"),
    "unknown-key": (config_edit(n_heads=2), r"unknown \['n_heads'\]"),
    "size-not-whole": (config_edit(n_embd=8.0), "describes no GPT: GPTConfig: n_embd must be a whole number >= 1, "
                                                "got 8.0"),
    "n_head-not-dividing": (config_edit(n_head=3), "describes no GPT: GPTConfig: n_embd 8 must be divisible by "
                                                   "n_head 3"),
    "n_layer-lies": (config_edit(n_layer=10**9), r"says n_layer 1000000000, but its tensors are of the blocks \['0'\]"),
    "context-lies": (config_edit(pos="sinusoidal", block_size=10**12), "block_size 1,000,000,000,000, more than"),
}
TENSOR_DAMAGE = {
    "tensor-shape": (lambda s: s.update({"h.0.attn.proj.weight": np.zeros((8, 4), np.float32)}),
                     r"tensor 'h.0.attn.proj.weight' has shape \(8, 4\), the model's is \(8, 8\)"),
    "tensor-dtype": (lambda s: s.update({"ln_f.weight": np.ones(8, np.int32)}),
                     "tensor 'ln_f.weight' has dtype int32, the model's is float32"),
    "tensor-missing": (lambda s: s.pop("ln_f.bias"), r"its tensors are not the model's: missing \['ln_f.bias'\]"),
    "tensor-extra": (lambda s: s.update({"h.0.extra": np.zeros(2, np.float32)}), r"unexpected \['h.0.extra'\]"),
}


@pytest.mark.parametrize("name", [*GPT_DAMAGE, *TENSOR_DAMAGE])
def test_a_gpt_checkpoint_whose_metadata_or_tensors_do_not_fit_is_refused_naming_what_differs(tmp_path, name):
    if name in GPT_DAMAGE:
        edit, message = GPT_DAMAGE[name]
        path = gpt_checkpoint(tmp_path / f"{name}.safetensors", edit_meta=edit)
    else:
        edit, message = TENSOR_DAMAGE[name]
        path = gpt_checkpoint(tmp_path / f"{name}.safetensors", edit_state=edit)
    assert_refused_taking_no_memory(nn.checkpoint.load_gpt, path, message)


def test_a_good_gpt_checkpoint_loads_its_arrays_as_the_weights(tmp_path):
    path = gpt_checkpoint(tmp_path / "ok.safetensors")
    model, tokenizer, meta = nn.checkpoint.load_gpt(path)
    assert tokenizer.chars == "\n abcd" and meta["model_config"]["n_embd"] == 8
    for name, array in safetensors.numpy.load_file(path).items():
        assert np.array_equal(dict(model.named_parameters())[name].data, array)


def test_the_sampler_and_the_job_answer_a_damaged_checkpoint_in_one_line(tmp_path, good):
    path = gpt_checkpoint(tmp_path / "bad.safetensors", edit_meta=config_edit(n_embd=16))
    sampled = subprocess.run(command("sample_chargpt.py", path), capture_output=True, text=True, env=environment())
    assert sampled.returncode == 1 and "Traceback" not in sampled.stderr and "tok_emb.weight" in sampled.stderr
    # a checkpoint of a model alone (no run state) can be sampled, not resumed
    model, tokenizer, meta = nn.checkpoint.load_gpt(good)
    nn.save(good, model, model_config=meta["model_config"], tokenizer=meta["tokenizer"])
    resumed = job("--resume", "--out", good)
    assert resumed.returncode == 1 and "Traceback" not in resumed.stderr
    assert "cannot resume from it: its metadata lacks config, step, history, best_val_loss, rng, batch_rng" in \
           resumed.stderr


@pytest.mark.parametrize("damage", ["a cell that is not a number", "a row cut short"])
def test_a_resume_answers_a_damaged_health_log_in_one_line_and_keeps_it(good, damage):
    log = good.with_suffix(".health.csv")
    lines = log.read_text().splitlines()
    lines[2] = lines[2].replace(",", ",abc,", 1) if damage.startswith("a cell") else lines[2].split(",")[0]
    log.write_text("\n".join(lines) + "\n")
    damaged, checkpoint = log.read_bytes(), good.read_bytes()
    resumed = job("--resume", "--out", good, "--max_iters", 30)
    assert resumed.returncode == 1 and "Traceback" not in resumed.stderr
    assert f"{log}: line 3 of the gradient health log is damaged" in resumed.stderr
    assert "move it away to start a new gradient health log" in resumed.stderr
    assert log.read_bytes() == damaged and good.read_bytes() == checkpoint


def test_an_optimizer_state_that_does_not_fit_is_a_checkpoint_error(good):
    nn.manual_seed(0)
    other = nn.GPT(vocab_size=29, block_size=8, n_layer=2, n_head=2, n_embd=16)
    with pytest.raises(nn.CheckpointError, match=f"{good}: its optimizer state does not fit this optimizer"):
        nn.load(good, nn.optim.AdamW(other.parameters()))


# ---- 8. logs a file can hold --------------------------------------------------------------------
def test_off_a_terminal_the_log_gets_a_line_every_log_interval_and_no_progress_bar(corpus, tmp_path):
    result = job("--data", corpus, *TINY, "--max_iters", 20, "--eval_interval", 10, "--log_interval", 5,
                 "--out", tmp_path / "run.safetensors")
    assert result.returncode == 0
    assert re.findall(r"^iter (\d+): loss \d+\.\d{4}, \d+ ms/iter, [\d,]+ tokens/s$", result.stdout, re.M) == \
           ["0", "5", "10", "15"]
    assert "\r" not in result.stdout + result.stderr and "iter/s" not in result.stderr


@pytest.mark.skipif(not LINUX, reason="a pseudo-terminal (pty)")
def test_on_a_terminal_the_progress_bar_draws_instead(corpus, tmp_path):
    import fcntl, pty, termios   # POSIX only
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))   # 100 columns for the bar
    process = subprocess.Popen(command("train_chargpt.py", "--data", corpus, *TINY, "--max_iters", 20,
                                       "--eval_interval", 10, "--out", tmp_path / "run.safetensors"),
                               stdout=terminal, stderr=terminal, env=environment())
    os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:   # the run closed its end
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    assert process.wait(timeout=60) == 0
    text = shown.decode("utf-8", "replace")
    assert "\r" in text and "iter/s" in text and not re.search(r"^iter \d+:", text, re.M)
