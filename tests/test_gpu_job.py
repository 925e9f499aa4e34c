"""The main job on the GPU (issue 38), without one: demos/train_chargpt.py --device cuda runs in
a subprocess whose Python first installs tests/fake_cupy.py as `cupy` (numpy inside, CuPy's
manners outside). A GPU run's checkpoint holds host arrays: it resumes on the CPU, and a CPU
run's resumes on cuda; samples come from it. --device cuda is one process: --processes 2 with
it is a flag error. Without CuPy, --device cuda says in one line how to install it."""
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nn
from test_train_chargpt import REPO, TINY, corpus, environment  # noqa: F401 (corpus: a fixture)

TESTS = Path(__file__).resolve().parent
INSTALL = 'pip install "tensorgrad[cuda]"'
CUPY = {"fake": "import atexit, fake_cupy; sys.modules['cupy'] = fake_cupy; "   # and says what it copied
                "atexit.register(lambda: print('fake_cupy', fake_cupy.copies, file=sys.stderr))",
        "none": "sys.modules['cupy'] = None",   # `import cupy` raises ImportError
        "untouched": "pass"}


def run(script, *args, cupy="fake"):
    """demos/<script> with args, run as `python demos/<script>` would run it, after `cupy`
    (CUPY's key) is put in sys.modules. Returns the CompletedProcess."""
    path = str(REPO / "demos" / script)
    argv = [path, *map(str, args)]
    boot = (f"import sys, runpy; sys.path.insert(0, {str(TESTS)!r}); sys.path.insert(0, {str(REPO / 'demos')!r}); "
            f"{CUPY[cupy]}; sys.argv = {argv!r}; runpy.run_path({path!r}, run_name='__main__')")
    return subprocess.run([sys.executable, "-c", boot], capture_output=True, text=True, env=environment(),
                          timeout=300)


def ok(result):
    assert result.returncode == 0, f"exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def error_lines(result):
    """stderr's lines, argparse's usage lines and the fake's count of copies left out."""
    return [line for line in result.stderr.splitlines()
            if line.strip() and not line.startswith(("usage:", " ", "fake_cupy "))]


def copies(result):
    """(to_device, to_host): the copies a run with the fake CuPy made between host and device."""
    found = re.search(r"^fake_cupy copies\(to_device=(\d+), to_host=(\d+)\)$", result.stderr, re.M)
    assert found, result.stderr
    return int(found.group(1)), int(found.group(2))


@pytest.fixture(scope="module")
def gpu_run(corpus, tmp_path_factory):
    """(checkpoint, stdout, copies) of a 10-step run with --device cuda."""
    out = tmp_path_factory.mktemp("gpu") / "chargpt.safetensors"
    result = run("train_chargpt.py", "--data", corpus, *TINY, "--max_iters", 10, "--eval_interval", 5,
                 "--device", "cuda", "--out", out)
    return out, ok(result), copies(result)


def test_the_job_trains_on_cuda_and_writes_a_checkpoint_of_host_arrays(gpu_run):
    out, stdout, (to_device, to_host) = gpu_run
    assert to_device >= 2 * 10, "the batches did not go to the device"   # x and y of each of the 10 steps
    assert re.findall(r"^step (\d+): train loss \d+\.\d+, val loss \d+\.\d+$", stdout, re.M) == ["0", "5", "10"]
    assert re.search(r"^final val loss \(full split\): \d+\.\d+$", stdout, re.M)
    assert f"checkpoint: {out}" in stdout and "--- sample ---" in stdout
    state, meta = nn.load(out)
    assert meta["step"] == 10 and all(type(a) is np.ndarray and np.isfinite(a).all() for a in state.values())
    assert len(out.with_suffix(".csv").read_text().splitlines()) == 4


def test_the_cuda_run_matches_a_cpu_run_of_one_process(corpus, tmp_path, gpu_run):
    """The fake computes with numpy: the losses must be the CPU's (rtol 1e-4, as issue 38 asks
    of a real GPU for the first steps)."""
    out = tmp_path / "cpu.safetensors"
    ok(run("train_chargpt.py", "--data", corpus, *TINY, "--max_iters", 10, "--eval_interval", 5,
           "--processes", 1, "--out", out, cupy="untouched"))
    on_cpu, on_gpu = nn.load(out)[1]["history"], nn.load(gpu_run[0])[1]["history"]
    assert [row[0] for row in on_gpu] == [row[0] for row in on_cpu] == [0, 5, 10]
    np.testing.assert_allclose([row[1:3] for row in on_gpu], [row[1:3] for row in on_cpu], rtol=1e-4)


def test_a_cuda_checkpoint_resumes_on_the_cpu(gpu_run, tmp_path):
    out = tmp_path / "resumed.safetensors"
    out.write_bytes(gpu_run[0].read_bytes())
    for suffix in (".csv", ".health.csv"):
        if gpu_run[0].with_suffix(suffix).exists():
            out.with_suffix(suffix).write_bytes(gpu_run[0].with_suffix(suffix).read_bytes())
    stdout = ok(run("train_chargpt.py", "--resume", "--max_iters", 15, "--out", out, cupy="none"))
    assert f"resuming from {out} at step 10" in stdout
    assert re.findall(r"^step (\d+):", stdout, re.M) == ["15"]
    assert nn.load(out)[1]["step"] == 15


def test_a_cpu_checkpoint_resumes_on_cuda(corpus, tmp_path):
    out = tmp_path / "chargpt.safetensors"
    ok(run("train_chargpt.py", "--data", corpus, *TINY, "--max_iters", 5, "--eval_interval", 5, "--out", out,
           cupy="none"))
    resumed = run("train_chargpt.py", "--resume", "--max_iters", 10, "--device", "cuda", "--out", out)
    stdout = ok(resumed)
    assert copies(resumed)[0] >= 2 * 5, "the batches did not go to the device"
    assert f"resuming from {out} at step 5" in stdout
    assert re.findall(r"^step (\d+):", stdout, re.M) == ["10"]
    assert nn.load(out)[1]["step"] == 10


def test_a_cuda_checkpoint_samples_and_exports_on_the_cpu(gpu_run, tmp_path):
    out = gpu_run[0]
    text = ok(run("sample_chargpt.py", out, "--prompt", "ANNA:", "--max_new_tokens", 20, "--seed", 3, cupy="none"))
    assert text.startswith("ANNA:") and len(text) == len("ANNA:") + 20 + 1
    folder = tmp_path / "gpt2"
    ok(run("export_gpt2.py", out, folder, cupy="none"))
    assert (folder / "model.safetensors").stat().st_size > 0


def test_cuda_with_more_than_one_process_is_a_flag_error(corpus, tmp_path):
    out = tmp_path / "chargpt.safetensors"
    result = run("train_chargpt.py", "--data", corpus, *TINY, "--max_iters", 5, "--device", "cuda",
                 "--processes", 2, "--out", out)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    lines = error_lines(result)
    assert len(lines) == 1 and "--processes" in lines[0] and "cuda" in lines[0], result.stderr
    assert not out.exists()


def test_an_unknown_device_is_a_flag_error(corpus, tmp_path):
    result = run("train_chargpt.py", "--data", corpus, *TINY, "--device", "tpu", "--out", tmp_path / "x.safetensors")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--device" in result.stderr and "tpu" in result.stderr


def test_cuda_without_cupy_says_how_to_install_it_in_one_line(corpus, tmp_path):
    out = tmp_path / "chargpt.safetensors"
    result = run("train_chargpt.py", "--data", corpus, *TINY, "--max_iters", 5, "--device", "cuda",
                 "--out", out, cupy="none")
    assert result.returncode in (1, 2) and "Traceback" not in result.stderr, result.stderr
    lines = error_lines(result)
    assert len(lines) == 1 and INSTALL in lines[0] and "CuPy" in lines[0], result.stderr
    assert not out.exists()
