"""bench/gpu_step.py runs without a GPU: with tests/fake_cupy.py standing in for CuPy it takes
its smoke run (--small) through the whole script, tensorgrad's step timed "on the GPU", PyTorch's
rows skipped where torch has no CUDA, and the first steps' losses on the "GPU" agreeing with the
CPU's; without CuPy it says "skipped: no GPU" in one line and ends with status 0."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# the script run as `python bench/gpu_step.py ARGS`, with `cupy` set to the stand-in (or to None: no CuPy)
RUNNER = ("import sys, runpy; sys.path.insert(0, 'tests'); import fake_cupy; sys.modules['cupy'] = {cupy}; "
          "sys.argv = ['bench/gpu_step.py', *sys.argv[1:]]; runpy.run_path('bench/gpu_step.py', run_name='__main__')")


def run(*args, cupy="fake_cupy"):
    done = subprocess.run([sys.executable, "-c", RUNNER.format(cupy=cupy), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout, done.stderr


def test_the_smoke_run_times_the_step_and_the_gpus_losses_agree_with_the_cpus():
    status, out, err = run("--small", "--steps", "2", "--warmup", "1", "--check-steps", "3")
    assert status == 0, out + err
    lines = out.splitlines()
    assert lines[0].startswith("GPU: ") and "CuPy 14.2.0-fake" in lines[1]
    assert any(line.startswith("tensorgrad on CuPy, fp32") for line in lines), out
    try:
        import torch
        torch_has_cuda = torch.cuda.is_available()
    except ImportError:
        torch_has_cuda = False
    if not torch_has_cuda:
        assert any(line.startswith("PyTorch eager: skipped (") for line in lines), out
    steps = [line for line in lines if line.startswith("step ") and "loss on the GPU" in line]
    assert len(steps) == 3 and all(line.endswith("agree (rtol 1e-4)") for line in steps), out
    assert lines[-1] == "the GPU's losses agree with the CPU's (rtol 1e-4)"


def test_without_cupy_it_says_skipped_in_one_line_and_ends_with_status_0():
    status, out, err = run("--small", cupy="None")
    assert status == 0, out + err
    assert out.splitlines() == [out.strip()] and out.startswith("skipped: no GPU (")
    assert 'pip install "tensorgrad[cuda]"' in out
