"""The random number generator of nn: parameter init and dropout draw from it, so one
seed (nn.manual_seed) makes a run repeatable, and its state can travel in a checkpoint.
nn.parallel runs each part of a batch drawing from a generator of its own, seeded from
this one (drawing_from), so a run is repeatable for a given number of processes."""
import contextlib

import numpy as np

generator = np.random.default_rng()
_instead = None   # the generator drawing_from() put in place of nn's, if any


def manual_seed(seed):
    """Reseed nn's generator in place (every module that holds it sees the new stream)."""
    generator.bit_generator.state = np.random.PCG64(seed).state


def get_state():
    """The generator's state: a JSON-friendly dict."""
    return generator.bit_generator.state


def set_state(state):
    generator.bit_generator.state = state


def current():
    """The generator dropout draws from: nn's, or the one drawing_from() put in its place."""
    return _instead or generator


@contextlib.contextmanager
def drawing_from(own):
    """Inside this block, dropout draws from `own` (a numpy Generator; None: nn's own)."""
    global _instead
    previous, _instead = _instead, own
    try:
        yield
    finally:
        _instead = previous
