"""nn.memory.keep_freed_memory: the allocator setting the training job applies."""
import sys

import pytest

import nn


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt is a Linux setting")
def test_keep_freed_memory_applies_on_linux_and_training_still_works():
    assert nn.memory.keep_freed_memory() is True
    model = nn.Linear(4, 2)
    loss = model(nn.Parameter([[1.0, 2.0, 3.0, 4.0]])).sum()
    loss.backward()
    assert model.weight.grad.shape == (4, 2)
