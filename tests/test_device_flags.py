"""The main job's --device and --preset flags (issue 38, item 3), without a GPU.

--device takes cpu (the default), cuda or cuda:0; cuda is one process (--processes above 1 is a
flag error, and left unsaid it is 1) and needs CuPy (without it: one line naming
`pip install "tensorgrad[cuda]"`, exit status 2, before any work). --preset shakespeare_char is
nanoGPT's GPU configuration, every flag given with it winning over it. Then tiny runs of the job
with tests/fake_cupy.py installed as `cupy` (numpy inside, CuPy's manners outside): the checkpoint
of a --device cuda run holds numpy arrays and resumes on the CPU, and a CPU run's resumes on cuda.
"""
import re
import sys
from dataclasses import fields

import numpy as np
import pytest

import fake_cupy
import nn
from nn.tensorfile import read_safetensors
from test_gpu_job import INSTALL, ok, run
from test_train_chargpt import TINY, corpus  # noqa: F401 (corpus: a fixture)
from tgtrain import flags

SHAKESPEARE_CHAR = dict(n_layer=6, n_head=6, n_embd=384, block_size=256, batch_size=64, dropout=0.2, lr=1e-3,
                        min_lr=1e-4, warmup_iters=100, beta1=0.9, beta2=0.99, max_iters=5000, eval_interval=250,
                        eval_iters=200, weight_decay=0.1, grad_clip=1.0, tie_weights=True, lr_decay_iters=0)


@pytest.fixture
def cupy(monkeypatch):
    """The fake CuPy, as `import cupy` finds it."""
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    return fake_cupy


@pytest.fixture
def no_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)   # `import cupy` raises ImportError


def refused(argv, capsys):
    """The one error line of parse_config(argv), which must exit with status 2."""
    with pytest.raises(SystemExit) as exit:
        flags.parse_config(argv)
    assert exit.value.code == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip() and not line.startswith(
        ("usage:", " "))]
    assert len(lines) == 1, lines
    return lines[0]


# ---- --device ------------------------------------------------------------------------------------------
def test_the_device_is_the_cpu_unless_asked(no_cupy):
    config, given = flags.parse_config([])
    assert config.device == "cpu" and "device" not in given
    assert config.processes == flags.Config().processes   # the CPU's default, untouched
    config, _ = flags.parse_config(["--device", "cpu", "--processes", "2"])
    assert config.device == "cpu" and config.processes == 2


@pytest.mark.parametrize("spelling", ["cuda", "cuda:0"])
def test_cuda_is_one_process(cupy, spelling):
    config, given = flags.parse_config(["--device", spelling])
    assert config.device == "cuda" and given["device"] == "cuda" and config.processes == 1
    config, _ = flags.parse_config(["--device", spelling, "--processes", "1"])
    assert config.device == "cuda" and config.processes == 1


@pytest.mark.parametrize("device", ["tpu", "gpu", "cuda:1", "CUDA", ""])
def test_an_unknown_device_is_refused(device, capsys, cupy):
    line = refused(["--device", device], capsys)
    assert line.endswith(f"argument --device: must be one of cpu, cuda, cuda:0, got {device}")


def test_cuda_with_more_processes_is_refused_in_one_line(cupy, capsys):
    line = refused(["--device", "cuda", "--processes", "2"], capsys)
    assert "--device cuda runs in one process" in line and "--processes 2" in line


def test_cuda_without_cupy_names_the_install_line(no_cupy, capsys):
    line = refused(["--device", "cuda"], capsys)
    assert INSTALL in line and "CuPy" in line and "--device cuda" in line


def test_cuda_without_a_gpu_is_refused(cupy, monkeypatch, capsys):
    monkeypatch.setattr(cupy.cuda.runtime, "getDeviceCount", lambda: 0)
    assert "no CUDA GPU" in refused(["--device", "cuda"], capsys)


def test_the_device_is_a_flag_with_help():
    assert "device" in {f.name for f in fields(flags.Config)}
    assert flags.FIELDS["device"].default == "cpu" and "cuda" in flags.FIELDS["device"].metadata["help"]


# ---- --preset shakespeare_char ------------------------------------------------------------------------
def test_the_preset_is_nanogpts_shakespeare_char():
    config, given = flags.parse_config(["--preset", "shakespeare_char"])
    assert {name: getattr(config, name) for name in SHAKESPEARE_CHAR} == SHAKESPEARE_CHAR
    assert config.decay_iters == 5000 and config.seed == 1337
    assert {name: given[name] for name in flags.PRESETS["shakespeare_char"]} == flags.PRESETS["shakespeare_char"]


@pytest.mark.parametrize("argv", [["--preset", "shakespeare_char", "--max_iters", "500", "--dropout", "0.1"],
                                  ["--max_iters", "500", "--preset", "shakespeare_char", "--dropout", "0.1"]],
                         ids=["after", "before"])
def test_flags_given_with_the_preset_win(argv):
    config, given = flags.parse_config(argv)
    assert config.max_iters == given["max_iters"] == 500 and config.dropout == 0.1
    assert config.n_embd == 384 and config.batch_size == 64


def test_the_preset_with_cuda(cupy):
    config, _ = flags.parse_config(["--preset", "shakespeare_char", "--device", "cuda"])
    assert config.device == "cuda" and config.processes == 1 and config.n_layer == 6


def test_an_unknown_preset_is_refused(capsys):
    assert "argument --preset: invalid choice: 'nope'" in refused(["--preset", "nope"], capsys)


def test_the_preset_is_listed_in_help(capsys):
    with pytest.raises(SystemExit):
        flags.parse_config(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--preset {shakespeare_char}" in text and "n_layer 6, n_head 6, n_embd 384, block_size 256" in text
    assert "--device STR" in text


# ---- the job, on the fake GPU ---------------------------------------------------------------------------
def job(*args, cupy="fake"):
    """demos/train_chargpt.py with args, in a Python that first installs the fake CuPy (cupy="fake")
    or makes `import cupy` fail (cupy="none"), as tests/test_gpu_job.py runs it. Returns stdout;
    the run must succeed."""
    return ok(run("train_chargpt.py", *map(str, args), cupy=cupy))


def steps(stdout):
    return [int(step) for step in re.findall(r"^step (\d+): train loss \d+\.\d+, val loss \d+\.\d+$", stdout, re.M)]


def test_a_cuda_run_writes_host_arrays_and_resumes_on_the_cpu(corpus, tmp_path):
    out = tmp_path / "chargpt.safetensors"
    stdout = job("--data", corpus, *TINY, "--max_iters", 20, "--eval_interval", 10, "--device", "cuda", "--out", out)
    assert steps(stdout) == [0, 10, 20] and "(1 process(es) added up)" in stdout and "--- sample ---" in stdout
    arrays, _ = read_safetensors(out)   # the model's and the optimizer's, all of them
    assert any(name.startswith("optimizer/") for name in arrays)
    assert all(type(array) is np.ndarray and np.isfinite(array).all() for array in arrays.values())
    meta = nn.load(out)[1]
    assert meta["step"] == 20 and meta["config"]["device"] == "cuda" and meta["config"]["processes"] == 1
    health = out.with_suffix(".health.csv").read_text().splitlines()
    assert {line.split(",")[0] for line in health[1:]} == {"0", "10"}   # measured on the GPU, at each evaluation
    # on the CPU: the device is this run's, not the checkpoint's; its one process was the GPU's
    stdout = job("--resume", "--max_iters", 25, "--eval_interval", 5, "--processes", 2, "--out", out, cupy="none")
    assert f"resuming from {out} at step 20" in stdout and steps(stdout) == [25]
    assert "(2 process(es) added up)" in stdout
    meta = nn.load(out)[1]
    assert meta["step"] == 25 and meta["config"]["device"] == "cpu"


def test_a_cpu_run_with_processes_resumes_on_cuda_in_one_process(corpus, tmp_path):
    out = tmp_path / "chargpt.safetensors"
    job("--data", corpus, *TINY, "--max_iters", 5, "--eval_interval", 5, "--processes", 2, "--out", out, cupy="none")
    stdout = job("--resume", "--max_iters", 10, "--device", "cuda:0", "--out", out)
    assert f"resuming from {out} at step 5" in stdout and steps(stdout) == [10]
    assert "(1 process(es) added up)" in stdout
    assert nn.load(out)[1]["config"]["device"] == "cuda"


def test_the_preset_trains_on_cuda_with_its_dropout_and_tied_head(corpus, tmp_path):
    """The preset's own settings (dropout 0.2, the tied head, its schedule) on the fake GPU, the
    sizes made tiny by flags given with it."""
    out = tmp_path / "chargpt.safetensors"
    stdout = job("--data", corpus, "--preset", "shakespeare_char", *TINY, "--max_iters", 6, "--eval_interval", 3,
                 "--device", "cuda", "--out", out)
    assert steps(stdout) == [0, 3, 6]
    model, _, meta = nn.checkpoint.load_gpt(out)
    assert model.config["tie_weights"] and model.config["dropout"] == 0.2
    assert meta["config"]["beta2"] == 0.99 and meta["config"]["min_lr"] == 1e-4 and meta["config"]["batch_size"] == 4
