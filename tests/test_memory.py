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
