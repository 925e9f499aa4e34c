"""demos/train_chargpt.py, demos/sample_chargpt.py and demos/export_gpt2.py, run as a user
runs them: in a subprocess, on a small generated text, with a tiny model."""
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy

import nn

REPO = Path(__file__).resolve().parents[1]
SHARED_SHAKESPEARE = REPO.parent / "shared" / "data" / "tinyshakespeare.txt"
TINY = ["--n_layer", "1", "--n_head", "2", "--n_embd", "16", "--block_size", "8", "--batch_size", "4",
        "--eval_iters", "2", "--warmup_iters", "5"]


def command(script, *args):
    return [sys.executable, str(REPO / "demos" / script), *map(str, args)]


def environment():
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
            "PYTHONUNBUFFERED": "1"}


def run(script, *args, check=True):
    result = subprocess.run(command(script, *args), capture_output=True, text=True, env=environment(),
                            timeout=300)
    if check and result.returncode != 0:
        raise AssertionError(f"{script} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A generated play of two speakers (about 46,000 characters): no third-party text."""
    rng = np.random.default_rng(0)
    words = "the king and queen of a small land said that we shall go to see her house now".split()
    lines = [("ANNA: " if i % 2 else "BORIS: ") + " ".join(rng.choice(words, rng.integers(3, 9))) + "."
             for i in range(1500)]
    path = tmp_path_factory.mktemp("corpus") / "play.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory):
    """(checkpoint path, the run's stdout) of a 20-iteration run."""
    out = tmp_path_factory.mktemp("run") / "chargpt.safetensors"
    result = run("train_chargpt.py", "--data", corpus, *TINY, "--max_iters", 20, "--eval_interval", 10,
                 "--out", out)
    return out, result.stdout


def test_a_short_run_prints_its_progress_and_writes_its_outputs(trained):
    out, stdout = trained
    assert "length of dataset in characters: 46,660\nvocab size: 29\ntrain has 41,994 tokens\n" \
           "val has 4,666 tokens\n" in stdout
    assert re.findall(r"^step (\d+): train loss \d+\.\d+, val loss \d+\.\d+$", stdout, re.M) == ["0", "10", "20"]
    assert re.search(r"^final val loss \(full split\): \d+\.\d+$", stdout, re.M)
    assert f"checkpoint: {out}" in stdout and "--- sample ---" in stdout
    state, meta = nn.load(out)
    assert meta["step"] == 20 and meta["config"]["max_iters"] == 20 and len(meta["tokenizer"]) == 29
    assert [row[0] for row in meta["history"]] == [0, 10, 20] and meta["full_val_loss"] > 0
    rows = out.with_suffix(".csv").read_text().splitlines()
    assert rows[0] == "step,train_loss,val_loss,lr" and len(rows) == 4
    assert re.search(r"^gradient health: \d+\.\d+ s measuring, writing and drawing, \d+\.\d% of the training time$",
                     stdout, re.M)
    health = out.with_suffix(".health.csv").read_text().splitlines()   # steps 0 and 10 (20 has no update)
    names = [name for name, _ in nn.GPT(29, 8, 1, 2, 16).named_parameters()] + ["h.0"]
    assert health[0] == "step,name,grad_norm,update_ratio,residual_std,gelu_tail_fraction"
    assert [line.split(",")[:2] for line in health[1:]] == [[step, name] for step in ("0", "10") for name in names]
    pytest.importorskip("matplotlib")
    assert out.with_suffix(".png").stat().st_size > 0
    from matplotlib.image import imread
    height, width, _ = imread(out.with_suffix(".health.png")).shape
    assert width >= 1200 and 4 / 3 <= width / height <= 2.4


def test_the_checkpoint_samples_without_the_corpus(trained):
    out, _ = trained
    first = run("sample_chargpt.py", out, "--prompt", "ANNA:", "--max_new_tokens", 30, "--seed", 3).stdout
    assert first.startswith("ANNA:") and len(first) == len("ANNA:") + 30 + 1   # + print's newline
    again = run("sample_chargpt.py", out, "--prompt", "ANNA:", "--max_new_tokens", 30, "--seed", 3).stdout
    assert again == first


def test_a_prompt_outside_the_vocabulary_is_a_clear_error(trained):
    out, _ = trained
    result = run("sample_chargpt.py", out, "--prompt", "ZOÉ: ANNA", check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "2 character(s) not in the vocabulary of 29: 'Z', 'É'" in result.stderr


def test_resume_continues_bit_exactly_from_this_version_and_from_tensorgrad_01(corpus, tmp_path, write_v01):
    """100 iterations, then --resume for 100 more, give the very weights, optimizer moments
    and random states of 200 iterations in one go; dropout is on, so nn's RNG must travel too.
    (The first half decays its learning rate over 200 steps, as the whole run does.) The same
    from the half-way checkpoint rewritten as tensorgrad 0.1's .npz (whose model_config had
    no tie_weights)."""
    common = ["--data", corpus, *TINY, "--dropout", 0.1, "--eval_interval", 50]
    whole, halves = tmp_path / "whole.safetensors", tmp_path / "halves.safetensors"
    old = tmp_path / "old" / "halves.npz"
    run("train_chargpt.py", *common, "--max_iters", 200, "--out", whole)
    run("train_chargpt.py", *common, "--max_iters", 100, "--lr_decay_iters", 200, "--out", halves)
    old.parent.mkdir()
    meta = nn.load(halves)[1]
    meta["model_config"].pop("tie_weights")
    meta["config"].pop("tie_weights")
    write_v01(old, safetensors.numpy.load_file(halves), meta)
    shutil.copy(halves.with_suffix(".health.csv"), old.with_suffix(".health.csv"))
    assert nn.load(old)[1] == meta
    expected = safetensors.numpy.load_file(whole)
    meta_whole = nn.load(whole)[1]
    for checkpoint in (halves, old):
        resumed = run("train_chargpt.py", "--resume", "--max_iters", 200, "--out", checkpoint).stdout
        assert f"resuming from {checkpoint} at step 100" in resumed
        assert re.findall(r"^step (\d+):", resumed, re.M) == ["150", "200"]
        arrays = safetensors.numpy.load_file(checkpoint)   # the checkpoint is written back as safetensors
        assert sorted(arrays) == sorted(expected)
        for name, array in expected.items():
            assert np.array_equal(arrays[name], array), name
        meta_resumed = nn.load(checkpoint)[1]
        for key in ("step", "rng", "batch_rng", "history", "full_val_loss"):
            assert meta_whole[key] == meta_resumed[key], key
        # the gradient health too: the resumed run keeps the first half's rows and adds the same ones
        assert whole.with_suffix(".health.csv").read_text() == checkpoint.with_suffix(".health.csv").read_text()


def test_tie_weights_trains_one_table_and_a_resume_keeps_it(corpus, tmp_path):
    out = tmp_path / "tied.safetensors"
    run("train_chargpt.py", "--data", corpus, *TINY, "--max_iters", 10, "--eval_interval", 5, "--tie_weights",
        "--out", out)
    state, meta = nn.load(out)
    assert meta["model_config"]["tie_weights"] is True and "head.weight" not in state
    untied = nn.GPT(29, 8, 1, 2, 16)
    assert nn.GPT(29, 8, 1, 2, 16, tie_weights=True).num_parameters() == untied.num_parameters() - 16 * 29
    resumed = run("train_chargpt.py", "--resume", "--max_iters", 15, "--out", out).stdout
    assert "resuming from" in resumed and nn.load(out)[1]["config"]["tie_weights"] is True
    bad = run("train_chargpt.py", "--tie_weights=yes", check=False)
    assert bad.returncode == 2 and "--tie_weights: ignored explicit argument 'yes'" in bad.stderr


def test_a_resume_cannot_tie_an_untied_model(trained):
    out, _ = trained
    result = run("train_chargpt.py", "--resume", "--out", out, "--tie_weights", check=False)
    assert result.returncode == 1
    assert "cannot change the model's shape: --tie_weights True (the checkpoint has False)" in result.stderr


def test_export_gpt2_writes_a_folder_that_samples_like_the_checkpoint(trained, tmp_path):
    out, _ = trained
    folder = tmp_path / "gpt2"
    printed = run("export_gpt2.py", out, folder).stdout
    assert f"wrote {folder / 'model.safetensors'}" in printed and "GPT2LMHeadModel.from_pretrained" in printed
    assert sorted(os.listdir(folder)) == ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]
    again = run("export_gpt2.py", out, folder, check=False)
    assert again.returncode == 2 and "already holds config.json, model.safetensors" in again.stderr
    run("export_gpt2.py", out, folder, "--overwrite")
    sampled = [run("sample_chargpt.py", path, "--prompt", "ANNA:", "--max_new_tokens", 30, "--seed", 3).stdout
               for path in (out, folder)]
    assert sampled[0] == sampled[1] and sampled[0].startswith("ANNA:")


def test_export_gpt2_refuses_what_gpt2_cannot_express(tmp_path):
    tokenizer = nn.data.CharTokenizer("abc \n")
    nn.manual_seed(0)
    model = nn.GPT(tokenizer.vocab_size, 8, 1, 2, 8, pos="sinusoidal")
    checkpoint = nn.save(tmp_path / "sin.safetensors", model, model_config=model.config, tokenizer=tokenizer.chars)
    result = run("export_gpt2.py", checkpoint, tmp_path / "gpt2", check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr   # a file it cannot take: status 1
    assert "GPT-2 cannot express this model: positions pos='sinusoidal'" in result.stderr
    missing = run("export_gpt2.py", tmp_path / "none.safetensors", tmp_path / "gpt2", check=False)
    assert missing.returncode == 1 and "no such checkpoint" in missing.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT cannot be sent to a child process on Windows")
def test_ctrl_c_stops_after_the_step_with_a_checkpoint(corpus, tmp_path):
    out = tmp_path / "chargpt.safetensors"
    process = subprocess.Popen(command("train_chargpt.py", "--data", corpus, *TINY, "--max_iters", 10**6,
                                       "--eval_interval", 10**5, "--out", out),
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=environment())
    try:
        for line in process.stdout:   # "step 0: ..." is printed from inside the loop
            if line.startswith("step 0:"):
                break
        process.send_signal(signal.SIGINT)
        stdout, _ = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 130
    stopped = re.search(r"^interrupted at step (\d+): checkpoint written to (.*); continue with --resume$",
                        stdout, re.M)
    assert stopped and stopped.group(2) == str(out)
    step = int(stopped.group(1))
    assert nn.load(out)[1]["step"] == step < 10**6
    resumed = run("train_chargpt.py", "--resume", "--max_iters", step + 3, "--out", out).stdout
    assert f"step {step + 3}: train loss" in resumed and nn.load(out)[1]["step"] == step + 3


def test_help_documents_every_flag_with_its_default():
    text = run("train_chargpt.py", "--help").stdout
    options = {entry.split()[0]: " ".join(entry.split()) for entry in re.split(r"\n  (?=-)", text)[1:]}
    for name in ("n_layer", "n_head", "n_embd", "block_size", "batch_size", "max_iters", "lr", "min_lr",
                 "warmup_iters", "weight_decay", "grad_clip", "dropout", "eval_interval", "eval_iters",
                 "seed", "data", "out", "resume", "sample_every"):
        assert re.search(r"\(default: [^)]+\)$", options[f"--{name}"]), options.get(f"--{name}")
    text = " ".join(text.split())
    for default in ("--n_layer INT transformer blocks (default: 4)", "(default: 0.001)",
                    "(default: out/chargpt.safetensors)", "(default: 0.99)"):
        assert default in text


@pytest.mark.parametrize("args, message", [
    (["--bogus", "1"], "unrecognized arguments: --bogus 1"),
    (["--n_embd", "30", "--n_head", "4"], "--n_embd 30 must be divisible by --n_head 4"),
    (["--block_size", "0"], "argument --block_size: must be a whole number >= 1, got 0"),
])
def test_bad_flags_are_usage_errors(args, message):
    result = run("train_chargpt.py", *args, check=False)
    assert result.returncode == 2 and message in result.stderr


def test_data_and_resume_errors_are_one_line_without_a_traceback(tmp_path, trained):
    empty, short = tmp_path / "empty.txt", tmp_path / "short.txt"
    empty.write_text("")
    short.write_text("a few words only\n")
    for args, message in [(["--data", empty], f"{empty}: the file is empty"),
                          (["--data", short, "--block_size", 8], "too few for block_size 8"),
                          (["--resume", "--out", tmp_path / "none.safetensors"], "no such checkpoint"),
                          (["--resume", "--out", trained[0], "--n_layer", 2], "cannot change the model's shape")]:
        result = run("train_chargpt.py", *args, check=False)
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
        assert result.stderr.startswith("train_chargpt.py: error: ") and message in result.stderr


@pytest.mark.slow
@pytest.mark.skipif(not SHARED_SHAKESPEARE.exists(), reason="the team's shared copy of tiny shakespeare is absent")
def test_a_few_hundred_steps_on_shakespeare_learn_the_language(tmp_path):
    result = run("train_chargpt.py", "--data", SHARED_SHAKESPEARE, "--n_layer", 2, "--n_head", 4, "--n_embd", 64,
                 "--block_size", 32, "--batch_size", 16, "--max_iters", 300, "--lr", 3e-3, "--warmup_iters", 30,
                 "--eval_interval", 100, "--out", tmp_path / "chargpt.safetensors")
    loss = float(re.search(r"^final val loss \(full split\): (\S+)$", result.stdout, re.M).group(1))
    assert loss < 2.5, result.stdout
