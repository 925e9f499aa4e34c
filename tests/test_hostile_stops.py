"""Every way a run can be stopped ends it within seconds, with its documented exit status and
one true line, wherever the stop lands: before training begins, during an evaluation (the
first one included: its history is empty), in the final sample, on a worker's death, and a
second Ctrl-C while the first is being handled. And Ctrl-C in the sampler is one line too.

    status 130 Ctrl-C, 143 SIGTERM, 1 a worker lost; a line that says what is on disk
"""
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import nn
import tgtrain
from test_faults import children, good, leftovers, start, trained, wait_for  # noqa: F401 (fixtures)
from test_hostile_runs import kill_if_running, needs_proc
from test_parallel import alive
from test_train_chargpt import TINY, command, corpus, environment, run  # noqa: F401 (corpus: a fixture)

LINUX = sys.platform.startswith("linux")
ENDLESS_EVALUATION = [*TINY, "--max_iters", 10**6, "--eval_iters", 10**6]   # its step-0 evaluation never ends


def stopped(process, how):
    """Send `how` to the process and wait for its end: (stdout rest, stderr, seconds it took)."""
    started = time.monotonic()
    process.send_signal(how)
    stdout, stderr = process.communicate(timeout=60)
    return stdout, stderr, time.monotonic() - started


@needs_proc
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_during_the_first_evaluation_ends_it_within_seconds_and_saves_step_0(corpus, tmp_path, how):
    """It once waited for the whole evaluation (eval_iters batches of each split), and then the
    plot of the empty history raised: exit 1 and a traceback."""
    out = tmp_path / "run.safetensors"
    process = start("--data", corpus, *ENDLESS_EVALUATION, "--out", out)
    try:
        assert wait_for(process, r"model: ")
        time.sleep(0.5)   # in the evaluation now
        stdout, stderr, took = stopped(process, how)
    finally:
        process.kill()
    assert process.returncode == 128 + how and took < 10 and "Traceback" not in stderr, (took, stderr)
    told = "interrupted" if how == signal.SIGINT else "stopped by SIGTERM"
    assert f"{told} at step 0: checkpoint written to {out}; continue with --resume\n" in stdout
    meta = nn.load(out)[1]
    assert meta["step"] == 0 and meta["history"] == [] and leftovers(tmp_path) == []
    assert not out.with_suffix(".png").exists()   # no curve to draw
    resumed = run("train_chargpt.py", "--resume", "--out", out, "--max_iters", 2, "--eval_iters", 2).stdout
    assert "step 2: train loss" in resumed and nn.load(out)[1]["step"] == 2


@needs_proc
def test_a_stop_before_training_begins_ends_the_job_at_once_and_writes_nothing(corpus, tmp_path):
    """While the corpus becomes ids (seconds, for 18 MB): nothing to save yet, so it ends there."""
    big = tmp_path / "big.txt"
    big.write_text(Path(corpus).read_text() * 400)
    out = tmp_path / "out" / "run.safetensors"
    process = start("--data", big, *TINY, "--out", out)
    try:
        assert wait_for(process, r"corpus: ")
        _, stderr, took = stopped(process, signal.SIGTERM)
    finally:
        process.kill()
    assert process.returncode == 143 and took < 10
    assert stderr == "train_chargpt.py: stopped by SIGTERM; no checkpoint written this time\n"
    assert os.listdir(out.parent) == []   # no checkpoint, and no lock left


@needs_proc
def test_a_worker_dying_in_the_first_evaluation_saves_step_0_and_says_so_in_one_line(corpus, tmp_path):
    out = tmp_path / "run.safetensors"
    process = start("--data", corpus, *ENDLESS_EVALUATION, "--processes", 2, "--out", out)
    workers = []
    try:
        assert wait_for(process, r"model: ")
        workers = children(process.pid)
        os.kill(workers[0], signal.SIGKILL)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
        kill_if_running(workers)
    assert process.returncode == 1 and stderr.count("\n") == 1, stderr
    assert stderr == (f"train_chargpt.py: error: worker process {workers[0]} died (killed by signal 9 (SIGKILL)) "
                      f"during step 0; saved the state of step 0, the last completed, to {out}; continue with "
                      "--resume\n")
    assert nn.load(out)[1]["step"] == 0 and leftovers(tmp_path) == []


@needs_proc
def test_ctrl_c_in_the_final_sample_ends_the_job_with_130_and_says_the_checkpoint_is_written(corpus, tmp_path):
    """It was ignored: the sample printed and the exit was 0. The model is large enough that
    its 200-character sample takes a second or more."""
    out = tmp_path / "run.safetensors"
    process = start("--data", corpus, "--n_layer", 4, "--n_head", 4, "--n_embd", 256, "--block_size", 256,
                    "--batch_size", 1, "--eval_iters", 1, "--warmup_iters", 0, "--max_iters", 0, "--out", out)
    try:
        assert wait_for(process, rf"checkpoint: {re.escape(str(out))}$")
        stdout, stderr, took = stopped(process, signal.SIGINT)
    finally:
        process.kill()
    assert process.returncode == 130 and took < 10 and "Traceback" not in stderr, (took, stderr)
    assert stdout == f"interrupted at the end of the run: checkpoint written to {out} (step 0, the last); no sample\n"
    assert nn.load(out)[1]["full_val_loss"] > 0


@needs_proc
def test_a_second_ctrl_c_quits_at_once_and_names_the_checkpoint_this_run_wrote(corpus, tmp_path):
    """It once said "no checkpoint written this time" although the run had saved one. The
    first Ctrl-C waits for the step (here on a stopped worker, two seconds more); the second
    does not wait for it (only the stopped worker, asked to end, has five seconds before it is
    killed, as at every exit)."""
    out = tmp_path / "run.safetensors"
    process = start("--data", corpus, *TINY, "--max_iters", 10**6, "--eval_interval", 1, "--processes", 2,
                    "--out", out)
    workers = []
    try:
        assert wait_for(process, r"step 1: ")   # step 0 is saved
        workers = children(process.pid)
        os.kill(workers[0], signal.SIGSTOP)   # the trainer now waits for it, whatever step it is in
        time.sleep(0.3)
        process.send_signal(signal.SIGINT)
        time.sleep(0.3)
        _, stderr, took = stopped(process, signal.SIGINT)
    finally:
        process.kill()
        kill_if_running(workers)
    assert process.returncode == 130 and took < 10, (took, stderr)
    quit = re.fullmatch(rf"train_chargpt\.py: interrupted again at step (\d+): quit at once; the checkpoint of step "
                        rf"(\d+) is written to {re.escape(str(out))}; continue with --resume\n", stderr)
    assert quit, stderr
    assert nn.load(out)[1]["step"] == int(quit.group(2)) <= int(quit.group(1))
    assert not any(alive(pid) for pid in workers)


def test_a_stop_in_a_sample_drops_the_sample_at_once_and_raises_the_flag():
    """The mechanism: Interrupt.unless_stopped runs work that changes nothing, and a stop ends it
    where it is (SIGTERM is sent while the model generates)."""
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    interrupt = tgtrain.stops.Interrupt()
    try:
        nn.manual_seed(0)
        model = nn.GPT(5, 8, 1, 1, 4)
        generated = []

        def generate():
            generated.append(model.generate(np.zeros((1, 1), np.int64), 3))
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(10)   # never reached: the stop ends the sample here
        with interrupt.deferred():
            started = time.monotonic()
            assert interrupt.unless_stopped(generate) is None
            assert time.monotonic() - started < 5 and interrupt.signal == signal.SIGTERM and generated
            assert interrupt.unless_stopped(generate) is None and len(generated) == 1   # stopped: not begun again
            with pytest.raises(tgtrain.stops.Stopped):   # a second one quits at once, deferred or not
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(10)
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


def test_an_evaluation_asks_before_each_batch_whether_to_stop(good):
    model, tokenizer, meta = nn.checkpoint.load_gpt(good)
    config = tgtrain.flags.Config(**{**meta["config"], "eval_iters": 50})
    text = "".join(tokenizer.chars) * 200
    corpus = nn.data.prepare(text, config.block_size)
    asked = []
    parallel = tgtrain.DataParallel(model, 1)
    assert tgtrain.evaluate.estimate_loss(parallel, corpus, config, lambda: len(asked) > 3 or asked.append(1)) is None
    assert len(asked) == 4 and model.training   # four batches, then the stop; the model back in training mode


@pytest.mark.skipif(not LINUX, reason="SIGINT to a child process")
def test_ctrl_c_in_the_sampler_is_one_line_and_status_130(good):
    process = subprocess.Popen(command("sample_chargpt.py", good, "--max_new_tokens", 10**7), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=environment())
    try:
        time.sleep(4)   # the model is loaded and generating: ten million characters take minutes
        _, stderr, took = stopped(process, signal.SIGINT)
    finally:
        process.kill()
    assert process.returncode == 130 and took < 5 and stderr == "sample_chargpt.py: interrupted\n", stderr
