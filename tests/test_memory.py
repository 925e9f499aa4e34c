"""nn.memory: the allocator setting the training job applies, and its peak memory."""
import multiprocessing
import sys
import time

import pytest

import nn


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt is a Linux setting")
def test_keep_freed_memory_applies_on_linux_and_training_still_works():
    assert nn.memory.keep_freed_memory() is True
    model = nn.Linear(4, 2)
    loss = model(nn.Parameter([[1.0, 2.0, 3.0, 4.0]])).sum()
    loss.backward()
    assert model.weight.grad.shape == (4, 2)


def test_peak_resident_mib_adds_up_the_processes_given():
    own = nn.memory.peak_resident_mib()
    assert 10 < own < 10_000
    if sys.platform.startswith("linux"):
        child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(2,))
        child.start()
        try:
            both = nn.memory.peak_resident_mib([child.pid])
            assert both > own
        finally:
            child.terminate()
            child.join()


FAULTS_PER_STEP = """
import resource, sys
import numpy as np
import nn
nn.manual_seed(0)
model = nn.GPT(vocab_size=65, block_size=64, n_layer=2, n_head=4, n_embd=128)
opt = nn.optim.AdamW(model.parameters())
x = np.random.default_rng(0).integers(0, 65, (12, 64))
faults = []
for step in range(8):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    opt.zero_grad()
    _, loss = model(x, x)          # README's loop: nothing about memory in it
    loss.backward()
    opt.step()
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(sorted(faults[3:])[2], nn.memory._kept)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt is a Linux setting")
def test_a_plain_training_loop_reuses_freed_memory_without_asking_and_can_opt_out():
    import os
    import subprocess

    # glibc moves its own thresholds with the process's history (freeing one large block raises
    # them), so whether an opted-out process refaults would hang on what it imported first.
    # Fixed thresholds, which nn's mallopt overrides, make glibc's handing back certain.
    returning = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}

    def run(**env):
        done = subprocess.run([sys.executable, "-c", FAULTS_PER_STEP], capture_output=True, text=True,
                              env=dict(os.environ, **returning, **env), check=True)
        faults, kept = done.stdout.split()
        return int(faults), kept == "True"

    reused, kept = run()
    refaulted, opted_out_kept = run(TENSORGRAD_KEEP_FREED_MEMORY="0")
    assert kept and not opted_out_kept
    assert reused * 5 < refaulted, (reused, refaulted)   # page faults per step, median of the last five
