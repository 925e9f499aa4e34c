"""nn.memory: the allocator setting the training job applies, and its peak memory."""
import mmap
import multiprocessing
import os
import subprocess
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


# A step's activations, as glibc sees them: many arrays of about a MiB, made and then all freed.
# With glibc's defaults, freeing them leaves that much free memory at the top of the heap, which
# glibc hands back to the OS, so the next round faults every page in again; once nn keeps freed
# memory (on a model's first training forward, with no call), the next round reuses it.
FAULTS_PER_ROUND = """
import resource
import numpy as np
import nn
layer = nn.Linear(4, 2)
layer(nn.Parameter(np.ones((1, 4))))   # a training forward: README's loop calls nothing else
faults = []
for _ in range(4):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    activations = [np.ones(2**18, np.float32) for _ in range(64)]   # 64 arrays of 1 MiB
    del activations
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(max(faults[1:]), nn.memory._kept)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt is a Linux setting")
def test_a_plain_training_loop_reuses_freed_memory_without_asking_and_can_opt_out():
    def run(**env):
        done = subprocess.run([sys.executable, "-c", FAULTS_PER_ROUND], capture_output=True, text=True,
                              env=dict(os.environ, **env), check=True)
        faults, kept = done.stdout.split()
        return int(faults), kept == "True"

    reused, kept = run()
    refaulted, opted_out_kept = run(TENSORGRAD_KEEP_FREED_MEMORY="0")
    assert kept and not opted_out_kept
    pages = 64 * 2**20 // mmap.PAGESIZE
    assert reused < pages // 100 and refaulted > pages // 2, (reused, refaulted, pages)   # faults in a later round
