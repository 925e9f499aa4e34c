"""tgtrain.memory: the allocator setting the training job applies (and a loop of your own in\none line), and its peak memory."""
import mmap
import multiprocessing
import subprocess
import sys
import time

import pytest

import nn
import tgtrain


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt is a Linux setting")
def test_keep_freed_memory_applies_on_linux_and_training_still_works():
    assert tgtrain.memory.keep_freed_memory() is True
    model = nn.Linear(4, 2)
    loss = model(nn.Parameter([[1.0, 2.0, 3.0, 4.0]])).sum()
    loss.backward()
    assert model.weight.grad.shape == (4, 2)


def test_peak_resident_mib_adds_up_the_processes_given():
    own = tgtrain.memory.peak_resident_mib()
    assert 10 < own < 10_000
    if sys.platform.startswith("linux"):
        child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(2,))
        child.start()
        try:
            both = tgtrain.memory.peak_resident_mib([child.pid])
            assert both > own
        finally:
            child.terminate()
            child.join()


# A step's activations, as glibc sees them: many arrays of about a MiB, made and then all freed.
# With glibc's defaults, freeing them leaves that much free memory at the top of the heap, which
# glibc hands back to the OS, so the next round faults every page in again; after the one line
# tgtrain.keep_freed_memory(), the next round reuses it. nn itself never changes the setting.
FAULTS_PER_ROUND = """
import resource, sys
import numpy as np
import nn
if sys.argv[1] == "keep":
    import tgtrain
    tgtrain.keep_freed_memory()
layer = nn.Linear(4, 2)
layer(nn.Parameter(np.ones((1, 4)))).sum().backward()   # a training step of nn's: it changes nothing
faults = []
for _ in range(4):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    activations = [np.ones(2**18, np.float32) for _ in range(64)]   # 64 arrays of 1 MiB
    del activations
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(max(faults[1:]), "tgtrain" in sys.modules)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt is a Linux setting")
def test_one_line_keeps_freed_memory_for_a_loop_of_your_own_and_nn_alone_sets_nothing():
    def run(mode):
        done = subprocess.run([sys.executable, "-c", FAULTS_PER_ROUND, mode], capture_output=True, text=True,
                              check=True)
        faults, imported_train = done.stdout.split()
        return int(faults), imported_train == "True"

    reused, _ = run("keep")
    refaulted, imported_train = run("plain")
    assert not imported_train   # nn never imports the training package
    pages = 64 * 2**20 // mmap.PAGESIZE
    assert reused < pages // 100 and refaulted > pages // 2, (reused, refaulted, pages)   # faults in a later round
